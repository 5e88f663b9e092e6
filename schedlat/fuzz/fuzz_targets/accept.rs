//! libFuzzer target `accept`: schedlat::fuzz::accept (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| schedlat::fuzz::accept(data));

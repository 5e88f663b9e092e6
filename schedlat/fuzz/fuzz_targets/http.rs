//! libFuzzer target `http`: schedlat::fuzz::http (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| schedlat::fuzz::http(data));

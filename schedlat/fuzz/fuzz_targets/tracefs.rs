//! libFuzzer target `tracefs`: schedlat::fuzz::tracefs (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| schedlat::fuzz::tracefs(data));

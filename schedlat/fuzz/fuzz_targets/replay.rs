//! libFuzzer target `replay`: schedlat::fuzz::replay (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| schedlat::fuzz::replay(data));

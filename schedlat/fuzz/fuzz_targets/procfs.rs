//! libFuzzer target `procfs`: schedlat::fuzz::procfs (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| schedlat::fuzz::procfs(data));

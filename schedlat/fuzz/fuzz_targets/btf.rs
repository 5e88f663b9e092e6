//! libFuzzer target `btf`: schedlat::fuzz::btf (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| schedlat::fuzz::btf(data));

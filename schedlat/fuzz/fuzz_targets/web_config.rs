//! libFuzzer target `web_config`: schedlat::fuzz::web_config (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| schedlat::fuzz::web_config(data));

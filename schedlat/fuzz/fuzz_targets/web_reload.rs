//! libFuzzer target `web_reload`: schedlat::fuzz::web_reload (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| schedlat::fuzz::web_reload(data));

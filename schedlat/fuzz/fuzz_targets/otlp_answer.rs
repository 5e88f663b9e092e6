//! libFuzzer target `otlp_answer`: schedlat::fuzz::otlp_answer (its doc says what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| schedlat::fuzz::otlp_answer(data));

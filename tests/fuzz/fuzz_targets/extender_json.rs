//! Fuzz target: `zonemesh_aggregator::fuzz::extender_json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    zonemesh_aggregator::fuzz::extender_json(data);
});

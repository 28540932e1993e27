//! Fuzz target: `zonemesh_aggregator::fuzz::wire_to_domain`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    zonemesh_aggregator::fuzz::wire_to_domain(data);
});

//! Fuzz target: `zonemesh_aggregator::fuzz::store_record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    zonemesh_aggregator::fuzz::store_record(data);
});

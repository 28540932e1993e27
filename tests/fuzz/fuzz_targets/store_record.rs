//! Fuzz target: `zonemesh_fuzz_support::store_record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    zonemesh_fuzz_support::store_record(data);
});

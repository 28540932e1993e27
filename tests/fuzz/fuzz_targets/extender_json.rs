//! Fuzz target: `zonemesh_fuzz_support::extender_json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    zonemesh_fuzz_support::extender_json(data);
});

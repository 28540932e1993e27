//! Fuzz target: `zonemesh_fuzz_support::wire_to_domain`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    zonemesh_fuzz_support::wire_to_domain(data);
});

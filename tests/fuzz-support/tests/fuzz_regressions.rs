//! The fuzz targets' functions over their seeds and over every input a fuzzer ever found
//! failing (`tests/fuzz/regressions/<target>/`, one file each; add the crash file there when
//! a fuzz run finds one, then fix the bug).

use std::path::Path;

use zonemesh_fuzz_support::{TARGETS, seeds};

#[test]
fn the_seeds_run_clean_and_reach_the_engine() {
    let seeds = seeds();
    for (target, run) in TARGETS {
        let mine: Vec<_> = seeds.iter().filter(|(t, _, _)| *t == target).collect();
        assert!(mine.len() >= 3, "{target}: {} seeds", mine.len());
        for (_, name, bytes) in mine {
            eprintln!("{target}/{name}");
            run(bytes);
        }
    }
}

#[test]
fn every_recorded_failure_stays_fixed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions");
    for (target, run) in TARGETS {
        let dir = root.join(target);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e} (one directory per target)", dir.display()));
        for entry in entries {
            let path = entry.expect("read the regressions").path();
            eprintln!("{}", path.display());
            run(&std::fs::read(&path).expect("read a regression input"));
        }
    }
}

//! Writes the fuzz targets' seed corpus: `cargo run -p zonemesh-fuzz-support --example fuzz_seeds
//! -- DIR` fills `DIR/<target>/<name>` with valid inputs of each target (see
//! `zonemesh_fuzz_support::seeds`).

fn main() -> std::io::Result<()> {
    let dir = std::env::args_os().nth(1).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "usage: fuzz_seeds DIR")
    })?;
    let dir = std::path::PathBuf::from(dir);
    for (target, name, bytes) in zonemesh_fuzz_support::seeds() {
        let target_dir = dir.join(target);
        std::fs::create_dir_all(&target_dir)?;
        std::fs::write(target_dir.join(name), bytes)?;
    }
    Ok(())
}

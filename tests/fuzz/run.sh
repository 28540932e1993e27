#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), from the seed corpus that
# `examples/fuzz_seeds.rs` writes plus what earlier runs here kept in tests/fuzz/corpus.
# A crash stops the run with its input in tests/fuzz/artifacts/<target>/: copy that file into
# tests/fuzz/regressions/<target>/, where `cargo test` runs it from then on, and fix the bug.
#
# cargo-fuzz needs nightly flags; RUSTC_BOOTSTRAP lets the stable toolchain take them.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"
case "$seconds" in
  '' | *[!0-9]*) echo "usage: tests/fuzz/run.sh [SECONDS]: $seconds is not a number of seconds" >&2; exit 64 ;;
esac
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz missing: cargo install cargo-fuzz --locked" >&2; exit 1; }
export RUSTC_BOOTSTRAP=1
log="$(mktemp)"
# FUZZ_SEEDS: a directory the seed corpus was written to already (CI writes it before it cleans
# the target directory, so that the seed writer is not built a second time).
if [ -n "${FUZZ_SEEDS:-}" ]; then
  seeds="$FUZZ_SEEDS"
  trap 'rm -f "$log"' EXIT
else
  seeds="$(mktemp -d)"
  trap 'rm -rf "$seeds" "$log"' EXIT
  cargo run --quiet --locked -p zonemesh-fuzz-support --example fuzz_seeds -- "$seeds"
fi
for target in wire_to_domain extender_json store_record; do
  mkdir -p "tests/fuzz/corpus/$target"
  echo "== fuzz $target for ${seconds}s"
  if ! cargo fuzz run --fuzz-dir tests/fuzz "$target" "tests/fuzz/corpus/$target" "$seeds/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 80 "$log" >&2
    echo "fuzz $target failed: the input is in tests/fuzz/artifacts/$target/" >&2
    exit 1
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
done

#!/bin/sh
# Runs every fuzz target for $1 seconds (default 180), one after another, on the stable toolchain
# (RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its nightly-only sanitizer flags). Seed corpora come
# from `SIFTDB_FUZZ_SEEDS=<dir> cargo test --test garbage_inputs write_fuzz_seeds`, if present.
set -eu
secs=${1:-180}
seeds=${SIFTDB_FUZZ_SEEDS:-}
cd "$(dirname "$0")"
for t in block codecs table log filters ops; do
    mkdir -p "corpus/$t"
    extra=""
    if [ -n "$seeds" ] && [ -d "$seeds/$t" ]; then extra="$seeds/$t"; fi
    echo "== $t"
    RUSTC_BOOTSTRAP=1 cargo fuzz run -O "$t" "corpus/$t" $extra -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 2>&1 | tail -25
done

//! `Db::multi_get` against the same keys read by `Db::get` one at a time, interleaved round by
//! round (the best of 15 rounds each), so that a shared machine's noise hits both alike.
//!
//! cargo run --release -p siftdb-examples --example multi_get_cost -- [keys, default 100000] [batch, default 32]
//!     [compact]
//!
//! Fills a store in a temporary directory with `keys` 16-byte keys (100-byte values, full
//! filter at 10 bits/key, a 256 MiB block cache), flushes it (with `compact`, then compacts it
//! into one level, the shape a settled store reads from), and reads 64,000 absent and then
//! 64,000 present keys in batches, checking that both ways find the same keys.

use std::time::Instant;

use siftdb::{Db, Filter, Options};

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("{i:016}").as_bytes());
    k
}

fn arg(n: usize, default: u64) -> Result<u64, String> {
    match std::env::args().nth(n) {
        None => Ok(default),
        Some(s) => match s.parse() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(format!("expected a positive number, got {s:?}")),
        },
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let keys = arg(1, 100_000)?;
    let batch = arg(2, 32)? as usize;
    let compact = match std::env::args().nth(3).as_deref() {
        None => false,
        Some("compact") => true,
        Some(other) => return Err(format!("expected `compact`, got {other:?}").into()),
    };
    let dir = tempfile::tempdir()?;
    let options = Options::default()
        .filter(Filter::full(10.0))
        .block_cache_bytes(256 << 20)
        // Both ways read the tree the flush left, as printed: neither the rounds' Gets nor the
        // pause of the writes may compact its L0 half way through.
        .compact_l0_for_reads(false)
        .compact_l0_when_idle(false);
    let db = Db::open(dir.path(), options)?;
    // Even keys are present, in a scrambled order; odd keys are absent.
    for i in 0..keys {
        db.put(key(2 * ((i * 7919) % keys)), [(i % 251) as u8; 100])?;
    }
    db.flush()?;
    if compact {
        db.compact()?;
    }
    let levels: Vec<String> = (0..siftdb::NUM_LEVELS)
        .filter_map(|l| db.property(&format!("siftdb.num-files-at-level{l}")))
        .collect();
    println!(
        "{keys} keys, batches of {batch}; tables per level: {}",
        levels.join(",")
    );
    for absent in [true, false] {
        let wanted: Vec<[u8; 16]> = (0..64_000u64)
            .map(|i| key(2 * ((i * 104_729) % keys) + u64::from(absent)))
            .collect();
        let batches: Vec<&[[u8; 16]]> = wanted.chunks(batch).collect();
        for k in &wanted {
            db.get(k)?; // every block in the cache
        }
        let (mut multi, mut single) = (f64::MAX, f64::MAX);
        for _ in 0..15 {
            let t = Instant::now();
            let mut found_multi = 0;
            for b in &batches {
                for v in db.multi_get(b) {
                    found_multi += usize::from(v?.is_some());
                }
            }
            multi = multi.min(t.elapsed().as_nanos() as f64 / wanted.len() as f64);
            let t = Instant::now();
            let mut found_single = 0;
            for b in &batches {
                for k in *b {
                    found_single += usize::from(db.get(k)?.is_some());
                }
            }
            single = single.min(t.elapsed().as_nanos() as f64 / wanted.len() as f64);
            if found_multi != found_single {
                return Err(format!("multi_get found {found_multi}, get {found_single}").into());
            }
        }
        println!(
            "{:<8} multi_get {multi:>7.0} ns/key   get {single:>7.0} ns/key   multi_get speed {:.2} × get's",
            if absent { "absent" } else { "present" },
            single / multi
        );
    }
    Ok(())
}

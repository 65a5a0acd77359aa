//! Side-by-side point lookups: siftdb against fjall, one store after another in one process.
//!
//! `cargo run --release --features compare --example compare -- --keys 1000000 --reads 1000000 [--compacted] [--stores siftdb,fjall]`
//!
//! Keys are 16-byte zero-padded decimals of even numbers, values 100 bytes, WAL on, no fsync.
//! Phases: fillrandom, flush, then readrandom (present keys), readmissing (odd numbers, absent),
//! readmixed (half each). Same settings: 10 bits/key bloom, 4 KiB blocks, 64 MiB block cache.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn key(n: u64) -> String {
    format!("{n:016}")
}

/// One store under test: put, get, flush, full compaction.
trait Store {
    fn put(&mut self, k: &[u8], v: &[u8]);
    fn get(&mut self, k: &[u8]) -> bool;
    fn flush(&mut self);
    fn compact(&mut self);
    fn bloom(&self) -> Option<(u64, u64, u64)> {
        None
    }
}

struct Sift(siftdb::Db);

impl Store for Sift {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        self.0.put(k, v).unwrap();
    }
    fn get(&mut self, k: &[u8]) -> bool {
        self.0.get(k).unwrap().is_some()
    }
    fn flush(&mut self) {
        self.0.flush().unwrap();
    }
    fn compact(&mut self) {
        self.0.compact().unwrap();
    }
    fn bloom(&self) -> Option<(u64, u64, u64)> {
        use siftdb::Ticker;
        let s = self.0.statistics();
        Some((
            s.ticker(Ticker::BloomFilterUseful),
            s.ticker(Ticker::BloomFilterFullPositive),
            s.ticker(Ticker::BloomFilterFullTruePositive),
        ))
    }
}

struct Fjall {
    keyspace: fjall::Keyspace,
    part: fjall::PartitionHandle,
}

impl Store for Fjall {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        self.part.insert(k, v).unwrap();
    }
    fn get(&mut self, k: &[u8]) -> bool {
        self.part.get(k).unwrap().is_some()
    }
    fn flush(&mut self) {
        self.keyspace.persist(fjall::PersistMode::Buffer).unwrap();
        self.part.rotate_memtable_and_wait().unwrap();
    }
    fn compact(&mut self) {
        self.part.major_compact().unwrap();
    }
}

fn open(name: &str, dir: &std::path::Path) -> Box<dyn Store> {
    match name {
        "siftdb" => {
            let opts = siftdb::Options::default()
                .filter(siftdb::Filter::full(10.0))
                .block_cache_bytes(64 << 20)
                .block_size(4096);
            Box::new(Sift(siftdb::Db::open(dir, opts).unwrap()))
        }
        "fjall" => {
            let keyspace = fjall::Config::new(dir).cache_size(64 << 20).open().unwrap();
            let opts = fjall::PartitionCreateOptions::default()
                .block_size(4096)
                .bloom_filter_bits(Some(10));
            let part = keyspace.open_partition("default", opts).unwrap();
            Box::new(Fjall { keyspace, part })
        }
        other => panic!("unknown store {other} (have siftdb, fjall)"),
    }
}

fn rate(n: usize, start: Instant) -> f64 {
    n as f64 / start.elapsed().as_secs_f64()
}

enum Kind {
    Present,
    Missing,
    Mixed,
}

/// `reads` random gets of one kind; checks every answer; returns ops/s.
fn reads_phase(
    name: &str,
    db: &mut dyn Store,
    rng: &mut StdRng,
    keys: u64,
    reads: usize,
    kind: Kind,
) -> f64 {
    let start = Instant::now();
    for _ in 0..reads {
        let i = rng.gen_range(0..keys);
        let present = match kind {
            Kind::Present => true,
            Kind::Missing => false,
            Kind::Mixed => rng.gen_bool(0.5),
        };
        let n = if present { 2 * i } else { 2 * i + 1 };
        if db.get(key(n).as_bytes()) != present {
            panic!("{name}: wrong answer for key {n}");
        }
    }
    rate(reads, start)
}

/// Runs every phase on one store; returns ops/s for fill, readrandom, readmissing, readmixed.
fn run(name: &str, keys: u64, reads: usize, compacted: bool) -> [f64; 4] {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(name, dir.path());
    let mut rng = StdRng::seed_from_u64(42);
    let value = [b'v'; 100];

    let mut order: Vec<u64> = (0..keys).collect();
    order.shuffle(&mut rng);
    let start = Instant::now();
    for &i in &order {
        db.put(key(2 * i).as_bytes(), &value);
    }
    let fill = rate(order.len(), start);
    db.flush();
    if compacted {
        db.compact();
    }

    let present = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Present);
    let before = db.bloom();
    let missing = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Missing);
    let after = db.bloom();
    let mixed = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Mixed);
    if let (Some(b), Some(a)) = (before, after) {
        println!(
            "{name} bloom tickers during readmissing: useful {} full.positive {} full.true.positive {}",
            a.0 - b.0,
            a.1 - b.1,
            a.2 - b.2
        );
    }
    [fill, present, missing, mixed]
}

fn main() {
    let mut keys = 1_000_000u64;
    let mut reads = 1_000_000usize;
    let mut compacted = false;
    let mut stores = "siftdb,fjall".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--keys" => keys = args.next().unwrap().parse().unwrap(),
            "--reads" => reads = args.next().unwrap().parse().unwrap(),
            "--stores" => stores = args.next().unwrap(),
            "--compacted" => compacted = true,
            other => panic!("unknown flag {other}"),
        }
    }
    println!("keys {keys} reads {reads} compacted {compacted}");
    let mut results = Vec::new();
    for name in stores.split(',') {
        results.push((name.to_string(), run(name, keys, reads, compacted)));
    }
    let phases = ["fillrandom", "readrandom", "readmissing", "readmixed"];
    let sift = results.iter().find(|(n, _)| n == "siftdb").map(|r| r.1);
    println!(
        "{:<12} {:>10} {:>14} {:>10}",
        "phase", "store", "ops/s", "siftdb/x"
    );
    for (p, phase) in phases.iter().enumerate() {
        for (name, r) in &results {
            let ratio = sift
                .map(|s| format!("{:.2}", s[p] / r[p]))
                .unwrap_or_default();
            println!("{phase:<12} {name:>10} {:>14.0} {ratio:>10}", r[p]);
        }
    }
}

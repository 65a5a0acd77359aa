//! Side-by-side point lookups: siftdb against RocksDB and fjall, one store after another in one
//! process.
//!
//! ```text
//! cargo run --release -p siftdb-compare -- \
//!     [--keys 1000000] [--reads 1000000] [--compacted] [--stores siftdb,rocksdb,fjall] [--json]
//! ```
//!
//! This crate (`compare/`, a workspace member that is never published and that a plain `cargo`
//! command at the root does not build) pulls in fjall and the `rocksdb` crate; the latter builds
//! RocksDB's C++ sources (needs clang and libclang-dev; 15-25 minutes on 2 cores). CI does not
//! build it.
//!
//! Keys are 16-byte zero-padded decimals of even numbers, values 100 bytes, inserted in random
//! order; WAL on, no fsync. Phases: fillrandom, then flush and wait until the store has no
//! pending or running compaction (`--compacted`: then a full compaction, and wait again), then
//! readrandom (present keys), readmissing (odd numbers, all absent) and readmixed (half each).
//! Every answer is checked; a wrong one panics. After settling, each store's files per level are
//! printed so a reader sees the shapes that are read; after the reads, the bloom tickers of the
//! readmissing phase and the false-positive rate they give,
//! (full.positive - full.true.positive) / (useful + full.positive - full.true.positive),
//! and the filter probes per get, for the stores that count them (siftdb, RocksDB; fjall 2 has
//! no such counters). The table at the end gives ops/s per phase and store, and siftdb's ratio to
//! each (siftdb/x, above 1 means siftdb is faster). `--json` prints the same numbers as one JSON
//! line after it.
//!
//! Settings, alike where the stores let them be:
//! - siftdb: full filter 10 bits/key on every level, 4 KiB blocks, 64 MiB block cache, snappy
//!   (its default), otherwise defaults (4 MiB memtable, 2 MiB tables, L1 budget 10 MiB, x10).
//!   Settling: `flush()`, then poll `siftdb.compaction-pending` until `0`.
//! - RocksDB: block-based tables with a full (not block-based) bloom filter of 10 bits/key on
//!   every level, 4 KiB blocks, 64 MiB LRU block cache, snappy, statistics on; memtable, table
//!   size and level budgets set to siftdb's defaults above, static level sizes
//!   (`level_compaction_dynamic_level_bytes = false`) like siftdb's. Writes use the default
//!   `WriteOptions` (WAL, no sync); reads use `get_pinned`. Settling: `flush()`, then poll
//!   `rocksdb.compaction-pending` and `rocksdb.num-running-compactions` every 50 ms until both
//!   are `0`. Compaction: `compact_range(None, None)`.
//! - fjall 2: `bloom_filter_bits(Some(10))`, 4 KiB blocks, 64 MiB cache, lz4 (its default),
//!   otherwise defaults (16 MiB memtable, leveled compaction). Note that fjall applies the 10
//!   bits/key only to tables written into L2 and deeper: a flush to L0 sizes its filter for a
//!   0.001% FP rate (~24 bits/key) and a compaction into L1 for 0.05% (~16 bits/key), and there
//!   is no option to change that. Settling: `rotate_memtable_and_wait()`, then poll every 50 ms
//!   until no level is being compacted and the files per level stayed the same for 200 ms
//!   (fjall exposes no pending-compaction signal). Compaction: `major_compact()`.

use clap::{Parser, ValueEnum};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

/// `n` as a 16-byte zero-padded decimal, built on the stack: the harness's own cost per
/// operation is paid by every store alike, so it is kept small to not blur their ratios.
fn key(mut n: u64) -> [u8; 16] {
    let mut k = [b'0'; 16];
    for d in k.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}
/// How long a store may take to settle before the run goes on with a warning.
const SETTLE_LIMIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(50);

/// Bloom tickers: useful (filter said absent), full.positive (said maybe),
/// full.true.positive (said maybe and the key was there).
type Bloom = (u64, u64, u64);

/// One store under test: put, get, flush, full compaction.
trait Store {
    fn put(&mut self, k: &[u8], v: &[u8]);
    fn get(&mut self, k: &[u8]) -> bool;
    /// Writes the memtable out as tables and waits for that (not for compactions).
    fn flush(&mut self);
    /// Compacts everything into one level; waits until done.
    fn compact(&mut self);
    /// Polls until background compaction has settled; returns false on timeout.
    fn settle(&mut self) -> bool;
    fn bloom(&self) -> Option<Bloom> {
        None
    }
    /// Files per level, L0 first.
    fn levels(&self) -> Option<Vec<usize>> {
        None
    }
    /// Bytes of filter held by the store's live tables.
    fn filter_bytes(&self) -> Option<u64> {
        None
    }
}

/// Polls `done` every 50 ms until it is true or `SETTLE_LIMIT` passes.
fn poll_until(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > SETTLE_LIMIT {
            return false;
        }
        std::thread::sleep(POLL);
    }
    true
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
    fn settle(&mut self) -> bool {
        poll_until(|| self.0.property("siftdb.compaction-pending").as_deref() == Some("0"))
    }
    fn bloom(&self) -> Option<Bloom> {
        use siftdb::Ticker;
        let s = self.0.statistics();
        Some((
            s.ticker(Ticker::BloomFilterUseful),
            s.ticker(Ticker::BloomFilterFullPositive),
            s.ticker(Ticker::BloomFilterFullTruePositive),
        ))
    }
    fn levels(&self) -> Option<Vec<usize>> {
        (0..siftdb::NUM_LEVELS)
            .map(|l| {
                self.0
                    .property(&format!("siftdb.num-files-at-level{l}"))?
                    .parse()
                    .ok()
            })
            .collect()
    }
    fn filter_bytes(&self) -> Option<u64> {
        // Every table has been opened by the reads, so every filter is pinned and counted.
        Some(self.0.statistics().filter_bytes_in_memory())
    }
}

/// RocksDB's default number of levels, set explicitly (siftdb has as many).
const ROCKS_LEVELS: usize = 7;

struct Rocks {
    // Dropped before `opts`, which holds the statistics the tickers are read from.
    db: rocksdb::DB,
    opts: rocksdb::Options,
}

impl Rocks {
    fn open(dir: &std::path::Path) -> Self {
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        table.set_block_size(4096);
        table.set_block_cache(&rocksdb::Cache::new_lru_cache(64 << 20));
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        opts.set_compression_type(rocksdb::DBCompressionType::Snappy);
        // siftdb's defaults, so that both build trees of the same shape.
        opts.set_write_buffer_size(4 << 20);
        opts.set_target_file_size_base(2 << 20);
        opts.set_max_bytes_for_level_base(10 << 20);
        opts.set_level_compaction_dynamic_level_bytes(false);
        opts.set_num_levels(ROCKS_LEVELS as i32);
        opts.enable_statistics();
        let db = rocksdb::DB::open(&opts, dir).unwrap();
        Rocks { db, opts }
    }

    fn int_property(&self, name: impl rocksdb::CStrLike) -> u64 {
        self.db.property_int_value(name).unwrap().unwrap()
    }
}

impl Store for Rocks {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        self.db.put(k, v).unwrap();
    }
    fn get(&mut self, k: &[u8]) -> bool {
        self.db.get_pinned(k).unwrap().is_some()
    }
    fn flush(&mut self) {
        self.db.flush().unwrap();
    }
    fn compact(&mut self) {
        self.db.compact_range::<&[u8], &[u8]>(None, None);
    }
    fn settle(&mut self) -> bool {
        use rocksdb::properties::{COMPACTION_PENDING, NUM_RUNNING_COMPACTIONS};
        poll_until(|| {
            self.int_property(COMPACTION_PENDING) == 0
                && self.int_property(NUM_RUNNING_COMPACTIONS) == 0
        })
    }
    fn bloom(&self) -> Option<Bloom> {
        use rocksdb::statistics::Ticker;
        Some((
            self.opts.get_ticker_count(Ticker::BloomFilterUseful),
            self.opts.get_ticker_count(Ticker::BloomFilterFullPositive),
            self.opts
                .get_ticker_count(Ticker::BloomFilterFullTruePositive),
        ))
    }
    fn levels(&self) -> Option<Vec<usize>> {
        (0..ROCKS_LEVELS)
            .map(|l| {
                self.db
                    .property_int_value(rocksdb::properties::num_files_at_level(l))
                    .ok()?
                    .map(|v| v as usize)
            })
            .collect()
    }
    fn filter_bytes(&self) -> Option<u64> {
        // "...; filter block size=N; ..." summed over the live tables.
        let props = self
            .db
            .property_value(rocksdb::properties::AGGREGATED_TABLE_PROPERTIES)
            .ok()??;
        let rest = &props[props.find("filter block size")?..];
        let digits: String = rest[rest.find('=')? + 1..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }
}

struct Fjall {
    keyspace: fjall::Keyspace,
    part: fjall::PartitionHandle,
}

impl Fjall {
    /// Files per level and whether some level is being compacted.
    fn shape(&self) -> Option<(Vec<usize>, bool)> {
        match &self.part.tree {
            fjall::AnyTree::Standard(tree) => {
                let levels = tree.levels.read().unwrap();
                let files = levels
                    .resolved_view()
                    .iter()
                    .map(|l| l.segments.len())
                    .collect();
                Some((files, !levels.busy_levels().is_empty()))
            }
            fjall::AnyTree::Blob(_) => None,
        }
    }
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
    fn settle(&mut self) -> bool {
        let mut last = None;
        let mut stable = 0;
        poll_until(|| {
            let Some((files, busy)) = self.shape() else {
                return true;
            };
            if busy || last.as_ref() != Some(&files) {
                stable = 0;
            } else {
                stable += 1;
            }
            last = Some(files);
            stable >= 4
        })
    }
    fn levels(&self) -> Option<Vec<usize>> {
        self.shape().map(|s| s.0)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreName {
    Siftdb,
    Rocksdb,
    Fjall,
}

impl StoreName {
    fn name(self) -> &'static str {
        match self {
            StoreName::Siftdb => "siftdb",
            StoreName::Rocksdb => "rocksdb",
            StoreName::Fjall => "fjall",
        }
    }
}

fn open(name: StoreName, dir: &std::path::Path) -> Box<dyn Store> {
    match name {
        StoreName::Siftdb => {
            let opts = siftdb::Options::default()
                .filter(siftdb::Filter::full(10.0))
                .block_cache_bytes(64 << 20)
                .block_size(4096);
            Box::new(Sift(siftdb::Db::open(dir, opts).unwrap()))
        }
        StoreName::Rocksdb => Box::new(Rocks::open(dir)),
        StoreName::Fjall => {
            let keyspace = fjall::Config::new(dir).cache_size(64 << 20).open().unwrap();
            let opts = fjall::PartitionCreateOptions::default()
                .block_size(4096)
                .bloom_filter_bits(Some(10));
            let part = keyspace.open_partition("default", opts).unwrap();
            Box::new(Fjall { keyspace, part })
        }
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
        if db.get(&key(n)) != present {
            panic!("{name}: wrong answer for key {n}");
        }
    }
    rate(reads, start)
}

/// What one store measured.
struct Outcome {
    /// ops/s for fillrandom, readrandom, readmissing, readmixed.
    ops: [f64; 4],
    /// Bloom ticker deltas over readmissing.
    bloom: Option<Bloom>,
    /// Filter bytes after the reads.
    filter_bytes: Option<u64>,
}

impl Outcome {
    /// False positives over filter probes of absent keys during readmissing.
    fn fp_rate(&self) -> Option<f64> {
        let (useful, positive, true_positive) = self.bloom?;
        let false_positive = positive.saturating_sub(true_positive);
        let probes = useful + false_positive;
        (probes > 0).then(|| false_positive as f64 / probes as f64)
    }
}

fn settle(name: &str, db: &mut dyn Store) {
    let start = Instant::now();
    if !db.settle() {
        println!("{name}: WARNING compaction still pending after {SETTLE_LIMIT:?}; reading anyway");
    }
    let shape = match db.levels() {
        Some(files) => files
            .iter()
            .enumerate()
            .map(|(l, n)| format!("L{l} {n}"))
            .collect::<Vec<_>>()
            .join("  "),
        None => "n/a".to_string(),
    };
    println!(
        "{name:<8} settled in {:>6.2}s; files per level: {shape}",
        start.elapsed().as_secs_f64()
    );
}

/// Runs every phase on one store.
fn run(name: StoreName, keys: u64, reads: usize, compacted: bool) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(name, dir.path());
    let name = name.name();
    let mut rng = StdRng::seed_from_u64(42);
    let value = [b'v'; 100];

    let mut order: Vec<u64> = (0..keys).collect();
    order.shuffle(&mut rng);
    let start = Instant::now();
    for &i in &order {
        db.put(&key(2 * i), &value);
    }
    let fill = rate(order.len(), start);
    db.flush();
    settle(name, db.as_mut());
    if compacted {
        db.compact();
        settle(name, db.as_mut());
    }

    let present = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Present);
    let before = db.bloom();
    let missing = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Missing);
    let after = db.bloom();
    let mixed = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Mixed);
    let bloom = before
        .zip(after)
        .map(|(b, a)| (a.0 - b.0, a.1 - b.1, a.2 - b.2));
    Outcome {
        ops: [fill, present, missing, mixed],
        bloom,
        filter_bytes: db.filter_bytes(),
    }
}

/// Point lookups on siftdb, RocksDB and fjall; see the module documentation.
#[derive(Parser)]
struct Args {
    /// Keys to insert.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Gets per read phase.
    #[arg(long, default_value_t = 1_000_000)]
    reads: usize,
    /// Fully compact each store before the reads.
    #[arg(long)]
    compacted: bool,
    /// Stores to run, in this order, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "siftdb,rocksdb,fjall"
    )]
    stores: Vec<StoreName>,
    /// Also print the results as one JSON line.
    #[arg(long)]
    json: bool,
}

fn main() {
    let args = Args::parse();
    if args.keys == 0 {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "--keys must be at least 1\n",
        )
        .exit();
    }
    let (keys, reads, compacted) = (args.keys, args.reads, args.compacted);
    println!("keys {keys} reads {reads} compacted {compacted}");
    let mut results = Vec::new();
    for &name in &args.stores {
        results.push((name.name(), run(name, keys, reads, compacted)));
    }

    println!("\nbloom tickers during readmissing ({reads} gets of absent keys):");
    println!(
        "{:<8} {:>12} {:>14} {:>19} {:>10} {:>11}",
        "store", "useful", "full.positive", "full.true.positive", "fp-rate", "probes/get"
    );
    for (name, r) in &results {
        match r.bloom {
            Some((u, p, tp)) => {
                let fp = r
                    .fp_rate()
                    .map_or("-".to_string(), |f| format!("{:.3}%", f * 100.0));
                let probes = (u + p) as f64 / reads.max(1) as f64;
                println!("{name:<8} {u:>12} {p:>14} {tp:>19} {fp:>10} {probes:>11.2}");
            }
            None => println!(
                "{name:<8} {:>12} {:>14} {:>19} {:>10} {:>11}",
                "n/a", "n/a", "n/a", "n/a", "n/a"
            ),
        }
    }

    println!("\nfilter memory after the reads (target: 10 bits/key x {keys} keys):");
    for (name, r) in &results {
        match r.filter_bytes {
            Some(b) => println!(
                "{name:<8} {b:>12} bytes {:>8.3} bits/key {:>+7.2}% vs target",
                b as f64 * 8.0 / keys as f64,
                (b as f64 * 8.0 / (10.0 * keys as f64) - 1.0) * 100.0
            ),
            None => println!("{name:<8} {:>12}", "n/a"),
        }
    }

    let phases = ["fillrandom", "readrandom", "readmissing", "readmixed"];
    let sift = results
        .iter()
        .find(|(n, _)| *n == "siftdb")
        .map(|r| r.1.ops);
    println!(
        "\n{:<12} {:>10} {:>14} {:>10}",
        "phase", "store", "ops/s", "siftdb/x"
    );
    for (p, phase) in phases.iter().enumerate() {
        for (name, r) in &results {
            let ratio = sift
                .map(|s| format!("{:.2}", s[p] / r.ops[p]))
                .unwrap_or_default();
            println!("{phase:<12} {name:>10} {:>14.0} {ratio:>10}", r.ops[p]);
        }
    }

    if args.json {
        let stores: Vec<String> = results
            .iter()
            .map(|(name, r)| {
                let mut fields: Vec<String> = phases
                    .iter()
                    .zip(r.ops)
                    .map(|(p, v)| format!("\"{p}\":{v:.0}"))
                    .collect();
                if let Some((u, p, tp)) = r.bloom {
                    fields.push(format!(
                        "\"bloom_useful\":{u},\"bloom_full_positive\":{p},\"bloom_full_true_positive\":{tp}"
                    ));
                }
                if let Some(fp) = r.fp_rate() {
                    fields.push(format!("\"fp_rate\":{fp}"));
                }
                if let Some(b) = r.filter_bytes {
                    fields.push(format!("\"filter_bytes\":{b}"));
                }
                format!("\"{name}\":{{{}}}", fields.join(","))
            })
            .collect();
        println!(
            "{{\"keys\":{keys},\"reads\":{reads},\"compacted\":{compacted},\"stores\":{{{}}}}}",
            stores.join(",")
        );
    }
}

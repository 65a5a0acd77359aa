//! A db_bench-like workload: fill a store, read it back, and watch the filters work.
//!
//! cargo run --release -p siftdb-examples --example workload                      # 200k keys, the default phases
//! cargo run --release -p siftdb-examples --example workload -- --filter none     # the same without filters
//! cargo run --release -p siftdb-examples --example workload -- --keys 1000000 --reads 1000000 \
//!     --phases fillrandom,readrandom,readmissing --threads 2 --json
//!
//! cargo run --release -p siftdb-examples --example workload -- --compression zstd --compression-ratio 0.5
//!
//! Present keys are the even numbers 0, 2, 4 … written as zero-padded decimals of `--key-size`
//! bytes; `readmissing` asks for the odd numbers between them, so every missing key falls inside
//! some table's key range and only the filter can spare the data block read.
//!
//! Values are db_bench's: slices of a 1 MiB buffer of 100-byte pieces, each made of
//! `--compression-ratio` × 100 random bytes repeated to fill it, so that values compress to about
//! that ratio (0.5 by default; 1.0 does not compress). Unlike db_bench's printable characters,
//! the random bytes take all 256 values, so the ratio holds for every codec.
//!
//! Each phase prints ops/s and per-op latency (p50, p99, p99.9; from an HDR histogram of
//! nanoseconds), the values and codec it ran with, and the bytes of the live tables when it ended;
//! read phases also print what the filters did during the phase: `useful` (said "no"),
//! `positive` (said "maybe"), `true positive` (said "maybe" and the table held the key), the
//! measured false positive rate and data blocks read per Get. `--json` prints one JSON object per
//! phase on stdout instead (the rest goes to stderr).
//!
//! `readwhilewriting` keeps one writer overwriting random present keys at full speed while the
//! `--threads` readers Get present and absent keys in turn (`examples/common/read_while_writing.rs`):
//!
//! cargo run --release -p siftdb-examples --example workload -- --keys 1000000 --reads 2000000 \
//!     --phases fillrandom,readwhilewriting
//!
//! Short range scans (`scanempty`, `scanhit`) need keys of `--key-format binary` (a fixed head
//! and a 64-bit number), `tenants` (`--tenants` tenant ids and 8-byte ids below 2^40) or
//! `strings` (`user:<id>:<field>`); `examples/common/key_formats.rs` describes them and what a
//! range of `--scan-width` keys is in each. `scanempty` asks ranges holding no key, starting
//! anywhere (uniform) or, with `--correlated`, just after a present key; `scanhit` ranges holding
//! one present key. With `--range-filter-bits` the store builds Grafite range filters:
//!
//! cargo run --release -p siftdb-examples --example workload -- --key-format tenants --key-size 12 \
//!     --range-filter-bits 20 --phases fillrandom,scanempty,scanhit --scan-width 256
//!
//! `--compaction-style` chooses how compactions shape the tree (`Options::compaction_style`):
//! `leveled` (the default), or `lazy` for lazy leveling with 4 sorted runs per tiered level
//! (`lazy:T` for T of them). The run ends with what the writes cost over the whole run (table
//! bytes written by flushes and compactions per byte of keys and values put, once the last
//! memtable is flushed; with `--settle`, once the store has settled) and the sorted runs a Get
//! then meets (L0 tables and non-empty levels):
//!
//! cargo run --release -p siftdb-examples --example workload -- --keys 1000000 --settle \
//!     --compaction-style lazy:4 --phases fillrandom,overwrite,readrandom,readmissing

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use key_formats::Keys;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use siftdb::{
    BinaryFuse, CacheLocalBloom, CompactionStyle, Compression, Db, Filter, FilterAllocation,
    FilterLayout, FilterPolicy, Keyspace, LevelDbBloom, Options, PrefixExtractor, RangeFilter,
    Ribbon, Statistics, Ticker, WriteBatch, WriteOptions,
};
use sorted_runs::SortedRuns;
use value_generator::ValueGenerator;

#[path = "common/key_formats.rs"]
mod key_formats;
#[path = "common/read_while_writing.rs"]
mod read_while_writing;
#[path = "common/sorted_runs.rs"]
mod sorted_runs;
#[path = "common/value_generator.rs"]
mod value_generator;

#[derive(Parser, Debug)]
#[command(about = "A db_bench-like workload for siftdb, with filter statistics per phase")]
struct Args {
    /// Phases to run, in order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fillrandom,readrandom,readmissing,readmixed,scan"
    )]
    phases: Vec<Phase>,
    /// Keys written by fill and overwrite phases.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    keys: u64,
    /// Gets per read phase.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    reads: u64,
    /// Bytes per key (zero-padded decimal; must fit 2 · keys).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    key_size: u16,
    /// Bytes per value.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=1_048_576))]
    value_size: u32,
    /// The share of each value that is random, as db_bench's `--compression_ratio`: values
    /// compress to about this ratio (1.0: not at all).
    #[arg(long, default_value_t = 0.5, value_parser = parse_compression_ratio)]
    compression_ratio: f64,
    /// Codec of the tables' blocks, on every level.
    #[arg(long, value_enum, default_value_t = CompressionArg::Snappy)]
    compression: CompressionArg,
    /// Codec of the tables compactions write into the bottommost level (default: --compression).
    #[arg(long, value_enum)]
    bottommost_compression: Option<CompressionArg>,
    /// The zstd level, where --compression or --bottommost-compression is zstd.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true, value_parser = parse_zstd_level)]
    zstd_level: i32,
    /// Filter layout for new tables.
    #[arg(long, value_enum, default_value_t = FilterArg::Full)]
    filter: FilterArg,
    /// Filter policy in that layout; default: LevelDB's bloom in the block-based layout, the
    /// cache-local bloom in the others.
    #[arg(long, value_enum)]
    policy: Option<PolicyArg>,
    /// Filter bits per key.
    #[arg(long, default_value_t = 10.0, value_parser = parse_bits_per_key)]
    bits_per_key: f64,
    /// How filter bits are spread over the levels.
    #[arg(long, value_enum, default_value_t = AllocationArg::Uniform)]
    allocation: AllocationArg,
    /// Build last-level tables without a filter (saves most filter memory; missing keys then
    /// read a last-level data block).
    #[arg(long)]
    no_filter_on_last_level: bool,
    /// Fraction of `readmixed` Gets that ask for a present key.
    #[arg(long, default_value_t = 0.5, value_parser = parse_ratio)]
    hit_ratio: f64,
    /// Threads for read phases (they share one `Arc<Db>`); writes use one thread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
    /// Database directory (kept); default: a fresh temporary directory, removed at the end.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Compact the whole store before the first read phase after writes.
    #[arg(long)]
    compact: bool,
    /// Before the first read phase after writes, wait until no compaction is pending: the tree
    /// the store settles in once writes pause, which read phases then meet unchanged (and a later
    /// run reopening `--dir` finds so); and again at the end, before the whole run's figures.
    #[arg(long)]
    settle: bool,
    /// Memtable size in KiB (default: the store's, 4096).
    #[arg(long, value_parser = clap::value_parser!(u64).range(4..=1 << 30))]
    write_buffer_kb: Option<u64>,
    /// `Options::max_bytes_for_level_base` in KiB (default: the store's, 10240).
    #[arg(long, value_parser = clap::value_parser!(u64).range(4..=1 << 30))]
    level_base_kb: Option<u64>,
    /// How compactions shape the tree (`Options::compaction_style`): `leveled`, or `lazy[:T]`,
    /// lazy leveling with T sorted runs per tiered level (T at least 2; `lazy` alone: 4).
    #[arg(long, default_value = "leveled", value_parser = parse_compaction_style)]
    compaction_style: CompactionStyle,
    /// `Options::level_budget_during_writes`: how many times its budget a level may hold while
    /// writes flow (default: the store's, 2; 1 compacts every level at its budget).
    #[arg(long)]
    level_budget_during_writes: Option<f64>,
    /// Print one JSON object per phase on stdout.
    #[arg(long)]
    json: bool,
    /// End with every counter of `Db::statistics`, by its `Ticker` name.
    #[arg(long)]
    tickers: bool,
    /// fsync the WAL on every write.
    #[arg(long)]
    sync: bool,
    /// Bytes of each key that form its prefix (a fixed-length prefix extractor), for the
    /// `seekprefix` phase; default: the whole key, so a missing key is a missing prefix.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    prefix_len: Option<u16>,
    /// Seed for key order and read choices.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Keys per lookup in the point-read phases (readrandom, readmissing, readmixed): above 1,
    /// each batch is one `Db::multi_get`, and each key's latency is the batch's divided by its
    /// keys.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=4096))]
    batch: u16,
    /// Block cache size in MiB (default: the store's, 32).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1 << 20))]
    block_cache_mb: Option<u64>,
    /// Put index and filter blocks in the block cache, charged to it, instead of keeping them
    /// with the tables (`Options::cache_index_and_filter_blocks`).
    #[arg(long)]
    cache_index_and_filter_blocks: bool,
    /// Threads one compaction may split its key range between (default: the store's, 2).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    subcompactions: Option<u16>,
    /// L0 tables at which writes slow down and stop (default: the store's, 28 and 36).
    #[arg(long, num_args = 2, value_names = ["SLOWDOWN", "STOP"])]
    l0_triggers: Option<Vec<u16>>,
    /// Leave L0 alone below its trigger however many reads check its filters in vain
    /// (`Options::compact_l0_for_reads(false)`).
    #[arg(long)]
    no_read_compaction: bool,
    /// Leave L0 alone below its trigger when writes pause
    /// (`Options::compact_l0_when_idle(false)`).
    #[arg(long)]
    no_idle_compaction: bool,
    /// Spread the keys over this many keyspaces, each with the store's options (key i lives in
    /// keyspace `ks<i mod N>`); write phases then report the peak bytes of the WALs on disk.
    /// Point reads ask each key's keyspace; with more than 1, `scan`, `seekprefix` and `--batch`
    /// above 1 are refused.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=4096))]
    keyspaces: u16,
    /// `Options::max_total_wal_size` in MiB (default: 4 × the largest memtable size).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    max_total_wal_mb: Option<u64>,
    /// How key numbers become keys: zero-padded decimals, or (for range scans) a fixed head and
    /// a scrambled big-endian number, tenants and ids (`--key-size` 9 to 1024 for both; the
    /// number or id is the last 8 bytes), or `user:<id>:<field>` strings (of their own lengths).
    #[arg(long, value_enum, default_value_t = KeyFormat::Decimal)]
    key_format: KeyFormat,
    /// Tenants of `--key-format tenants`.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    tenants: u64,
    /// Build Grafite range filters of this many bits per key (`Options::range_filter`).
    #[arg(long, value_parser = parse_range_filter_bits)]
    range_filter_bits: Option<f64>,
    /// The widest range (in integers) the range filters answer.
    #[arg(long, default_value_t = 1 << 16, value_parser = clap::value_parser!(u64).range(1..))]
    range_filter_max_range: u64,
    /// Integers per range of `scanempty` and `scanhit`.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    scan_width: u64,
    /// `scanempty` ranges start just after a present key instead of anywhere.
    #[arg(long)]
    correlated: bool,
    /// `readwhilewriting` runs this many seconds instead of until `--reads` Gets.
    #[arg(long, value_parser = parse_seconds)]
    read_while_writing_secs: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum KeyFormat {
    /// Zero-padded decimal numbers.
    Decimal,
    /// A fixed head, then a scrambled big-endian 64-bit number.
    Binary,
    /// A tenant id, then a big-endian id below 2^40.
    Tenants,
    /// `user:<id>:<field>`.
    Strings,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Phase {
    Fillrandom,
    Fillseq,
    Readrandom,
    Readmissing,
    Readmixed,
    Scan,
    Overwrite,
    /// `scan_prefix` of present (`--hit-ratio`) and missing prefixes; tables whose filter rules
    /// the prefix out are skipped.
    Seekprefix,
    /// Short scans of `--scan-width` keys that find nothing (not with `--key-format decimal`).
    Scanempty,
    /// Short scans of `--scan-width` keys holding one present key (not with decimal keys).
    Scanhit,
    /// db_bench's readwhilewriting: one writer overwrites random present keys at full speed
    /// while `--threads` readers make `--reads` Gets in all, present and absent keys in turn;
    /// reports the readers' rates of each kind, the writer's, and L0's table count meanwhile.
    Readwhilewriting,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FilterArg {
    None,
    BlockBased,
    Full,
    Partitioned,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PolicyArg {
    /// The cache-local bloom.
    Bloom,
    /// The Ribbon filter: 7 bits/key give about the bloom's rate at 10.
    Ribbon,
    /// The binary fuse filter with 8-bit fingerprints (about 9 bits/key whatever --bits-per-key).
    Fuse8,
    /// The binary fuse filter with 16-bit fingerprints (about 18 bits/key).
    Fuse16,
    /// LevelDB's bloom.
    Leveldb,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum CompressionArg {
    None,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionArg {
    fn codec(self, zstd_level: i32) -> Compression {
        match self {
            CompressionArg::None => Compression::None,
            CompressionArg::Snappy => Compression::Snappy,
            CompressionArg::Lz4 => Compression::Lz4,
            CompressionArg::Zstd => Compression::Zstd(zstd_level),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum AllocationArg {
    Uniform,
    Monkey,
}

fn parse_bits_per_key(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v.is_finite() && v > 0.0 && v <= 100.0 {
        Ok(v)
    } else {
        Err("must be > 0 and ≤ 100".into())
    }
}

fn parse_range_filter_bits(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (3.0..=60.0).contains(&v) {
        Ok(v)
    } else {
        Err("must be from 3 to 60".into())
    }
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v.is_finite() && v > 0.0 && v <= 86_400.0 {
        Ok(v)
    } else {
        Err("must be above 0 and at most a day".into())
    }
}

fn parse_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err("must be between 0 and 1".into())
    }
}

fn parse_compression_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err("must be above 0 and at most 1".into())
    }
}

fn parse_compaction_style(s: &str) -> Result<CompactionStyle, String> {
    let runs_per_level = match s.split_once(':') {
        None if s == "leveled" => return Ok(CompactionStyle::Leveled),
        None if s == "lazy" => 4,
        Some(("lazy", t)) => t
            .parse::<usize>()
            .ok()
            .filter(|&t| t >= 2)
            .ok_or("lazy:T takes a whole number T of at least 2")?,
        _ => return Err("leveled, lazy or lazy:T".into()),
    };
    Ok(CompactionStyle::LazyLeveled { runs_per_level })
}

fn parse_zstd_level(s: &str) -> Result<i32, String> {
    let v: i32 = s.parse().map_err(|e| format!("{e}"))?;
    let known = zstd::compression_level_range();
    if known.contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "zstd knows levels {} to {}",
            known.start(),
            known.end()
        ))
    }
}

/// What the values and tables of a run are, as every result names them.
struct RunKind {
    value_size: u32,
    compression_ratio: f64,
    compression: Compression,
    bottommost: Option<Compression>,
    compaction_style: CompactionStyle,
}

impl RunKind {
    fn text(&self) -> String {
        let bottom = self
            .bottommost
            .map_or(String::new(), |c| format!(", {c} bottommost"));
        // Named where it is not the default, so that leveled runs print as they always have.
        let style = match self.compaction_style {
            CompactionStyle::Leveled => String::new(),
            lazy => format!("; {lazy}"),
        };
        format!(
            "[{} B values, compression ratio {:.2}; {}{bottom}{style}]",
            self.value_size, self.compression_ratio, self.compression
        )
    }

    fn json(&self) -> Value {
        json!({
            "value_size": self.value_size,
            "compression_ratio": self.compression_ratio,
            "compression": self.compression.to_string(),
            "bottommost_compression": self.bottommost.map(|c| c.to_string()),
            "compaction_style": self.compaction_style.to_string(),
        })
    }
}

/// Per-op latencies in nanoseconds, any size (the histogram grows to fit).
fn latency_histogram() -> Histogram<u64> {
    Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant figures are valid"))
}

/// Records `n` ops of `elapsed` each.
fn record(h: &mut Histogram<u64>, elapsed: Duration, n: u64) {
    let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
    if h.record_n(ns, n).is_err() {
        h.saturating_record_n(ns, n);
    }
}

/// How a run makes its keys.
#[derive(Clone, Copy, Debug)]
struct KeySpec {
    size: usize,
    /// The keys of the formats that short scans run on.
    scan_keys: Option<Keys>,
}

impl KeySpec {
    fn of(args: &Args) -> KeySpec {
        let size = usize::from(args.key_size);
        KeySpec {
            size,
            scan_keys: match args.key_format {
                KeyFormat::Decimal => None,
                KeyFormat::Binary => Some(Keys::binary(size)),
                KeyFormat::Tenants => Some(Keys::tenants(size, args.tenants)),
                KeyFormat::Strings => Some(Keys::strings()),
            },
        }
    }

    /// Key `n`: a zero-padded decimal of exactly `size` bytes, or a key of the scan formats.
    fn key(&self, n: u64, buf: &mut Vec<u8>) {
        match self.scan_keys {
            Some(keys) => keys.key(n, buf),
            None => {
                buf.clear();
                let size = self.size;
                let mut s = String::with_capacity(size);
                let _ = write!(s, "{n:0size$}");
                buf.extend_from_slice(s.as_bytes());
            }
        }
    }
}

/// What one phase measured.
struct PhaseResult {
    name: &'static str,
    ops: u64,
    elapsed: Duration,
    /// Per-op latencies (sampled for scans), nanoseconds.
    latencies: Histogram<u64>,
    /// Gets that found a value (read phases).
    found: Option<u64>,
    stats: Statistics,
    /// Bytes of the live tables when the phase ended.
    sst_bytes: u64,
    /// The most bytes the WALs on disk held during a write phase (sampled every 1,024 writes),
    /// with several keyspaces.
    wal_peak: Option<u64>,
}

/// A scan times one step in every `SCAN_SAMPLE_EVERY`; timing every op would cost as much as a scan step.
const SCAN_SAMPLE_EVERY: u64 = 16;

fn main() -> ExitCode {
    let args = Args::parse();
    let digits = match args.key_format {
        KeyFormat::Decimal => (2 * args.keys + 1).to_string().len(),
        KeyFormat::Binary | KeyFormat::Tenants => 9,
        KeyFormat::Strings => 0,
    };
    if usize::from(args.key_size) < digits {
        eprintln!(
            "error: --key-size {} is too small for --keys {} (need at least {digits} bytes)",
            args.key_size, args.keys
        );
        return ExitCode::from(2);
    }
    let unroutable = args.batch > 1
        || args
            .phases
            .iter()
            .any(|p| matches!(p, Phase::Scan | Phase::Seekprefix));
    if args.keyspaces > 1 && unroutable {
        eprintln!("error: --keyspaces above 1 takes no scan or seekprefix phase and no --batch");
        return ExitCode::from(2);
    }
    let short_scans = args
        .phases
        .iter()
        .any(|p| matches!(p, Phase::Scanempty | Phase::Scanhit));
    if short_scans && (args.key_format == KeyFormat::Decimal || args.keyspaces > 1) {
        eprintln!(
            "error: scanempty and scanhit need binary, tenants or strings keys, and one keyspace"
        );
        return ExitCode::from(2);
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("workload: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let bits = args.bits_per_key;
    let filter = match (args.filter, args.policy) {
        (FilterArg::None, _) => Filter::none(),
        (FilterArg::BlockBased, None) => Filter::block_based(bits),
        (FilterArg::Full, None) => Filter::full(bits),
        (FilterArg::Partitioned, None) => Filter::partitioned(bits),
        (layout, Some(policy)) => {
            let layout = match layout {
                FilterArg::BlockBased => FilterLayout::BlockBased,
                FilterArg::Partitioned => FilterLayout::Partitioned,
                FilterArg::Full | FilterArg::None => FilterLayout::Full,
            };
            let policy: Arc<dyn FilterPolicy> = match policy {
                PolicyArg::Bloom => Arc::new(CacheLocalBloom::new(bits)),
                PolicyArg::Ribbon => Arc::new(Ribbon::new(bits)),
                PolicyArg::Fuse8 => Arc::new(BinaryFuse::fuse8()),
                PolicyArg::Fuse16 => Arc::new(BinaryFuse::fuse16()),
                PolicyArg::Leveldb => Arc::new(LevelDbBloom::new(bits)),
            };
            Filter::new(layout, policy)
        }
    };
    // A temporary directory lives as long as `_tmp` and is removed when it drops.
    let (_tmp, dir) = match &args.dir {
        Some(d) => (None, d.clone()),
        None => {
            let t = tempfile::tempdir()?;
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    };
    let allocation = match args.allocation {
        AllocationArg::Uniform => FilterAllocation::Uniform,
        AllocationArg::Monkey => FilterAllocation::Monkey,
    };
    let kind = RunKind {
        value_size: args.value_size,
        compression_ratio: args.compression_ratio,
        compression: args.compression.codec(args.zstd_level),
        bottommost: args
            .bottommost_compression
            .map(|c| c.codec(args.zstd_level)),
        compaction_style: args.compaction_style,
    };
    let options = Options::default()
        .compaction_style(kind.compaction_style)
        .compression(kind.compression)
        .filter(filter.clone())
        .filter_allocation(allocation)
        .no_filter_on_last_level(args.no_filter_on_last_level)
        .cache_index_and_filter_blocks(args.cache_index_and_filter_blocks)
        .compact_l0_for_reads(!args.no_read_compaction)
        .compact_l0_when_idle(!args.no_idle_compaction);
    let options = match kind.bottommost {
        Some(c) => options.bottommost_compression(c),
        None => options,
    };
    let options = match args.block_cache_mb {
        Some(mb) => options.block_cache_bytes(usize::try_from(mb << 20).unwrap_or(usize::MAX)),
        None => options,
    };
    let options = match args.subcompactions {
        Some(n) => options.max_subcompactions(usize::from(n)),
        None => options,
    };
    let options = match args.l0_triggers.as_deref() {
        Some(&[slowdown, stop]) => options
            .level0_slowdown_writes_trigger(usize::from(slowdown))
            .level0_stop_writes_trigger(usize::from(stop)),
        _ => options,
    };
    // A prefix extractor only where prefixes are asked for: it adds entries to every filter.
    let wants_prefixes = args.prefix_len.is_some() || args.phases.contains(&Phase::Seekprefix);
    let options = if wants_prefixes {
        let prefix_len = args.prefix_len.unwrap_or(args.key_size).min(args.key_size);
        options.prefix_extractor(PrefixExtractor::fixed(usize::from(prefix_len)))
    } else {
        options
    };
    let options = match args.write_buffer_kb {
        Some(kb) => options.write_buffer_size(usize::try_from(kb << 10).unwrap_or(usize::MAX)),
        None => options,
    };
    let options = match args.level_base_kb {
        Some(kb) => options.max_bytes_for_level_base(kb << 10),
        None => options,
    };
    let options = match args.level_budget_during_writes {
        Some(factor) => options.level_budget_during_writes(factor),
        None => options,
    };
    let options = match args.max_total_wal_mb {
        Some(mb) => options.max_total_wal_size(mb << 20),
        None => options,
    };
    let range_filter = match args.range_filter_bits {
        Some(bits) => RangeFilter::grafite(bits, args.range_filter_max_range),
        None => RangeFilter::none(),
    };
    let options = options.range_filter(range_filter);
    let db = Arc::new(Db::open(&dir, options)?);
    let spaces: Arc<Vec<Keyspace>> = Arc::new(if args.keyspaces > 1 {
        (0..args.keyspaces)
            .map(|i| db.keyspace(&format!("ks{i:04}")))
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    });
    note(
        args,
        &configuration(args, &kind, &filter, range_filter, &dir),
    );

    let mut values =
        ValueGenerator::new(args.compression_ratio, args.value_size as usize, args.seed);
    let mut dirty = false;

    for &phase in &args.phases {
        let is_read = matches!(
            phase,
            Phase::Readrandom
                | Phase::Readmissing
                | Phase::Readmixed
                | Phase::Scan
                | Phase::Seekprefix
                | Phase::Scanempty
                | Phase::Scanhit
                | Phase::Readwhilewriting
        );
        if is_read && dirty {
            // Reads are meant to meet tables (and their filters), not the memtable.
            let t = Instant::now();
            db.flush()?;
            if args.compact {
                db.compact()?;
            }
            for ks in spaces.iter() {
                ks.flush()?;
                if args.compact {
                    ks.compact()?;
                }
            }
            if args.settle {
                settle(&db);
                for ks in spaces.iter() {
                    settle(ks);
                }
            }
            note(
                args,
                &format!(
                    "  (flushed{}{} before reading: {:.2} s)",
                    if args.compact { " and compacted" } else { "" },
                    if args.settle { ", settled" } else { "" },
                    t.elapsed().as_secs_f64()
                ),
            );
            dirty = false;
        }
        let result = match phase {
            Phase::Fillrandom | Phase::Fillseq | Phase::Overwrite => {
                dirty = true;
                write_phase(args, &db, &spaces, phase, &mut values)?
            }
            Phase::Readrandom | Phase::Readmissing | Phase::Readmixed | Phase::Seekprefix => {
                read_phase(args, &db, &spaces, phase)?
            }
            Phase::Scan => scan_phase(&db)?,
            Phase::Readwhilewriting => {
                dirty = true;
                let (result, measured) = read_while_writing_phase(args, &db, &spaces)?;
                report_read_while_writing(args, &kind, &result, &measured);
                report_writes(args, &kind, &result);
                continue;
            }
            Phase::Scanempty | Phase::Scanhit => short_scan_phase(args, &db, phase)?,
        };
        let point_reads = matches!(
            phase,
            Phase::Readrandom | Phase::Readmissing | Phase::Readmixed
        );
        report(args, &kind, &result, point_reads);
        if matches!(phase, Phase::Scanempty | Phase::Scanhit) {
            report_range_filter(args, &kind, &result, range_filter);
        }
        if phase == Phase::Seekprefix {
            report_prefix(args, &kind, &result);
        }
        if matches!(phase, Phase::Fillrandom | Phase::Fillseq | Phase::Overwrite) {
            report_writes(args, &kind, &result);
        }
    }

    if dirty {
        // Leave tables behind for `sst_dump --dir`, not just a WAL, and count their bytes.
        db.flush()?;
        for ks in spaces.iter() {
            ks.flush()?;
        }
    }
    if args.settle {
        settle(&db);
        for ks in spaces.iter() {
            settle(ks);
        }
    }
    report_run(args, &kind, &db, &spaces);
    let stats = db
        .property("siftdb.stats")
        .unwrap_or_else(|| "(no siftdb.stats)".into());
    // The report ends with every counter, under a line saying so: shown on request only.
    let report = match stats.split_once("\ncounters since open") {
        Some((report, _)) if !args.tickers => {
            format!("{report}\n(every counter by its Ticker name: --tickers)")
        }
        _ => stats,
    };
    note(args, &format!("\ndb.property(\"siftdb.stats\"):\n{report}"));
    Ok(())
}

/// The run's configuration in words, for the header.
fn configuration(
    args: &Args,
    kind: &RunKind,
    filter: &Filter,
    range_filter: RangeFilter,
    dir: &std::path::Path,
) -> String {
    let keys = match args.key_format {
        KeyFormat::Decimal => "zero-padded decimals".to_string(),
        KeyFormat::Binary => "a fixed head and a scrambled number".to_string(),
        KeyFormat::Tenants => format!("{} tenants' ids", args.tenants),
        KeyFormat::Strings => "user:<id>:<field> strings".to_string(),
    };
    let size = match args.key_format {
        KeyFormat::Strings => "varying length".to_string(),
        _ => format!("{} bytes", args.key_size),
    };
    let codecs = match kind.bottommost {
        Some(c) => format!("{} blocks ({c} in the bottommost level)", kind.compression),
        None => format!("{} blocks", kind.compression),
    };
    let filter = match (filter.layout(), filter.policy()) {
        (Some(layout), Some(policy)) => {
            let bits = policy.bits_per_key();
            let policy = match policy.name() {
                "leveldb.BuiltinBloomFilter2" => "LevelDB's bloom",
                "siftdb.CacheLocalBloom" => "the cache-local bloom",
                "siftdb.BinaryFuse8" => "an 8-bit binary fuse filter",
                "siftdb.BinaryFuse16" => "a 16-bit binary fuse filter",
                "siftdb.Ribbon128" => "a Ribbon filter",
                other => other,
            };
            let spread = match args.allocation {
                AllocationArg::Uniform => "the same on every level",
                AllocationArg::Monkey => "spread over the levels as Monkey derives",
            };
            let last = if args.no_filter_on_last_level {
                ", none on the last level"
            } else {
                ""
            };
            format!("{policy} in the {layout} layout at {bits} bits per key, {spread}{last}")
        }
        _ => "no filters".to_string(),
    };
    let range = match (range_filter.bits_per_key(), range_filter.max_range()) {
        (Some(bits), Some(max)) => {
            format!("Grafite range filters of {bits} bits per key for ranges up to {max}")
        }
        _ => "no range filters".to_string(),
    };
    let style = match args.compaction_style.runs_per_level() {
        None => "leveled compaction".to_string(),
        Some(t) => format!("lazy leveling, {t} sorted runs per tiered level"),
    };
    format!(
        "siftdb workload: {} keys of {size} ({keys}); values of {} bytes that compress to \
         about {:.0} % of their size; {codecs}; {filter}; {range}; {style}; {} read thread{}; \
         the store in {}",
        args.keys,
        args.value_size,
        100.0 * args.compression_ratio,
        args.threads,
        if args.threads == 1 { "" } else { "s" },
        dir.display()
    )
}

/// Waits until no compaction is pending in `db` (a store or one keyspace's handle).
fn settle(db: &impl std::ops::Deref<Target = Db>) {
    while db.property("siftdb.compaction-pending").as_deref() != Some("0") {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Prints to stdout, or to stderr when stdout carries JSON.
fn note(args: &Args, text: &str) {
    if args.json {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
}

/// A progress bar on stderr when it is a terminal, hidden otherwise. `len: None` for an unknown
/// length (a scan).
fn progress(len: Option<u64>, name: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let (pb, template) = match len {
        Some(n) => (
            ProgressBar::new(n),
            "{prefix:12} [{bar:40}] {human_pos}/{human_len} {elapsed}",
        ),
        None => (
            ProgressBar::new_spinner(),
            "{prefix:12} {spinner} {human_pos} {elapsed}",
        ),
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(name.to_string());
    pb
}

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Fillrandom => "fillrandom",
        Phase::Fillseq => "fillseq",
        Phase::Readrandom => "readrandom",
        Phase::Readmissing => "readmissing",
        Phase::Readmixed => "readmixed",
        Phase::Scan => "scan",
        Phase::Overwrite => "overwrite",
        Phase::Seekprefix => "seekprefix",
        Phase::Scanempty => "scanempty",
        Phase::Scanhit => "scanhit",
        Phase::Readwhilewriting => "readwhilewriting",
    }
}

/// The store handle key number `idx` lives in: its keyspace's, with several.
fn home<'a>(db: &'a Db, spaces: &'a [Keyspace], idx: u64) -> &'a Db {
    match spaces.len() {
        0 => db,
        n => &spaces[(idx % n as u64) as usize],
    }
}

/// Bytes of the WAL files in `dir`.
fn wal_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn write_phase(
    args: &Args,
    db: &Db,
    spaces: &[Keyspace],
    phase: Phase,
    values: &mut ValueGenerator,
) -> Result<PhaseResult, siftdb::Error> {
    let n = args.keys;
    let mut rng = StdRng::seed_from_u64(args.seed ^ 0x5752_4954);
    // Key numbers to write: every key once (in order or shuffled), or random keys for overwrite.
    let order: Vec<u64> = match phase {
        Phase::Fillseq => (0..n).collect(),
        Phase::Fillrandom => {
            let mut v: Vec<u64> = (0..n).collect();
            v.shuffle(&mut rng);
            v
        }
        _ => (0..n).map(|_| rng.gen_range(0..n)).collect(),
    };
    let name = phase_name(phase);
    let pb = progress(Some(n), name);
    let before = db.statistics();
    let sync = WriteOptions { sync: true };
    let value_size = args.value_size as usize;
    let keys = KeySpec::of(args);
    let mut latencies = latency_histogram();
    let mut k = Vec::new();
    let mut wal_peak = None;
    let start = Instant::now();
    for (i, &idx) in order.iter().enumerate() {
        keys.key(idx * 2, &mut k);
        let value = values.next(value_size);
        let target = home(db, spaces, idx);
        let t = Instant::now();
        if args.sync {
            let mut batch = WriteBatch::new();
            match spaces.is_empty() {
                true => batch.put(&k, value),
                false => batch.put_in(&spaces[(idx % spaces.len() as u64) as usize], &k, value),
            };
            db.write_opt(batch, &sync)?;
        } else {
            target.put(&k, value)?;
        }
        record(&mut latencies, t.elapsed(), 1);
        if i % 1024 == 1023 {
            pb.inc(1024);
            if !spaces.is_empty() {
                let now = wal_bytes(db.path());
                wal_peak = Some(wal_peak.map_or(now, |p: u64| p.max(now)));
            }
        }
    }
    let elapsed = start.elapsed();
    pb.finish_and_clear();
    Ok(PhaseResult {
        name,
        ops: n,
        elapsed,
        latencies,
        found: None,
        stats: db.statistics().since(&before),
        sst_bytes: sst_bytes(db),
        wal_peak,
    })
}

fn read_phase(
    args: &Args,
    db: &Arc<Db>,
    spaces: &Arc<Vec<Keyspace>>,
    phase: Phase,
) -> Result<PhaseResult, siftdb::Error> {
    let name = phase_name(phase);
    let pb = progress(Some(args.reads), name);
    let before = db.statistics();
    let threads = u64::from(args.threads);
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            // Each thread gets its share of the reads and its own random stream.
            let share = args.reads / threads + u64::from(t < args.reads % threads);
            let db = Arc::clone(db);
            let spaces = Arc::clone(spaces);
            let pb = pb.clone();
            let (keys, key_size, hit_ratio) = (args.keys, args.key_size as usize, args.hit_ratio);
            let keys_total = keys;
            let prefix_len = usize::from(args.prefix_len.unwrap_or(args.key_size)).min(key_size);
            let mut rng = StdRng::seed_from_u64(args.seed.wrapping_add(1000 + t));
            let batch = u64::from(args.batch);
            let spec = KeySpec::of(args);
            std::thread::spawn(move || -> Result<(Histogram<u64>, u64), siftdb::Error> {
                let mut latencies = latency_histogram();
                let mut found = 0u64;
                let mut k = Vec::new();
                if batch > 1 && phase != Phase::Seekprefix {
                    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(batch as usize);
                    let mut done = 0;
                    while done < share {
                        let n = batch.min(share - done);
                        keys.clear();
                        for _ in 0..n {
                            let idx = rng.gen_range(0..keys_total);
                            let present = match phase {
                                Phase::Readrandom => true,
                                Phase::Readmissing => false,
                                _ => rng.gen_bool(hit_ratio),
                            };
                            spec.key(idx * 2 + u64::from(!present), &mut k);
                            keys.push(k.clone());
                        }
                        let t = Instant::now();
                        for v in db.multi_get(&keys) {
                            found += u64::from(v?.is_some());
                        }
                        let per_key = t.elapsed() / u32::try_from(n).unwrap_or(u32::MAX);
                        record(&mut latencies, per_key, n);
                        if (done + n) / 1024 > done / 1024 {
                            pb.inc(1024);
                        }
                        done += n;
                    }
                    return Ok((latencies, found));
                }
                for i in 0..share {
                    let idx = rng.gen_range(0..keys);
                    let present = match phase {
                        Phase::Readrandom => true,
                        Phase::Readmissing => false,
                        _ => rng.gen_bool(hit_ratio),
                    };
                    // Present keys are even, missing ones odd: between two present keys.
                    spec.key(idx * 2 + u64::from(!present), &mut k);
                    let t = Instant::now();
                    let hit = if phase == Phase::Seekprefix {
                        let mut rows = 0u64;
                        for row in db.scan_prefix(&k[..prefix_len]) {
                            row?;
                            rows += 1;
                        }
                        rows > 0
                    } else {
                        home(&db, &spaces, idx).get(&k)?.is_some()
                    };
                    record(&mut latencies, t.elapsed(), 1);
                    found += u64::from(hit);
                    if i % 1024 == 1023 {
                        pb.inc(1024);
                    }
                }
                Ok((latencies, found))
            })
        })
        .collect();
    let mut latencies = latency_histogram();
    let mut found = 0;
    for h in handles {
        let (l, f) = h.join().map_err(|_| {
            siftdb::Error::InvalidArgument("a reader thread panicked".to_string())
        })??;
        latencies
            .add(l)
            .map_err(|e| siftdb::Error::InvalidArgument(format!("latencies: {e:?}")))?;
        found += f;
    }
    let elapsed = start.elapsed();
    pb.finish_and_clear();
    Ok(PhaseResult {
        name,
        ops: args.reads,
        elapsed,
        latencies,
        found: Some(found),
        stats: db.statistics().since(&before),
        sst_bytes: sst_bytes(db),
        wal_peak: None,
    })
}

/// The store as the `readwhilewriting` phase reaches it: keys by the run's format, each in its
/// keyspace.
struct WorkloadTarget<'a> {
    db: &'a Db,
    spaces: &'a [Keyspace],
    keys: KeySpec,
}

impl read_while_writing::Target for WorkloadTarget<'_> {
    type Error = siftdb::Error;

    fn put(&self, n: u64, value: &[u8]) -> Result<(), siftdb::Error> {
        let mut k = Vec::new();
        self.keys.key(n, &mut k);
        home(self.db, self.spaces, n / 2).put(&k, value)
    }

    fn get(&self, n: u64) -> Result<bool, siftdb::Error> {
        let mut k = Vec::new();
        self.keys.key(n, &mut k);
        Ok(home(self.db, self.spaces, n / 2).get(&k)?.is_some())
    }

    fn l0_tables(&self) -> Option<usize> {
        let l0 = |db: &Db| {
            db.property("siftdb.num-files-at-level0")?
                .parse::<usize>()
                .ok()
        };
        match self.spaces.is_empty() {
            true => l0(self.db),
            false => self.spaces.iter().map(|ks| l0(ks)).sum(),
        }
    }

    fn wrong_answer(&self, n: u64) -> siftdb::Error {
        siftdb::Error::InvalidArgument(format!("readwhilewriting: wrong answer for key {n}"))
    }
}

/// One writer overwriting at full speed while `--threads` readers make `--reads` Gets.
fn read_while_writing_phase(
    args: &Args,
    db: &Db,
    spaces: &[Keyspace],
) -> Result<(PhaseResult, read_while_writing::ReadWhileWriting), siftdb::Error> {
    let before = db.statistics();
    let target = WorkloadTarget {
        db,
        spaces,
        keys: KeySpec::of(args),
    };
    let plan = read_while_writing::Plan {
        keys: args.keys,
        readers: usize::from(args.threads),
        until: match args.read_while_writing_secs {
            Some(secs) => read_while_writing::Until::Elapsed(Duration::from_secs_f64(secs)),
            None => read_while_writing::Until::Gets(args.reads),
        },
        value_size: args.value_size as usize,
        compression_ratio: args.compression_ratio,
        seed: args.seed,
    };
    let measured = read_while_writing::run(&target, plan)?;
    let result = PhaseResult {
        name: "readwhilewriting",
        ops: measured.puts,
        elapsed: Duration::from_secs_f64(measured.secs),
        latencies: latency_histogram(),
        found: None,
        stats: db.statistics().since(&before),
        sst_bytes: sst_bytes(db),
        wal_peak: None,
    };
    Ok((result, measured))
}

/// The readers' rates (present and absent Gets apart), the writer's, L0's table count while it
/// ran, and the filter checks a Get made.
fn report_read_while_writing(
    args: &Args,
    kind: &RunKind,
    r: &PhaseResult,
    m: &read_while_writing::ReadWhileWriting,
) {
    let readers = usize::from(args.threads);
    let gets = r.stats.ticker(Ticker::NumberKeysRead).max(1) as f64;
    let f = r.stats.filter_totals();
    let checks_per_get = (f.useful + f.positive) as f64 / gets;
    if args.json {
        print_json(
            kind,
            json!({
                "phase": r.name,
                "seconds": rounded(m.secs, 4),
                "readers": readers,
                "present_gets": m.present_gets,
                "present_gets_per_sec": rounded(m.present_per_sec(readers), 1),
                "present_get_us": rounded(m.present_us(), 3),
                "missing_gets": m.missing_gets,
                "missing_gets_per_sec": rounded(m.missing_per_sec(readers), 1),
                "missing_get_us": rounded(m.missing_us(), 3),
                "puts": m.puts,
                "puts_per_sec": rounded(m.puts_per_sec(), 1),
                "put_us": rounded(m.put_us(), 3),
                "l0_tables_mean": m.l0_mean.map(|x| rounded(x, 2)),
                "l0_tables_max": m.l0_max,
                "filter_checks_per_get": rounded(checks_per_get, 3),
                "reader_cpu_us_per_get": m.reader_cpu_us_per_get().map(|x| rounded(x, 3)),
                "reader_on_core_share": m.reader_on_core_share().map(|x| rounded(x, 4)),
            }),
        );
        return;
    }
    let l0 = match (m.l0_mean, m.l0_max) {
        (Some(mean), Some(max)) => format!("L0 tables mean {mean:.1}, max {max}"),
        _ => "L0 tables n/a".to_string(),
    };
    println!(
        "{:<12} {:>8.2} s  {readers} reader{}: present {:>10.0} Gets/s ({:.2} µs)   absent {:>10.0} Gets/s ({:.2} µs)",
        r.name,
        m.secs,
        if readers == 1 { "" } else { "s" },
        m.present_per_sec(readers),
        m.present_us(),
        m.missing_per_sec(readers),
        m.missing_us()
    );
    println!(
        "{:<12} writer: {} puts, {:.0} puts/s ({:.2} µs a put)   {l0}   filter checks/Get {checks_per_get:.2}",
        "",
        m.puts,
        m.puts_per_sec(),
        m.put_us()
    );
    if let (Some(cpu), Some(share)) = (m.reader_cpu_us_per_get(), m.reader_on_core_share()) {
        println!(
            "{:<12} readers: {cpu:.2} µs on a core per Get, on a core {:.0} % of their time",
            "",
            100.0 * share
        );
    }
    println!(
        "{:<12} {}   tables {:.1} MiB",
        "",
        kind.text(),
        r.sst_bytes as f64 / f64::from(1 << 20)
    );
}

/// Reads the whole store in key order.
fn scan_phase(db: &Db) -> Result<PhaseResult, siftdb::Error> {
    let before = db.statistics();
    let pb = progress(None, "scan");
    let mut latencies = latency_histogram();
    let mut ops = 0u64;
    let start = Instant::now();
    let mut scan = db.iter();
    loop {
        let sampled = ops.is_multiple_of(SCAN_SAMPLE_EVERY);
        let t = sampled.then(Instant::now);
        let Some(item) = scan.next() else { break };
        if let Some(t) = t {
            record(&mut latencies, t.elapsed(), 1);
        }
        item?;
        ops += 1;
        if ops.is_multiple_of(4096) {
            pb.inc(4096);
        }
    }
    let elapsed = start.elapsed();
    pb.finish_and_clear();
    Ok(PhaseResult {
        name: "scan",
        ops,
        elapsed,
        latencies,
        found: None,
        stats: db.statistics().since(&before),
        sst_bytes: sst_bytes(db),
        wal_peak: None,
    })
}

/// Short scans of `--scan-width` keys, `--reads` of them on one thread: over ranges holding
/// nothing (`scanempty`: anywhere, or with `--correlated` just after a present key), or holding
/// one present key somewhere in them (`scanhit`). `found` counts the entries the scans returned.
fn short_scan_phase(args: &Args, db: &Db, phase: Phase) -> Result<PhaseResult, siftdb::Error> {
    let name = phase_name(phase);
    let pb = progress(Some(args.reads), name);
    let mut rng = StdRng::seed_from_u64(args.seed.wrapping_add(77));
    let width = args.scan_width;
    let Some(keys) = KeySpec::of(args).scan_keys else {
        return Err(siftdb::Error::InvalidArgument(
            "short scans need binary, tenants or strings keys".to_string(),
        ));
    };
    let (mut k, mut lo, mut hi) = (Vec::new(), Vec::new(), Vec::new());
    let mut latencies = latency_histogram();
    let mut found = 0u64;
    let before = db.statistics();
    let start = Instant::now();
    for i in 0..args.reads {
        let present = rng.gen_range(0..args.keys) * 2;
        match phase {
            Phase::Scanhit => {
                keys.key(present, &mut k);
                key_formats::minus(&k, rng.gen_range(0..width), &mut lo);
                key_formats::plus(&lo, width - 1, &mut hi);
            }
            _ if args.correlated => {
                keys.key(present, &mut k);
                key_formats::plus(&k, 1, &mut lo);
                key_formats::plus(&k, width, &mut hi);
            }
            _ => {
                keys.anywhere(&mut rng, &mut lo);
                key_formats::plus(&lo, width - 1, &mut hi);
            }
        }
        let t = Instant::now();
        for row in db.scan(lo.as_slice()..=hi.as_slice()) {
            row?;
            found += 1;
        }
        record(&mut latencies, t.elapsed(), 1);
        if i % 1024 == 1023 {
            pb.inc(1024);
        }
    }
    let elapsed = start.elapsed();
    pb.finish_and_clear();
    Ok(PhaseResult {
        name,
        ops: args.reads,
        elapsed,
        latencies,
        found: Some(found),
        stats: db.statistics().since(&before),
        sst_bytes: sst_bytes(db),
        wal_peak: None,
    })
}

/// What the range filters did in a short-scan phase: checks, "no"s, "maybe"s, the measured false
/// positive rate beside theory's, and blocks read per scan.
fn report_range_filter(args: &Args, kind: &RunKind, r: &PhaseResult, configured: RangeFilter) {
    let c = r.stats.range_filter_totals();
    let scans = r.ops.max(1) as f64;
    let blocks = (r.stats.ticker(Ticker::BlockCacheHit) + r.stats.ticker(Ticker::BlockCacheMiss))
        as f64
        / scans;
    let data_read = r.stats.ticker(Ticker::DataBlocksRead) as f64 / scans;
    let theory = configured.theoretical_fp_rate(args.scan_width);
    if args.json {
        print_json(
            kind,
            json!({
                "phase": r.name,
                "scan_width": args.scan_width,
                "correlated": args.correlated,
                "range_filter_checked": c.checks(),
                "range_filter_useful": c.useful,
                "range_filter_positive": c.positive,
                "range_filter_true_positive": c.true_positive,
                "range_fp_rate": c.fp_rate().map(|x| rounded(x, 6)),
                "range_fp_theory": theory.map(|x| rounded(x, 6)),
                "block_reads_per_scan": rounded(blocks, 4),
                "data_blocks_from_disk_per_scan": rounded(data_read, 4),
            }),
        );
        return;
    }
    let pct = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:.4}%", x * 100.0));
    println!(
        "{:<12} width {} ({}): range filter checked {}  useful {}  positive {}  true positive {}  measured FP {}  theory {}  blocks/scan {blocks:.3} (from disk {data_read:.3})",
        "",
        args.scan_width,
        if args.correlated { "correlated" } else { "uniform" },
        c.checks(),
        c.useful,
        c.positive,
        c.true_positive,
        pct(c.fp_rate()),
        pct(theory)
    );
}

/// Bytes of the live tables of every keyspace.
fn sst_bytes(db: &Db) -> u64 {
    db.keyspace_names()
        .iter()
        .filter_map(|name| db.keyspace(name).ok())
        .filter_map(|ks| ks.property("siftdb.total-sst-bytes"))
        .filter_map(|b| b.parse::<u64>().ok())
        .sum()
}

/// The prefix counters of a `seekprefix` phase: tables checked, skipped, and scanned per seek.
fn report_prefix(args: &Args, kind: &RunKind, r: &PhaseResult) {
    let checked = r.stats.ticker(Ticker::BloomFilterPrefixChecked);
    let useful = r.stats.ticker(Ticker::BloomFilterPrefixUseful);
    let seeks = r.ops.max(1) as f64;
    let blocks = r.stats.ticker(Ticker::DataBlocksRead) as f64 / seeks;
    if args.json {
        print_json(
            kind,
            json!({
                "phase": r.name,
                "prefix_checked": checked,
                "prefix_useful": useful,
                "tables_scanned_per_seek": rounded((checked - useful) as f64 / seeks, 4),
                "data_blocks_per_seek": rounded(blocks, 4),
            }),
        );
        return;
    }
    println!(
        "{:<12} prefix filter: checked {checked}  useful {useful}  tables skipped/seek {:.3}  tables scanned/seek {:.3}  data blocks/seek {blocks:.3}",
        "",
        useful as f64 / seeks,
        (checked - useful) as f64 / seeks
    );
}

/// What a write phase cost beyond its writes: table bytes flushes and compactions wrote during it
/// per byte of keys and values written (write amplification, the WAL not counted), and how long
/// writers stalled, by cause.
fn report_writes(args: &Args, kind: &RunKind, r: &PhaseResult) {
    let t = |ticker| r.stats.ticker(ticker);
    let amp = t(Ticker::TableBytesWritten) as f64 / t(Ticker::UserBytesWritten).max(1) as f64;
    let secs = |ticker| t(ticker) as f64 / 1e6;
    let stall = secs(Ticker::WriteStallMicros);
    let share = 100.0 * stall / r.elapsed.as_secs_f64().max(1e-9);
    let (slowed, stopped, memtables) = (
        secs(Ticker::WriteStallL0SlowdownMicros),
        secs(Ticker::WriteStallL0StopMicros),
        secs(Ticker::WriteStallMemtablesMicros),
    );
    if args.json {
        print_json(
            kind,
            json!({
                "phase": r.name,
                "write_amplification": rounded(amp, 3),
                "stall_seconds": rounded(stall, 3),
                "stall_share": rounded(share / 100.0, 4),
                "stall_l0_slowdown_seconds": rounded(slowed, 3),
                "stall_l0_stop_seconds": rounded(stopped, 3),
                "stall_memtables_seconds": rounded(memtables, 3),
                "flushes": t(Ticker::Flushes),
                "compactions": t(Ticker::Compactions),
                "keyspaces": args.keyspaces,
                "wal_peak_bytes": r.wal_peak,
            }),
        );
        return;
    }
    println!(
        "{:<12} write amplification {amp:.2} ({} flushes, {} compactions)   stalled {stall:.2} s ({share:.1} %): slowed by L0 {slowed:.2} s, stopped by L0 {stopped:.2} s, by frozen memtables {memtables:.2} s",
        "",
        t(Ticker::Flushes),
        t(Ticker::Compactions)
    );
    if let Some(peak) = r.wal_peak {
        println!(
            "{:<12} {} keyspaces: the WALs on disk peaked at {:.1} MiB",
            "",
            args.keyspaces,
            peak as f64 / f64::from(1 << 20)
        );
    }
}

/// Files per level of one keyspace's tree, L0 first.
fn files_per_level(db: &Db) -> Vec<usize> {
    (0..siftdb::NUM_LEVELS)
        .map(|l| {
            db.property(&format!("siftdb.num-files-at-level{l}"))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        })
        .collect()
}

/// What the writes cost over the whole run (table bytes flushes and compactions wrote per byte of
/// keys and values put, the last memtable flushed), and the sorted runs a Get meets at its end:
/// the keyspace's, or with several the most any keyspace has and their mean.
fn report_run(args: &Args, kind: &RunKind, db: &Db, spaces: &[Keyspace]) {
    let stats = db.statistics();
    let t = |ticker| stats.ticker(ticker);
    let (table, user) = (t(Ticker::TableBytesWritten), t(Ticker::UserBytesWritten));
    let amp = table as f64 / user.max(1) as f64;
    let runs: Vec<SortedRuns> = match spaces.is_empty() {
        true => vec![SortedRuns::of(&files_per_level(db))],
        false => spaces
            .iter()
            .map(|ks| SortedRuns::of(&files_per_level(ks)))
            .collect(),
    };
    let most = runs
        .iter()
        .copied()
        .max_by_key(SortedRuns::total)
        .unwrap_or_default();
    let mean = runs.iter().map(SortedRuns::total).sum::<usize>() as f64 / runs.len().max(1) as f64;
    let tables = sst_bytes(db);
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    if args.json {
        print_json(
            kind,
            json!({
                "phase": "whole_run",
                "settled": args.settle,
                "write_amplification": rounded(amp, 3),
                "table_bytes_written": table,
                "user_bytes_written": user,
                "flushes": t(Ticker::Flushes),
                "compactions": t(Ticker::Compactions),
                "sst_bytes": tables,
                "sorted_runs": most.total(),
                "l0_tables": most.l0_tables,
                "nonempty_levels": most.levels,
                "sorted_runs_mean": rounded(mean, 2),
                "keyspaces": args.keyspaces,
            }),
        );
        return;
    }
    println!(
        "{:<12} write amplification {amp:.2}: {:.1} MiB of tables written by {} flushes and {} compactions for {:.1} MiB of keys and values put{}   tables {:.1} MiB",
        "whole run",
        mib(table),
        t(Ticker::Flushes),
        t(Ticker::Compactions),
        mib(user),
        if args.settle { ", settled" } else { "" },
        mib(tables)
    );
    let keyspaces = match runs.len() {
        1 => String::new(),
        n => format!(" (in the keyspace with the most; {mean:.1} on average over {n} keyspaces)"),
    };
    println!(
        "{:<12} sorted runs a Get meets: {} ({} L0 tables + {} non-empty levels){keyspaces}   {}",
        "",
        most.total(),
        most.l0_tables,
        most.levels,
        kind.text()
    );
}

/// `x` rounded to `digits` decimals, for JSON that reads like the text.
fn rounded(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

/// Prints one JSON object on a line: `fields`, then what the values and tables of the run are.
fn print_json(kind: &RunKind, mut fields: Value) {
    if let (Some(out), Value::Object(run)) = (fields.as_object_mut(), kind.json()) {
        out.extend(run);
    }
    println!("{fields}");
}

/// The `q`-quantile of the latencies, in microseconds.
fn quantile_us(latencies: &Histogram<u64>, q: f64) -> f64 {
    latencies.value_at_quantile(q) as f64 / 1000.0
}

fn report(args: &Args, kind: &RunKind, r: &PhaseResult, point_reads: bool) {
    let lat = &r.latencies;
    let (p50, p99, p999) = (
        quantile_us(lat, 0.50),
        quantile_us(lat, 0.99),
        quantile_us(lat, 0.999),
    );
    let secs = r.elapsed.as_secs_f64();
    let ops_per_sec = r.ops as f64 / secs.max(1e-9);
    let f = r.stats.filter_totals();
    let gets = r.stats.ticker(Ticker::NumberKeysRead);
    let blocks_per_get = r.stats.ticker(Ticker::DataBlocksRead) as f64 / gets.max(1) as f64;

    if args.json {
        let mut j = json!({
            "phase": r.name,
            "ops": r.ops,
            "seconds": rounded(secs, 4),
            "ops_per_sec": rounded(ops_per_sec, 1),
            "p50_us": rounded(p50, 3),
            "p99_us": rounded(p99, 3),
            "p999_us": rounded(p999, 3),
            "max_us": rounded(lat.max() as f64 / 1000.0, 3),
            "sst_bytes": r.sst_bytes,
        });
        if let (true, Some(out)) = (point_reads, j.as_object_mut()) {
            let reads = json!({
                "found": r.found.unwrap_or(0),
                "filter_useful": f.useful,
                "filter_positive": f.positive,
                "filter_true_positive": f.true_positive,
                "fp_rate": f.fp_rate().map(|x| rounded(x, 6)),
                "data_blocks_per_get": rounded(blocks_per_get, 4),
            });
            if let Value::Object(reads) = reads {
                out.extend(reads);
            }
        }
        print_json(kind, j);
        return;
    }
    println!(
        "{:<12} {:>9} ops {:>8.2} s {:>11.0} ops/s   p50 {:>7.2} µs   p99 {:>7.2} µs   p99.9 {:>8.2} µs{}",
        r.name,
        r.ops,
        secs,
        ops_per_sec,
        p50,
        p99,
        p999,
        r.found.map_or(String::new(), |n| format!("   found {n}"))
    );
    println!(
        "{:<12} {}   tables {:.1} MiB",
        "",
        kind.text(),
        r.sst_bytes as f64 / f64::from(1 << 20)
    );
    if point_reads {
        let fp = f
            .fp_rate()
            .map_or("-".to_string(), |x| format!("{:.3}%", x * 100.0));
        println!(
            "{:<12} filter: useful {}  positive {}  true positive {}  measured FP rate {}  data blocks/Get {:.3}",
            "", f.useful, f.positive, f.true_positive, fp, blocks_per_get
        );
    }
}

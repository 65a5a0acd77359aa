//! Loading sorted data: a put loop against tables built outside the store with `TableWriter` and
//! ingested with `Db::ingest`.
//!
//! cargo run --release -p siftdb-examples --example ingest                         # a million keys, 4 tables
//! cargo run --release -p siftdb-examples --example ingest -- --keys 20000 --tables 2
//!
//! Both stores get the same `--keys` keys in increasing order with db_bench's values (100 bytes
//! compressing to about half). The put loop writes them through the WAL and the memtable, none
//! synced, then flushes (its time ends there) and lets compactions settle (which, once writes
//! pause for a second, merge L0 into L1). The ingest writes them into `--tables`
//! tables of consecutive key ranges with `TableWriter`s (each fsynced), then ingests them all in
//! one call, which links them into the store. Each prints its time, the bytes it wrote (WAL and
//! tables for the put loop, the tables for the ingest) against the bytes of keys and values, and
//! the tree it left; then the two stores are read back against each other. The stores live in a
//! temporary directory, or in `--dir` (which then keeps them).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use siftdb::{Db, Options, Ticker, NUM_LEVELS};
use value_generator::ValueGenerator;

#[path = "common/value_generator.rs"]
mod value_generator;

#[derive(Parser, Debug)]
#[command(about = "Sorted keys loaded by a put loop and by TableWriter + Db::ingest, compared")]
struct Args {
    /// Keys loaded into each store.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(10..=1_000_000_000))]
    keys: u64,
    /// Tables the ingest builds (consecutive key ranges).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1000))]
    tables: u64,
    /// Directory for the two stores (`puts`, `ingested`) and the tables (`tables`), kept
    /// afterwards (it must not hold them yet); a temporary one if not given.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seed of the values.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn key(i: u64) -> String {
    format!("key{i:016}")
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// Waits until no compaction is running or due.
fn settle(db: &Db) {
    while db.property("siftdb.compaction-pending").as_deref() != Some("0") {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Tables per level, L0 first, as `L0 0, L1 0, …`, leaving out empty levels past the last.
fn tree(db: &Db) -> String {
    let counts: Vec<String> = (0..NUM_LEVELS)
        .map(|l| {
            db.property(&format!("siftdb.num-files-at-level{l}"))
                .unwrap_or_default()
        })
        .collect();
    let bytes: u64 = db
        .property("siftdb.total-sst-bytes")
        .and_then(|b| b.parse().ok())
        .unwrap_or(0);
    let levels: Vec<String> = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| c.as_str() != "0")
        .map(|(l, c)| format!("L{l}: {c}"))
        .collect();
    format!("tables {}; {:.1} MiB", levels.join(", "), mib(bytes))
}

/// The bytes of the files directly in `dir`.
fn dir_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let meta = entry?.metadata()?;
        if meta.is_file() {
            total += meta.len();
        }
    }
    Ok(total)
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let (_tmp, dir) = match &args.dir {
        Some(d) => (None, d.clone()),
        None => {
            let t = tempfile::tempdir()?;
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    };
    let (puts_dir, ingested_dir, tables_dir) =
        (dir.join("puts"), dir.join("ingested"), dir.join("tables"));
    for d in [&puts_dir, &ingested_dir, &tables_dir] {
        if d.exists() {
            return Err(format!("{} exists already", d.display()).into());
        }
    }
    std::fs::create_dir_all(&tables_dir)?;
    let n = args.keys;
    let user_bytes = n * (key(0).len() as u64 + 100);
    println!(
        "{n} sorted keys, 100-byte values compressing to about half: {:.1} MiB of keys and values",
        mib(user_bytes)
    );

    // The put loop.
    let puts = Db::open(&puts_dir, Options::default())?;
    let mut values = ValueGenerator::new(0.5, 100, args.seed);
    let t = Instant::now();
    for i in 0..n {
        puts.put(key(i), values.next(100))?;
    }
    puts.flush()?;
    let took = t.elapsed();
    settle(&puts);
    let settled = t.elapsed() - took;
    let s = puts.statistics();
    let written = s.ticker(Ticker::WalBytes) + s.ticker(Ticker::TableBytesWritten);
    println!(
        "put loop:  {took:>9.2?}  {:>8.0} keys/s  (compactions settled {settled:.2?} later) wrote \
         {:>7.1} MiB (WAL {:.1}, tables {:.1}), {:.2} × the data; {}",
        n as f64 / took.as_secs_f64(),
        mib(written),
        mib(s.ticker(Ticker::WalBytes)),
        mib(s.ticker(Ticker::TableBytesWritten)),
        written as f64 / user_bytes as f64,
        tree(&puts)
    );

    // TableWriters, then one ingest.
    let ingested = Db::open(&ingested_dir, Options::default())?;
    let mut values = ValueGenerator::new(0.5, 100, args.seed);
    let t = Instant::now();
    let per_table = n.div_ceil(args.tables);
    let mut paths = Vec::new();
    for (t_index, start) in (0..n).step_by(per_table as usize).enumerate() {
        let mut w = ingested.table_writer(tables_dir.join(format!("part{t_index:04}.sst")))?;
        for i in start..(start + per_table).min(n) {
            w.put(key(i), values.next(100))?;
        }
        paths.push(w.finish()?.path);
    }
    let built = t.elapsed();
    let placed = ingested.ingest(&paths)?;
    let took = t.elapsed();
    settle(&ingested);
    let written = dir_bytes(&tables_dir)?;
    let s = ingested.statistics();
    let levels: Vec<usize> = placed.iter().map(|p| p.level).collect();
    println!(
        "ingest:    {took:>9.2?}  {:>8.0} keys/s  wrote {:>7.1} MiB ({} tables, {built:.2?} to \
         build them, into levels {levels:?}; the store wrote {:.1} MiB more), {:.2} × the data; {}",
        n as f64 / took.as_secs_f64(),
        mib(written),
        paths.len(),
        mib(s.ticker(Ticker::WalBytes) + s.ticker(Ticker::TableBytesWritten)),
        (written + s.ticker(Ticker::WalBytes) + s.ticker(Ticker::TableBytesWritten)) as f64
            / user_bytes as f64,
        tree(&ingested)
    );

    // The two stores hold the same.
    let t = Instant::now();
    let mut a = puts.iter();
    let mut b = ingested.iter();
    let mut compared = 0u64;
    loop {
        match (a.next().transpose()?, b.next().transpose()?) {
            (None, None) => break,
            (x, y) if x == y => compared += 1,
            (x, y) => {
                return Err(format!(
                    "the stores differ after {compared} entries: {:?} against {:?}",
                    x.map(|e| String::from_utf8_lossy(&e.0).into_owned()),
                    y.map(|e| String::from_utf8_lossy(&e.0).into_owned())
                )
                .into())
            }
        }
    }
    if compared != n {
        return Err(format!("the stores hold {compared} keys, not {n}").into());
    }
    println!(
        "both stores hold the same {compared} entries (scanned side by side in {:.2?})",
        t.elapsed()
    );
    Ok(())
}

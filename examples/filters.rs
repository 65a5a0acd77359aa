//! The same data under each filter layout, side by side, and the Ribbon policy in the full layout
//! at the same bits/key: what the filters answered for a batch of missing Gets and a batch of
//! present Gets, and what they cost in bytes.
//!
//! cargo run --release -p siftdb-examples --example filters
//! cargo run --release -p siftdb-examples --example filters -- --keys 20000 --probes 20000
//!
//! Present keys are even numbers, missing keys the odd numbers between them (16-byte zero-padded
//! decimals), so every missing key lies inside some table's key range: only a filter can spare the
//! data block read. Each store is compacted first, so every layout sees the same tables.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use siftdb::inspect::TableInfo;
use siftdb::{Db, Filter, FilterCounts, Options, Ticker, WriteBatch};

#[derive(Parser, Debug)]
#[command(about = "Compare siftdb's filter layouts (and the Ribbon policy) on the same data")]
struct Args {
    /// Keys loaded into each store.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    keys: u64,
    /// Gets in each batch (missing keys, then present keys).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    probes: u64,
    /// Filter bits per key.
    #[arg(long, default_value_t = 10.0)]
    bits_per_key: f64,
}

/// What one layout did.
struct Column {
    name: &'static str,
    /// Gets in each batch.
    gets: u64,
    missing: FilterCounts,
    missing_blocks: u64,
    missing_micros: f64,
    present: FilterCounts,
    present_blocks: u64,
    tables: usize,
    filter_bytes_on_disk: u64,
    filter_bytes_in_memory: u64,
}

fn key(n: u64) -> String {
    format!("{n:016}")
}

/// A spread of `count` numbers over `0..keys` (a fixed stride, so every run asks the same keys).
fn spread(count: u64, keys: u64) -> impl Iterator<Item = u64> {
    (0..count).map(move |i| i.wrapping_mul(2_654_435_761) % keys)
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !(args.bits_per_key.is_finite() && args.bits_per_key > 0.0) {
        eprintln!("error: --bits-per-key must be a positive number");
        return ExitCode::from(2);
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("filters: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> siftdb::Result<()> {
    let b = args.bits_per_key;
    let layouts = [
        ("none", Filter::none()),
        ("block-based", Filter::block_based(b)),
        ("full", Filter::full(b)),
        ("partitioned", Filter::partitioned(b)),
        ("ribbon (full)", Filter::ribbon(b)),
    ];
    println!(
        "{} keys (16 B keys, 100 B values), {} missing and {} present Gets per layout, {b} bits/key\n",
        args.keys, args.probes, args.probes
    );
    let mut columns = Vec::new();
    for (name, filter) in layouts {
        eprintln!("loading {name} …");
        columns.push(measure(args, name, filter)?);
    }
    print_table(&columns);
    Ok(())
}

fn measure(args: &Args, name: &'static str, filter: Filter) -> siftdb::Result<Column> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().filter(filter))?;
    let value = [b'v'; 100];
    let mut batch = WriteBatch::new();
    for i in 0..args.keys {
        batch.put(key(2 * i), value);
        if i % 1000 == 999 {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    db.write(batch)?;
    db.flush()?;
    db.compact()?;

    // Missing keys: odd numbers, between two present keys.
    let before = db.statistics();
    let start = Instant::now();
    for n in spread(args.probes, args.keys) {
        db.get(key(2 * n + 1))?;
    }
    let missing_micros = start.elapsed().as_secs_f64() * 1e6 / args.probes as f64;
    let after_missing = db.statistics();
    let m = after_missing.since(&before);

    for n in spread(args.probes, args.keys) {
        db.get(key(2 * n))?;
    }
    let p = db.statistics().since(&after_missing);

    // The filters' size on disk, from the tables themselves.
    let mut tables = 0;
    let mut on_disk = 0;
    for entry in std::fs::read_dir(dir.path())? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "sst") {
            tables += 1;
            on_disk += TableInfo::open(&path)?.filter.map_or(0, |f| f.bytes);
        }
    }
    Ok(Column {
        name,
        gets: args.probes,
        missing: m.filter_totals(),
        missing_blocks: m.ticker(Ticker::DataBlocksRead),
        missing_micros,
        present: p.filter_totals(),
        present_blocks: p.ticker(Ticker::DataBlocksRead),
        tables,
        filter_bytes_on_disk: on_disk,
        filter_bytes_in_memory: db.statistics().filter_bytes_in_memory(),
    })
}

fn print_table(columns: &[Column]) {
    let mut out = String::new();
    let row = |out: &mut String, label: &str, cells: Vec<String>| {
        let _ = write!(out, "{label:<30}");
        for c in cells {
            let _ = write!(out, "{c:>14}");
        }
        out.push('\n');
    };
    row(
        &mut out,
        "",
        columns.iter().map(|c| c.name.to_string()).collect(),
    );
    row(
        &mut out,
        "tables",
        columns.iter().map(|c| c.tables.to_string()).collect(),
    );
    let _ = writeln!(out, "missing Gets");
    let counts = |out: &mut String, get: &dyn Fn(&Column) -> FilterCounts| {
        row(
            out,
            "  useful",
            columns.iter().map(|c| get(c).useful.to_string()).collect(),
        );
        row(
            out,
            "  positive",
            columns
                .iter()
                .map(|c| get(c).positive.to_string())
                .collect(),
        );
        row(
            out,
            "  true positive",
            columns
                .iter()
                .map(|c| get(c).true_positive.to_string())
                .collect(),
        );
    };
    counts(&mut out, &|c| c.missing);
    row(
        &mut out,
        "  measured FP rate",
        columns
            .iter()
            .map(|c| {
                c.missing
                    .fp_rate()
                    .map_or("-".into(), |r| format!("{:.3}%", r * 100.0))
            })
            .collect(),
    );
    row(
        &mut out,
        "  data blocks read per Get",
        columns
            .iter()
            .map(|c| format!("{:.4}", c.missing_blocks as f64 / c.gets as f64))
            .collect(),
    );
    row(
        &mut out,
        "  µs per Get",
        columns
            .iter()
            .map(|c| format!("{:.2}", c.missing_micros))
            .collect(),
    );
    let _ = writeln!(out, "present Gets");
    counts(&mut out, &|c| c.present);
    row(
        &mut out,
        "  data blocks read per Get",
        columns
            .iter()
            .map(|c| format!("{:.4}", c.present_blocks as f64 / c.gets as f64))
            .collect(),
    );
    row(
        &mut out,
        "filter bytes on disk",
        columns
            .iter()
            .map(|c| c.filter_bytes_on_disk.to_string())
            .collect(),
    );
    row(
        &mut out,
        "filter bytes in memory",
        columns
            .iter()
            .map(|c| c.filter_bytes_in_memory.to_string())
            .collect(),
    );
    print!("{out}");
}

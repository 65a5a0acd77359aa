//! Missing-key Gets per second against block cache size, with every table's index and filter
//! pinned in memory (the default) or charged to the block cache
//! (`Options::cache_index_and_filter_blocks`): what putting filters under a memory budget costs.
//!
//! cargo run --release -p siftdb-examples --example cache_chart                  # writes docs/cache_chart.{svg,csv}
//! cargo run --release -p siftdb-examples --example cache_chart -- --keys 100000 --reads 50000 --out-dir /tmp/cc
//!
//! One store of `--keys` keys (16 bytes, 100-byte values, full 10 bits/key filters) is written and
//! compacted once; then for each cache size and each placement it is reopened and asked
//! `--reads` absent keys (inside the tables' key ranges, so only a filter spares a data block).
//! Each line reports ops/s, the filter bytes pinned with tables, what the cache holds, and the
//! filter and index blocks read back from the table files after eviction.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use plotters::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::{Db, Filter, Options, Ticker};

#[derive(Parser, Debug)]
#[command(
    about = "Chart missing-key Gets per second against block cache size, filters pinned or charged"
)]
struct Args {
    /// Where to write cache_chart.svg and cache_chart.csv.
    #[arg(long, default_value = "docs")]
    out_dir: PathBuf,
    /// Keys written.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    keys: u64,
    /// Absent-key Gets per cache size and placement.
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..))]
    reads: u64,
    /// Block cache sizes to try, in KiB.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "256,512,1024,2048,4096,8192,16384,65536"
    )]
    cache_kib: Vec<u64>,
    /// Directory for the store (kept); default: a temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Use the store already in `--dir` instead of writing one (to measure a process that only
    /// reads: its peak memory is then the store's, not the writing's).
    #[arg(long, requires = "dir")]
    no_fill: bool,
    /// Placements to measure.
    #[arg(long, value_delimiter = ',', default_value = "pinned,charged")]
    placements: Vec<Placement>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Placement {
    /// Index and filter blocks read at open and kept with their tables.
    Pinned,
    /// Index and filter blocks charged to the block cache.
    Charged,
}

/// One measured point.
struct Point {
    charged: bool,
    cache_kib: u64,
    ops_per_sec: f64,
    pinned_filter_bytes: u64,
    cache_used: String,
    filter_misses: u64,
    index_misses: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cache_chart: {e}");
            ExitCode::FAILURE
        }
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

fn options(cache_kib: u64, charged: bool) -> Options {
    Options::default()
        .filter(Filter::full(10.0))
        .block_cache_bytes(usize::try_from(cache_kib << 10).unwrap_or(usize::MAX))
        .cache_index_and_filter_blocks(charged)
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let temp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            temp = tempfile::tempdir()?;
            temp.path().to_path_buf()
        }
    };
    // Present keys are even numbers, absent ones the odd numbers between them.
    let t = Instant::now();
    if !args.no_fill {
        let db = Db::open(&dir, options(32 << 10, false))?;
        let mut rng = StdRng::seed_from_u64(1);
        let mut value = [0u8; 100];
        for i in 0..args.keys {
            rng.fill(&mut value[..]);
            db.put(key(2 * i), value)?;
        }
        db.compact()?;
    }
    println!(
        "wrote and compacted {} keys in {:.1} s ({})",
        args.keys,
        t.elapsed().as_secs_f64(),
        dir.display()
    );
    println!(
        "{:<8} {:>10} {:>12} {:>14} {:>13} {:>13}  cache use (data, filter, index bytes)",
        "filters", "cache KiB", "ops/s", "pinned filter", "filter reads", "index reads"
    );
    let mut points = Vec::new();
    for charged in args.placements.iter().map(|&p| p == Placement::Charged) {
        for &cache_kib in &args.cache_kib {
            let db = Db::open(&dir, options(cache_kib, charged))?;
            let mut rng = StdRng::seed_from_u64(2);
            // One pass to fill the cache, then the measured one.
            for pass in 0..2 {
                let before = db.statistics();
                let t = Instant::now();
                for _ in 0..args.reads {
                    let k = key(2 * rng.gen_range(0..args.keys) + 1);
                    if db.get(&k)?.is_some() {
                        return Err(format!("absent key {k:?} found").into());
                    }
                }
                if pass == 0 {
                    continue;
                }
                let s = db.statistics().since(&before);
                let report = db.property("siftdb.stats").unwrap_or_default();
                let cache_used = report
                    .lines()
                    .find_map(|l| l.strip_prefix("block cache: "))
                    .unwrap_or("")
                    .to_string();
                points.push(Point {
                    charged,
                    cache_kib,
                    ops_per_sec: args.reads as f64 / t.elapsed().as_secs_f64(),
                    pinned_filter_bytes: db.statistics().filter_bytes_in_memory(),
                    cache_used,
                    filter_misses: s.ticker(Ticker::BlockCacheFilterMiss),
                    index_misses: s.ticker(Ticker::BlockCacheIndexMiss),
                });
            }
            if let Some(p) = points.last() {
                println!(
                    "{:<8} {:>10} {:>12.0} {:>14} {:>13} {:>13}  {}",
                    if p.charged { "charged" } else { "pinned" },
                    p.cache_kib,
                    p.ops_per_sec,
                    p.pinned_filter_bytes,
                    p.filter_misses,
                    p.index_misses,
                    p.cache_used
                );
            }
        }
    }
    // The process's resident memory now and at its peak (Linux), beside what the store was
    // allowed: the block cache and the memtables.
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        println!(
            "process memory: VmRSS {}, VmHWM (peak) {}",
            field("VmRSS:"),
            field("VmHWM:")
        );
    }
    std::fs::create_dir_all(&args.out_dir)?;
    let mut csv = String::from(
        "filters,cache_kib,ops_per_sec,pinned_filter_bytes,filter_block_reads,index_block_reads\n",
    );
    for p in &points {
        let _ = writeln!(
            csv,
            "{},{},{:.0},{},{},{}",
            if p.charged { "charged" } else { "pinned" },
            p.cache_kib,
            p.ops_per_sec,
            p.pinned_filter_bytes,
            p.filter_misses,
            p.index_misses
        );
    }
    let csv_path = args.out_dir.join("cache_chart.csv");
    std::fs::write(&csv_path, csv)?;
    let svg_path = args.out_dir.join("cache_chart.svg");
    draw(&svg_path, &points, args)?;
    println!("\nwrote {} and {}", svg_path.display(), csv_path.display());
    Ok(())
}

fn draw(
    path: &std::path::Path,
    points: &[Point],
    args: &Args,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let lo = args.cache_kib.iter().copied().min().unwrap_or(1).max(1) as f64 / 1.5;
    let hi = args.cache_kib.iter().copied().max().unwrap_or(1).max(1) as f64 * 1.5;
    let top = points.iter().map(|p| p.ops_per_sec).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "siftdb: missing-key Gets against block cache size ({} keys, full 10 bits/key filters)",
                args.keys
            ),
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(90)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("block cache (KiB)")
        .y_desc("missing-key Gets per second")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
        .draw()?;
    for (charged, color, name) in [
        (
            false,
            RGBColor(31, 119, 180),
            "index and filters pinned with tables",
        ),
        (
            true,
            RGBColor(214, 39, 40),
            "index and filters charged to the block cache",
        ),
    ] {
        let line: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.charged == charged)
            .map(|p| (p.cache_kib as f64, p.ops_per_sec))
            .collect();
        chart.draw_series(
            line.iter()
                .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
        )?;
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

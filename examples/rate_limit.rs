//! How closely `Options::rate_limiter` holds flushes and compactions to their rate under a
//! compaction-heavy load: keys in random order into small memtables, tables and levels, so that
//! every byte is flushed once and then rewritten by compaction after compaction.
//!
//! cargo run --release -p siftdb-examples --example rate_limit                        # 100k keys, 8 MiB/s
//! cargo run --release -p siftdb-examples --example rate_limit -- --keys 10000 --mib-per-sec 8
//!
//! The load runs twice, each time from an empty store until no compaction is pending: first
//! without a limit (how fast this machine writes the tables), then with one. For the paced run a
//! thread reads the limiter's counters every 100 ms; the example prints the mean rate over the
//! run (table bytes ÷ time from the first write until no compaction is pending) and the most
//! bytes paced in any one-second window. The limit is a ceiling: the mean falls below it by the
//! time jobs spend not writing (fsyncs, MANIFEST edits, choosing the next job), since the
//! limiter keeps no more than one request's worth of unused bytes. Values are db_bench's (random
//! bytes that compress to about half); the bytes counted are table bytes as written, after
//! compression.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use siftdb::{Db, Options, RateLimiter, RateLimiterStats, Ticker};
use value_generator::ValueGenerator;

#[path = "common/value_generator.rs"]
mod value_generator;

#[derive(Parser, Debug)]
#[command(about = "Flushes and compactions paced by a rate limiter, measured")]
struct Args {
    /// Keys written, in random order.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1000..=100_000_000))]
    keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    value_size: u64,
    /// The limit, in MiB of table writes per second.
    #[arg(long, default_value_t = 8.0)]
    mib_per_sec: f64,
}

const MIB: f64 = (1 << 20) as f64;

fn main() -> ExitCode {
    let args = Args::parse();
    if !(args.mib_per_sec.is_finite() && args.mib_per_sec * MIB >= 1.0) {
        eprintln!("error: --mib-per-sec must be a positive number");
        return ExitCode::from(2);
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Small memtables, tables and levels: a compaction-heavy store at a small size. Compactions run
/// at their triggers only, so the run ends when none is pending.
fn options() -> Options {
    Options::default()
        .write_buffer_size(1 << 20)
        .target_file_size(1 << 20)
        .max_bytes_for_level_base(4 << 20)
        .compact_l0_when_idle(false)
        .compact_l0_for_reads(false)
}

/// What one run of the load did.
struct Run {
    table_bytes: u64,
    took: Duration,
}

/// Writes `args.keys` keys in random order into a new store, then waits until its flushes and
/// compactions are done.
fn load(args: &Args, options: Options) -> Result<Run, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), options)?;
    let mut values = ValueGenerator::new(0.5, args.value_size as usize, 7);
    let started = Instant::now();
    for i in 0..args.keys {
        // A fixed permutation of 0..keys: each key once, in random order.
        let k = (i.wrapping_mul(6_364_136_223_846_793_005) ^ 0x9e37_79b9) % (args.keys * 16);
        db.put(format!("key{k:016}"), values.next(args.value_size as usize))?;
    }
    db.flush()?;
    while db.property("siftdb.compaction-pending").as_deref() != Some("0") {
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = started.elapsed();
    let table_bytes = db.statistics().ticker(Ticker::TableBytesWritten);
    db.close()?;
    Ok(Run { table_bytes, took })
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "load: {} keys of {} bytes in random order; memtables and tables of 1 MiB, L1 of 4 MiB",
        args.keys, args.value_size
    );
    let free = load(args, options())?;
    println!(
        "{:<22} {:>8.1} MiB of tables in {:>6.2} s: {:>7.1} MiB/s",
        "no limit:",
        free.table_bytes as f64 / MIB,
        free.took.as_secs_f64(),
        free.table_bytes as f64 / MIB / free.took.as_secs_f64()
    );

    let rate = (args.mib_per_sec * MIB) as u64;
    let limiter = RateLimiter::new(rate);
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (limiter, done) = (limiter.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut samples: Vec<(Instant, RateLimiterStats)> = Vec::new();
            while !done.load(Ordering::Relaxed) {
                samples.push((Instant::now(), limiter.stats()));
                std::thread::sleep(Duration::from_millis(100));
            }
            samples.push((Instant::now(), limiter.stats()));
            samples
        })
    };
    let paced = load(args, options().rate_limiter(limiter.clone()))?;
    done.store(true, Ordering::Relaxed);
    let samples = sampler.join().map_err(|_| "the sampler panicked")?;
    let s = limiter.stats();
    let paced_bytes = |st: &RateLimiterStats| st.flush_bytes + st.compaction_bytes;
    if paced_bytes(&s) != paced.table_bytes {
        return Err(format!(
            "the limiter paced {} bytes, the store wrote {} bytes of tables",
            paced_bytes(&s),
            paced.table_bytes
        )
        .into());
    }
    // The most bytes paced in any window of one second between two samples.
    let mut peak = 0.0f64;
    for (i, (t0, s0)) in samples.iter().enumerate() {
        if let Some((t1, s1)) = samples[i..]
            .iter()
            .find(|(t, _)| t.duration_since(*t0) >= Duration::from_secs(1))
        {
            let window = t1.duration_since(*t0).as_secs_f64();
            peak = peak.max((paced_bytes(s1) - paced_bytes(s0)) as f64 / window);
        }
    }
    let mean = paced.table_bytes as f64 / paced.took.as_secs_f64();
    println!(
        "{:<22} {:>8.1} MiB of tables in {:>6.2} s: {:>7.1} MiB/s mean ({:.0} % of the limit)",
        format!("limit {:.1} MiB/s:", args.mib_per_sec),
        paced.table_bytes as f64 / MIB,
        paced.took.as_secs_f64(),
        mean / MIB,
        100.0 * mean / rate as f64,
    );
    if peak > 0.0 {
        println!("  {:.1} MiB/s at most over any one second", peak / MIB);
    }
    println!(
        "  flushes {:.1} MiB, compactions {:.1} MiB; {} of {} requests waited, {:.2} s in all",
        s.flush_bytes as f64 / MIB,
        s.compaction_bytes as f64 / MIB,
        s.waits,
        s.requests,
        s.wait_micros as f64 / 1e6
    );
    Ok(())
}

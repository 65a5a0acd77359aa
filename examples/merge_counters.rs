//! Counters two ways: increments written as merge operands (`Db::merge` with the `U64Add`
//! operator: one write, no read, never a conflict) against read-modify-write transactions (a
//! `get`, a `put` of the sum, a `commit`, retried on a conflict), on the same random keys.
//!
//! cargo run --release -p siftdb-examples --example merge_counters                       # 200k counters, 500k increments
//! cargo run --release -p siftdb-examples --example merge_counters -- --keys 10000 --increments 20000 --threads 2
//!
//! Each counter is 8 bytes (a little-endian u64: it does not compress), its key 16 decimal digits;
//! every counter starts at 0 (written in random order, then compacted). Each way then adds 1 to
//! `--increments` counters drawn at random, over `--threads` threads, WAL on, no fsync; the
//! example prints both rates, the conflicts the transactions met, and the time of a full scan
//! after each way (after the merges it resolves every counter's operands still uncompacted).
//! Last, it checks that every increment counted: the counters add up to twice the increments.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use siftdb::{Db, Filter, Options, U64Add};

#[derive(Parser, Debug)]
#[command(about = "Counters incremented by merge operands and by read-modify-write transactions")]
struct Args {
    /// Counters (keys).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    keys: u64,
    /// Increments per way.
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    increments: u64,
    /// Threads incrementing at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    threads: u64,
    /// The store's directory (a temporary one if not given).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("{i:016}").as_bytes());
    k
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

/// Runs `increment` `args.increments` times over `args.threads` threads, each with its own
/// random keys; returns increments per second.
fn timed(
    args: &Args,
    seed: u64,
    increment: impl Fn(&[u8]) -> siftdb::Result<()> + Sync,
) -> siftdb::Result<f64> {
    let started = Instant::now();
    let failure = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for t in 0..args.threads {
            let share =
                args.increments / args.threads + u64::from(t < args.increments % args.threads);
            let (increment, failure) = (&increment, &failure);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed * 1000 + t);
                for _ in 0..share {
                    if let Err(e) = increment(&key(rng.gen_range(0..args.keys))) {
                        failure.lock().unwrap().get_or_insert(e);
                        return;
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().unwrap() {
        return Err(e);
    }
    Ok(args.increments as f64 / started.elapsed().as_secs_f64())
}

/// The sum of every counter and the seconds a full scan took.
fn scan_sum(db: &Db) -> siftdb::Result<(u64, f64)> {
    let started = Instant::now();
    let mut sum = 0u64;
    for kv in db.iter() {
        let (_, v) = kv?;
        let n: [u8; 8] = v.as_slice().try_into().map_err(|_| {
            siftdb::Error::InvalidArgument(format!("a counter of {} bytes", v.len()))
        })?;
        sum = sum.wrapping_add(u64::from_le_bytes(n));
    }
    Ok((sum, started.elapsed().as_secs_f64()))
}

fn run(args: &Args) -> siftdb::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = args.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let options = Options::default()
        .merge_operator(Arc::new(U64Add))
        .filter(Filter::full(10.0));
    let db = Db::open(&dir, options)?;
    let mut order: Vec<u64> = (0..args.keys).collect();
    order.shuffle(&mut StdRng::seed_from_u64(7));
    for i in order {
        db.put(key(i), 0u64.to_le_bytes())?;
    }
    db.compact()?;
    println!(
        "{} counters of 8 bytes (incompressible), {} increments per way, {} thread(s)",
        args.keys, args.increments, args.threads
    );

    let one = 1u64.to_le_bytes();
    let merges = timed(args, 1, |k| db.merge(k, one))?;
    let (_, merged_scan) = scan_sum(&db)?;

    let conflicts = AtomicU64::new(0);
    let transactions = timed(args, 2, |k| loop {
        let mut txn = db.transaction();
        let n = match txn.get(k)? {
            Some(v) => u64::from_le_bytes(v.as_slice().try_into().unwrap_or_default()),
            None => 0,
        };
        txn.put(k, (n + 1).to_le_bytes())?;
        match txn.commit() {
            Ok(()) => return Ok(()),
            Err(e) if e.is_conflict() => {
                conflicts.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => return Err(e),
        }
    })?;
    let (sum, txn_scan) = scan_sum(&db)?;

    println!("{:<36} {:>14} {:>12}", "way", "increments/s", "scan after");
    println!(
        "{:<36} {:>14.0} {:>10.3} s",
        "merge (U64Add operand)", merges, merged_scan
    );
    println!(
        "{:<36} {:>14.0} {:>10.3} s",
        "transaction (get, put, commit)", transactions, txn_scan
    );
    println!(
        "merges: {:.1} x the transactions' rate; {} conflicts retried",
        merges / transactions,
        conflicts.load(Ordering::Relaxed)
    );
    if sum != 2 * args.increments {
        return Err(siftdb::Error::InvalidArgument(format!(
            "the counters add up to {sum}, not {}",
            2 * args.increments
        )));
    }
    println!("the counters add up to {sum}: every increment counted");
    Ok(())
}

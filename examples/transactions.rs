//! What a transaction costs, and how often transactions conflict.
//!
//! cargo run --release -p siftdb-examples --example transactions
//! cargo run --release -p siftdb-examples --example transactions -- --keys 1000000 --seconds 2 --rounds 5
//!
//! Uncontended: threads update two random keys of `--keys` at a time, three ways, in alternating
//! rounds (the machine's noise hits all three alike; the median round of each is printed):
//! - `transaction`: read both keys in a transaction, write both, commit (the commit checks both
//!   keys for conflicts under the WAL lock);
//! - `get + batch`: the same reads and writes without a transaction (no snapshot, no check);
//! - `batch`: the two writes alone, as one `WriteBatch`.
//!
//! Contended: threads transfer amounts between `K` accounts in transactions, retrying on
//! conflict, for each `K` of `--accounts`: commits per second and the share of commit attempts
//! refused with a conflict.
//!
//! Values are 100 bytes that compress to about half (50 random bytes, repeated), an 8-byte
//! balance first for the accounts. Writes are not synced.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use siftdb::{Db, Options, Ticker, WriteBatch};

#[derive(Parser, Debug)]
#[command(about = "Transactions against plain batches, and conflict rates under contention")]
struct Args {
    /// Keys of the uncontended runs.
    #[arg(long, default_value_t = 200_000)]
    keys: u64,
    /// Writer threads.
    #[arg(long, default_value_t = 2)]
    threads: u64,
    /// Seconds per round.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Rounds of each uncontended way (the median is printed).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Account counts of the contended runs.
    #[arg(long, value_delimiter = ',', default_value = "2,4,16,64,1024")]
    accounts: Vec<u64>,
    /// Directory for the store (a temporary one if absent).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("{i:016}").as_bytes());
    k
}

/// 100 bytes: `head`, then 50 random bytes repeated (compressing to about half).
fn value(rng: &mut StdRng, head: i64) -> Vec<u8> {
    let mut half = [0u8; 50];
    rng.fill_bytes(&mut half);
    let mut v = Vec::with_capacity(100);
    v.extend_from_slice(&head.to_be_bytes());
    v.extend_from_slice(&half);
    v.extend_from_slice(&half[..42]);
    v
}

fn balance(v: Option<Vec<u8>>) -> i64 {
    v.and_then(|v| {
        v.get(..8)
            .map(|b| i64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
    })
    .unwrap_or(0)
}

#[derive(Clone, Copy, Debug)]
enum Way {
    Transaction,
    GetAndBatch,
    Batch,
}

/// Runs `threads` threads doing `way` for `seconds`; returns operations per second.
fn run(db: &Db, way: Way, args: &Args, round: u64) -> siftdb::Result<f64> {
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let result = std::thread::scope(|s| -> siftdb::Result<()> {
        let workers: Vec<_> = (0..args.threads)
            .map(|t| {
                let (db, stop, ops) = (db.clone(), Arc::clone(&stop), Arc::clone(&ops));
                s.spawn(move || -> siftdb::Result<()> {
                    let mut rng = StdRng::seed_from_u64(round * 1000 + t);
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let (a, b) = (
                            key(rng.gen_range(0..args.keys)),
                            key(rng.gen_range(0..args.keys)),
                        );
                        let (va, vb) = (value(&mut rng, 1), value(&mut rng, 2));
                        match way {
                            Way::Transaction => {
                                let mut tx = db.transaction();
                                std::hint::black_box((tx.get(a)?, tx.get(b)?));
                                tx.put(a, va)?;
                                tx.put(b, vb)?;
                                match tx.commit() {
                                    Err(e) if e.is_conflict() => continue,
                                    other => other?,
                                }
                            }
                            Way::GetAndBatch => {
                                std::hint::black_box((db.get(a)?, db.get(b)?));
                                let mut batch = WriteBatch::new();
                                batch.put(a, va).put(b, vb);
                                db.write(batch)?;
                            }
                            Way::Batch => {
                                let mut batch = WriteBatch::new();
                                batch.put(a, va).put(b, vb);
                                db.write(batch)?;
                            }
                        }
                        n += 1;
                    }
                    ops.fetch_add(n, Ordering::Relaxed);
                    Ok(())
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(args.seconds));
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join().expect("a worker panicked")?;
        }
        Ok(())
    });
    result?;
    Ok(ops.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

/// Transfers between `accounts` accounts; returns commits/s and the conflict share.
fn contended(db: &Db, accounts: u64, args: &Args) -> siftdb::Result<(f64, f64)> {
    let ks = db.keyspace(&format!("accounts{accounts}"))?;
    let mut rng = StdRng::seed_from_u64(accounts);
    for i in 0..accounts {
        ks.put(key(i), value(&mut rng, 1_000_000))?;
    }
    let before = db.statistics().ticker(Ticker::TransactionConflicts);
    let commits = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    std::thread::scope(|s| -> siftdb::Result<()> {
        let workers: Vec<_> = (0..args.threads)
            .map(|t| {
                let (db, ks, commits, stop) = (db.clone(), ks.clone(), &commits, &stop);
                s.spawn(move || -> siftdb::Result<()> {
                    let mut rng = StdRng::seed_from_u64(t);
                    while !stop.load(Ordering::Relaxed) {
                        let from = rng.gen_range(0..accounts);
                        let to = (from + rng.gen_range(1..accounts)) % accounts;
                        let amount = rng.gen_range(1..100);
                        let mut tx = db.transaction();
                        let a = balance(tx.get_in(&ks, key(from))?);
                        let b = balance(tx.get_in(&ks, key(to))?);
                        tx.put_in(&ks, key(from), value(&mut rng, a - amount))?;
                        tx.put_in(&ks, key(to), value(&mut rng, b + amount))?;
                        match tx.commit() {
                            Ok(()) => {
                                commits.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) if e.is_conflict() => {}
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(args.seconds));
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join().expect("a worker panicked")?;
        }
        Ok(())
    })?;
    let elapsed = started.elapsed().as_secs_f64();
    let commits = commits.load(Ordering::Relaxed) as f64;
    let conflicts = (db.statistics().ticker(Ticker::TransactionConflicts) - before) as f64;
    // The balances still add up.
    let total: i64 = ks
        .iter()
        .map(|r| r.map(|(_, v)| balance(Some(v))))
        .sum::<siftdb::Result<i64>>()?;
    assert_eq!(
        total,
        1_000_000 * accounts as i64,
        "the transfers kept the total"
    );
    Ok((
        commits / elapsed,
        conflicts / (commits + conflicts).max(1.0),
    ))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> siftdb::Result<()> {
    let args = Args::parse();
    let tmp = tempfile::tempdir()?;
    let dir = args.dir.clone().unwrap_or_else(|| tmp.path().join("db"));
    let db = Db::open(&dir, Options::default())?;
    let mut rng = StdRng::seed_from_u64(0);
    let mut batch = WriteBatch::new();
    for i in 0..args.keys {
        batch.put(key(i), value(&mut rng, 0));
        if batch.len() == 1000 {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    db.write(batch)?;
    db.compact()?;
    println!(
        "uncontended: {} threads, two random keys of {} per operation, {} rounds of {} s",
        args.threads, args.keys, args.rounds, args.seconds
    );
    let ways = [Way::Transaction, Way::GetAndBatch, Way::Batch];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
    for round in 0..args.rounds {
        for (i, way) in ways.iter().enumerate() {
            rates[i].push(run(&db, *way, &args, round as u64)?);
        }
    }
    let medians: Vec<f64> = rates.into_iter().map(median).collect();
    for (way, ops) in ways.iter().zip(&medians) {
        println!(
            "  {:<12} {:>9.0} ops/s  ({:.2}× the batch's time per op)",
            format!("{way:?}"),
            ops,
            medians[2] / ops
        );
    }
    println!(
        "  transaction conflicts: {}",
        db.statistics().ticker(Ticker::TransactionConflicts)
    );
    println!(
        "contended: {} threads transferring between K accounts, {} s each",
        args.threads, args.seconds
    );
    println!("  {:>6} {:>12} {:>10}", "K", "commits/s", "conflicts");
    for &k in &args.accounts {
        let (rate, share) = contended(&db, k.max(2), &args)?;
        println!("  {:>6} {:>12.0} {:>9.1}%", k.max(2), rate, share * 100.0);
    }
    Ok(())
}

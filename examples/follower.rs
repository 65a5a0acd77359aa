//! A follower serving reads beside a live writer.
//!
//! cargo run --release -p siftdb-examples --example follower
//! cargo run --release -p siftdb-examples --example follower -- --seconds 10 --catch-up-ms 50 --readers 2
//!
//! A writer thread puts random keys of `--keys` (100-byte values, unsynced) as fast as it can,
//! flushing and compacting as it goes, while a follower of its store (`Db::open_follower`, in
//! the same process here; another process works alike) catches up every `--catch-up-ms` and
//! `--readers` threads read random keys from it. Each second it prints the writer's rate, the
//! follower's reads per second, and the follower's lag: how many sequence numbers (writes) the
//! follower is behind the writer just before each catch-up, and the catch-up's time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::{Db, Options};

#[derive(Parser, Debug)]
#[command(about = "A follower catching up with a live writer and serving reads")]
struct Args {
    /// Keys the writer puts and the readers read.
    #[arg(long, default_value_t = 200_000)]
    keys: u64,
    /// Seconds to run.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Milliseconds between the follower's catch-ups.
    #[arg(long, default_value_t = 100)]
    catch_up_ms: u64,
    /// Reader threads on the follower.
    #[arg(long, default_value_t = 1)]
    readers: u64,
}

fn key(k: u64) -> Vec<u8> {
    format!("user{k:012}").into_bytes()
}

fn main() -> siftdb::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let options = || Options::default().write_buffer_size(4 << 20);
    let db = Db::open(dir.path().join("db"), options())?;
    // Something to read from the start.
    for k in (0..args.keys).step_by(10) {
        db.put(key(k), [b'v'; 100])?;
    }
    let follower = Db::open_follower(
        dir.path().join("db"),
        dir.path().join("follower"),
        options(),
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    let (writes, reads, found) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut threads = Vec::new();
    {
        let (db, stop, writes, keys) = (db.clone(), stop.clone(), writes.clone(), args.keys);
        threads.push(std::thread::spawn(move || -> siftdb::Result<()> {
            let mut rng = StdRng::seed_from_u64(1);
            let mut value = [0u8; 100];
            while !stop.load(Ordering::Relaxed) {
                rng.fill(&mut value[..]);
                db.put(key(rng.gen_range(0..keys)), value)?;
                writes.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    for t in 0..args.readers {
        let (f, stop, reads, found, keys) = (
            follower.clone(),
            stop.clone(),
            reads.clone(),
            found.clone(),
            args.keys,
        );
        threads.push(std::thread::spawn(move || -> siftdb::Result<()> {
            let mut rng = StdRng::seed_from_u64(100 + t);
            while !stop.load(Ordering::Relaxed) {
                if f.get(key(rng.gen_range(0..keys)))?.is_some() {
                    found.fetch_add(1, Ordering::Relaxed);
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    // The lags and catch-up times of the current second.
    let second: Arc<Mutex<Vec<(u64, Duration)>>> = Arc::default();
    {
        let (db, f, stop, second) = (db.clone(), follower.clone(), stop.clone(), second.clone());
        let every = Duration::from_millis(args.catch_up_ms);
        threads.push(std::thread::spawn(move || -> siftdb::Result<()> {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(every);
                let lag = db
                    .snapshot()
                    .sequence()
                    .saturating_sub(f.snapshot().sequence());
                let started = Instant::now();
                f.catch_up()?;
                second
                    .lock()
                    .expect("no panics")
                    .push((lag, started.elapsed()));
            }
            Ok(())
        }));
    }
    println!(
        "{:>4}  {:>12}  {:>12}  {:>10}  {:>14}  {:>14}",
        "sec", "writes/s", "reads/s", "found", "lag (writes)", "catch-up (ms)"
    );
    let start = Instant::now();
    let (mut last_writes, mut last_reads, mut last_found) = (0, 0, 0);
    let mut sec = 0;
    let mut lags = Vec::new();
    while start.elapsed().as_secs_f64() < args.seconds {
        sec += 1;
        let until = Duration::from_secs(sec).min(Duration::from_secs_f64(args.seconds));
        std::thread::sleep(until.saturating_sub(start.elapsed()));
        let (w, r, fd) = (
            writes.load(Ordering::Relaxed),
            reads.load(Ordering::Relaxed),
            found.load(Ordering::Relaxed),
        );
        let this: Vec<_> = std::mem::take(&mut *second.lock().expect("no panics"));
        lags.extend(this.iter().map(|(lag, _)| *lag));
        let mean_lag = this.iter().map(|(l, _)| *l).sum::<u64>() / this.len().max(1) as u64;
        let catch_up =
            this.iter().map(|(_, t)| t.as_secs_f64() * 1e3).sum::<f64>() / this.len().max(1) as f64;
        let share = (fd - last_found) as f64 / (r - last_reads).max(1) as f64;
        println!(
            "{sec:>4}  {:>12}  {:>12}  {:>9.0}%  {mean_lag:>14}  {catch_up:>14.2}",
            w - last_writes,
            r - last_reads,
            share * 100.0
        );
        (last_writes, last_reads, last_found) = (w, r, fd);
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a thread panicked")?;
    }
    lags.sort_unstable();
    let median = lags.get(lags.len() / 2).copied().unwrap_or(0);
    let max = lags.last().copied().unwrap_or(0);
    let caught = follower.catch_up()?;
    println!(
        "{} catch-ups; lag before a catch-up: median {median} writes, max {max}; after the \
         writer stopped the follower caught up to sequence {caught} of {}",
        lags.len(),
        db.snapshot().sequence()
    );
    assert_eq!(caught, db.snapshot().sequence());
    Ok(())
}

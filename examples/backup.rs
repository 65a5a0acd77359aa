//! Backups of a running store with `BackupEngine`: a full backup, an incremental one after 10 %
//! new writes, the list, a verify of each, a restore checked against the store, and a purge.
//!
//! cargo run --release -p siftdb-examples --example backup                          # a million keys
//! cargo run --release -p siftdb-examples --example backup -- --keys 20000 --dir /tmp/backups
//!
//! The store takes `--keys` puts of db_bench's values (100 bytes compressing to about half) in a
//! random order, none synced, then is flushed and its compactions let settle; the first backup
//! copies it all. Then 10 % new keys are written (not flushed) and the second backup copies what
//! changed: the tables flushed and compacted since (compaction rewrites the tables the new keys
//! land in, so this is more than a tenth), the WAL holding the newest writes and a MANIFEST,
//! sharing every other table with the first. Each
//! line gives the time and the bytes the step added to the backup directory. The store and the
//! backups live in a temporary directory, or in `--dir` (which then keeps them).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use siftdb::{BackupEngine, Db, Options};
use value_generator::ValueGenerator;

#[path = "common/value_generator.rs"]
mod value_generator;

#[derive(Parser, Debug)]
#[command(about = "A full and an incremental backup of a running store, verified and restored")]
struct Args {
    /// Keys written before the first backup (a tenth as many new ones before the second).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(10..=100_000_000))]
    keys: u64,
    /// Directory for the store (`live`), the backups (`backups`) and the restore (`restored`,
    /// which must not exist yet), kept afterwards; a temporary one if not given.
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

/// Key `i` of the run, in an order that spreads writes over the whole key range.
fn key(i: u64) -> String {
    format!("key{:016}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 4)
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

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// Waits until no compaction is running or due, so a backup sees a settled tree.
fn settle(db: &Db) {
    while db.property("siftdb.compaction-pending").as_deref() != Some("0") {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    // A temporary directory lives as long as `_tmp` and is removed when it drops.
    let (_tmp, dir) = match &args.dir {
        Some(d) => (None, d.clone()),
        None => {
            let t = tempfile::tempdir()?;
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    };
    let (live, backups, restored) = (dir.join("live"), dir.join("backups"), dir.join("restored"));
    let db = Db::open(&live, Options::default())?;
    let mut engine = BackupEngine::open(&backups)?;
    let mut values = ValueGenerator::new(0.5, 100, args.seed);
    let n = args.keys;
    let t = Instant::now();
    for i in 0..n {
        db.put(key(i), values.next(100))?;
    }
    db.flush()?;
    settle(&db);
    println!(
        "loaded {n} keys in {:.2?}; the store holds {:.1} MiB of tables",
        t.elapsed(),
        mib(db
            .property("siftdb.total-sst-bytes")
            .unwrap_or_default()
            .parse()?)
    );

    let mut backup = |what: &str, db: &Db| -> Result<u32, Box<dyn std::error::Error>> {
        let before = dir_bytes(&backups)?;
        let t = Instant::now();
        let id = engine.create_backup(db)?;
        let took = t.elapsed();
        let added = dir_bytes(&backups)? - before;
        println!(
            "backup {id} ({what}): {took:.2?}, {:.1} MiB copied into the backup directory",
            mib(added)
        );
        Ok(id)
    };
    let first = backup("full", &db)?;
    let t = Instant::now();
    for i in n..n + n / 10 {
        db.put(key(i), values.next(100))?;
    }
    // Not flushed: the writes since the last flush are in the WAL, which the backup copies.
    settle(&db);
    println!("wrote {} new keys (10 %) in {:.2?}", n / 10, t.elapsed());
    let second = backup("after 10 % new writes", &db)?;

    println!("backups in {}:", backups.display());
    for b in engine.list() {
        let age = b.created.elapsed().unwrap_or_default();
        println!(
            "  {:>3}  {:>8.1} MiB  {:>4} files  up to sequence {:>9}  taken {age:.1?} ago",
            b.id,
            mib(b.size),
            b.files,
            b.sequence
        );
    }
    println!(
        "  the directory holds {:.1} MiB in all (tables shared)",
        mib(dir_bytes(&backups)?)
    );
    for id in [first, second] {
        let t = Instant::now();
        engine.verify(id)?;
        println!("verified backup {id} in {:.2?}", t.elapsed());
    }

    let t = Instant::now();
    engine.restore(second, &restored)?;
    let copy = Db::open(&restored, Options::default())?;
    println!(
        "restored backup {second} into {} and opened it in {:.2?}",
        restored.display(),
        t.elapsed()
    );
    let mut checked = 0;
    for i in (0..n + n / 10).step_by(((n / 1000) as usize).max(1)) {
        if copy.get(key(i))? != db.get(key(i))? {
            return Err(format!("the restore differs from the store at {}", key(i)).into());
        }
        checked += 1;
    }
    let len = copy.iter().count() as u64;
    if len != n + n / 10 {
        return Err(format!("the restore holds {len} keys, not {}", n + n / 10).into());
    }
    println!("the restore holds all {len} keys; {checked} read back equal to the store's");

    engine.purge_old(1)?;
    println!(
        "purged all but the newest: {:?} left, {:.1} MiB",
        engine.list().iter().map(|b| b.id).collect::<Vec<_>>(),
        mib(dir_bytes(&backups)?)
    );
    Ok(())
}

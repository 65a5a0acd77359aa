//! Crash loops with real SIGKILL.
//!
//! The parent re-executes this test binary as a child (selected by `SIFTDB_CRASH_CHILD`, with the
//! libtest filter naming `crash_child`, so no extra binary is needed). The child opens the store
//! and applies operation after operation, printing `ack <i>` on stdout once operation `i` has
//! returned `Ok`. The parent kills it with SIGKILL (`Child::kill`) after a random delay — the
//! store's buffers and trigger sizes are tiny, so the kill lands during recovery, flushes,
//! compactions, WAL switches and MANIFEST/CURRENT switches — then reopens the store in-process and
//! checks it.
//!
//! Operation `i` is one atomic batch: put `key(i)`, and for every fifth operation also delete the
//! key written two operations earlier. The recovered store must equal exactly the state after
//! some prefix `0..m` of the operations (no holes, nothing reordered, batches whole), and `m`
//! must cover every acknowledged operation. A user is only promised the latter for `sync: true`;
//! here it is asserted for `sync: false` too, because every write is handed to the OS before it
//! is acknowledged and SIGKILL does not lose the page cache (a machine crash would).
//!
//! Every recovered key is then read back with `get`, which goes through the tables' filters
//! (recovery flushes the WAL into tables, so the memtable is empty): a filter that wrongly said
//! "no" would show as a missing key, and the statistics must count exactly one filter true
//! positive per key found.
//!
//! A third loop writes unsynced and calls `Db::sync_wal` after every eighth operation, so kills
//! also land inside `sync_wal` (among WAL switches and flushes): the store must recover the same
//! prefix covering every acknowledged operation. (SIGKILL keeps the page cache, so this shows that
//! `sync_wal` amid writes, flushes and WAL switches damages nothing; that it makes writes durable
//! through a power cut is `tests/store/operations.rs`'s, on the fault-injection layer.)
//!
//! A fourth loop runs the unsynced one under lazy leveling (two runs per level), so kills land
//! inside its merges of runs and its moves of runs down.
//!
//! Short mode (plain `cargo test`): 4 × 30 kills. Long mode: `SIFTDB_LONG=1` (1,000 kills per
//! test) or `SIFTDB_CRASH_KILLS=n`.

use crate::common;
use common::child::{self, key, options, parse_key, spawn_lock, value};
use common::{env_number, file_names, long};
use std::path::Path;
use std::time::{Duration, Instant};

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::{CompactionStyle, Db, Ticker, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "SIFTDB_CRASH_CHILD";

/// How the child makes its writes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// `sync: false`.
    Unsynced,
    /// `sync: true` on every write.
    Synced,
    /// `sync: false`, and `Db::sync_wal` after every eighth operation.
    SyncWal,
}

impl Durability {
    fn env(self) -> &'static str {
        match self {
            Durability::Unsynced => "0",
            Durability::Synced => "1",
            Durability::SyncWal => "wal",
        }
    }

    fn from_env(s: &str) -> Durability {
        match s {
            "0" => Durability::Unsynced,
            "1" => Durability::Synced,
            "wal" => Durability::SyncWal,
            _ => panic!("unknown SIFTDB_CRASH_SYNC {s}"),
        }
    }
}

/// Operation `i` deletes `key(i - 2)` as well when `i % 5 == 4`.
fn deletes(i: u64) -> Option<u64> {
    (i % 5 == 4).then(|| i - 2)
}

/// Whether `key(j)` is live after operations `0..m`.
fn live_after(j: u64, m: u64) -> bool {
    j < m && !(j % 5 == 2 && j + 2 < m)
}

/// Child side: never returns normally while the parent is alive; it is killed.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return; // Not a child: nothing to do in a normal test run.
    };
    let var = |name: &str| -> u64 { std::env::var(name).unwrap().parse().unwrap() };
    let start = var("SIFTDB_CRASH_START");
    let epoch = var("SIFTDB_CRASH_EPOCH");
    let durability = Durability::from_env(&std::env::var("SIFTDB_CRASH_SYNC").unwrap());
    let style: CompactionStyle = std::env::var("SIFTDB_CRASH_STYLE")
        .unwrap()
        .parse()
        .unwrap();
    let db = Db::open(&dir, options(epoch).compaction_style(style)).unwrap();
    let wo = WriteOptions {
        sync: durability == Durability::Synced,
    };
    let mut out = std::io::stdout().lock();
    for i in start.. {
        let mut b = WriteBatch::new();
        b.put(key(i), value(i));
        if let Some(d) = deletes(i) {
            b.delete(key(d));
        }
        db.write_opt(b, &wo).unwrap();
        use std::io::Write;
        writeln!(out, "ack {i}").unwrap();
        if durability == Durability::SyncWal && i % 8 == 7 {
            db.sync_wal().unwrap();
            writeln!(out, "synced {i}").unwrap();
        }
        out.flush().unwrap();
    }
}

/// Runs the child until killed after `delay`; returns the last acknowledged operation, if any, and
/// how many `sync_wal` calls returned.
fn run_child(
    dir: &Path,
    start: u64,
    (epoch, style): (u64, CompactionStyle),
    durability: Durability,
    delay: Duration,
) -> (Option<u64>, u64) {
    let env = [
        (CHILD_ENV, dir.display().to_string()),
        ("SIFTDB_CRASH_START", start.to_string()),
        ("SIFTDB_CRASH_EPOCH", epoch.to_string()),
        ("SIFTDB_CRASH_SYNC", durability.env().to_string()),
        ("SIFTDB_CRASH_STYLE", style.to_string()),
    ];
    let report = child::run_child(
        &child::test_name(module_path!(), "crash_child"),
        &env,
        delay,
    );
    (report.last_ack, report.syncs)
}

/// Reopens the store and checks it against the model; returns the recovered prefix length.
fn check(
    dir: &Path,
    (epoch, style): (u64, CompactionStyle),
    acked: Option<u64>,
    kill: usize,
) -> u64 {
    let _guard = spawn_lock();
    let db = Db::open(dir, options(epoch).compaction_style(style))
        .unwrap_or_else(|e| panic!("kill {kill}: open after SIGKILL failed: {e}"));
    let entries: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter()
        .map(|r| r.unwrap_or_else(|e| panic!("kill {kill}: scan failed: {e}")))
        .collect();
    // The prefix length is one past the newest operation whose put survived, or the operation
    // after the newest surviving key plus any trailing ops that left no live key (none here: the
    // newest op always leaves its own key live).
    let m = entries.last().map_or(0, |(k, _)| parse_key(k) + 1);
    if let Some(a) = acked {
        assert!(
            m > a,
            "kill {kill}: acknowledged op {a} lost (recovered prefix 0..{m})"
        );
    }
    let expected: Vec<u64> = (0..m).filter(|&j| live_after(j, m)).collect();
    let got: Vec<u64> = entries.iter().map(|(k, _)| parse_key(k)).collect();
    if let Some((missing, extra)) = child::differences(&expected, &got) {
        panic!(
            "kill {kill}: recovered state is not a prefix 0..{m}: missing {missing:?}, extra {extra:?}"
        );
    }
    for (k, v) in &entries {
        assert_eq!(*v, value(parse_key(k)), "kill {kill}: wrong value");
    }
    // Point reads go through the filters; none may deny a present key.
    let before = db.statistics();
    for (k, v) in &entries {
        let got = db.get(k).unwrap();
        assert_eq!(got.as_ref(), Some(v), "kill {kill}: get lost a present key");
    }
    let s = db.statistics().since(&before);
    let tp = s.ticker(Ticker::BloomFilterFullTruePositive);
    let pos = s.ticker(Ticker::BloomFilterFullPositive);
    assert_eq!(
        s.ticker(Ticker::MemtableHit),
        0,
        "recovery left data in the memtable"
    );
    assert_eq!(
        tp,
        entries.len() as u64,
        "kill {kill}: one filter true positive per key found"
    );
    assert!(pos >= tp);
    m
}

/// How many kills left the traces of each kind of interrupted work.
#[derive(Default)]
struct Interrupted {
    open: usize,
    current_switch: usize,
    table_work: usize,
}

fn kills(short: usize) -> usize {
    env_number(
        "SIFTDB_CRASH_KILLS",
        if long() { 1000 } else { short as u64 },
    ) as usize
}

fn crash_loop(durability: Durability, style: CompactionStyle, seed: u64) {
    let kills = kills(30);
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let root = tempfile::tempdir().unwrap();
    // A fresh store every 40 kills bounds the data each check scans and rotates the filter layout.
    let per_epoch = 40;
    let (mut acked_total, mut recovered_extra, mut syncs) = (0u64, 0u64, 0u64);
    let mut dir = root.path().join("epoch0");
    let mut start = 0;
    let mut seen = Interrupted::default();
    for kill in 0..kills {
        let epoch = (kill / per_epoch) as u64;
        if kill % per_epoch == 0 {
            dir = root.path().join(format!("epoch{epoch}"));
            start = 0;
        }
        // Mostly short lives (recovery, the MANIFEST switch, the first flushes), some long enough
        // for several compactions.
        let delay = if rng.gen_bool(0.3) {
            Duration::from_millis(rng.gen_range(0..30))
        } else {
            Duration::from_millis(rng.gen_range(30..250))
        };
        let (acked, synced) = run_child(&dir, start, (epoch, style), durability, delay);
        syncs += synced;
        // What the kill interrupted, judged from what it left behind: a CURRENT.dbtmp (inside
        // the CURRENT switch), two MANIFESTs (inside an open, after the new MANIFEST and before
        // the clean-up), tables the reopen deletes (a flush or compaction that had not finished,
        // or inputs not yet deleted after one had).
        let before = file_names(&dir);
        if before.iter().any(|n| n == "CURRENT.dbtmp") {
            seen.current_switch += 1;
        }
        if before.iter().filter(|n| n.starts_with("MANIFEST-")).count() > 1 {
            seen.open += 1;
        }
        let m = check(&dir, (epoch, style), acked, kill);
        let after = file_names(&dir);
        if before
            .iter()
            .any(|n| n.ends_with(".sst") && !after.contains(n))
        {
            seen.table_work += 1;
        }
        if let Some(a) = acked {
            acked_total += a + 1 - start;
            recovered_extra += m - (a + 1);
        }
        start = m;
    }
    if durability == Durability::SyncWal {
        assert!(syncs > 0, "no sync_wal call returned before a kill");
    }
    eprintln!(
        "crash loop ({durability:?}, {style}): {kills} SIGKILLs survived in {:.1?}, {acked_total} ops \
         acknowledged ({syncs} sync_wal calls returned), {recovered_extra} unacknowledged ops \
         also recovered; kills that interrupted: an open {}, the CURRENT switch {}, a flush or \
         compaction {}",
        started.elapsed(),
        seen.open,
        seen.current_switch,
        seen.table_work
    );
}

#[test]
fn sigkill_loses_no_acknowledged_write_sync() {
    crash_loop(Durability::Synced, CompactionStyle::Leveled, 1);
}

#[test]
fn sigkill_recovers_a_prefix_without_sync() {
    crash_loop(Durability::Unsynced, CompactionStyle::Leveled, 2);
}

/// Unsynced writes covered by `sync_wal` every eighth operation: kills land inside `sync_wal` too.
#[test]
fn sigkill_with_sync_wal_loses_no_acknowledged_write() {
    crash_loop(Durability::SyncWal, CompactionStyle::Leveled, 3);
}

#[test]
fn sigkill_under_lazy_leveling_recovers_a_prefix_without_sync() {
    let lazy = CompactionStyle::LazyLeveled { runs_per_level: 2 };
    crash_loop(Durability::Unsynced, lazy, 4);
}

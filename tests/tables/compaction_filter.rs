//! Compaction filters (`Options::compaction_filter`): what compaction keeps, removes and changes
//! as a filter decides; what snapshots keep seeing, those taken and the transactions begun while a
//! compaction is filtering too (a filter held on one key opens that window), and what expiry by a
//! TTL there does; that a removed value does not bring back an older version from a deeper level;
//! a panicking filter; a keyspace's filter found again on reopen.

use crate::common;
use common::scratch;
use common::{settle, tables_per_level};

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use siftdb::{
    Clock, CompactionDecision, CompactionFilter, Db, Error, GetSource, Options, Snapshot, Ticker,
};

/// Removes keys starting with `drop` and values `remove-me`, upper-cases the values of keys
/// starting with `up`, panics on the key `panic`; keeps the rest. Off, it keeps everything.
struct Rules {
    name: &'static str,
    on: AtomicBool,
    calls: AtomicUsize,
    lowest_level: AtomicUsize,
}

impl Rules {
    fn new(name: &'static str) -> Arc<Rules> {
        Arc::new(Rules {
            name,
            on: AtomicBool::new(true),
            calls: AtomicUsize::new(0),
            lowest_level: AtomicUsize::new(usize::MAX),
        })
    }
}

impl CompactionFilter for Rules {
    fn name(&self) -> &str {
        self.name
    }

    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> CompactionDecision {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.lowest_level.fetch_min(level, Ordering::Relaxed);
        if !self.on.load(Ordering::Relaxed) {
            return CompactionDecision::Keep;
        }
        if key == b"panic" {
            panic!("the filter met the key it panics on");
        }
        if key.starts_with(b"drop") || value == b"remove-me" {
            CompactionDecision::Remove
        } else if key.starts_with(b"up") {
            CompactionDecision::ChangeValue(value.to_ascii_uppercase())
        } else {
            CompactionDecision::Keep
        }
    }
}

fn ticker(db: &Db, t: Ticker) -> u64 {
    db.statistics().ticker(t)
}

fn get(db: &Db, key: &str) -> Option<String> {
    db.get(key).unwrap().map(|v| String::from_utf8(v).unwrap())
}

#[test]
fn compaction_removes_and_changes_values_as_the_filter_decides() {
    let dir = scratch();
    let rules = Rules::new("test.Rules");
    let db = Db::open(
        dir.path(),
        Options::default().compaction_filter(rules.clone()),
    )
    .unwrap();
    for i in 0..50 {
        db.put(format!("drop{i:02}"), "x").unwrap();
        db.put(format!("up{i:02}"), format!("value {i}")).unwrap();
        db.put(format!("keep{i:02}"), format!("value {i}")).unwrap();
    }
    db.delete("keep00").unwrap();
    // Neither writes nor flushes ask the filter.
    db.flush().unwrap();
    assert_eq!(rules.calls.load(Ordering::Relaxed), 0);
    assert_eq!(get(&db, "drop07"), Some("x".into()));
    db.compact().unwrap();
    // Asked once per value the compaction writes (the tombstone of keep00 is not shown to it),
    // at the level compaction writes.
    assert_eq!(rules.calls.load(Ordering::Relaxed), 149);
    assert_eq!(rules.lowest_level.load(Ordering::Relaxed), 1);
    for i in 0..50 {
        assert_eq!(get(&db, &format!("drop{i:02}")), None);
        assert_eq!(get(&db, &format!("up{i:02}")), Some(format!("VALUE {i}")));
        let kept = (i > 0).then(|| format!("value {i}"));
        assert_eq!(get(&db, &format!("keep{i:02}")), kept);
    }
    assert_eq!(ticker(&db, Ticker::CompactionFilterRemoved), 50);
    assert_eq!(ticker(&db, Ticker::CompactionFilterChanged), 50);
    // Nothing below held the removed keys: their tombstones went too.
    assert_eq!(db.approximate_len(), 99);
    let scanned: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(scanned.len(), 99);
    assert_eq!(scanned[0], (b"keep01".to_vec(), b"value 1".to_vec()));
    assert_eq!(scanned[49], (b"up00".to_vec(), b"VALUE 0".to_vec()));
}

#[test]
fn snapshots_keep_seeing_what_they_saw_and_removed_values_hide_older_ones() {
    let dir = scratch();
    let rules = Rules::new("test.Rules");
    let db = Db::open(
        dir.path(),
        Options::default().compaction_filter(rules.clone()),
    )
    .unwrap();
    db.put("drop-a", "old").unwrap();
    db.put("up-b", "old b").unwrap();
    let snapshot = db.snapshot();
    db.put("drop-a", "new").unwrap();
    db.put("up-b", "new b").unwrap();
    db.put("keep-c", "c").unwrap();
    db.compact().unwrap();
    // The newest versions are newer than the snapshot: the filter rewrote them. The old version
    // of drop-a stays for the snapshot, and the tombstone at "new"'s sequence hides it.
    assert_eq!(get(&db, "drop-a"), None);
    assert_eq!(get(&db, "up-b"), Some("NEW B".into()));
    assert_eq!(get(&db, "keep-c"), Some("c".into()));
    let at = |k: &str| {
        db.get_at(&snapshot, k)
            .unwrap()
            .map(|v| String::from_utf8(v).unwrap())
    };
    assert_eq!(at("drop-a"), Some("old".into()));
    assert_eq!(at("up-b"), Some("old b".into()));
    assert_eq!(at("keep-c"), None);
    let then: Vec<_> = db.iter_at(&snapshot).map(|kv| kv.unwrap().0).collect();
    assert_eq!(then, [b"drop-a".to_vec(), b"up-b".to_vec()]);

    // A snapshot taken now sees the newest versions, which the filter then leaves alone.
    let now = db.snapshot();
    let calls = rules.calls.load(Ordering::Relaxed);
    db.put("keep-d", "d").unwrap(); // overlaps the L1 table: the next compaction rewrites it
    db.compact().unwrap();
    assert_eq!(
        rules.calls.load(Ordering::Relaxed),
        calls + 1,
        "only keep-d is newer"
    );
    assert_eq!(at("drop-a"), Some("old".into()));
    assert_eq!(db.get_at(&now, "up-b").unwrap(), Some(b"NEW B".to_vec()));

    // With the snapshots gone, the old version and the tombstone both go.
    drop((snapshot, now));
    db.put("keep-e", "e").unwrap();
    db.compact().unwrap();
    assert_eq!(get(&db, "drop-a"), None);
    assert_eq!(db.approximate_len(), 4, "up-b, keep-c, keep-d, keep-e");
}

#[test]
fn a_removed_value_does_not_bring_back_a_version_in_a_deeper_level() {
    let dir = scratch();
    let rules = Rules::new("test.Rules");
    rules.on.store(false, Ordering::Relaxed);
    let options = Options::default()
        .write_buffer_size(32 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(32 << 10)
        .compaction_filter(rules.clone());
    let db = Db::open(dir.path(), options).unwrap();
    let key = |i: usize| format!("key{i:06}");
    let n = 12_000;
    for i in 0..n {
        db.put(key(i), format!("old value {i} {}", "z".repeat(i % 50)))
            .unwrap();
    }
    db.flush().unwrap();
    settle(&db);
    assert!(tables_per_level(&db)[2..].iter().sum::<usize>() > 0);
    // Keys whose only version lies in L2 or deeper.
    let deep: Vec<usize> = (0..n)
        .step_by(97)
        .filter(|&i| {
            let e = db.explain_get(key(i)).unwrap();
            matches!(e.source, GetSource::Table { level, .. } if level >= 2)
        })
        .take(20)
        .collect();
    assert!(!deep.is_empty(), "no key lies in L2 or deeper");
    rules.on.store(true, Ordering::Relaxed);
    for &i in &deep {
        db.put(key(i), "remove-me").unwrap();
    }
    // The new versions go into L0 and compact down into L1, where the filter removes them,
    // while their old versions stay deeper until a later job reaches them.
    db.compact().unwrap();
    for &i in &deep {
        assert_eq!(db.get(key(i)).unwrap(), None, "{}", key(i));
    }
    assert_eq!(db.iter().count(), n - deep.len());
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for &i in &deep {
        assert_eq!(db.get(key(i)).unwrap(), None, "{} after reopen", key(i));
    }
}

#[test]
fn a_panicking_filter_stops_writes_and_loses_nothing() {
    let dir = scratch();
    let rules = Rules::new("test.Panics");
    {
        let db = Db::open(
            dir.path(),
            Options::default().compaction_filter(rules.clone()),
        )
        .unwrap();
        for i in 0..100 {
            db.put(format!("k{i:03}"), format!("v{i}")).unwrap();
        }
        db.put("panic", "p").unwrap();
        db.put("drop-me", "d").unwrap();
        let e = db.compact().unwrap_err();
        assert!(
            matches!(&e, Error::Background(_)) && e.to_string().contains("panicked"),
            "{e}"
        );
        let refused = db.put("after", "x").unwrap_err();
        assert!(matches!(refused, Error::Background(_)), "{refused}");
        // Reads go on, from the compaction's inputs.
        assert_eq!(get(&db, "drop-me"), Some("d".into()));
        assert_eq!(get(&db, "k042"), Some("v42".into()));
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.iter().count(), 102);
    assert_eq!(get(&db, "panic"), Some("p".into()));
    db.compact().unwrap();
    assert_eq!(get(&db, "drop-me"), Some("d".into()));
    assert_eq!(db.iter().count(), 102);
}

#[test]
fn a_keyspace_finds_its_filter_again_by_name_on_reopen() {
    let dir = scratch();
    let rules = Rules::new("test.KeyspaceRules");
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let ks = db
            .keyspace_with(
                "filtered",
                Options::default().compaction_filter(rules.clone()),
            )
            .unwrap();
        ks.put("drop1", "x").unwrap();
        ks.compact().unwrap();
        assert_eq!(ks.get("drop1").unwrap(), None);
        // Another keyspace of the store, created with its options, has no filter.
        db.put("drop1", "x").unwrap();
        db.compact().unwrap();
        assert_eq!(get(&db, "drop1"), Some("x".into()));
        // An existing keyspace opens with its recorded filter; another one is refused.
        let other = Rules::new("test.Other");
        let e = db
            .keyspace_with("filtered", Options::default().compaction_filter(other))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(db
            .keyspace_with(
                "filtered",
                Options::default().compaction_filter(rules.clone())
            )
            .is_ok());
    }
    // Registered, the filter is found again; the default keyspace still has none.
    let calls = rules.calls.load(Ordering::Relaxed);
    {
        let db = Db::open(
            dir.path(),
            Options::default().register_compaction_filter(rules.clone()),
        )
        .unwrap();
        let ks = db.keyspace("filtered").unwrap();
        ks.put("drop2", "x").unwrap();
        ks.compact().unwrap();
        assert_eq!(ks.get("drop2").unwrap(), None);
        assert!(rules.calls.load(Ordering::Relaxed) > calls);
        db.put("drop2", "x").unwrap();
        db.compact().unwrap();
        assert_eq!(get(&db, "drop2"), Some("x".into()));
    }
    // Not given, the keyspace compacts without it (a warning is logged).
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let ks = db.keyspace("filtered").unwrap();
    ks.put("drop3", "x").unwrap();
    ks.compact().unwrap();
    assert_eq!(ks.get("drop3").unwrap(), Some(b"x".to_vec()));
}

/// [`Rules`] that, the first time compaction asks about a key ending in `hold`, stop the
/// compaction there until the test releases it: keys before it are then decided, keys after it
/// not yet.
struct Held {
    rules: Arc<Rules>,
    once: AtomicBool,
    arrived: Mutex<Sender<()>>,
    release: Mutex<Receiver<()>>,
}

/// The test's side of a [`Held`] filter.
struct Window {
    arrived: Receiver<()>,
    release: Sender<()>,
}

impl Window {
    fn wait_arrival(&self) {
        self.arrived
            .recv_timeout(Duration::from_secs(60))
            .expect("no compaction asked the filter about the held key");
    }

    fn release(&self) {
        self.release.send(()).unwrap();
    }
}

fn held() -> (Arc<Held>, Window) {
    let (arrived_tx, arrived) = channel();
    let (release, release_rx) = channel();
    let filter = Arc::new(Held {
        rules: Rules::new("test.Held"),
        once: AtomicBool::new(true),
        arrived: Mutex::new(arrived_tx),
        release: Mutex::new(release_rx),
    });
    (filter, Window { arrived, release })
}

impl CompactionFilter for Held {
    fn name(&self) -> &str {
        "test.Held"
    }

    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> CompactionDecision {
        if key.ends_with(b"hold") && self.once.swap(false, Ordering::SeqCst) {
            self.arrived.lock().unwrap().send(()).unwrap();
            self.release.lock().unwrap().recv().unwrap();
        }
        self.rules.filter(level, key, value)
    }
}

fn get_at(db: &Db, snapshot: &Snapshot, key: &str) -> Option<String> {
    db.get_at(snapshot, key)
        .unwrap()
        .map(|v| String::from_utf8(v).unwrap())
}

/// A store whose default keyspace has `filter` and holds `keys`, all "original", in L0.
fn store_holding(dir: &std::path::Path, filter: Arc<Held>, keys: &[&str]) -> Db {
    let db = Db::open(dir, Options::default().compaction_filter(filter)).unwrap();
    for k in keys {
        db.put(k, "original").unwrap();
    }
    db
}

/// A snapshot and a transaction begin while `Db::compact` is held at the key `held`, among
/// `drop-a` (which the filter removes) and `up-b` (which it changes): both read the same before
/// and after the compaction installs, and the transaction commits as if the compaction had not
/// run. The filter was asked `asked` times in all.
fn snapshot_and_transaction_in_the_window(held: &str, asked: usize) {
    let dir = scratch();
    let (filter, window) = self::held();
    let db = store_holding(dir.path(), filter.clone(), &["drop-a", held, "up-b"]);
    let compacting = {
        let db = db.clone();
        std::thread::spawn(move || db.compact())
    };
    window.wait_arrival();
    let snapshot = db.snapshot();
    let mut tx = db.transaction();
    let original = Some("original".to_string());
    let tx_get = |tx: &mut siftdb::Transaction, k: &str| {
        tx.get(k).unwrap().map(|v| String::from_utf8(v).unwrap())
    };
    for k in ["drop-a", "up-b"] {
        assert_eq!(
            get_at(&db, &snapshot, k),
            original,
            "{k} before the install"
        );
        assert_eq!(tx_get(&mut tx, k), original, "{k} before the install");
    }
    window.release();
    compacting.join().unwrap().unwrap();
    for k in ["drop-a", "up-b"] {
        assert_eq!(get_at(&db, &snapshot, k), original, "{k} after the install");
        assert_eq!(tx_get(&mut tx, k), original, "{k} after the install");
        assert_eq!(
            get(&db, k),
            original,
            "{k}: the store as the transaction saw it"
        );
    }
    // What it read is what the store holds as it commits: nothing to refuse, and its write lands.
    tx.put("seen", "drop-a and up-b original").unwrap();
    tx.commit().unwrap();
    assert_eq!(get(&db, "seen"), Some("drop-a and up-b original".into()));
    assert_eq!(get(&db, "drop-a"), original);
    // The job ran once more without asking the filter; the decisions thrown away are not counted.
    assert_eq!(filter.rules.calls.load(Ordering::Relaxed), asked);
    assert_eq!(ticker(&db, Ticker::CompactionFilterReruns), 1);
    assert_eq!(ticker(&db, Ticker::CompactionFilterRemoved), 0);
    assert_eq!(ticker(&db, Ticker::CompactionFilterChanged), 0);
    // With the snapshot gone, the next compaction decides them.
    drop(snapshot);
    db.compact().unwrap();
    assert_eq!(get(&db, "drop-a"), None);
    assert_eq!(get(&db, "up-b"), Some("ORIGINAL".into()));
    assert_eq!(ticker(&db, Ticker::CompactionFilterRemoved), 1);
    assert_eq!(ticker(&db, Ticker::CompactionFilterChanged), 1);
}

#[test]
fn a_snapshot_and_a_transaction_begun_while_a_filter_runs_read_the_same_once_it_installs() {
    // Held before up-b: the job sees the snapshot at its next key, asks no more and gives up
    // (up-b is never asked).
    snapshot_and_transaction_in_the_window("hold", 2);
    // Held at its last key, every decision made: the install finds the snapshot.
    snapshot_and_transaction_in_the_window("zz-hold", 3);
}

#[test]
fn a_snapshot_released_before_the_filtering_job_installs_leaves_its_decisions_standing() {
    let dir = scratch();
    let (filter, window) = held();
    let db = store_holding(dir.path(), filter.clone(), &["drop-a", "hold", "up-b"]);
    let compacting = {
        let db = db.clone();
        std::thread::spawn(move || db.compact())
    };
    window.wait_arrival();
    let snapshot = db.snapshot();
    assert_eq!(get_at(&db, &snapshot, "drop-a"), Some("original".into()));
    let mut tx = db.transaction();
    assert_eq!(tx.get("drop-a").unwrap(), Some(b"original".to_vec()));
    tx.put("other", "o").unwrap();
    tx.commit().unwrap();
    drop(snapshot);
    window.release();
    compacting.join().unwrap().unwrap();
    // No reader that saw drop-a and up-b as they were is left: the decisions stand, in one job.
    assert_eq!(get(&db, "drop-a"), None);
    assert_eq!(get(&db, "up-b"), Some("ORIGINAL".into()));
    assert_eq!(get(&db, "other"), Some("o".into()));
    assert_eq!(ticker(&db, Ticker::CompactionFilterRemoved), 1);
    assert_eq!(ticker(&db, Ticker::CompactionFilterChanged), 1);
    assert_eq!(ticker(&db, Ticker::CompactionFilterReruns), 0);
    assert_eq!(filter.rules.calls.load(Ordering::Relaxed), 3);
}

/// A clock moved by hand, in seconds since the Unix epoch.
struct ManualClock(AtomicU64);

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::Relaxed))
    }
}

#[test]
fn expiry_by_a_compaction_that_a_snapshot_watches_changes_none_of_its_reads() {
    const T0: u64 = 1_700_000_000;
    let dir = scratch();
    let clock = Arc::new(ManualClock(AtomicU64::new(T0)));
    let (filter, window) = held();
    let db = Db::open(dir.path(), Options::default().clock(clock.clone())).unwrap();
    let ks = db
        .keyspace_with(
            "expiring",
            Options::default()
                .ttl(Duration::from_secs(10))
                .compaction_filter(filter),
        )
        .unwrap();
    ks.put("gone", "written at T0").unwrap();
    clock.0.store(T0 + 5, Ordering::Relaxed);
    ks.put("hold", "h").unwrap();
    ks.put("stays", "written at T0 + 5").unwrap();
    clock.0.store(T0 + 10, Ordering::Relaxed);
    let compacting = {
        let ks = ks.clone();
        std::thread::spawn(move || ks.compact())
    };
    // The job has turned `gone` into a tombstone and waits on `hold`.
    window.wait_arrival();
    let snapshot = ks.snapshot();
    let reads =
        |ks: &siftdb::Keyspace| ["gone", "hold", "stays"].map(|k| ks.get_at(&snapshot, k).unwrap());
    let before = reads(&ks);
    assert_eq!(before[0], None, "expired by the clock");
    assert_eq!(before[2], Some(b"written at T0 + 5".to_vec()));
    window.release();
    compacting.join().unwrap().unwrap();
    assert_eq!(reads(&ks), before);
    // The expiry was installed while the snapshot lived: the expired value is gone from disk.
    assert_eq!(ks.statistics().ticker(Ticker::CompactionFilterRemoved), 1);
    assert_eq!(ks.approximate_len(), 2);
    // Later, the clock expires the rest for the snapshot too, as for every reader.
    clock.0.store(T0 + 15, Ordering::Relaxed);
    assert_eq!(reads(&ks), [None, None, None]);
}

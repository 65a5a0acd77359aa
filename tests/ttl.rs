//! Keyspaces with a time to live (`Options::ttl`), on a clock moved by hand: entries visible
//! before they expire and invisible to every read path from then on; removed by compaction;
//! their write time kept through flushes, reopen and WAL recovery, and stamped at commit; the TTL
//! fixed when the keyspace is created; a compaction filter in such a keyspace.

mod common;
use common::tables_per_level;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use siftdb::{
    Clock, CompactionDecision, CompactionFilter, Db, Error, Keyspace, Options, Snapshot, Ticker,
    WriteBatch,
};

/// A clock moved by hand, in seconds since the Unix epoch.
struct ManualClock(AtomicU64);

impl ManualClock {
    fn at(seconds: u64) -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicU64::new(seconds)))
    }

    fn set(&self, seconds: u64) {
        self.0.store(seconds, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::Relaxed))
    }
}

/// An arbitrary moment, in seconds since the epoch.
const T0: u64 = 1_700_000_000;
const TTL: Duration = Duration::from_secs(10);

fn store_options(clock: &Arc<ManualClock>) -> Options {
    Options::default().clock(clock.clone())
}

fn ttl_keyspace(db: &Db) -> Keyspace {
    db.keyspace_with("expiring", Options::default().ttl(TTL))
        .unwrap()
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn model(entries: &[(&str, &str)]) -> Model {
    entries
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// Every read path of `ks` (at `snapshot` too, if given) against `want`, over `keys` (which
/// include keys absent from `want`).
fn check_reads(
    ks: &Keyspace,
    snapshot: Option<&Snapshot>,
    keys: &[&str],
    want: &Model,
    what: &str,
) {
    fn pairs(
        scan: impl Iterator<Item = siftdb::Result<(Vec<u8>, Vec<u8>)>>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        scan.map(|kv| kv.unwrap()).collect()
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = want.clone().into_iter().collect();
    let mut backward = all.clone();
    backward.reverse();
    for key in keys {
        let expected = want.get(key.as_bytes()).cloned();
        let (got, pinned, contains) = match snapshot {
            None => (
                ks.get(key).unwrap(),
                ks.get_pinned(key).unwrap().map(|p| p.to_vec()),
                ks.contains_key(key).unwrap(),
            ),
            Some(s) => (
                ks.get_at(s, key).unwrap(),
                ks.get_pinned_at(s, key).unwrap().map(|p| p.to_vec()),
                ks.contains_key_at(s, key).unwrap(),
            ),
        };
        assert_eq!(got, expected, "{what}: get {key}");
        assert_eq!(pinned, expected, "{what}: get_pinned {key}");
        assert_eq!(contains, expected.is_some(), "{what}: contains_key {key}");
    }
    let multi = match snapshot {
        None => ks.multi_get(keys),
        Some(s) => ks.multi_get_at(s, keys),
    };
    let multi: Vec<Option<Vec<u8>>> = multi.into_iter().map(|r| r.unwrap()).collect();
    let expected: Vec<Option<Vec<u8>>> = keys
        .iter()
        .map(|k| want.get(k.as_bytes()).cloned())
        .collect();
    assert_eq!(multi, expected, "{what}: multi_get");
    let (forward, reverse, prefixed, cursor) = match snapshot {
        None => (
            pairs(ks.iter()),
            pairs(ks.scan(..).rev()),
            pairs(ks.scan_prefix("k")),
            ks.cursor(),
        ),
        Some(s) => (
            pairs(ks.iter_at(s)),
            pairs(ks.scan_at(s, ..).rev()),
            pairs(ks.scan_prefix_at(s, "k")),
            ks.cursor_at(s),
        ),
    };
    assert_eq!(forward, all, "{what}: iter");
    assert_eq!(reverse, backward, "{what}: scan backward");
    let with_k: Vec<_> = all
        .iter()
        .filter(|(k, _)| k.starts_with(b"k"))
        .cloned()
        .collect();
    assert_eq!(prefixed, with_k, "{what}: scan_prefix");
    let mut cursor = cursor;
    let mut walked = Vec::new();
    cursor.seek_to_first().unwrap();
    while cursor.valid() {
        walked.push((cursor.key().to_vec(), cursor.value().to_vec()));
        cursor.next().unwrap();
    }
    assert_eq!(walked, all, "{what}: cursor forward");
    walked.clear();
    cursor.seek_to_last().unwrap();
    while cursor.valid() {
        walked.push((cursor.key().to_vec(), cursor.value().to_vec()));
        cursor.prev().unwrap();
    }
    assert_eq!(walked, backward, "{what}: cursor backward");
    // Turning around on every key, with seeks into the middle.
    for key in keys {
        cursor.seek(key).unwrap();
        let at_or_after = all.iter().find(|(k, _)| k.as_slice() >= key.as_bytes());
        assert_eq!(
            cursor
                .valid()
                .then(|| (cursor.key().to_vec(), cursor.value().to_vec())),
            at_or_after.cloned(),
            "{what}: seek {key}"
        );
        cursor.seek_for_prev(key).unwrap();
        let at_or_before = all
            .iter()
            .rev()
            .find(|(k, _)| k.as_slice() <= key.as_bytes());
        assert_eq!(
            cursor
                .valid()
                .then(|| (cursor.key().to_vec(), cursor.value().to_vec())),
            at_or_before.cloned(),
            "{what}: seek_for_prev {key}"
        );
        if cursor.valid() {
            cursor.next().unwrap();
            let after = all.iter().find(|(k, _)| k.as_slice() > key.as_bytes());
            assert_eq!(
                cursor.valid().then(|| cursor.key().to_vec()),
                after.map(|(k, _)| k.clone()),
                "{what}: next after {key}"
            );
        }
    }
    if snapshot.is_none() {
        let mut tx = ks.transaction();
        for key in keys {
            assert_eq!(
                tx.get(key).unwrap(),
                want.get(key.as_bytes()).cloned(),
                "{what}: tx get {key}"
            );
        }
        let scanned: Vec<_> = tx.scan(..).map(|kv| kv.unwrap()).collect();
        assert_eq!(scanned, all, "{what}: tx scan");
        assert_eq!(
            ks.first_key_value().unwrap(),
            all.first().cloned(),
            "{what}: first"
        );
        assert_eq!(
            ks.last_key_value().unwrap(),
            all.last().cloned(),
            "{what}: last"
        );
    }
}

const KEYS: [&str; 7] = ["a", "k1", "k2", "k3", "k4", "x", "z"];

#[test]
fn entries_vanish_from_every_read_path_once_they_expire() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(T0);
    let db = Db::open(dir.path(), store_options(&clock)).unwrap();
    let ks = ttl_keyspace(&db);
    ks.put("k1", "one").unwrap();
    ks.put("k2", "two").unwrap();
    ks.put("a", "").unwrap(); // an empty value is a value too
    clock.set(T0 + 4);
    ks.put("k3", "three").unwrap();
    ks.put("k4", "four").unwrap();
    ks.delete("k4").unwrap();
    // "x": an older version written later by the clock (turned back): when the newest version
    // expires, the key is absent, whatever older versions hold.
    clock.set(T0 + 100);
    ks.put("x", "old, written at T0 + 100").unwrap();
    clock.set(T0 + 4);
    ks.put("x", "new, written at T0 + 4").unwrap();

    for flushed in [false, true] {
        if flushed {
            ks.flush().unwrap();
        }
        let stage = if flushed { "tables" } else { "memtable" };
        let snapshot = ks.snapshot();
        clock.set(T0 + 9);
        let all = model(&[
            ("a", ""),
            ("k1", "one"),
            ("k2", "two"),
            ("k3", "three"),
            ("x", "new, written at T0 + 4"),
        ]);
        check_reads(&ks, None, &KEYS, &all, &format!("{stage}, before expiry"));
        check_reads(
            &ks,
            Some(&snapshot),
            &KEYS,
            &all,
            &format!("{stage}, snapshot before expiry"),
        );
        // T0 + 10: the first three are a TTL old.
        clock.set(T0 + 10);
        let later = model(&[("k3", "three"), ("x", "new, written at T0 + 4")]);
        check_reads(&ks, None, &KEYS, &later, &format!("{stage}, first expiry"));
        check_reads(
            &ks,
            Some(&snapshot),
            &KEYS,
            &later,
            &format!("{stage}, snapshot, first expiry"),
        );
        clock.set(T0 + 14);
        check_reads(
            &ks,
            None,
            &KEYS,
            &Model::new(),
            &format!("{stage}, all expired"),
        );
        check_reads(
            &ks,
            Some(&snapshot),
            &KEYS,
            &Model::new(),
            &format!("{stage}, snapshot, all expired"),
        );
        clock.set(T0 + 4);
    }
    // A cursor judges expiry as of its creation.
    clock.set(T0 + 9);
    let mut cursor = ks.cursor();
    clock.set(T0 + 20);
    cursor.seek_to_first().unwrap();
    assert_eq!(cursor.key(), b"a");
    assert_eq!(ks.get("k1").unwrap(), None);
}

#[test]
fn compaction_removes_expired_entries() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(T0);
    let db = Db::open(dir.path(), store_options(&clock)).unwrap();
    let ks = ttl_keyspace(&db);
    for i in 0..500 {
        ks.put(format!("old{i:03}"), format!("value {i}")).unwrap();
    }
    ks.flush().unwrap();
    clock.set(T0 + 5);
    for i in 0..300 {
        ks.put(format!("new{i:03}"), format!("value {i}")).unwrap();
    }
    // An overwrite that expires later, of a key whose first version expires first.
    ks.put("old007", "again").unwrap();
    ks.flush().unwrap();
    assert_eq!(ks.approximate_len(), 801);
    clock.set(T0 + 10);
    ks.compact().unwrap();
    // The 499 expired values are gone, tombstones and all (nothing lies below them).
    assert_eq!(ks.approximate_len(), 301);
    assert_eq!(ks.statistics().ticker(Ticker::CompactionFilterRemoved), 500);
    assert_eq!(ks.get("old007").unwrap(), Some(b"again".to_vec()));
    assert_eq!(ks.iter().count(), 301);
    let before = ks.disk_space().unwrap();
    clock.set(T0 + 15);
    ks.put("late", "l").unwrap();
    ks.compact().unwrap();
    assert_eq!(
        ks.iter().map(|kv| kv.unwrap().0).collect::<Vec<_>>(),
        [b"late".to_vec()]
    );
    assert_eq!(ks.approximate_len(), 1);
    assert!(ks.disk_space().unwrap() < before);
    assert_eq!(tables_per_level(&ks).iter().sum::<usize>(), 1);
}

#[test]
fn expired_versions_under_a_snapshot_read_as_deleted_and_compact_away() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(T0);
    let db = Db::open(dir.path(), store_options(&clock)).unwrap();
    let ks = ttl_keyspace(&db);
    ks.put("k1", "first").unwrap();
    let snapshot = ks.snapshot();
    clock.set(T0 + 6);
    ks.put("k1", "second").unwrap();
    clock.set(T0 + 12);
    ks.compact().unwrap();
    // The snapshot's version expired: it reads as deleted, before and after the compaction
    // turned it into a tombstone.
    assert_eq!(ks.get_at(&snapshot, "k1").unwrap(), None);
    assert_eq!(ks.get("k1").unwrap(), Some(b"second".to_vec()));
    clock.set(T0 + 16);
    assert_eq!(ks.get("k1").unwrap(), None);
    drop(snapshot);
    ks.put("k2", "x").unwrap();
    ks.compact().unwrap();
    assert_eq!(ks.approximate_len(), 1);
}

#[test]
fn write_times_survive_flush_reopen_and_wal_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(T0);
    {
        let db = Db::open(dir.path(), store_options(&clock)).unwrap();
        let ks = ttl_keyspace(&db);
        ks.put("k1", "in a table").unwrap();
        ks.flush().unwrap();
        clock.set(T0 + 3);
        ks.put("k2", "in the WAL").unwrap();
        // Closed without a flush: k2 is only in the WAL.
    }
    clock.set(T0 + 9);
    {
        // Reopened without saying so, the keyspace has its TTL.
        let db = Db::open(dir.path(), store_options(&clock)).unwrap();
        let ks = db.keyspace("expiring").unwrap();
        let both = model(&[("k1", "in a table"), ("k2", "in the WAL")]);
        check_reads(&ks, None, &KEYS, &both, "reopened");
        clock.set(T0 + 10);
        check_reads(
            &ks,
            None,
            &KEYS,
            &model(&[("k2", "in the WAL")]),
            "reopened, k1 expired",
        );
    }
    // Read-only, the WAL replayed into memory keeps the write time too.
    clock.set(T0 + 12);
    {
        let db = Db::open_read_only(dir.path(), store_options(&clock)).unwrap();
        let ks = db.keyspace("expiring").unwrap();
        assert_eq!(ks.get("k2").unwrap(), Some(b"in the WAL".to_vec()));
        clock.set(T0 + 13);
        assert_eq!(ks.get("k2").unwrap(), None);
    }
    let db = Db::open(dir.path(), store_options(&clock)).unwrap();
    let ks = db.keyspace("expiring").unwrap();
    assert_eq!(ks.iter().count(), 0);
    ks.compact().unwrap();
    assert_eq!(ks.approximate_len(), 0);
}

#[test]
fn batches_and_transactions_are_stamped_when_they_commit() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(T0);
    let db = Db::open(dir.path(), store_options(&clock)).unwrap();
    let ks = ttl_keyspace(&db);
    let plain = db.keyspace("plain").unwrap();
    let mut tx = db.transaction();
    tx.put_in(&ks, "tx", "from a transaction").unwrap();
    tx.put_in(&plain, "tx", "no ttl here").unwrap();
    clock.set(T0 + 3);
    tx.commit().unwrap();
    let mut batch = WriteBatch::new();
    batch
        .put_in(&ks, "batch", "from a batch")
        .put("default", "no ttl either")
        .delete_in(&ks, "nothing");
    db.write(batch).unwrap();
    clock.set(T0 + 12);
    assert_eq!(ks.get("tx").unwrap(), Some(b"from a transaction".to_vec()));
    assert_eq!(ks.get("batch").unwrap(), Some(b"from a batch".to_vec()));
    clock.set(T0 + 13);
    assert_eq!(ks.get("tx").unwrap(), None);
    assert_eq!(ks.get("batch").unwrap(), None);
    // Keyspaces without a TTL store values as written, and never expire them.
    clock.set(T0 + 1_000_000);
    assert_eq!(plain.get("tx").unwrap(), Some(b"no ttl here".to_vec()));
    assert_eq!(db.get("default").unwrap(), Some(b"no ttl either".to_vec()));
    plain.compact().unwrap();
    assert_eq!(plain.get("tx").unwrap(), Some(b"no ttl here".to_vec()));
}

#[test]
fn a_ttl_is_fixed_when_its_keyspace_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(T0);
    let e = Db::open(dir.path(), store_options(&clock).ttl(TTL))
        .err()
        .unwrap();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("ttl")),
        "{e}"
    );
    assert!(
        common::file_names(dir.path()).is_empty(),
        "refused before creating anything"
    );
    let e = Db::open(dir.path(), store_options(&clock).ttl(Duration::ZERO))
        .err()
        .unwrap();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let db = Db::open(dir.path(), store_options(&clock)).unwrap();
    let e = db
        .keyspace_with("zero", Options::default().ttl(Duration::ZERO))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    ttl_keyspace(&db).put("k", "v").unwrap();
    db.keyspace("plain").unwrap().put("k", "v").unwrap();
    for other in [
        Options::default(),
        Options::default().ttl(Duration::from_secs(11)),
    ] {
        let e = db.keyspace_with("expiring", other).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("expiring")),
            "{e}"
        );
    }
    let e = db
        .keyspace_with("plain", Options::default().ttl(TTL))
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("plain")),
        "{e}"
    );
    // A fraction of a second counts as a whole one.
    assert!(db
        .keyspace_with(
            "expiring",
            Options::default().ttl(Duration::from_millis(9_500))
        )
        .is_ok());
    drop(db);
    let db = Db::open(dir.path(), store_options(&clock)).unwrap();
    assert!(db
        .keyspace_with("expiring", Options::default().ttl(TTL))
        .is_ok());
    assert!(db.keyspace_with("plain", Options::default()).is_ok());
    clock.set(T0 + 10);
    assert_eq!(db.keyspace("expiring").unwrap().get("k").unwrap(), None);
    assert_eq!(
        db.keyspace("plain").unwrap().get("k").unwrap(),
        Some(b"v".to_vec())
    );
}

/// Appends `!` to every value, and remembers the values it was shown.
struct Exclaim(std::sync::Mutex<Vec<Vec<u8>>>);

impl CompactionFilter for Exclaim {
    fn name(&self) -> &str {
        "test.Exclaim"
    }

    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> CompactionDecision {
        self.0.lock().unwrap().push(value.to_vec());
        let mut v = value.to_vec();
        v.push(b'!');
        CompactionDecision::ChangeValue(v)
    }
}

#[test]
fn a_compaction_filter_sees_values_without_their_write_time_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(T0);
    let exclaim = Arc::new(Exclaim(std::sync::Mutex::new(Vec::new())));
    let db = Db::open(dir.path(), store_options(&clock)).unwrap();
    let ks = db
        .keyspace_with(
            "expiring",
            Options::default()
                .ttl(TTL)
                .compaction_filter(exclaim.clone()),
        )
        .unwrap();
    ks.put("k1", "hello").unwrap();
    clock.set(T0 + 5);
    ks.put("k2", "expires later").unwrap();
    clock.set(T0 + 10);
    ks.compact().unwrap();
    // k1 expired: removed without being shown; k2 was shown as written.
    assert_eq!(*exclaim.0.lock().unwrap(), [b"expires later".to_vec()]);
    assert_eq!(ks.get("k1").unwrap(), None);
    assert_eq!(ks.get("k2").unwrap(), Some(b"expires later!".to_vec()));
    // The changed value kept its write time.
    clock.set(T0 + 15);
    assert_eq!(ks.get("k2").unwrap(), None);
}

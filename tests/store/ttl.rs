//! Times to live (`Options::ttl`, `put_with_ttl`), on a clock moved by hand: entries visible
//! before they expire and invisible to every read path from then on; removed by compaction;
//! their expiry kept through flushes, reopen, WAL recovery and power cuts, and stamped at commit;
//! a TTL of their own beside the keyspace's; TTLs on any keyspace, changed by `set_options` and
//! kept across reopen; a compaction filter in such a keyspace.

use crate::common;
use common::scratch;
use common::{tables_per_level, ManualClock};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use siftdb::{
    CompactionDecision, CompactionFilter, Db, Error, Keyspace, Options, Snapshot, Ticker,
    WriteBatch,
};

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
    let dir = scratch();
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
    let dir = scratch();
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
    let dir = scratch();
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
fn expiry_times_survive_flush_reopen_and_wal_recovery() {
    let dir = scratch();
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
    // Read-only, the WAL replayed into memory keeps the expiry time too.
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
    let dir = scratch();
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
fn any_keyspace_takes_a_ttl_and_another_one_is_named_when_asked_for() {
    let dir = scratch();
    let clock = ManualClock::at(T0);
    let e = Db::open(dir.path(), store_options(&clock).ttl(Duration::ZERO))
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
    // The default keyspace takes one from `Db::open`: its plain puts expire.
    let db = Db::open(dir.path(), store_options(&clock).ttl(TTL)).unwrap();
    db.put("k", "v").unwrap();
    db.put_with_ttl("own", "v", Duration::from_secs(100))
        .unwrap();
    clock.set(T0 + 9);
    assert_eq!(db.get("k").unwrap(), Some(b"v".to_vec()));
    clock.set(T0 + 10);
    assert_eq!(db.get("k").unwrap(), None);
    assert_eq!(db.get("own").unwrap(), Some(b"v".to_vec()));
    let e = db
        .keyspace_with("zero", Options::default().ttl(Duration::ZERO))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    ttl_keyspace(&db).put("k", "v").unwrap();
    db.keyspace_with("plain", Options::default())
        .unwrap()
        .put("k", "v")
        .unwrap();
    // Another TTL, or none, is named in the error, with the keyspace.
    for (name, other) in [
        ("expiring", Options::default()),
        ("expiring", Options::default().ttl(Duration::from_secs(11))),
        ("plain", Options::default().ttl(TTL)),
    ] {
        let e = db.keyspace_with(name, other).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains(name) && m.contains(": ttl")),
            "{e}"
        );
    }
    let e = db
        .keyspace_with("expiring", Options::default().ttl(TTL).block_size(8192))
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains(": block_size (")),
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
    // Reopened without a TTL, the default keyspace's new puts keep; the old ones keep their
    // expiry time.
    let db = Db::open(dir.path(), store_options(&clock)).unwrap();
    db.put("k", "again").unwrap();
    assert!(db
        .keyspace_with("expiring", Options::default().ttl(TTL))
        .is_ok());
    assert!(db.keyspace_with("plain", Options::default()).is_ok());
    clock.set(T0 + 20);
    assert_eq!(db.keyspace("expiring").unwrap().get("k").unwrap(), None);
    assert_eq!(
        db.keyspace("plain").unwrap().get("k").unwrap(),
        Some(b"v".to_vec())
    );
    assert_eq!(db.get("k").unwrap(), Some(b"again".to_vec()));
    clock.set(T0 + 100);
    assert_eq!(db.get("own").unwrap(), None);
}

/// Every read path of `ks` at each time of `timeline`: the entries of `written` (key, value,
/// second it expires at, if it does) that have not expired by then.
fn check_timeline(
    ks: &Keyspace,
    clock: &ManualClock,
    written: &[(&str, &str, Option<u64>)],
    stage: &str,
) {
    for at in [
        T0,
        T0 + 2,
        T0 + 3,
        T0 + 5,
        T0 + 9,
        T0 + 10,
        T0 + 49,
        T0 + 50,
        T0 + 100,
    ] {
        clock.set(at);
        let live: Vec<(&str, &str)> = written
            .iter()
            .filter(|(_, _, expiry)| expiry.is_none_or(|e| at < e))
            .map(|(k, v, _)| (*k, *v))
            .collect();
        let keys: Vec<&str> = written
            .iter()
            .map(|(k, _, _)| *k)
            .chain(["absent"])
            .collect();
        check_reads(
            ks,
            None,
            &keys,
            &model(&live),
            &format!("{stage}, T0 + {}", at - T0),
        );
    }
    clock.set(T0);
}

#[test]
fn entries_with_a_ttl_of_their_own_expire_beside_the_keyspace_ttl_on_every_read_path() {
    let dir = scratch();
    let clock = ManualClock::at(T0);
    let mut db = Db::open(dir.path(), store_options(&clock)).unwrap();
    let ks = ttl_keyspace(&db);
    let own = |s| Duration::from_secs(s);
    // Through every write path, all at T0.
    ks.put("k1", "the keyspace's ttl").unwrap();
    ks.put_with_ttl("k2", "three seconds", own(3)).unwrap();
    ks.put_with_ttl("k3", "a hundred", own(100)).unwrap();
    let mut batch = WriteBatch::new();
    batch.put_with_ttl("k4", "five, from a batch", own(5));
    ks.write(batch).unwrap();
    let mut batch = WriteBatch::new();
    batch.put_with_ttl_in(&ks, "k5", "fifty, named", own(50));
    db.write(batch).unwrap();
    let mut tx = ks.transaction();
    tx.put_with_ttl("x", "fifty, from a transaction", own(50))
        .unwrap();
    tx.put("z", "a transaction's plain put").unwrap();
    tx.commit().unwrap();
    // An older version with a long TTL under a newer one with a short TTL: once the newer one
    // expires, the key is absent.
    ks.put_with_ttl("a", "old, long", own(1000)).unwrap();
    ks.put_with_ttl("a", "new, short", own(2)).unwrap();
    // The default keyspace has no TTL: its plain puts never expire.
    db.put("d1", "forever").unwrap();
    db.put_with_ttl("d2", "ten", own(10)).unwrap();
    let written = [
        ("a", "new, short", Some(T0 + 2)),
        ("k1", "the keyspace's ttl", Some(T0 + 10)),
        ("k2", "three seconds", Some(T0 + 3)),
        ("k3", "a hundred", Some(T0 + 100)),
        ("k4", "five, from a batch", Some(T0 + 5)),
        ("k5", "fifty, named", Some(T0 + 50)),
        ("x", "fifty, from a transaction", Some(T0 + 50)),
        ("z", "a transaction's plain put", Some(T0 + 10)),
    ];
    let default_written = [("d1", "forever", None), ("d2", "ten", Some(T0 + 10))];
    let check = |db: &Db, stage: &str| {
        check_timeline(&db.keyspace("expiring").unwrap(), &clock, &written, stage);
        check_timeline(&db.default_keyspace(), &clock, &default_written, stage);
    };
    check(&db, "memtable");
    drop((ks, db));
    db = Db::open(dir.path(), store_options(&clock)).unwrap();
    check(&db, "recovered from the WAL");
    db.keyspace("expiring").unwrap().flush().unwrap();
    db.flush().unwrap();
    check(&db, "flushed");
    db.keyspace("expiring").unwrap().compact().unwrap();
    db.compact().unwrap();
    check(&db, "compacted before expiry");
    drop(db);
    db = Db::open(dir.path(), store_options(&clock)).unwrap();
    check(&db, "reopened");
    // A snapshot sees expiry as a read does.
    let ks = db.keyspace("expiring").unwrap();
    let snapshot = ks.snapshot();
    clock.set(T0 + 50);
    let left = model(&[("k3", "a hundred")]);
    check_reads(&ks, Some(&snapshot), &["a", "k3", "x"], &left, "snapshot");
    drop(snapshot);
    // Compaction removes what expired, in either keyspace.
    ks.compact().unwrap();
    assert_eq!(ks.approximate_len(), 1);
    clock.set(T0 + 100);
    ks.compact().unwrap();
    db.compact().unwrap();
    assert_eq!(ks.approximate_len(), 0);
    assert_eq!(db.approximate_len(), 1);
    assert_eq!(db.get("d1").unwrap(), Some(b"forever".to_vec()));
}

#[test]
fn set_options_survives_a_reopen() {
    let dir = scratch();
    let clock = ManualClock::at(T0);
    let exclaim = Arc::new(Exclaim(std::sync::Mutex::new(Vec::new())));
    let opts = || store_options(&clock).register_compaction_filter(exclaim.clone());
    let changed = || {
        Options::default()
            .ttl(TTL)
            .compaction_filter(exclaim.clone())
            .block_size(8192)
    };
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        let ks = db.keyspace("sessions").unwrap();
        ks.put("before", "no ttl").unwrap();
        ks.set_options(changed()).unwrap();
        ks.put("after", "the new ttl").unwrap();
        clock.set(T0 + 10);
        assert_eq!(ks.get("after").unwrap(), None);
        // An entry keeps the expiry it was written with: none.
        assert_eq!(ks.get("before").unwrap(), Some(b"no ttl".to_vec()));
        // What cannot change is refused, and named.
        let e = ks
            .set_options(changed().prefix_extractor(siftdb::PrefixExtractor::fixed(4)))
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("prefix_extractor")),
            "{e}"
        );
        // The default keyspace's change lasts until the store closes.
        db.default_keyspace()
            .set_options(Options::default().ttl(TTL))
            .unwrap();
        db.put("default", "expires").unwrap();
    }
    clock.set(T0 + 20);
    let db = Db::open(dir.path(), opts()).unwrap();
    assert!(db.keyspace_with("sessions", changed()).is_ok());
    let e = db
        .keyspace_with("sessions", Options::default())
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m)
            if m.contains("block_size, compaction_filter, ttl")),
        "{e}"
    );
    let ks = db.keyspace("sessions").unwrap();
    ks.put("reopened", "the recorded ttl").unwrap();
    db.put("default", "no ttl now").unwrap();
    clock.set(T0 + 29);
    assert_eq!(
        ks.get("reopened").unwrap(),
        Some(b"the recorded ttl".to_vec())
    );
    clock.set(T0 + 30);
    assert_eq!(ks.get("reopened").unwrap(), None);
    assert_eq!(db.get("default").unwrap(), Some(b"no ttl now".to_vec()));
    // The recorded compaction filter rewrites what it is shown.
    ks.compact().unwrap();
    assert_eq!(ks.get("before").unwrap(), Some(b"no ttl!".to_vec()));
    assert_eq!(*exclaim.0.lock().unwrap(), [b"no ttl".to_vec()]);
    // And back: no TTL, no filter.
    ks.set_options(Options::default()).unwrap();
    drop((ks, db));
    let db = Db::open(dir.path(), opts()).unwrap();
    assert!(db.keyspace_with("sessions", Options::default()).is_ok());
}

/// Entries written with a TTL of their own, and plain ones in a keyspace with a TTL, through
/// power cuts (every file keeps its fsynced bytes and some of the rest) in flushes, compactions
/// and WAL writes: every synced entry survives, and every entry that survives, synced or not,
/// expires when it was written to.
#[test]
fn times_to_live_survive_power_cuts() {
    use rand::{Rng, SeedableRng};
    use siftdb::fault_injection::{FaultInjector, PowerCut};
    let cuts = if common::long() { 400 } else { 25 };
    let root = scratch();
    let dir = root.path().join("store");
    let faults = FaultInjector::new(&dir).unwrap();
    let clock = ManualClock::at(T0);
    let opts = || {
        common::power_cuts::tiny_options()
            .clock(clock.clone())
            .fault_injector(faults.clone())
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x77_1e);
    // Each entry: key, value, expiry (seconds after T0), and whether it was synced.
    let mut entries: Vec<(String, String, u64, bool)> = Vec::new();
    let expiry_of = |i: usize| [2u64, 5, 50][i % 3];
    for cut in 0..cuts {
        clock.set(T0);
        let db = Db::open(&dir, opts()).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        let ks = db
            .keyspace_with(
                "sessions",
                common::power_cuts::tiny_options().ttl(Duration::from_secs(5)),
            )
            .unwrap();
        faults.cut_after(rng.gen_range(0..200), Box::new(|_| true));
        let first = entries.len();
        for i in 0.. {
            let (key, value) = (format!("c{cut:03}-{i:04}"), format!("v{i}"));
            let written = match expiry_of(i) {
                5 => ks.put(&key, &value),
                secs => ks.put_with_ttl(&key, &value, Duration::from_secs(secs)),
            };
            if written.is_err() {
                break;
            }
            entries.push((key, value, expiry_of(i), false));
            if i % 16 == 15 {
                if ks.sync_wal().is_err() {
                    break;
                }
                for e in &mut entries[first..] {
                    e.3 = true;
                }
            }
        }
        drop((ks, db));
        faults.power_cut(PowerCut::random(rng.r#gen())).unwrap();
        let db = Db::open(&dir, opts()).unwrap_or_else(|e| panic!("cut {cut}: reopen: {e}"));
        let ks = db.keyspace("sessions").unwrap();
        for at in [1, 2, 5, 50] {
            clock.set(T0 + at);
            for (key, value, expiry, synced) in &entries {
                let got = ks.get(key).unwrap();
                if at >= *expiry {
                    assert_eq!(got, None, "cut {cut}: {key} at T0 + {at}");
                } else if *synced {
                    assert_eq!(got.as_deref(), Some(value.as_bytes()), "cut {cut}: {key}");
                } else if let Some(got) = got {
                    assert_eq!(got, value.as_bytes(), "cut {cut}: {key}");
                }
            }
        }
        // What was lost stays lost: the next life's entries start afresh.
        clock.set(T0 + 1);
        entries.retain(|(k, ..)| ks.get(k).unwrap().is_some());
        for e in &mut entries {
            e.3 = true;
        }
        drop((ks, db));
    }
    // Lives that wrote, synced and lost entries: not asserted, only shown.
    println!("{cuts} power cuts; {} entries survive", entries.len());
    assert!(!entries.is_empty(), "the lives wrote entries that survived");
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
fn a_compaction_filter_sees_values_without_their_expiry_time_and_keeps_it() {
    let dir = scratch();
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
    // The changed value kept its expiry time.
    clock.set(T0 + 15);
    assert_eq!(ks.get("k2").unwrap(), None);
}

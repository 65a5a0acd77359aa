//! Compaction filters (`Options::compaction_filter`): what compaction keeps, removes and changes
//! as a filter decides; what snapshots keep seeing; that a removed value does not bring back an
//! older version from a deeper level; a panicking filter; a keyspace's filter found again on
//! reopen.

mod common;
use common::{settle, tables_per_level};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use siftdb::{CompactionDecision, CompactionFilter, Db, Error, GetSource, Options, Ticker};

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
    let dir = tempfile::tempdir().unwrap();
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
    let dir = tempfile::tempdir().unwrap();
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
    let dir = tempfile::tempdir().unwrap();
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
    let dir = tempfile::tempdir().unwrap();
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
    let dir = tempfile::tempdir().unwrap();
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

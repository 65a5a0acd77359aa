//! What the store checks when it opens a directory, and how it survives failures of user code on
//! its background threads.
//!
//! - A directory that holds a store's MANIFEST, tables or WALs but no `CURRENT` is a damaged
//!   store, not an empty one: open refuses it with `Error::Corruption` naming `CURRENT` and leaves
//!   every file as it was, so restoring `CURRENT` brings every key back.
//! - `create_if_missing(false)` refuses an empty or missing directory and creates nothing there.
//! - A table copied in from another store under the name of one of this store's tables is never
//!   read as this store's data: open or the read fails with `Error::Corruption` naming the table,
//!   or the read returns this store's own value.
//! - A panic in a user-supplied filter policy or prefix extractor during a flush or compaction
//!   becomes an error of that call (never a hang, never a panic in the caller's thread); the store
//!   then refuses writes, and a reopen recovers every acknowledged write.
//! - Options that cannot work (an L0 compaction trigger no table count can reach, sizes past their
//!   bounds, a filter's bits per key that is not a number) are refused at open with
//!   `Error::InvalidArgument`, and building them does not panic; absurdly many subcompactions are
//!   clamped, and a compaction under them finishes.
//! - An empty path is refused with `Error::InvalidArgument` before anything is created.
//! - A stray file numbered past the largest file number a store allocates is refused with
//!   `Error::Corruption` naming it, and nothing is written or removed; without it the store opens
//!   again, with every key.
//!
//! Calls that could hang run under a watchdog that turns a hang into a test failure.

use crate::common;
use common::scratch;
use common::{key, names_with_ext};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use siftdb::{
    Compression, Db, Error, Filter, FilterBitsBuilder, FilterLayout, FilterPolicy, Options,
    PrefixExtractor, SliceTransform,
};

/// Runs `f` on its own thread and returns its result; panics if it takes over 20 s ("hung") or
/// panics itself.
fn watchdog<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(outcome);
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => panic!(
            "{what} panicked in the caller's thread instead of returning an error: {}",
            panic_message(payload.as_ref())
        ),
        Err(_) => panic!("{what} hung: no answer within 20 s"),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

/// A value of `len` bytes that starts with `tag` (the store it belongs to) and is otherwise the
/// same for every store.
fn value(tag: u8, i: usize, len: usize) -> Vec<u8> {
    let mut v = vec![tag];
    v.extend((1..len).map(|j| b'a' + ((i * 31 + j) % 26) as u8));
    v
}

/// Puts keys `range` with their standard values.
fn put_keys(db: &Db, range: std::ops::Range<usize>) {
    for i in range {
        db.put(key(i), value(b'v', i, 40)).unwrap();
    }
}

/// Every key of `range` reads back with its standard value.
fn check_keys(db: &Db, range: std::ops::Range<usize>) {
    for i in range {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(b'v', i, 40)), "key {i}");
    }
}

/// Every file in `dir` but `LOCK`, by name, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name() != "LOCK")
        .map(|e| {
            let name = e.file_name().into_string().unwrap();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// How `after` differs from `before`, in words; empty if they are the same.
fn differences(before: &BTreeMap<String, Vec<u8>>, after: &BTreeMap<String, Vec<u8>>) -> String {
    let mut out = Vec::new();
    for (name, bytes) in before {
        match after.get(name) {
            None => out.push(format!("{name} deleted")),
            Some(b) if b != bytes => out.push(format!("{name} rewritten")),
            Some(_) => {}
        }
    }
    for name in after.keys().filter(|n| !before.contains_key(*n)) {
        out.push(format!("{name} created"));
    }
    out.join(", ")
}

fn describe<T>(r: &Result<T, Error>) -> String {
    match r {
        Ok(_) => "Ok(..)".to_string(),
        Err(e) => format!("Err({e:?})"),
    }
}

/// Opening a directory with a MANIFEST, a table and a WAL but no CURRENT fails with
/// `Error::Corruption` naming CURRENT, with and without `create_if_missing`, and deletes or
/// rewrites no file; once CURRENT is back, every key is there.
#[test]
fn missing_current_with_tables_is_corruption_and_deletes_nothing() {
    let dir = scratch();
    let path = dir.path();
    {
        let db = Db::open(path, Options::default()).unwrap();
        put_keys(&db, 0..500);
        db.flush().unwrap();
        put_keys(&db, 500..505);
    }
    let current = path.join("CURRENT");
    let current_bytes = std::fs::read(&current).unwrap();
    std::fs::remove_file(&current).unwrap();
    let before = snapshot(path);
    assert!(before.keys().any(|n| n.ends_with(".sst")), "{before:?}");
    assert!(before.keys().any(|n| n.starts_with("MANIFEST-")));
    assert!(
        before
            .iter()
            .any(|(n, b)| n.ends_with(".log") && !b.is_empty()),
        "a WAL should hold the unflushed writes"
    );

    for (label, options) in [
        ("default options", Options::default()),
        (
            "create_if_missing(false)",
            Options::default().create_if_missing(false),
        ),
    ] {
        let opened = Db::open(path, options);
        let outcome = describe(&opened);
        let refused = matches!(&opened, Err(Error::Corruption { file, .. }) if *file == current);
        drop(opened);
        let changed = differences(&before, &snapshot(path));
        assert!(
            refused && changed.is_empty(),
            "open ({label}) of a store without CURRENT must fail with Corruption naming {} and \
             leave every file alone; it returned {outcome}, files changed: [{changed}]",
            current.display()
        );
    }

    std::fs::write(&current, &current_bytes).unwrap();
    let db = Db::open(path, Options::default()).unwrap();
    check_keys(&db, 0..505);
}

/// `create_if_missing(false)` on an existing empty directory fails with `InvalidArgument` and
/// leaves no CURRENT, MANIFEST, WAL or table behind.
#[test]
fn create_if_missing_false_refuses_an_empty_directory_and_creates_no_store() {
    let dir = scratch();
    let opened = Db::open(dir.path(), Options::default().create_if_missing(false));
    let outcome = describe(&opened);
    drop(opened);
    let left: Vec<String> = snapshot(dir.path()).into_keys().collect();
    assert!(
        outcome.starts_with("Err(InvalidArgument"),
        "open of an empty directory with create_if_missing(false) must be InvalidArgument, \
         got {outcome}; the directory now holds {left:?}"
    );
    assert!(
        !left
            .iter()
            .any(|n| n == "CURRENT" || n.starts_with("MANIFEST-") || n.ends_with(".log")),
        "a refused open created store files: {left:?}"
    );
}

/// `create_if_missing(false)` on a directory that does not exist fails with `InvalidArgument`
/// and does not create it.
#[test]
fn create_if_missing_false_refuses_a_missing_directory() {
    let dir = scratch();
    let absent = dir.path().join("absent");
    let opened = Db::open(&absent, Options::default().create_if_missing(false));
    assert!(
        matches!(opened, Err(Error::InvalidArgument(_))),
        "got {}",
        describe(&opened)
    );
    assert!(!absent.exists());
}

/// Builds a store in `dir` holding `count` keys whose values start with `tag`, flushed into one
/// table, with nothing left in the WAL.
fn build_store(dir: &Path, tag: u8, count: usize, value_len: usize) {
    let db = Db::open(dir, Options::default().compression(Compression::None)).unwrap();
    for i in 0..count {
        db.put(key(i), value(tag, i, value_len)).unwrap();
    }
    db.flush().unwrap();
}

/// Copies B's only table over A's table of the same name and returns its path in A.
fn swap_in_foreign_table(a: &Path, b: &Path) -> PathBuf {
    let a_tables = names_with_ext(a, "sst");
    let b_tables = names_with_ext(b, "sst");
    assert_eq!(
        a_tables.len(),
        1,
        "store A should hold one table: {a_tables:?}"
    );
    assert_eq!(
        a_tables, b_tables,
        "both stores should name their table alike"
    );
    let name = a_tables.into_iter().next().unwrap();
    let target = a.join(&name);
    std::fs::copy(b.join(&name), &target).unwrap();
    target
}

/// Reads every key of A (values tagged `A`) from a store whose table `table` was replaced by
/// another store's; returns the problems found, in words.
fn check_reads_of_a(a: &Path, table: &Path, count: usize, value_len: usize) -> Vec<String> {
    let db = match Db::open(a, Options::default().compression(Compression::None)) {
        Ok(db) => db,
        Err(Error::Corruption { file, .. }) if file == table => return Vec::new(),
        Err(e) => return vec![format!("open failed with another error: {e:?}")],
    };
    let (mut foreign, mut missing, mut other) = (0, 0, Vec::new());
    for i in 0..count {
        match db.get(key(i)) {
            Ok(Some(v)) if v == value(b'A', i, value_len) => {}
            Ok(Some(v)) if v.first() == Some(&b'B') => foreign += 1,
            Ok(None) => missing += 1,
            Err(Error::Corruption { file, .. }) if file == table => {}
            r => other.push(format!("key {i}: {}", describe(&r))),
        }
    }
    let mut problems = Vec::new();
    if foreign > 0 {
        problems.push(format!(
            "{foreign} of {count} gets returned the other store's value"
        ));
    }
    if missing > 0 {
        problems.push(format!("{missing} of {count} gets returned None"));
    }
    problems.extend(other.into_iter().take(5));
    for item in db.iter() {
        match item {
            Ok((k, v)) => {
                let own = (0..count).find(|&i| key(i) == k);
                match own {
                    Some(i) if v == value(b'A', i, value_len) => {}
                    Some(_) => {
                        problems.push(format!(
                            "scan returned the other store's value for {}",
                            String::from_utf8_lossy(&k)
                        ));
                        break;
                    }
                    None => {
                        problems.push(format!(
                            "scan returned {}, a key this store never wrote",
                            String::from_utf8_lossy(&k)
                        ));
                        break;
                    }
                }
            }
            Err(Error::Corruption { file, .. }) if file == table => break,
            Err(e) => {
                problems.push(format!("scan failed with another error: {e:?}"));
                break;
            }
        }
    }
    problems
}

/// A table of another store copied over this store's table of the same number and size is
/// refused (Corruption naming it, at open or read) or read as this store's data; never does a
/// get return the other store's value or lose a key.
#[test]
fn foreign_table_of_same_name_and_size_is_never_read_as_own_data() {
    let (a, b) = (scratch(), scratch());
    build_store(a.path(), b'A', 500, 100);
    build_store(b.path(), b'B', 500, 100);
    let name = names_with_ext(a.path(), "sst").into_iter().next().unwrap();
    let (len_a, len_b) = (
        std::fs::metadata(a.path().join(&name)).unwrap().len(),
        std::fs::metadata(b.path().join(&name)).unwrap().len(),
    );
    assert_eq!(len_a, len_b, "the two tables should be the same size");
    let table = swap_in_foreign_table(a.path(), b.path());
    let problems = check_reads_of_a(a.path(), &table, 500, 100);
    assert!(
        problems.is_empty(),
        "{} from another store was read as this store's: {}",
        table.display(),
        problems.join("; ")
    );
}

/// As above with a foreign table of another size holding more keys: no get returns the other
/// store's value and no scan returns a key this store never wrote.
#[test]
fn foreign_table_of_other_size_is_never_read_as_own_data() {
    let (a, b) = (scratch(), scratch());
    build_store(a.path(), b'A', 500, 100);
    build_store(b.path(), b'B', 700, 160);
    let table = swap_in_foreign_table(a.path(), b.path());
    let problems = check_reads_of_a(a.path(), &table, 500, 100);
    assert!(
        problems.is_empty(),
        "{} from another store was read as this store's: {}",
        table.display(),
        problems.join("; ")
    );
}

/// A filter policy whose builder panics in `finish` while `armed` is set; its filters say
/// "maybe" to every key.
struct PanicsOnFinish {
    armed: Arc<AtomicBool>,
}

struct PanicsOnFinishBuilder {
    armed: Arc<AtomicBool>,
    keys: usize,
}

impl FilterBitsBuilder for PanicsOnFinishBuilder {
    fn add_key(&mut self, _key: &[u8]) {
        self.keys += 1;
    }

    fn num_keys(&self) -> usize {
        self.keys
    }

    fn estimated_len(&self) -> usize {
        1
    }

    fn finish(&mut self) -> Vec<u8> {
        if self.armed.load(Ordering::SeqCst) {
            panic!("test filter policy: finish panics while armed");
        }
        self.keys = 0;
        vec![1]
    }
}

impl FilterPolicy for PanicsOnFinish {
    fn name(&self) -> &str {
        "test.PanicsOnFinish"
    }

    fn bits_per_key(&self) -> f64 {
        f64::NAN
    }

    fn builder(&self) -> Box<dyn FilterBitsBuilder> {
        Box::new(PanicsOnFinishBuilder {
            armed: Arc::clone(&self.armed),
            keys: 0,
        })
    }

    fn may_match(&self, _filter: &[u8], _key: &[u8]) -> bool {
        true
    }
}

/// A panic in a filter policy during a background flush makes `flush` return an error (not
/// hang) and later writes fail; after a reopen with a working policy every key written is there.
#[test]
fn filter_policy_panic_during_flush_fails_flush_and_writes_and_loses_nothing() {
    let dir = scratch();
    let armed = Arc::new(AtomicBool::new(false));
    let options = || {
        let policy = PanicsOnFinish {
            armed: Arc::clone(&armed),
        };
        Options::default().filter(Filter::new(FilterLayout::Full, Arc::new(policy)))
    };
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    put_keys(&db, 0..300);
    armed.store(true, Ordering::SeqCst);
    let flushed = watchdog("flush with a panicking filter policy", {
        let db = Arc::clone(&db);
        move || db.flush()
    });
    assert!(
        flushed.is_err(),
        "flush must fail when the filter policy panics"
    );
    let put = watchdog("put after a failed flush", {
        let db = Arc::clone(&db);
        move || db.put(b"after", b"failure")
    });
    assert!(
        put.is_err(),
        "writes must be refused after a background failure"
    );
    watchdog("drop after a failed flush", move || drop(db));

    armed.store(false, Ordering::SeqCst);
    let db = Db::open(dir.path(), options()).unwrap();
    check_keys(&db, 0..300);
}

/// A prefix extractor (three-byte prefixes) that panics in `in_domain` and `transform` while
/// `armed` is set.
struct PanicsWhenArmed {
    armed: Arc<AtomicBool>,
}

impl PanicsWhenArmed {
    fn check(&self) {
        if self.armed.load(Ordering::SeqCst) {
            panic!("test prefix extractor: panics while armed");
        }
    }
}

impl SliceTransform for PanicsWhenArmed {
    fn name(&self) -> &str {
        "test.PanicsWhenArmed"
    }

    fn in_domain(&self, key: &[u8]) -> bool {
        self.check();
        key.len() >= 3
    }

    fn transform<'a>(&self, key: &'a [u8]) -> &'a [u8] {
        self.check();
        &key[..3.min(key.len())]
    }
}

/// Writes two tables' worth of keys with a prefix extractor that then starts to panic, then
/// compacts (with `flush_last_batch`, the second batch is flushed before the panics start, so the
/// compaction itself meets them; else the flush inside `compact` does). `compact` must return an
/// error, neither hang nor panic; after a reopen with a working extractor every key is there.
fn prefix_extractor_panic_during_compact(flush_last_batch: bool) {
    let dir = scratch();
    let armed = Arc::new(AtomicBool::new(false));
    let options = || {
        let extractor = PanicsWhenArmed {
            armed: Arc::clone(&armed),
        };
        Options::default().prefix_extractor(PrefixExtractor::custom(Arc::new(extractor)))
    };
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    put_keys(&db, 0..300);
    db.flush().unwrap();
    put_keys(&db, 300..600);
    if flush_last_batch {
        db.flush().unwrap();
    }
    armed.store(true, Ordering::SeqCst);
    let compacted = watchdog("compact with a panicking prefix extractor", {
        let db = Arc::clone(&db);
        move || db.compact()
    });
    assert!(
        compacted.is_err(),
        "compact must fail when the prefix extractor panics"
    );
    watchdog("drop after a failed compaction", move || drop(db));

    armed.store(false, Ordering::SeqCst);
    let db = Db::open(dir.path(), options()).unwrap();
    check_keys(&db, 0..600);
}

/// A prefix extractor that panics while the flush inside `compact` builds a table: `compact`
/// returns an error, and a reopen loses no key.
#[test]
fn prefix_extractor_panic_during_flush_in_compact_fails_compact_and_loses_nothing() {
    prefix_extractor_panic_during_compact(false);
}

/// A prefix extractor that panics while `compact` merges tables on the caller's thread: `compact`
/// returns an error instead of panicking, and a reopen loses no key.
#[test]
fn prefix_extractor_panic_during_compaction_fails_compact_and_loses_nothing() {
    prefix_extractor_panic_during_compact(true);
}

/// An L0 compaction trigger of `usize::MAX` can be set without a panic and is refused by open
/// with `InvalidArgument` (were it accepted, writes under it must not hang); the directory then
/// opens with default options and takes writes.
#[test]
fn unreachable_level0_compaction_trigger_is_refused_at_open() {
    let dir = scratch();
    let path = dir.path().to_path_buf();
    let opened = watchdog(
        "building and opening with level0_compaction_trigger(usize::MAX)",
        {
            let path = path.clone();
            move || {
                let options = Options::default()
                    .write_buffer_size(4096)
                    .level0_compaction_trigger(usize::MAX);
                let db = Db::open(&path, options)?;
                // Accepted: enough L0 tables and full memtables to reach any stall.
                for round in 0..16 {
                    db.put(key(round), value(b'v', round, 40))?;
                    db.flush()?;
                }
                for i in 0..200 {
                    db.put(key(i), value(b'v', i, 100))?;
                }
                Ok::<_, Error>(())
            }
        },
    );
    assert!(
        matches!(opened, Err(Error::InvalidArgument(_))),
        "open with level0_compaction_trigger(usize::MAX) must be InvalidArgument, got {}",
        describe(&opened)
    );
    let value_back = watchdog("put and get with default options", move || {
        let db = Db::open(&path, Options::default())?;
        db.put(b"k", b"v")?;
        db.get(b"k")
    });
    assert_eq!(value_back.unwrap(), Some(b"v".to_vec()));
}

/// Options past their bounds are refused by open, naming the option, before anything is created;
/// values a caller can only mean as "as far as it goes" are clamped and work.
#[test]
fn absurd_options_are_refused_or_clamped_at_open() {
    let dir = scratch();
    let path = dir.path().join("db");
    let refused = [
        (
            "write_buffer_size",
            Options::default().write_buffer_size(usize::MAX),
        ),
        ("block_size", Options::default().block_size(usize::MAX)),
        (
            "target_file_size",
            Options::default().target_file_size(u64::MAX),
        ),
        (
            "max_bytes_for_level_base",
            Options::default().max_bytes_for_level_base(u64::MAX),
        ),
        (
            "block_cache_high_priority_share",
            Options::default().block_cache_high_priority_share(f64::NAN),
        ),
        (
            "block_cache_high_priority_share",
            Options::default().block_cache_high_priority_share(1.5),
        ),
        (
            "bits per key",
            Options::default().filter(Filter::full(f64::NAN)),
        ),
        (
            "bits per key",
            Options::default().filter(Filter::partitioned(-1.0)),
        ),
        (
            "bits per key",
            Options::default().filter(Filter::ribbon(f64::INFINITY)),
        ),
        (
            "bits per key",
            Options::default().filter(Filter::block_based(0.0)),
        ),
    ];
    for (name, options) in refused {
        match Db::open(&path, options) {
            Err(Error::InvalidArgument(why)) => assert!(why.contains(name), "{name}: {why}"),
            other => panic!("{name}: expected InvalidArgument, got {}", describe(&other)),
        }
        assert!(
            !path.exists(),
            "{name}: refused, yet the directory was created"
        );
    }
    // Clamped: a bloom asked for a billion bits per key gets its policy's most.
    let db = Db::open(&path, Options::default().filter(Filter::full(1e9))).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.get(b"absent").unwrap(), None);
}

/// `max_subcompactions(1 << 40)` counts as `MAX_SUBCOMPACTIONS`: a compaction large enough to
/// split finishes, every key survives it, and the store closes.
#[test]
fn absurdly_many_subcompactions_are_clamped_and_compaction_finishes() {
    let dir = scratch();
    let path = dir.path().to_path_buf();
    watchdog("compact() with max_subcompactions(1 << 40)", move || {
        let options = Options::default()
            .write_buffer_size(64 << 10)
            .target_file_size(16 << 10)
            .max_subcompactions(1 << 40);
        let db = Db::open(&path, options).unwrap();
        // Keys in a scattered order, so that the flushed tables overlap and compact by rewrite.
        for n in 0..4000 {
            let i = n * 7919 % 4000;
            db.put(key(i), value(b's', i, 100)).unwrap();
            if n % 1000 == 999 {
                db.flush().unwrap();
            }
        }
        db.compact().unwrap();
        for i in (0..4000).step_by(37) {
            assert_eq!(db.get(key(i)).unwrap(), Some(value(b's', i, 100)));
        }
        assert!(
            db.statistics().ticker(siftdb::Ticker::Subcompactions) >= 2,
            "the job was split"
        );
        db.close().unwrap();
    });
}

/// An empty path is refused before anything is created: no `LOCK` (or any file) appears in the
/// working directory, and the error says what was wrong.
#[test]
fn empty_path_is_refused_before_anything_is_created() {
    let before = common::file_names(Path::new("."));
    for (what, result) in [
        ("open", Db::open("", Options::default()).map(drop)),
        (
            "open_read_only",
            Db::open_read_only("", Options::default()).map(drop),
        ),
        ("destroy", Db::destroy("")),
    ] {
        match result {
            Err(Error::InvalidArgument(why)) => assert!(why.contains("empty"), "{what}: {why}"),
            other => panic!(
                "{what}(\"\"): expected InvalidArgument, got {}",
                describe(&other)
            ),
        }
    }
    assert_eq!(common::file_names(Path::new(".")), before);
}

/// A stray empty file numbered near `u64::MAX` (a table, a WAL or a MANIFEST) would wrap the
/// file-number counter: open refuses it with `Corruption` naming it and changes nothing; with it
/// moved away, the store opens with every key, and opens again after that.
#[test]
fn stray_file_numbered_past_the_counter_is_refused_and_changes_nothing() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    put_keys(&db, 0..300);
    db.flush().unwrap();
    put_keys(&db, 300..400); // in the WAL only
    db.close().unwrap();
    for name in [
        "18446744073709551614.sst",
        "18446744073709551615.log",
        "MANIFEST-18446744073709551614",
        "1152921504606846976.sst", // 2^60, the first number past the counter's range
    ] {
        let stray = dir.path().join(name);
        std::fs::write(&stray, b"").unwrap();
        let before = snapshot(dir.path());
        for read_only in [false, true] {
            let opened = if read_only {
                Db::open_read_only(dir.path(), Options::default())
            } else {
                Db::open(dir.path(), Options::default())
            };
            match opened {
                Err(Error::Corruption { file, what }) => {
                    assert_eq!(file, stray, "{what}");
                    assert!(what.contains("beyond"), "{what}");
                }
                other => panic!("{name}: expected Corruption, got {}", describe(&other)),
            }
            let after = snapshot(dir.path());
            assert!(before == after, "{name}: {}", differences(&before, &after));
        }
        std::fs::remove_file(&stray).unwrap();
        for _ in 0..2 {
            let db = Db::open(dir.path(), Options::default()).unwrap();
            check_keys(&db, 0..400);
            db.close().unwrap();
        }
    }
}

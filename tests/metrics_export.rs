//! `Db::export_metrics` (feature `metrics`): every counter reaches the recorder under its stable
//! name and labels, with the value the store's own statistics give, and the gauges tell the
//! tables, the cache and the limiter as they are. A recorder of the test's own captures what the
//! facade is handed.
#![cfg(feature = "metrics")]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder, SharedString,
    Unit,
};
use siftdb::{Cache, Db, FilterLayout, Options, RateLimiter, Ticker, NUM_LEVELS};

/// A figure's name and labels (sorted).
type Id = (String, Vec<(String, String)>);

/// What the recorder was handed: the last value of each counter and gauge.
#[derive(Default)]
struct Captured {
    counters: Mutex<BTreeMap<Id, u64>>,
    gauges: Mutex<BTreeMap<Id, f64>>,
}

fn id(key: &Key) -> Id {
    let mut labels: Vec<_> = key
        .labels()
        .map(|l| (l.key().to_string(), l.value().to_string()))
        .collect();
    labels.sort();
    (key.name().to_string(), labels)
}

struct Cell(Arc<Captured>, Id);

impl CounterFn for Cell {
    fn increment(&self, value: u64) {
        *self
            .0
            .counters
            .lock()
            .unwrap()
            .entry(self.1.clone())
            .or_default() += value;
    }

    fn absolute(&self, value: u64) {
        let mut counters = self.0.counters.lock().unwrap();
        let c = counters.entry(self.1.clone()).or_default();
        *c = (*c).max(value);
    }
}

impl GaugeFn for Cell {
    fn increment(&self, value: f64) {
        *self
            .0
            .gauges
            .lock()
            .unwrap()
            .entry(self.1.clone())
            .or_default() += value;
    }

    fn decrement(&self, value: f64) {
        *self
            .0
            .gauges
            .lock()
            .unwrap()
            .entry(self.1.clone())
            .or_default() -= value;
    }

    fn set(&self, value: f64) {
        self.0.gauges.lock().unwrap().insert(self.1.clone(), value);
    }
}

struct Capture(Arc<Captured>);

impl Recorder for Capture {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(Arc::new(Cell(Arc::clone(&self.0), id(key))))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(Arc::new(Cell(Arc::clone(&self.0), id(key))))
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// Exports `dbs` into a new capture.
fn export(dbs: &[&Db]) -> Arc<Captured> {
    let captured = Arc::new(Captured::default());
    let recorder = Capture(Arc::clone(&captured));
    metrics::with_local_recorder(&recorder, || {
        for db in dbs {
            db.export_metrics();
        }
    });
    captured
}

fn db_label(db: &Db) -> String {
    db.path().display().to_string()
}

/// The figures of `map` named `name` whose labels include every pair of `with`.
fn matching<'a, V: Copy>(
    map: &'a BTreeMap<Id, V>,
    name: &'a str,
    with: &'a [(&'a str, String)],
) -> impl Iterator<Item = V> + 'a {
    map.iter()
        .filter(move |((n, labels), _)| {
            n == name
                && with
                    .iter()
                    .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, v)| *v)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// Quiet stores: compactions only when asked, so the figures hold still while they are read.
fn options() -> Options {
    Options::default()
        .write_buffer_size(64 << 10)
        .level0_compaction_trigger(20)
        .compact_l0_when_idle(false)
        .compact_l0_for_reads(false)
}

#[test]
fn every_ticker_is_exported_per_keyspace_and_sums_to_the_stores_statistics() {
    let cache = Cache::new(8 << 20);
    let limiter = RateLimiter::new(1 << 30);
    let dir = tempfile::tempdir().unwrap();
    let opts = options()
        .block_cache(cache.clone())
        .rate_limiter(limiter.clone());
    let db = Db::open(dir.path(), opts).unwrap();
    let events = db.keyspace("events").unwrap();
    for i in 0..3_000 {
        // In scattered order: every table spans the key range, so compaction rewrites them all
        // rather than moving them down.
        db.put(key(i * 7_919 % 3_000), vec![b'v'; 100]).unwrap();
        // Even keys only: the odd ones between them are absent, and a filter rules them out.
        events.put(key(2 * i), vec![b'e'; 50]).unwrap();
    }
    db.compact().unwrap();
    events.flush().unwrap();
    for i in 0..3_000 {
        assert!(db.get(key(i)).unwrap().is_some());
        assert!(events.get(key(2 * i + 1)).unwrap().is_none());
    }
    let mut tx = db.transaction();
    tx.put("t", "1").unwrap();
    tx.commit().unwrap();

    let captured = export(&[&db]);
    let counters = captured.counters.lock().unwrap();
    let gauges = captured.gauges.lock().unwrap();
    let store = ("db", db_label(&db));
    let in_store = std::slice::from_ref(&store);
    let stats = db.statistics();
    for &t in Ticker::ALL {
        let name = format!("siftdb.{}", t.name());
        // Once for the store, once per keyspace.
        let series: Vec<u64> = matching(&counters, &name, in_store).collect();
        assert_eq!(series.len(), 3, "{name}");
        assert_eq!(series.iter().sum::<u64>(), stats.ticker(t), "{name}");
    }
    let in_keyspace = |name: &str| ("keyspace", name.to_string());
    let named = |t: Ticker, ks: &str| {
        let name = format!("siftdb.{}", t.name());
        matching(&counters, &name, &[store.clone(), in_keyspace(ks)]).collect::<Vec<_>>()
    };
    assert_eq!(
        named(Ticker::NumberKeysRead, "events"),
        [events.statistics().ticker(Ticker::NumberKeysRead)]
    );
    assert!(named(Ticker::BloomFilterUseful, "events")[0] > 0);
    // Store-wide counts carry no keyspace.
    let commits: Vec<_> = counters
        .iter()
        .filter(|((n, labels), _)| n == "siftdb.txn.commits" && labels.len() == 1)
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(commits, [1]);

    // Per level: the filter counters add up to the keyspace's, the tables to the files.
    let mut useful = 0;
    for level in 0..NUM_LEVELS {
        for layout in FilterLayout::ALL {
            let at = [
                store.clone(),
                in_keyspace("events"),
                ("level", level.to_string()),
                ("layout", layout.name().to_string()),
            ];
            useful += matching(&counters, "siftdb.level.bloom.filter.useful", &at).sum::<u64>();
        }
    }
    assert_eq!(
        useful,
        events.statistics().ticker(Ticker::BloomFilterUseful)
    );
    let tables: f64 = matching(&gauges, "siftdb.level.tables", in_store).sum();
    let files = common::names_with_ext(dir.path(), "sst").len();
    assert_eq!(tables as usize, files);
    assert_eq!(
        matching(&gauges, "siftdb.level.tables", in_store).count(),
        2 * NUM_LEVELS
    );
    let compacted: Vec<u64> = matching(
        &counters,
        "siftdb.level.compaction.written.bytes",
        &[store.clone(), in_keyspace("default")],
    )
    .collect();
    assert_eq!(
        compacted.iter().sum::<u64>(),
        db.default_keyspace()
            .statistics()
            .ticker(Ticker::TableBytesWritten)
    );
    let filter_memory: f64 = matching(&gauges, "siftdb.filter.bytes.in.memory", in_store).sum();
    assert_eq!(filter_memory as u64, stats.filter_bytes_in_memory());
    assert!(filter_memory > 0.0);

    // The cache and the limiter.
    let gauge = |name: &str| matching(&gauges, name, in_store).collect::<Vec<_>>();
    assert_eq!(
        gauge("siftdb.block.cache.usage.bytes"),
        [cache.usage() as f64]
    );
    assert_eq!(
        gauge("siftdb.block.cache.capacity.bytes"),
        [(8 << 20) as f64]
    );
    assert_eq!(
        gauge("siftdb.rate.limiter.bytes.per.second"),
        [(1u64 << 30) as f64]
    );
    let paced = |job: &str| {
        matching(
            &counters,
            "siftdb.rate.limiter.bytes",
            &[store.clone(), ("job", job.to_string())],
        )
        .collect::<Vec<_>>()
    };
    let s = limiter.stats();
    assert_eq!(paced("flush"), [s.flush_bytes]);
    assert_eq!(paced("compaction"), [s.compaction_bytes]);
    assert!(s.compaction_bytes > 0);
}

#[test]
fn two_stores_are_told_apart_by_their_directory() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Db::open(dir_a.path(), options()).unwrap();
    let b = Db::open(dir_b.path(), options()).unwrap();
    a.put("x", "1").unwrap();
    for i in 0..5 {
        b.put(key(i), "2").unwrap();
    }
    let captured = export(&[&a, &b]);
    let counters = captured.counters.lock().unwrap();
    let written = |db: &Db| {
        matching(
            &counters,
            "siftdb.number.keys.written",
            &[("db", db_label(db))],
        )
        .sum::<u64>()
    };
    assert_eq!((written(&a), written(&b)), (1, 5));
    // No limiter, no limiter figures.
    assert!(!counters
        .keys()
        .any(|(n, _)| n.starts_with("siftdb.rate.limiter")));
}

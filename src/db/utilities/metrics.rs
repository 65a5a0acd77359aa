//! A store's counters and gauges handed to the `metrics` facade (feature `metrics`), under stable
//! names: the recorder the application installed (Prometheus, StatsD, …) exports them.
//!
//! Nothing here runs while the store works: the store keeps counting in its sharded counters,
//! and [`Db::export_metrics`] reads them when asked, as [`Db::statistics`] does.
//! Counters are set to their totals since the store opened (`Counter::absolute`); gauges to
//! their value now. The names and labels are listed there.

use metrics::{counter, gauge, Label};

use crate::db::Db;
use crate::filter::FilterLayout;
use crate::options::NUM_LEVELS;
use crate::rate_limiter::RateLimiter;
use crate::sst::table_reader::block_cache::Cache;
use crate::stats::{Statistics, Ticker};

impl Db {
    /// Hands the store's counters and gauges to the [`metrics`](https://docs.rs/metrics) facade,
    /// through the recorder the application installed: call it from a timer or before each
    /// scrape. It reads the counters the store keeps anyway, as
    /// [`statistics`](Db::statistics) does, so a store that is never exported pays nothing, and
    /// Gets never touch the facade.
    ///
    /// Every figure carries the label `db`, the store's directory. Counters (totals since the
    /// store opened, set with `Counter::absolute`; a store reopened in the same process counts
    /// from 0 again):
    /// - `siftdb.<ticker>` for every [`Ticker`](crate::Ticker) under its
    ///   [name](crate::Ticker::name) (`siftdb.block.cache.hit`, …): once per keyspace (label
    ///   `keyspace`), and once for the store-wide counts (the WAL, stalls, transactions) without
    ///   that label. Their sum is [`statistics`](Db::statistics)' ticker (less keyspaces dropped
    ///   since open).
    /// - Per keyspace and `level`: `siftdb.level.bloom.filter.useful`, `.full.positive` and
    ///   `.full.true.positive` (label `layout` too), `siftdb.level.filter.lines.touched`,
    ///   `siftdb.level.range.filter.useful`, `.positive`, `.true.positive`, and the flushes (L0)
    ///   or compactions into the level: `siftdb.level.compaction.jobs`, `.read.bytes`,
    ///   `.written.bytes`, `.micros`; each once it is above 0.
    /// - With a rate limiter: `siftdb.rate.limiter.bytes` (label `job`: `flush`, `compaction`),
    ///   `siftdb.rate.limiter.requests`, `.waits`, `.wait.micros`: the limiter's, shared by every
    ///   store given it.
    ///
    /// Gauges: `siftdb.filter.bytes.in.memory` per keyspace; `siftdb.level.tables` and
    /// `siftdb.level.bytes` per keyspace and level; `siftdb.block.cache.usage.bytes` and
    /// `.capacity.bytes` (the whole cache, shared or not); `siftdb.rate.limiter.bytes.per.second`.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("k", "v")?;
    /// // In a service: every few seconds, into the recorder it installed at start.
    /// db.export_metrics();
    /// # Ok(())
    /// # }
    /// ```
    pub fn export_metrics(&self) {
        export(&self.metrics_figures());
    }
}

/// What one store shows.
pub(crate) struct StoreFigures {
    /// The store's directory: the `db` label of every figure.
    pub(crate) path: String,
    /// The store-wide counters (the WAL, writes, stalls, transactions).
    pub(crate) store: Statistics,
    pub(crate) keyspaces: Vec<KeyspaceFigures>,
    pub(crate) cache: Cache,
    pub(crate) rate_limiter: Option<RateLimiter>,
}

/// What one keyspace shows.
pub(crate) struct KeyspaceFigures {
    pub(crate) name: String,
    pub(crate) stats: Statistics,
    pub(crate) levels: [LevelFigures; NUM_LEVELS],
}

/// One level of one keyspace: its tables now, and the flushes or compactions into it since open.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LevelFigures {
    pub(crate) tables: u64,
    pub(crate) bytes: u64,
    pub(crate) jobs: u64,
    pub(crate) read_bytes: u64,
    pub(crate) written_bytes: u64,
    pub(crate) micros: u64,
}

/// Labels: the store's, then more.
fn labels(db: &str, more: &[(&'static str, String)]) -> Vec<Label> {
    let mut out = vec![Label::new("db", db.to_string())];
    out.extend(more.iter().map(|(k, v)| Label::new(*k, v.clone())));
    out
}

fn set_counter(name: &str, labels: Vec<Label>, value: u64) {
    counter!(format!("siftdb.{name}"), labels).absolute(value);
}

fn set_gauge(name: &str, labels: Vec<Label>, value: u64) {
    gauge!(format!("siftdb.{name}"), labels).set(value as f64);
}

/// Hands every figure of `f` to the recorder in use.
fn export(f: &StoreFigures) {
    let db = f.path.as_str();
    for &t in Ticker::ALL {
        set_counter(t.name(), labels(db, &[]), f.store.ticker(t));
    }
    for ks in &f.keyspaces {
        export_keyspace(db, ks);
    }
    set_gauge(
        "block.cache.usage.bytes",
        labels(db, &[]),
        f.cache.usage() as u64,
    );
    set_gauge(
        "block.cache.capacity.bytes",
        labels(db, &[]),
        f.cache.capacity() as u64,
    );
    if let Some(limiter) = &f.rate_limiter {
        let s = limiter.stats();
        let job = |j: &str| labels(db, &[("job", j.to_string())]);
        set_counter("rate.limiter.bytes", job("flush"), s.flush_bytes);
        set_counter("rate.limiter.bytes", job("compaction"), s.compaction_bytes);
        set_counter("rate.limiter.requests", labels(db, &[]), s.requests);
        set_counter("rate.limiter.waits", labels(db, &[]), s.waits);
        set_counter("rate.limiter.wait.micros", labels(db, &[]), s.wait_micros);
        let rate = limiter.bytes_per_second();
        set_gauge("rate.limiter.bytes.per.second", labels(db, &[]), rate);
    }
}

fn export_keyspace(db: &str, ks: &KeyspaceFigures) {
    let keyspace = ("keyspace", ks.name.clone());
    let in_keyspace = || labels(db, std::slice::from_ref(&keyspace));
    let s = &ks.stats;
    for &t in Ticker::ALL {
        set_counter(t.name(), in_keyspace(), s.ticker(t));
    }
    let filter_bytes = s.filter_bytes_in_memory();
    set_gauge("filter.bytes.in.memory", in_keyspace(), filter_bytes);
    for (level, l) in ks.levels.iter().enumerate() {
        let at = |more: &[(&'static str, String)]| {
            let mut all = vec![keyspace.clone(), ("level", level.to_string())];
            all.extend_from_slice(more);
            labels(db, &all)
        };
        // Gauges at every level, so that one that empties reads 0 rather than its last value.
        set_gauge("level.tables", at(&[]), l.tables);
        set_gauge("level.bytes", at(&[]), l.bytes);
        if l.jobs > 0 {
            set_counter("level.compaction.jobs", at(&[]), l.jobs);
            set_counter("level.compaction.read.bytes", at(&[]), l.read_bytes);
            set_counter("level.compaction.written.bytes", at(&[]), l.written_bytes);
            set_counter("level.compaction.micros", at(&[]), l.micros);
        }
        for layout in FilterLayout::ALL {
            let c = s.filter_counts(level, layout);
            if c.checks() > 0 {
                let at = || at(&[("layout", layout.name().to_string())]);
                set_counter("level.bloom.filter.useful", at(), c.useful);
                set_counter("level.bloom.filter.full.positive", at(), c.positive);
                set_counter(
                    "level.bloom.filter.full.true.positive",
                    at(),
                    c.true_positive,
                );
            }
        }
        let lines = s.filter_lines_touched(level);
        if lines > 0 {
            set_counter("level.filter.lines.touched", at(&[]), lines);
        }
        let r = s.range_filter_counts(level);
        if r.checks() > 0 {
            set_counter("level.range.filter.useful", at(&[]), r.useful);
            set_counter("level.range.filter.positive", at(&[]), r.positive);
            set_counter("level.range.filter.true.positive", at(&[]), r.true_positive);
        }
    }
}

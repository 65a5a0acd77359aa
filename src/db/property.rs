//! `Db::property`: text reports about the store.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::version::Triggers;
use super::Db;
use crate::filter::{nats_per_bit, FilterAllocation, FilterLayout, TreeShape};
use crate::options::NUM_LEVELS;
use crate::stats::Ticker;
use crate::store_id::DEFAULT_KEYSPACE_ID;

/// Filter facts gathered over the tables of one level that share a layout and policy.
/// One live table, as the allocation report sees it: its level, filter keys and bits per key, and
/// its filter's theoretical FP rate (1 without a filter: every missing key reads a block).
struct FilteredTable {
    level: usize,
    keys: f64,
    bits_per_key: f64,
    rate: f64,
}

impl FilteredTable {
    fn filtered(&self) -> bool {
        self.rate < 1.0
    }
}

#[derive(Default)]
struct FilterGroup {
    tables: usize,
    filter_bytes: u64,
    filter_keys: u64,
    /// Σ theory × weight over the tables whose policy knows its theory, and Σ weight.
    theory_weighted: f64,
    theory_keys: u64,
}

/// The line `siftdb.stats` prints before every counter: what the list is.
const COUNTERS_HEADER: &str =
    "counters since open (Ticker names and values, as Db::statistics returns them):";

impl Db {
    /// A named report, or `None` for an unknown name:
    /// - `siftdb.stats`: per level the tables, bytes and entries; per level and filter the layout,
    ///   policy, filter bytes, bits per key, and the measured next to the theoretical FP rate;
    ///   per level the bits per key the tables have and those Monkey would give the tree's
    ///   current shape at uniform's memory, and the data-block reads a missing Get wastes there,
    ///   expected at uniform's bits, at the tables' and at Monkey's, and measured;
    ///   per level, the filter cache lines a Get touched on average (`filter.lines.touched`);
    ///   the block cache's use by kind of block (data, filter, index: this store's blocks, in a
    ///   [`Cache`](crate::Cache) stores share); the [`RateLimiter`](crate::RateLimiter)'s counts,
    ///   if any; the filter memory pinned with tables and charged to the cache; the live snapshots
    ///   and the oldest one's sequence;
    ///   per level, what the flushes or compactions into it read (from the level above and from
    ///   itself), wrote and took, as RocksDB's compaction stats; the write amplification (table
    ///   bytes written ÷ key and value bytes written); the store's WAL bytes and write stall
    ///   time by cause; then, under a line saying what they are, every counter. In a store with several keyspaces, the per-level parts come once per
    ///   keyspace under a `** keyspace <name> **` line, and the counters are the store's totals;
    ///   on a [`Keyspace`](crate::Keyspace) other than the default one, the report is that
    ///   keyspace's alone, with its own counters.
    /// - `siftdb.num-files-at-level<N>`: the number of tables in level N (of this handle's
    ///   keyspace, as the two below).
    /// - `siftdb.total-sst-bytes`: bytes of all live tables.
    /// - `siftdb.compaction-pending`: `1` if some level is over its budget, else `0`. L0 is over
    ///   its budget at `level0_compaction_trigger` tables, even while its compaction waits for the
    ///   writes to pause; with [`compact_l0_when_idle`](crate::Options::compact_l0_when_idle), at
    ///   any table while no memtable holds writes (its merge into L1 is then at most a second
    ///   away). Under [`FilterAllocation::Monkey`](crate::FilterAllocation::Monkey), also while
    ///   a table's filter is due to be rewritten with its level's bits per key, which happens
    ///   once writes pause.
    pub fn property(&self, name: &str) -> Option<String> {
        let version = self.tree.super_version().version.clone();
        if let Some(level) = name.strip_prefix("siftdb.num-files-at-level") {
            let level: usize = level.parse().ok()?;
            return version.levels.get(level).map(|f| f.len().to_string());
        }
        match name {
            "siftdb.total-sst-bytes" => Some(
                (0..NUM_LEVELS)
                    .map(|l| version.level_bytes(l))
                    .sum::<u64>()
                    .to_string(),
            ),
            "siftdb.stats" => Some(self.stats_report()),
            "siftdb.compaction-pending" => {
                // Levels count at the triggers they compact at once writes pause: work that waits
                // for them is still pending.
                let options = &*self.tree.options();
                let sv = self.tree.super_version();
                let pending = version
                    .compaction_score(options, Triggers::quiet(options))
                    .is_some()
                    || (!self.inner.read_only
                        && (super::compaction::idle::pending(&sv, options)
                            || self.tree.filter_refresh_due(&version)));
                Some(u8::from(pending).to_string())
            }
            _ => None,
        }
    }

    fn stats_report(&self) -> String {
        let trees = if self.tree.id == DEFAULT_KEYSPACE_ID {
            self.inner.trees()
        } else {
            vec![std::sync::Arc::clone(&self.tree)]
        };
        let mut out = String::new();
        // A store of one keyspace prints its report as before keyspaces existed.
        let named = trees.len() > 1 || trees.iter().any(|t| t.id != DEFAULT_KEYSPACE_ID);
        for tree in &trees {
            if named {
                let _ = writeln!(out, "** keyspace {} **", tree.name);
            }
            self.keyspace_report(tree, &mut out);
            out.push('\n');
        }
        let stats = match trees.as_slice() {
            [one] if one.id != DEFAULT_KEYSPACE_ID => one.stats.snapshot(),
            _ => self.statistics(),
        };
        let blocks = self.inner.tables.block_cache();
        let [data, filter, index] = blocks.usage_by_kind();
        let cache = blocks.cache();
        let _ = writeln!(
            out,
            "block cache: {} of {} bytes in use{}: data {data}, filter {filter}, index {index}",
            cache.usage(),
            cache.capacity(),
            if blocks.is_shared() {
                ", shared with other stores; this store's blocks"
            } else {
                ""
            },
        );
        if let Some(limiter) = &self.inner.options.rate_limiter {
            let r = limiter.stats();
            let _ = writeln!(
                out,
                "rate limit: {} bytes/s; paced {} bytes of flushes, {} of compactions; {} of {} \
                 requests waited, {} ms in all",
                limiter.bytes_per_second(),
                r.flush_bytes,
                r.compaction_bytes,
                r.waits,
                r.requests,
                r.wait_micros / 1000
            );
        }
        let _ = writeln!(
            out,
            "filter memory: {} bytes pinned with their tables, {filter} charged to the block cache",
            stats.filter_bytes_in_memory()
        );
        let (live, oldest) = self.inner.snapshots.summary();
        let _ = writeln!(
            out,
            "snapshots: {live} live{}",
            oldest.map_or(String::new(), |s| format!(", the oldest at sequence {s}"))
        );
        super::compaction::stats::write_store_report(&mut out, &self.inner.stats.snapshot());
        let _ = writeln!(out, "\n{COUNTERS_HEADER}\n{stats}");
        out
    }

    /// What [`Db::export_metrics`] hands to the `metrics` facade: the counters and gauges this
    /// report prints, as numbers.
    #[cfg(feature = "metrics")]
    pub(crate) fn metrics_figures(&self) -> super::utilities::metrics::StoreFigures {
        use super::utilities::metrics::{KeyspaceFigures, LevelFigures, StoreFigures};
        let keyspaces = self.inner.trees().into_iter().map(|tree| {
            let version = tree.super_version().version.clone();
            let work = tree.compaction_stats.levels();
            KeyspaceFigures {
                name: tree.name.clone(),
                stats: tree.stats.snapshot(),
                levels: std::array::from_fn(|l| LevelFigures {
                    tables: version.levels[l].len() as u64,
                    bytes: version.level_bytes(l),
                    jobs: work[l].jobs,
                    read_bytes: work[l].read_upper + work[l].read_this,
                    written_bytes: work[l].written,
                    micros: work[l].micros,
                }),
            }
        });
        StoreFigures {
            path: self.inner.dir.display().to_string(),
            store: self.inner.stats.snapshot(),
            keyspaces: keyspaces.collect(),
            cache: self.inner.tables.block_cache().cache(),
            rate_limiter: self.inner.options.rate_limiter.clone(),
        }
    }

    /// One keyspace's levels, filters (measured and theoretical false positive rates) and
    /// compaction work.
    fn keyspace_report(&self, tree: &super::tree::Tree, out: &mut String) {
        let version = tree.super_version().version.clone();
        let stats = tree.stats.snapshot();
        let _ = writeln!(
            out,
            "{:<5} {:>6} {:>12} {:>10}",
            "level", "tables", "bytes", "entries"
        );
        let mut filters: BTreeMap<(usize, String, String), FilterGroup> = BTreeMap::new();
        let mut allocated: Vec<FilteredTable> = Vec::new();
        for (level, files) in version.levels.iter().enumerate() {
            if files.is_empty() {
                continue;
            }
            let mut entries = 0u64;
            for f in files {
                let Ok(table) = tree.tables.get(f) else {
                    continue;
                };
                let p = table.properties();
                entries += p.num_entries;
                let (layout, policy, theory) = match table.filter() {
                    Some(tf) => {
                        let bits = p.filter_bytes as f64 * 8.0 / p.filter_keys.max(1) as f64;
                        (
                            tf.layout().name().to_string(),
                            tf.policy.name().to_string(),
                            tf.policy.theoretical_fp_rate(bits),
                        )
                    }
                    None if p.filter_layout.is_empty() => ("none".into(), "-".into(), None),
                    None => (
                        format!("{} (unread)", p.filter_layout),
                        p.filter_policy.clone(),
                        None,
                    ),
                };
                let keys = if p.filter_keys > 0 {
                    p.filter_keys
                } else {
                    p.num_entries
                };
                allocated.push(FilteredTable {
                    level,
                    keys: keys as f64,
                    bits_per_key: if p.filter_bits_per_key.is_finite() && p.filter_keys > 0 {
                        p.filter_bits_per_key
                    } else {
                        p.filter_bytes as f64 * 8.0 / keys.max(1) as f64
                    },
                    rate: if p.filter_layout.is_empty() {
                        1.0
                    } else {
                        theory.unwrap_or(f64::NAN)
                    },
                });
                let g = filters.entry((level, layout, policy)).or_default();
                g.tables += 1;
                g.filter_bytes += p.filter_bytes;
                g.filter_keys += p.filter_keys;
                if let Some(t) = theory {
                    // A missing key meets every L0 table, but only one table of a deeper level,
                    // about as often as that table's share of the level's keys.
                    let weight = if level == 0 { 1 } else { p.filter_keys };
                    g.theory_weighted += t * weight as f64;
                    g.theory_keys += weight;
                }
            }
            let _ = writeln!(
                out,
                "L{:<4} {:>6} {:>12} {:>10}",
                level,
                files.len(),
                version.level_bytes(level),
                entries
            );
        }
        let _ = writeln!(
            out,
            "\n{:<5} {:<12} {:<28} {:>6} {:>12} {:>8} {:>10} {:>11} {:>10}",
            "level",
            "filter",
            "policy",
            "tables",
            "filter-bytes",
            "bits/key",
            "checks",
            "measured-fp",
            "theory-fp"
        );
        for ((level, layout, policy), g) in &filters {
            let counts = FilterLayout::ALL
                .into_iter()
                .find(|l| l.name() == layout)
                .map(|l| stats.filter_counts(*level, l))
                .unwrap_or_default();
            let pct = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{:.3}%", r * 100.0));
            let bits = if g.filter_keys > 0 {
                g.filter_bytes as f64 * 8.0 / g.filter_keys as f64
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "L{:<4} {:<12} {:<28} {:>6} {:>12} {:>8.2} {:>10} {:>11} {:>10}",
                level,
                layout,
                policy,
                g.tables,
                g.filter_bytes,
                bits,
                counts.checks(),
                pct(counts.fp_rate()),
                pct((g.theory_keys > 0).then(|| g.theory_weighted / g.theory_keys as f64))
            );
        }
        // What a Get reads of the filters, level by level: the lines its probes touch.
        let gets = stats.ticker(Ticker::NumberKeysRead);
        let per_level: Vec<String> = (0..NUM_LEVELS)
            .filter(|&l| stats.filter_lines_touched(l) > 0)
            .map(|l| {
                let per_get = stats.filter_lines_touched(l) as f64 / gets.max(1) as f64;
                format!("L{l} {per_get:.2}")
            })
            .collect();
        if !per_level.is_empty() {
            let _ = writeln!(
                out,
                "\nfilter lines touched per Get ({gets} Gets): {}",
                per_level.join("  ")
            );
        }
        allocation_report(tree, &allocated, &stats, out);
        range_filter_report(tree, &version, &stats, out);
        super::compaction::stats::write_report(out, &tree.compaction_stats.levels(), &stats);
    }
}

/// Per level: the bits per key the tables have and those Monkey would give the current shape at
/// uniform's memory (the configured bits per key), and the data-block reads a missing Get wastes
/// there, each run counted as often as absent Gets meet it (every time, before enough of them:
/// see `Tree::absent_get_coverage`), at uniform's bits, at the tables', and at Monkey's, with the
/// measured ones (false positives per Get that found nothing). Left out when the
/// configured policy has no bits-per-key knob or no theory, or some table's theory is unknown.
fn allocation_report(
    tree: &super::tree::Tree,
    tables: &[FilteredTable],
    stats: &crate::stats::Statistics,
    out: &mut String,
) {
    let options = tree.options();
    let Some(policy) = options.filter.policy() else {
        return;
    };
    let average = policy.bits_per_key();
    let rate = |b: f64| policy.theoretical_fp_rate(b);
    if tables.is_empty() || !average.is_finite() || rate(average).is_none() {
        return;
    }
    if tables.iter().any(|t| t.rate.is_nan()) {
        return;
    }
    // The runs with filters: each L0 table, each deeper level.
    let mut shape = TreeShape {
        l0_tables: Vec::new(),
        levels: vec![0.0; NUM_LEVELS],
        met: tree.absent_get_coverage(),
    };
    for t in tables.iter().filter(|t| t.filtered()) {
        if t.level == 0 {
            shape.l0_tables.push(t.keys);
        } else {
            shape.levels[t.level] += t.keys;
        }
    }
    let (l0_bits, level_bits) = shape.monkey_bits(average, nats_per_bit(policy.as_ref()));
    let p = |b: f64| if b > 0.0 { rate(b).unwrap_or(1.0) } else { 1.0 };
    let gets = stats.ticker(crate::Ticker::NumberKeysRead);
    let missing = gets.saturating_sub(stats.ticker(crate::Ticker::NumberKeysFound));
    let allocation = match tree.options().filter_allocation {
        FilterAllocation::Uniform => "uniform",
        FilterAllocation::Monkey => "monkey",
    };
    let _ = writeln!(
        out,
        "\nfilter allocation: {allocation} at {average:.2} bits/key; data-block reads wasted per \
         missing Get (each run as often as absent Gets meet it), expected at uniform's, the \
         tables' and Monkey's bits, and measured"
    );
    if !shape.met.is_empty() {
        let shares: Vec<String> = (1..NUM_LEVELS)
            .filter(|&l| shape.levels[l] > 0.0)
            .map(|l| format!("L{l} {:.2}", shape.met(l)))
            .collect();
        let _ = writeln!(
            out,
            "absent Gets meeting each level's run ({} absent Gets): {}",
            stats.absent_gets_in_tables(),
            shares.join("  ")
        );
    }
    let _ = writeln!(
        out,
        "{:<5} {:>5} {:>11} {:>11} {:>11} {:>8} {:>8} {:>8} {:>8}",
        "level",
        "runs",
        "keys",
        "tables-b/k",
        "monkey-b/k",
        "uniform",
        "tables",
        "monkey",
        "measured"
    );
    // (runs, keys, bits spent by tables, bits Monkey spends, uniform, tables, monkey, measured)
    let mut total = (0usize, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    let mut l0_slot = 0;
    for (level, &b) in level_bits.iter().enumerate() {
        let here: Vec<&FilteredTable> = tables.iter().filter(|t| t.level == level).collect();
        if here.is_empty() {
            continue;
        }
        let keys: f64 = here.iter().map(|t| t.keys).sum();
        let spent: f64 = here.iter().map(|t| t.keys * t.bits_per_key).sum();
        let (runs, uniform, current, monkey, monkey_spent) = if level == 0 {
            let mut monkey = 0.0;
            let mut monkey_spent = 0.0;
            for t in &here {
                if t.filtered() {
                    let b = l0_bits.get(l0_slot).copied().unwrap_or(0.0);
                    l0_slot += 1;
                    monkey += p(b);
                    monkey_spent += b * t.keys;
                } else {
                    monkey += 1.0;
                }
            }
            let uniform: f64 = here
                .iter()
                .map(|t| if t.filtered() { p(average) } else { 1.0 })
                .sum();
            (
                here.len(),
                uniform,
                here.iter().map(|t| t.rate).sum::<f64>(),
                monkey,
                monkey_spent,
            )
        } else {
            // A missing key the level's run meets meets one of its tables, as often as its share
            // of the keys.
            let met = shape.met(level);
            let share = |t: &&FilteredTable| t.keys / keys.max(1.0);
            let unfiltered: f64 = here.iter().filter(|t| !t.filtered()).map(share).sum();
            let filtered_keys: f64 = here.iter().filter(|t| t.filtered()).map(|t| t.keys).sum();
            (
                1,
                met * (unfiltered + (1.0 - unfiltered) * p(average)),
                met * here.iter().map(|t| share(t) * t.rate).sum::<f64>(),
                met * (unfiltered + (1.0 - unfiltered) * p(b)),
                b * filtered_keys,
            )
        };
        let counts = stats.level_filter_counts(level);
        let measured = (counts.positive - counts.true_positive.min(counts.positive)) as f64
            / missing.max(1) as f64;
        let _ = writeln!(
            out,
            "L{:<4} {:>5} {:>11.0} {:>11.2} {:>11.2} {:>8.4} {:>8.4} {:>8.4} {:>8.4}",
            level,
            runs,
            keys,
            spent / keys.max(1.0),
            monkey_spent / keys.max(1.0),
            uniform,
            current,
            monkey,
            measured
        );
        total.0 += runs;
        total.1 += keys;
        total.2 += spent;
        total.3 += monkey_spent;
        total.4 += uniform;
        total.5 += current;
        total.6 += monkey;
        total.7 += measured;
    }
    let (runs, keys, spent, monkey_spent, uniform, current, monkey, measured) = total;
    let _ = writeln!(
        out,
        "{:<5} {:>5} {:>11.0} {:>11.2} {:>11.2} {:>8.4} {:>8.4} {:>8.4} {:>8.4}",
        "all",
        runs,
        keys,
        spent / keys.max(1.0),
        monkey_spent / keys.max(1.0),
        uniform,
        current,
        monkey,
        measured
    );
    let _ = writeln!(
        out,
        "the tables waste {:.2} × Monkey's optimum for this shape and {:.2} × uniform's; {missing} \
         Gets found nothing",
        current / monkey.max(f64::MIN_POSITIVE),
        current / uniform.max(f64::MIN_POSITIVE)
    );
}

/// The range filters of one keyspace: per level the tables that have one, their stored bytes,
/// the memory and bits per key of those read so far, and checks by bounded scans; then per range
/// width the measured false positive rate beside theory's. A report reads no filter: a table's
/// range filter is read when a bounded read first asks it, and a report is not one.
fn range_filter_report(
    tree: &super::tree::Tree,
    version: &super::version::Version,
    stats: &crate::stats::Statistics,
    out: &mut String,
) {
    let mut configured = tree.options().range_filter;
    let mut any = false;
    let mut rows = String::new();
    for (level, files) in version.levels.iter().enumerate() {
        let (mut tables, mut stored, mut read, mut bytes, mut keys) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        for f in files {
            let Ok(table) = tree.tables.get(f) else {
                continue;
            };
            let Some((stored_bytes, kept)) = table.range_filter_if_read() else {
                continue;
            };
            tables += 1;
            stored += stored_bytes;
            if let Some(r) = kept {
                read += 1;
                bytes += r.memory_bytes() as u64;
                keys += r.num_keys();
                if !configured.is_some() {
                    configured =
                        crate::filter::RangeFilter::grafite(r.bits_per_key(), r.max_range());
                }
            }
        }
        let c = stats.range_filter_counts(level);
        if tables == 0 && c.checks() == 0 {
            continue;
        }
        any = true;
        let pct = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{:.3}%", r * 100.0));
        let bits_per_key = if read == 0 {
            "-".to_string()
        } else {
            format!("{:.2}", bytes as f64 * 8.0 / keys.max(1) as f64)
        };
        let _ = writeln!(
            rows,
            "L{:<4} {:>6} {:>12} {:>6} {:>12} {:>8} {:>10} {:>10} {:>10} {:>10} {:>11}",
            level,
            tables,
            stored,
            read,
            bytes,
            bits_per_key,
            c.checks(),
            c.useful,
            c.positive,
            c.true_positive,
            pct(c.fp_rate())
        );
    }
    if !any {
        return;
    }
    let _ =
        writeln!(
        out,
        "\nrange filter (Grafite{})\n{:<5} {:>6} {:>12} {:>6} {:>12} {:>8} {:>10} {:>10} {:>10} {:>10} {:>11}",
        configured
            .bits_per_key()
            .zip(configured.max_range())
            .map_or(String::new(), |(b, l)| format!(", {b} bits/key, ranges up to {l}")),
        "level",
        "tables",
        "stored-bytes",
        "read",
        "memory-bytes",
        "bits/key",
        "checks",
        "useful",
        "positive",
        "true-pos",
        "measured-fp"
    );
    out.push_str(&rows);
    let _ = writeln!(
        out,
        "{:<14} {:>10} {:>11} {:>10}",
        "range width", "checks", "measured-fp", "theory-fp"
    );
    for class in 0..crate::stats::RANGE_WIDTH_CLASSES {
        let c = stats.range_filter_width_counts(class);
        if c.checks() == 0 {
            continue;
        }
        let last = class + 1 == crate::stats::RANGE_WIDTH_CLASSES;
        let (label, widest) = match class {
            _ if last => (format!("> 2^{}", class - 1), None),
            0 => ("1".to_string(), Some(1u64)),
            _ => (format!("<= 2^{class}"), Some(1u64 << class)),
        };
        let theory = widest.and_then(|w| configured.theoretical_fp_rate(w));
        let pct = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{:.3}%", r * 100.0));
        let _ = writeln!(
            out,
            "{:<14} {:>10} {:>11} {:>10}",
            label,
            c.checks(),
            pct(c.fp_rate()),
            pct(theory)
        );
    }
}

//! `Db::property`: text reports about the store.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::version_edit::DEFAULT_KEYSPACE_ID;
use super::Db;
use crate::filter::FilterLayout;
use crate::options::NUM_LEVELS;
use crate::sst::table_reader::CachedBlock;
use crate::stats::Ticker;

/// Filter facts gathered over the tables of one level that share a layout and policy.
#[derive(Default)]
struct FilterGroup {
    tables: usize,
    filter_bytes: u64,
    filter_keys: u64,
    /// Σ theory × weight over the tables whose policy knows its theory, and Σ weight.
    theory_weighted: f64,
    theory_keys: u64,
}

impl Db {
    /// A named report, or `None` for an unknown name:
    /// - `siftdb.stats`: per level the tables, bytes and entries; per level and filter the layout,
    ///   policy, filter bytes, bits per key, and the measured next to the theoretical FP rate;
    ///   per level, the filter cache lines a Get touched on average (`filter.lines.touched`);
    ///   the block cache's use by kind of block (data, filter, index) and the filter memory pinned
    ///   with tables and charged to the cache; the live snapshots and the oldest one's sequence;
    ///   per level, what the flushes or compactions into it read (from the level above and from
    ///   itself), wrote and took, as RocksDB's compaction stats; the write amplification (table
    ///   bytes written ÷ key and value bytes written) and the write stall time by cause; then
    ///   every counter. In a store with several keyspaces, the per-level parts come once per
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
    ///   away).
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
                // L0 counts at the trigger it compacts at once writes pause: work that waits for
                // them is still pending.
                let options = &self.tree.options;
                let sv = self.tree.super_version();
                let pending = version
                    .compaction_level(options, options.level0_compaction_trigger)
                    .is_some()
                    || (!self.inner.read_only && super::idle_compaction::pending(&sv, options));
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
        let cache = self.inner.tables.block_cache();
        let [data, filter, index] = cache.usage_by(|b: &CachedBlock| b.kind() as usize);
        let _ = writeln!(
            out,
            "block cache: {} of {} bytes in use: data {data}, filter {filter}, index {index}",
            cache.usage(),
            cache.capacity()
        );
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
        let _ = writeln!(out, "\n{stats}");
        out
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
        super::compaction_stats::write_report(out, &tree.compaction_stats.levels(), &stats);
    }
}

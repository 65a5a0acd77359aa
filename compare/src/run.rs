//! One store's run: the fill, the settle, then every phase, and what it measured.

use std::path::Path;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::engines::{
    open, Bloom, PeerShape, Prefix, ScanCounters, Store, StoreName, WriteStats, SETTLE_LIMIT,
};
use crate::phases::{
    decimal_key, empty_scans_phase, multi_get_phase, read_while_writing_phase, reads_phase, Kind,
    ScanPlan,
};
use crate::read_while_writing::ReadWhileWriting;
use crate::sorted_runs::SortedRuns;
use crate::value_generator::ValueGenerator;

/// What one store measured.
pub(crate) struct Outcome {
    /// ops/s per phase, in the order of `phases`.
    pub(crate) ops: Vec<f64>,
    /// Seconds the fill took.
    pub(crate) fill_secs: f64,
    /// Bytes of keys and values the fill put.
    pub(crate) fill_bytes: u64,
    /// Write counters at the end of the fill and once settled after it.
    pub(crate) writes_fill_end: Option<WriteStats>,
    pub(crate) writes_settled: Option<WriteStats>,
    /// The store once settled after the fill.
    pub(crate) shape_settled: Shape,
    /// With `--overwrite`: seconds the overwrite took, and the write counters it added by its
    /// end and once settled after it.
    pub(crate) overwrite: Option<Overwrite>,
    /// Bloom ticker deltas over readmissing.
    pub(crate) bloom: Option<Bloom>,
    /// Filter bytes after the reads.
    pub(crate) filter_bytes: Option<u64>,
    /// The scan counters of each short-scan phase.
    pub(crate) scan_counters: Vec<Option<ScanCounters>>,
    /// What the read-while-writing phase measured, if it ran.
    pub(crate) read_while_writing: Option<ReadWhileWriting>,
}

impl Outcome {
    /// False positives over filter probes of absent keys during readmissing.
    pub(crate) fn fp_rate(&self) -> Option<f64> {
        let (useful, positive, true_positive) = self.bloom?;
        let false_positive = positive.saturating_sub(true_positive);
        let probes = useful + false_positive;
        (probes > 0).then(|| false_positive as f64 / probes as f64)
    }

    /// Seconds writers were stalled during the fill, and that as a percentage of the fill.
    pub(crate) fn stall(&self) -> Option<(f64, f64)> {
        let secs = self.writes_fill_end?.stall_micros as f64 / 1e6;
        Some((secs, secs / self.fill_secs * 100.0))
    }
}

/// What the overwrite phase measured: its seconds, and the write counters it added by its end
/// and once the store settled after it.
#[derive(Clone, Copy)]
pub(crate) struct Overwrite {
    pub(crate) secs: f64,
    pub(crate) end: Option<WriteStats>,
    pub(crate) settled: Option<WriteStats>,
    /// The store once settled after the overwrite.
    pub(crate) shape: Shape,
}

/// A settled store's space and the runs a Get meets in it.
#[derive(Clone, Copy)]
pub(crate) struct Shape {
    /// Bytes of every file in the store's directory: tables, WAL, manifest, logs.
    pub(crate) disk_bytes: u64,
    /// Bytes of its live tables, as the store counts them.
    pub(crate) table_bytes: Option<u64>,
    /// L0 tables and non-empty levels below.
    pub(crate) runs: Option<SortedRuns>,
}

impl Shape {
    pub(crate) fn of(db: &dyn Store, dir: &Path) -> Shape {
        Shape {
            disk_bytes: dir_bytes(dir),
            table_bytes: db.table_bytes(),
            runs: db.levels().map(|files| SortedRuns::of(&files)),
        }
    }
}

/// Bytes of the files under `dir`, in every subdirectory.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

impl Overwrite {
    /// Seconds writers were stalled during the overwrite, and that as a percentage of it.
    pub(crate) fn stall(&self) -> Option<(f64, f64)> {
        let secs = self.end?.stall_micros as f64 / 1e6;
        Some((secs, secs / self.secs * 100.0))
    }
}

/// Names of the phases run, in order.
pub(crate) fn phases(w: &Workload, scans: Option<&ScanPlan>) -> Vec<String> {
    let (batch, overwrite) = (w.batch, w.overwrite);
    let mut phases = vec!["fillrandom"];
    if overwrite {
        phases.push("overwrite");
    }
    if let Some(plan) = scans {
        let mut phases: Vec<String> = phases.into_iter().map(String::from).collect();
        phases.extend(plan.phase_names());
        return phases;
    }
    if w.reads > 0 {
        phases.extend(["readrandom", "readmissing", "readmixed"]);
        if batch > 0 {
            phases.extend(["multiget-present", "multiget-missing"]);
        }
    }
    if w.read_while_writing_secs > 0.0 {
        phases.extend([
            "readwhilewriting-present",
            "readwhilewriting-missing",
            "readwhilewriting-puts",
        ]);
    }
    phases.into_iter().map(String::from).collect()
}

pub(crate) fn settle(name: &str, db: &mut dyn Store) {
    let start = Instant::now();
    if !db.settle() {
        println!("{name}: WARNING compaction still pending after {SETTLE_LIMIT:?}; reading anyway");
    }
    let shape = match db.levels() {
        Some(files) => files
            .iter()
            .enumerate()
            .map(|(l, n)| format!("L{l} {n}"))
            .collect::<Vec<_>>()
            .join("  "),
        None => "n/a".to_string(),
    };
    println!(
        "{name:<18} settled in {:>6.2}s; files per level: {shape}",
        start.elapsed().as_secs_f64()
    );
}

/// The workload's sizes.
#[derive(Clone, Copy)]
pub(crate) struct Workload {
    pub(crate) keys: u64,
    pub(crate) reads: usize,
    pub(crate) batch: usize,
    pub(crate) compacted: bool,
    pub(crate) shape: PeerShape,
    pub(crate) print_stats: bool,
    /// The values' compression ratio, or `None` for the constant value.
    pub(crate) compression_ratio: Option<f64>,
    /// Put every key again, in a new random order, after the fill has settled.
    pub(crate) overwrite: bool,
    /// Bytes of every store's block cache.
    pub(crate) block_cache_bytes: usize,
    /// Bits per key of `siftdb-range`'s range filters.
    pub(crate) range_filter_bits: f64,
    /// The prefixes of `rocksdb-prefix`'s prefix blooms.
    pub(crate) rocksdb_prefix: Prefix,
    /// siftdb's filter bits spread over the levels as Monkey derives, at the same memory.
    pub(crate) siftdb_monkey: bool,
    /// siftdb's filters are Ribbon filters of the same bits per key instead of blooms.
    pub(crate) siftdb_ribbon: bool,
    /// Runs per tiered level of `siftdb-lazy`.
    pub(crate) runs_per_level: usize,
    /// Seconds of the read-while-writing phase (0: not run), and its reader threads.
    pub(crate) read_while_writing_secs: f64,
    pub(crate) readers_while_writing: usize,
}

/// Runs every phase on one store: the lookups, or with `scans` the short scans.
pub(crate) fn run(name: StoreName, w: Workload, scans: Option<&ScanPlan>) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(name, dir.path(), &w);
    let name = name.name();
    let mut rng = StdRng::seed_from_u64(42);
    let constant = [b'v'; 100];
    let mut values = w
        .compression_ratio
        .map(|ratio| ValueGenerator::new(ratio, constant.len(), 301));

    let mut order: Vec<u64> = (0..w.keys).collect();
    order.shuffle(&mut rng);
    let mut k = Vec::new();
    // Puts every key of `order`; returns the seconds that took and the bytes of keys and values.
    let mut put_all = |db: &mut dyn Store, order: &[u64]| {
        let mut bytes = 0;
        let start = Instant::now();
        for &i in order {
            let value = match values.as_mut() {
                Some(g) => g.next(constant.len()),
                None => &constant,
            };
            match scans {
                Some(plan) => plan.keys.key(2 * i, &mut k),
                None => {
                    k.clear();
                    k.extend_from_slice(&decimal_key(2 * i));
                }
            }
            db.put(&k, value);
            bytes += (k.len() + value.len()) as u64;
        }
        (start.elapsed().as_secs_f64(), bytes)
    };
    let (fill_secs, fill_bytes) = put_all(db.as_mut(), &order);
    let writes_fill_end = db.write_stats();
    db.flush();
    settle(name, db.as_mut());
    let writes_settled = db.write_stats();
    let shape_settled = Shape::of(db.as_ref(), dir.path());
    if w.print_stats {
        let report = db.stats_report().unwrap_or_else(|| "n/a".to_string());
        println!("{name} stats once settled after the fill:\n{report}");
    }
    // db_bench's overwrite: the same keys again, in another random order, into a tree that
    // already holds them all, so that every level below L0 is full and compactions merge into
    // the last level as they do in a store long in use.
    let overwrite = w.overwrite.then(|| {
        order.shuffle(&mut rng);
        let (secs, _) = put_all(db.as_mut(), &order);
        let end = db.write_stats();
        db.flush();
        settle(name, db.as_mut());
        let since = |s: Option<WriteStats>| Some(s?.since(&writes_settled?));
        let settled = since(db.write_stats());
        let shape = Shape::of(db.as_ref(), dir.path());
        if w.print_stats {
            let report = db.stats_report().unwrap_or_else(|| "n/a".to_string());
            println!("{name} stats once settled after the overwrite:\n{report}");
        }
        Overwrite {
            secs,
            end: since(end),
            settled,
            shape,
        }
    });
    if w.compacted {
        db.compact();
        settle(name, db.as_mut());
    }

    let (keys, reads) = (w.keys, w.reads);
    let fill = order.len() as f64 / fill_secs;
    if let Some(plan) = scans {
        // One untimed pass opens every table (and loads its filters).
        let warm = (reads, plan.widths[0], false);
        empty_scans_phase(name, db.as_mut(), &mut rng, plan, warm);
        let mut ops = vec![fill];
        ops.extend(overwrite.map(|o| order.len() as f64 / o.secs));
        let mut scan_counters = Vec::new();
        for &width in &plan.widths {
            for after_key in [false, true] {
                let before = db.scan_counters();
                let phase = (reads, width, after_key);
                ops.push(empty_scans_phase(name, db.as_mut(), &mut rng, plan, phase));
                let after = db.scan_counters();
                scan_counters.push(before.zip(after).map(|(b, a)| a.since(b)));
            }
        }
        return Outcome {
            ops,
            fill_secs,
            fill_bytes,
            writes_fill_end,
            writes_settled,
            shape_settled,
            overwrite,
            bloom: None,
            filter_bytes: db.filter_bytes(),
            scan_counters,
            read_while_writing: None,
        };
    }
    let mut ops = vec![fill];
    ops.extend(overwrite.map(|o| order.len() as f64 / o.secs));
    let mut bloom = None;
    if reads > 0 {
        let present = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Present);
        let before = db.bloom();
        let missing = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Missing);
        let after = db.bloom();
        let mixed = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Mixed);
        ops.extend([present, missing, mixed]);
        if w.batch > 0 {
            for kind in [Kind::Present, Kind::Missing] {
                ops.push(multi_get_phase(name, db.as_mut(), &mut rng, w, kind));
            }
        }
        bloom = before
            .zip(after)
            .map(|(b, a)| (a.0 - b.0, a.1 - b.1, a.2 - b.2));
    }
    // Last: its writes leave the tree unsettled.
    let read_while_writing = (w.read_while_writing_secs > 0.0).then(|| {
        let ratio = w.compression_ratio.unwrap_or(1.0);
        let m = read_while_writing_phase(name, db.as_ref(), w, ratio);
        let readers = w.readers_while_writing;
        ops.extend([
            m.present_per_sec(readers),
            m.missing_per_sec(readers),
            m.puts_per_sec(),
        ]);
        m
    });
    Outcome {
        ops,
        fill_secs,
        fill_bytes,
        writes_fill_end,
        writes_settled,
        shape_settled,
        overwrite,
        bloom,
        filter_bytes: db.filter_bytes(),
        scan_counters: Vec::new(),
        read_while_writing,
    }
}

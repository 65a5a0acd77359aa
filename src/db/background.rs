//! The two background workers: one flushes frozen memtables, one compacts (levels over their
//! budget, L0 at a trigger that rises while writes flow, L0 once writes pause, L0 once reads have
//! paid for it, or, with nothing else to do while writes pause, a table whose filter is far from
//! its level's bits: `compaction/write_burst.rs`, `idle.rs`, `read_triggered.rs`,
//! `filter_refresh.rs`). Both stop at the first error, which is kept in `State::bg_error` and
//! returned to writers and to every waiter. A panic in user code they call (a filter policy, a
//! prefix extractor) is such an error, not the end of the thread. Failures are reported through
//! the `log` facade as they happen (`error`), and every flush and compaction at `debug` level
//! (tables, levels, bytes, duration).

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::compaction::idle::IdleWatch;
use super::compaction::read_triggered::ReadRent;
use super::compaction::write_burst::{WriteBurst, QUIET_AFTER};
use super::tree::Tree;
use super::version::{Triggers, Version};
use super::{DbInner, State};
use crate::error::{BackgroundError, Error, Result};
use crate::stats::Ticker;

/// Runs `f`, turning a panic into `Error::Background` that says what panicked. Work that panics
/// leaves what it had made as garbage for the next open; the data it read from stays where it was.
pub(crate) fn catch_panic<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".to_string());
            Err(Error::Background(BackgroundError::from(format!(
                "{what} panicked: {message}"
            ))))
        }
    }
}

pub(crate) fn spawn_workers(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    let flusher = {
        let inner = Arc::clone(inner);
        std::thread::Builder::new()
            .name("siftdb-flush".into())
            .spawn(move || flush_loop(&inner))?
    };
    let compactor = {
        let inner = Arc::clone(inner);
        std::thread::Builder::new()
            .name("siftdb-compact".into())
            .spawn(move || compaction_loop(&inner))?
    };
    Ok(vec![flusher, compactor])
}

/// The keyspace whose oldest frozen memtable is the oldest of all (its WAL is the one most worth
/// retiring), if any has one.
fn tree_to_flush(st: &State) -> Option<Arc<Tree>> {
    st.trees
        .values()
        .filter_map(|t| Some((t.sv.imm.last()?.log_number(), &t.tree)))
        .min_by_key(|(log, _)| *log)
        .map(|(_, tree)| Arc::clone(tree))
}

fn flush_loop(inner: &DbInner) {
    loop {
        let (tree, log_number, bytes, before) = {
            let mut st = inner.state.lock();
            let tree = loop {
                if inner.is_closed() {
                    return;
                }
                if st.bg_error.is_none()
                    && let Some(tree) = tree_to_flush(&st)
                {
                    break tree;
                }
                inner.changed.wait(&mut st);
            };
            let Some(sv) = st.sv(tree.id) else {
                continue;
            };
            let oldest = sv.imm.last();
            (
                Arc::clone(&tree),
                oldest.map_or(0, |m| m.log_number()),
                oldest.map_or(0, |m| m.approximate_bytes()),
                table_numbers(&sv.version, 0),
            )
        };
        let start = Instant::now();
        match catch_panic("flush", || inner.flush_oldest_memtable(&tree)) {
            Ok(()) if log::log_enabled!(log::Level::Debug) => {
                // Only the flush thread adds L0 tables: the new ones are this flush's.
                let after = Arc::clone(&tree.super_version().version);
                let added = new_tables(&before, &after, 0);
                log::debug!(
                    "siftdb {}: keyspace {}: flush of the memtable of WAL {log_number} \
                     (~{bytes} bytes) into L0 {} in {:.1} ms",
                    inner.dir.display(),
                    tree.name,
                    describe(&added),
                    start.elapsed().as_secs_f64() * 1e3
                );
            }
            Ok(()) => {}
            Err(e) => inner.record_background_error(e),
        }
    }
}

/// What the compaction thread keeps per keyspace between looks.
#[derive(Default)]
struct TreeWatch {
    rent: ReadRent,
    burst: WriteBurst,
    idle: IdleWatch,
    /// The last version found with no filter due for a refresh: not looked at again (a job that
    /// changes which tables a refresh leaves alone also makes a new version).
    refreshed_version: Weak<Version>,
}

/// Why a job other than one for a level over its budget runs, if one does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EarlyL0 {
    /// No such job: a level over its budget, or nothing.
    No,
    /// The keyspace's writes paused with tables in L0 (`compaction/idle.rs`).
    Idle,
    /// Reads paid for it in filter checks (`compaction/read_triggered.rs`).
    ForReads,
    /// The keyspace's writes paused with a table whose filter is far from its level's bits
    /// (`compaction/filter_refresh.rs`).
    FilterRefresh,
}

/// The keyspace to compact now, the triggers it compacts at, and whether the job is an early one
/// of L0 or a filter refresh; else how long to wait before looking again (`None`: until something
/// changes).
fn tree_to_compact(
    st: &State,
    watches: &mut HashMap<u32, TreeWatch>,
) -> std::result::Result<(Arc<Tree>, Triggers, EarlyL0), Option<Duration>> {
    let now = Instant::now();
    watches.retain(|id, _| st.trees.contains_key(id));
    let mut wait: Option<Duration> = None;
    let mut early = None;
    let mut best: Option<(f64, &Arc<Tree>, Triggers)> = None;
    for (id, t) in &st.trees {
        let w = watches.entry(*id).or_default();
        let options = &*t.tree.options();
        let (triggers, writes_pause_in) = w.burst.triggers(&t.sv, options, now);
        let version = &t.sv.version;
        if let Some(score) = version.compaction_score(options, triggers) {
            if best.is_none_or(|(b, _, _)| score > b) {
                best = Some((score, &t.tree, triggers));
            }
            continue;
        }
        let idle_in = match w.idle.due(&t.sv, options, now) {
            Ok(()) => {
                early.get_or_insert((&t.tree, triggers, EarlyL0::Idle));
                None
            }
            Err(wait) => wait,
        };
        if early.is_none() && w.rent.paid(version, &t.tree.stats, options) {
            early = Some((&t.tree, triggers, EarlyL0::ForReads));
        }
        // Filters are refreshed only once writes pause, and after L0's merge into L1 then (which
        // changes the plan): look again when writes may have paused.
        let paused =
            !w.burst.flowing(&t.sv, now) && !super::compaction::idle::pending(&t.sv, options);
        let refresh_in = (!paused && t.tree.refreshes_filters()).then_some(QUIET_AFTER);
        let looked = Weak::ptr_eq(&w.refreshed_version, &Arc::downgrade(version));
        if early.is_none() && paused && !looked {
            if t.tree.filter_refresh_ready(version) {
                early = Some((&t.tree, triggers, EarlyL0::FilterRefresh));
            } else {
                w.refreshed_version = Arc::downgrade(version);
            }
        }
        // While L0 holds tables, look again now and then at what reads paid for them, when the
        // writes that hold its compaction back would have paused, and when they will have been
        // idle long enough.
        for d in [
            w.rent.next_look(version, options),
            writes_pause_in,
            idle_in,
            refresh_in,
        ]
        .into_iter()
        .flatten()
        {
            wait = Some(wait.map_or(d, |w| w.min(d)));
        }
    }
    match (best, early) {
        (Some((_, tree, trigger)), _) => Ok((Arc::clone(tree), trigger, EarlyL0::No)),
        (None, Some((tree, trigger, why))) => Ok((Arc::clone(tree), trigger, why)),
        (None, None) => Err(wait),
    }
}

fn compaction_loop(inner: &DbInner) {
    let mut watches: HashMap<u32, TreeWatch> = HashMap::new();
    loop {
        let (tree, triggers, early) = {
            let mut st = inner.state.lock();
            loop {
                if inner.is_closed() {
                    return;
                }
                let wait = if st.bg_error.is_none() {
                    match tree_to_compact(&st, &mut watches) {
                        Ok(picked) => break picked,
                        Err(wait) => wait,
                    }
                } else {
                    None
                };
                match wait {
                    Some(wait) => {
                        inner.changed.wait_for(&mut st, wait);
                    }
                    None => inner.changed.wait(&mut st),
                }
            }
        };
        let compacting = inner.compaction.lock();
        let start = Instant::now();
        let mut picked = None;
        let mut refreshing = false;
        let done = catch_panic("compaction", || {
            // A level over its budget goes first, even if L0 is due early.
            let job = match (inner.pick_compaction(&tree, triggers)?, early) {
                (Some(job), _) => Some(job),
                (None, EarlyL0::No) => None,
                (None, EarlyL0::FilterRefresh) => {
                    let job = tree.filter_refresh(&inner.manifest.lock().version(tree.id));
                    if job.is_some() {
                        tree.stats.inc(Ticker::FilterRefreshes);
                        refreshing = true;
                    }
                    job
                }
                (None, why) => {
                    let job = inner.pick_l0_for_reads(&tree);
                    if job.is_some() {
                        tree.stats.inc(match why {
                            EarlyL0::Idle => Ticker::IdleL0Compactions,
                            _ => Ticker::ReadTriggeredCompactions,
                        });
                    }
                    job
                }
            };
            match job {
                Some(job) => {
                    let inputs: Vec<(u64, u64)> =
                        job.all_inputs().map(|f| (f.number, f.size)).collect();
                    picked = Some((
                        (job.level, job.out_level),
                        inputs,
                        table_numbers(&job.version, job.out_level),
                    ));
                    inner.move_or_compact(job)
                }
                None => Ok(()),
            }
        });
        drop(compacting);
        if let (Ok(()), Some(((_, out_level), _, before))) = (&done, &picked) {
            if refreshing {
                let after = Arc::clone(&tree.super_version().version);
                let written = new_tables(before, &after, *out_level);
                tree.record_refresh(&after, written.iter().map(|(number, _)| *number));
            } else {
                tree.refreshed.clear();
            }
        }
        match (done, picked) {
            (Ok(()), Some(((level, out_level), inputs, before)))
                if log::log_enabled!(log::Level::Debug) =>
            {
                // This thread holds the compaction lock, and flushes add only to L0: the new
                // tables of the output level are this compaction's.
                let after = Arc::clone(&tree.super_version().version);
                let added = new_tables(&before, &after, out_level);
                let numbers: Vec<String> = inputs.iter().map(|(n, _)| n.to_string()).collect();
                log::debug!(
                    "siftdb {}: keyspace {}: compaction of L{level} → L{out_level}: {} tables \
                     [{}] ({} bytes) into {} in {:.1} ms",
                    inner.dir.display(),
                    tree.name,
                    inputs.len(),
                    numbers.join(", "),
                    inputs.iter().map(|(_, size)| size).sum::<u64>(),
                    describe(&added),
                    start.elapsed().as_secs_f64() * 1e3
                );
            }
            (Ok(()), _) => {}
            (Err(e), _) => inner.record_background_error(e),
        }
    }
}

/// The numbers of the tables of `level` in `version`. The log lines compare numbers rather than
/// keep the version: a version held after the job would keep the files it replaced on disk.
fn table_numbers(version: &Version, level: usize) -> Vec<u64> {
    version.levels[level].iter().map(|f| f.number).collect()
}

/// The tables (number, size) of `level` in `after` whose numbers are not in `before`.
fn new_tables(before: &[u64], after: &Version, level: usize) -> Vec<(u64, u64)> {
    after.levels[level]
        .iter()
        .filter(|f| !before.contains(&f.number))
        .map(|f| (f.number, f.size))
        .collect()
}

/// "table 12 (4096 bytes)", "2 tables [12, 13] (8192 bytes)" or "no table" for a log line.
fn describe(tables: &[(u64, u64)]) -> String {
    let bytes: u64 = tables.iter().map(|(_, size)| size).sum();
    match tables {
        [] => "no table".to_string(),
        [(number, _)] => format!("table {number} ({bytes} bytes)"),
        _ => {
            let numbers: Vec<String> = tables.iter().map(|(n, _)| n.to_string()).collect();
            format!(
                "{} tables [{}] ({bytes} bytes)",
                tables.len(),
                numbers.join(", ")
            )
        }
    }
}

//! Filters brought back to their level's bits once writes pause (Monkey allocation).
//!
//! Under Monkey a table's filter keeps the bits it was built with, and those drift from what its
//! level should have: a table moves down a level as it is (a move rewrites nothing), and the
//! tables of a young deepest level, or of the level above it, keep bits set for a smaller tree.
//! Once writes pause, when the compaction thread has no level over its budget and no L0 merge to
//! run (L0's merge into L1 comes first: it changes the plan), it rewrites in place, one table a
//! job, the table whose bits per key are furthest (by more than [`REFRESH_TOLERANCE`]) from those
//! a rewrite would give it now: tables that spend more than their level's bits first, so that the
//! memory bound has room for those that spend less. The puts do not wait for these rewrites, and
//! the tree reaches its plan once they are done. A table a refresh wrote while other tables still
//! overspent got what the memory bound left it, often less than its plan: it is *provisional*, and
//! may be refreshed once more after every other table is done. Any other table a refresh wrote is
//! *final*, and is not refreshed again until another compaction changes the tree, so the
//! refreshes of a tree at rest end (each table is rewritten at most twice).
//!
//! A lazy leveled tree has no refreshes: its runs are rewritten whole as their levels fill, each
//! with its bits for the tree as it then is, and a refresh for every shift of the plan that a new
//! run brings would rewrite the tree over and over.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::refreshed_tables::Refreshable;
use super::CompactionJob;
use crate::db::tree::Tree;
use crate::db::version::{FileMeta, Version};

/// How far, in bits per key, a table's filter may be from the bits a rewrite would give it before
/// a refresh rewrites it: a quarter bit changes a bloom's false positive rate by about 11 %.
pub(crate) const REFRESH_TOLERANCE: f64 = 0.25;

/// A table whose filter a refresh would rewrite.
struct Stale<'a> {
    level: usize,
    file: &'a Arc<FileMeta>,
    /// Its bits per key less those a rewrite would give it.
    excess: f64,
    keys: u64,
}

impl Stale<'_> {
    /// Tables that spend more than their bits come first, then the furthest in bits.
    fn priority(&self) -> (bool, f64) {
        (self.excess > 0.0, self.excess.abs() * self.keys as f64)
    }
}

impl Tree {
    /// The tables of `version` below L0 whose filters are due for a refresh, those a compaction
    /// is merging left out when `skip_busy`; none unless its filters are refreshed at all.
    fn stale_filters<'a>(
        self: &'a Arc<Self>,
        version: &'a Arc<Version>,
        skip_busy: bool,
        refreshable: Refreshable,
    ) -> impl Iterator<Item = Stale<'a>> + 'a {
        let deeper: &[Vec<Arc<FileMeta>>] = if self.refreshes_filters() {
            &version.levels[1..]
        } else {
            &[]
        };
        let tables = deeper
            .iter()
            .zip(1..)
            .flat_map(|(files, level)| files.iter().map(move |file| (level, file)));
        tables.filter_map(move |(level, file)| {
            if skip_busy && file.merging.load(Ordering::Relaxed)
                || self.refreshed.skips(file.number, refreshable)
            {
                return None;
            }
            let spend = self.filter_spend(file)?;
            let bits = if spend.keys > 0 {
                spend.bits / spend.keys as f64
            } else {
                0.0
            };
            let job = CompactionJob::rewrite_in_place(self, version, level, file);
            let wanted = self
                .compaction_outputs_filter(&job)
                .policy()
                .map_or(0.0, |p| p.bits_per_key());
            let excess = bits - wanted;
            (excess.abs() > REFRESH_TOLERANCE).then_some(Stale {
                level,
                file,
                excess,
                keys: spend.keys,
            })
        })
    }

    /// The job that rewrites, in place, the table of `version` whose filter is most due for a
    /// refresh, provisional tables only once no other is due; `None` if none is.
    pub(crate) fn filter_refresh(
        self: &Arc<Self>,
        version: &Arc<Version>,
    ) -> Option<CompactionJob> {
        let most = |refreshable| {
            self.stale_filters(version, true, refreshable)
                .max_by(|a, b| {
                    a.priority()
                        .partial_cmp(&b.priority())
                        .unwrap_or(std::cmp::Ordering::Equal)
                })
                .map(|s| (s.level, s.file))
        };
        let (level, file) = most(Refreshable::NotWritten).or_else(|| most(Refreshable::Any))?;
        Some(CompactionJob::rewrite_in_place(self, version, level, file))
    }

    /// Whether [`filter_refresh`](Self::filter_refresh) would find a job in `version`, without
    /// weighing every due table to pick one.
    pub(crate) fn filter_refresh_ready(self: &Arc<Self>, version: &Arc<Version>) -> bool {
        self.stale_filters(version, true, Refreshable::Any)
            .next()
            .is_some()
    }

    /// Whether some table of `version` is due for a refresh, or being refreshed.
    pub(crate) fn filter_refresh_due(self: &Arc<Self>, version: &Arc<Version>) -> bool {
        self.stale_filters(version, false, Refreshable::Any)
            .next()
            .is_some()
    }

    /// Whether its filters are ever refreshed: under Monkey allocation, but not lazy leveling.
    pub(crate) fn refreshes_filters(&self) -> bool {
        self.monkey_applies() && self.options().compaction_style.runs_per_level().is_none()
    }

    /// Records the tables a refresh wrote into `after`: provisional while a table no refresh
    /// wrote still overspends (the memory bound held them below their plan), else final.
    pub(crate) fn record_refresh(
        self: &Arc<Self>,
        after: &Arc<Version>,
        written: impl IntoIterator<Item = u64>,
    ) {
        let written: Vec<u64> = written.into_iter().collect();
        let others_overspend = self
            .stale_filters(after, false, Refreshable::NotWritten)
            .any(|s| s.excess > 0.0 && !written.contains(&s.file.number));
        self.refreshed.record(written, others_overspend);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_that_overspend_are_refreshed_before_those_that_underspend() {
        let version = Version::for_tests(&[(2, 1, "a", "b", 100), (2, 2, "c", "d", 100)]);
        let stale = |i: usize, excess: f64, keys: u64| Stale {
            level: 2,
            file: &version.levels[2][i],
            excess,
            keys,
        };
        let first = |a: &Stale, b: &Stale| {
            if a.priority() >= b.priority() {
                a.file.number
            } else {
                b.file.number
            }
        };
        // A small excess beats a large shortfall, however many keys the shortfall has.
        assert_eq!(first(&stale(0, 0.3, 10), &stale(1, -4.0, 10_000)), 1);
        // Among overspenders, the most excess bits in all.
        assert_eq!(first(&stale(0, 0.5, 100), &stale(1, 2.0, 100)), 2);
        assert_eq!(first(&stale(0, 0.5, 1_000), &stale(1, 2.0, 100)), 1);
        // Among underspenders, likewise.
        assert_eq!(first(&stale(0, -0.5, 100), &stale(1, -2.0, 100)), 2);
    }
}

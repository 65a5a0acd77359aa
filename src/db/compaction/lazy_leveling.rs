//! The jobs of lazy leveling: a merge of runs as the tree's shape asks
//! (`version/lazy_shape.rs`), a run moved down to close a gap, and `Db::compact`'s merge of
//! everything into the last run.

use std::sync::Arc;

use super::CompactionJob;
use crate::db::tree::Tree;
use crate::db::version::edit::VersionEdit;
use crate::db::version::lazy_shape::{l0_merge, next_step, runs, Step, LAST};
use crate::db::version::{FileMeta, Triggers, Version};
use crate::db::DbInner;
use crate::error::Result;
use crate::stats::Ticker;

/// The job that merges as `step` says (`None` for a move, or if it would read nothing).
pub(crate) fn merge_job(
    tree: &Arc<Tree>,
    version: Arc<Version>,
    step: &Step,
) -> Option<CompactionJob> {
    let Step::Merge {
        with_l0,
        levels,
        out,
    } = step
    else {
        return None;
    };
    let run = |l: usize| -> Vec<Arc<FileMeta>> { version.levels[l].clone() };
    let (level, inputs, rest) = match (with_l0, levels.split_first()) {
        (true, _) => (0, run(0), &levels[..]),
        (false, Some((&first, rest))) => (first, run(first), rest),
        (false, None) => return None,
    };
    let (between, next_level_inputs) = match rest.split_last() {
        Some((&last, middle)) if last == *out => {
            (middle.iter().map(|&l| (l, run(l))).collect(), run(last))
        }
        _ => (rest.iter().map(|&l| (l, run(l))).collect(), Vec::new()),
    };
    if inputs.is_empty() && next_level_inputs.is_empty() {
        return None;
    }
    Some(CompactionJob {
        tree: Arc::clone(tree),
        level,
        inputs,
        between,
        out_level: *out,
        next_level_inputs,
        version,
    })
}

impl DbInner {
    /// The next merge `tree` needs under lazy leveling with `t` runs per level at `triggers`,
    /// after moving runs down to close the gaps above them.
    ///
    /// # Errors
    /// `Error::Io` if a move's MANIFEST edit cannot be written.
    pub(super) fn pick_lazy_merge(
        &self,
        tree: &Arc<Tree>,
        triggers: Triggers,
        t: usize,
    ) -> Result<Option<CompactionJob>> {
        loop {
            let version = self.manifest.lock().version(tree.id);
            let Some(due) = next_step(&version, &tree.options(), triggers, t) else {
                return Ok(None);
            };
            match due.step {
                Step::Move { from, to } => {
                    if !self.move_run(tree, &version, from, to)? {
                        return Ok(None);
                    }
                }
                step => return Ok(merge_job(tree, version, &step)),
            }
        }
    }

    /// L0's merge into a new run (or the shallowest tiered level, with no place for one).
    pub(super) fn pick_lazy_l0_merge(&self, tree: &Arc<Tree>, t: usize) -> Option<CompactionJob> {
        let version = self.manifest.lock().version(tree.id);
        if version.levels[0].is_empty() {
            return None;
        }
        let step = l0_merge(&version, &tree.options(), t);
        merge_job(tree, version, &step)
    }

    /// Everything in one merge into the last run: L0 and every run; `None` if the last run
    /// holds it all already.
    pub(super) fn pick_lazy_full_merge(&self, tree: &Arc<Tree>) -> Option<CompactionJob> {
        let version = self.manifest.lock().version(tree.id);
        let levels: Vec<usize> = runs(&version).into_iter().map(|(l, _)| l).collect();
        if version.levels[0].is_empty() && levels.iter().all(|&l| l == LAST) {
            return None;
        }
        let step = Step::Merge {
            with_l0: !version.levels[0].is_empty(),
            levels,
            out: LAST,
        };
        merge_job(tree, version, &step)
    }

    /// Lists the run of level `from` at level `to` by an edit alone; `false` if the keyspace was
    /// dropped.
    fn move_run(
        &self,
        tree: &Arc<Tree>,
        version: &Version,
        from: usize,
        to: usize,
    ) -> Result<bool> {
        let run = &version.levels[from];
        let edit = VersionEdit {
            deleted: run.iter().map(|t| (from, t.number)).collect(),
            added: run.iter().map(|t| t.record_at(to)).collect(),
            ..Default::default()
        };
        if !self.install(tree, edit)? {
            return Ok(false);
        }
        // A reader opened for the old level may hold that level's pinning of index and filter
        // blocks; the table is reopened for its new level when next read.
        for t in run {
            tree.tables.evict(t.number);
        }
        tree.stats.add(Ticker::TrivialMoves, run.len() as u64);
        Ok(true)
    }
}

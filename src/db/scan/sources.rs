//! The memtables and tables a cursor merges ([`Sources`]), chosen for its range, and their merge,
//! each child with the age that range tombstones are judged by (`tombstone_skipping.rs`).

use std::ops::Bound;
use std::sync::Arc;

use super::level_iter::LevelIter;
use crate::db::read::range_filtering::{PendingVerdicts, RangeFiltering};
use crate::db::tree::{SuperVersion, Tree};
use crate::db::ttl::Expiry;
use crate::db::version::table_cache::TableCache;
use crate::db::version::FileMeta;
use crate::error::Result;
use crate::iter::{InternalIterator, MergingIterator};
use crate::merge_operator::MergeOperator;

/// The memtables and tables a cursor merges: a super-version's, with (for a prefix scan) only
/// the tables that may hold the prefix.
#[derive(Clone)]
pub(crate) struct Sources {
    /// Held for as long as the cursor lives: its memtables and tables (and so their files) stay.
    pub(super) sv: Arc<SuperVersion>,
    /// L0 tables to read, newest first.
    pub(super) l0: Vec<Arc<FileMeta>>,
    /// Per level ≥ 1 that has tables to read, the level and its tables in key order.
    pub(super) levels: Vec<(usize, Vec<Arc<FileMeta>>)>,
    /// The readers of the keyspace's tables.
    pub(super) tables: Arc<TableCache>,
    /// Which values have expired, as of the cursor's creation.
    pub(super) expiry: Expiry,
    /// The range filter answers of a bounded read whose truth the first positioning settles.
    pub(super) range_verdicts: Option<Arc<PendingVerdicts>>,
    /// The keyspace's merge operator, which resolves operands, and its name, which errors name.
    pub(super) merging: (Option<Arc<dyn MergeOperator>>, Arc<str>),
}

/// What a cursor of `tree` resolves merge operands with.
fn merging_of(tree: &Tree) -> (Option<Arc<dyn MergeOperator>>, Arc<str>) {
    (
        tree.options().merge_operator.clone(),
        Arc::from(tree.name.as_str()),
    )
}

impl Sources {
    /// The memtables of `sv` and, of its tables that `keep` accepts, those a read of
    /// `(lower, upper)` needs: whose key range meets the range (found by binary search in levels
    /// ≥ 1) and, with both bounds set and range filters configured, whose range filter does not
    /// rule the range out.
    ///
    /// # Errors
    /// `Error::Corruption` or `Error::Io` if a table whose range filter is asked cannot be opened,
    /// or as `keep` fails.
    pub(crate) fn for_range(
        sv: Arc<SuperVersion>,
        tree: &Tree,
        lower: &Bound<Vec<u8>>,
        upper: &Bound<Vec<u8>>,
        mut keep: impl FnMut(&FileMeta) -> Result<bool>,
    ) -> Result<Sources> {
        let bounded = !matches!(lower, Bound::Unbounded) && !matches!(upper, Bound::Unbounded);
        let ask = bounded && tree.options().range_filter.is_some();
        let (from, to) = (
            lower.as_ref().map(Vec::as_slice),
            upper.as_ref().map(Vec::as_slice),
        );
        let mut ranged = RangeFiltering::new(tree, lower, upper);
        let mut choose = |f: &FileMeta| -> Result<bool> {
            if !keep(f)? {
                return Ok(false);
            }
            match ask {
                true => ranged.may_hold(f),
                false => Ok(f.meets((from, to))),
            }
        };
        let mut l0 = Vec::new();
        for f in sv.version.levels[0].iter().rev() {
            if choose(f)? {
                l0.push(Arc::clone(f));
            }
        }
        let mut levels = Vec::new();
        for (level, files) in sv.version.levels.iter().enumerate().skip(1) {
            // A level's tables are sorted and disjoint: those meeting the range are a run.
            let first = files.partition_point(|f| !f.meets((from, Bound::Unbounded)));
            let mut kept = Vec::new();
            for f in files[first..]
                .iter()
                .take_while(|f| f.meets((Bound::Unbounded, to)))
            {
                if choose(f)? {
                    kept.push(Arc::clone(f));
                }
            }
            if !kept.is_empty() {
                levels.push((level, kept));
            }
        }
        Ok(Sources {
            sv,
            l0,
            levels,
            tables: Arc::clone(&tree.tables),
            expiry: Expiry::of(tree),
            range_verdicts: ranged.into_pending(),
            merging: merging_of(tree),
        })
    }

    /// Whether `other` reads the same tables.
    pub(super) fn same_tables(&self, other: &Sources) -> bool {
        let numbers = |s: &Sources| -> Vec<u64> {
            s.l0.iter()
                .chain(s.levels.iter().flat_map(|(_, files)| files))
                .map(|f| f.number)
                .collect()
        };
        numbers(self) == numbers(other)
    }

    /// Settles the pending range filter answers from where `merge` was just positioned.
    pub(super) fn settle_range_verdicts(&self, merge: &MergingIterator) {
        if let Some(v) = &self.range_verdicts {
            v.settle(merge);
        }
    }

    /// The merge of every source: memtables newest first, L0 tables newest first, then one
    /// [`LevelIter`] per level (which opens its tables as the walk reaches them); and each
    /// child's [age](Self::age_of_table).
    ///
    /// # Errors
    /// `Error::Corruption` or `Error::Io` if an L0 table cannot be opened.
    pub(super) fn merge(&self) -> Result<(MergingIterator, Vec<usize>)> {
        let sv = &self.sv;
        let n = 1 + sv.imm.len() + self.l0.len() + self.levels.len();
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::with_capacity(n);
        let mut ages = Vec::with_capacity(n);
        children.push(Box::new(sv.mem.iter()));
        for m in &sv.imm {
            children.push(Box::new(m.iter()));
        }
        ages.extend(0..children.len());
        for f in &self.l0 {
            children.push(Box::new(self.tables.get(f)?.iter(true)));
            ages.push(self.age_of_table(0, f));
        }
        for (level, files) in &self.levels {
            let tables = Arc::clone(&self.tables);
            children.push(Box::new(LevelIter::new(files.clone(), tables, true)));
            ages.push(self.age_of_table(*level, &files[0]));
        }
        Ok((MergingIterator::new(children), ages))
    }

    /// How old the source holding table `f` of `level` is: 0 for the memtable, then one more
    /// per frozen memtable, per newer L0 table, and per level. Every entry of an older source
    /// is older than every range tombstone of a newer one over its key (a table's key range
    /// takes in its tombstones', and compaction moves a key's entries and the tombstones over
    /// it down together), so such a tombstone hides a whole run of the older source's entries.
    pub(super) fn age_of_table(&self, level: usize, f: &FileMeta) -> usize {
        let memtables = 1 + self.sv.imm.len();
        let l0 = &self.sv.version.levels[0];
        match level {
            0 => memtables + l0.iter().filter(|g| g.number > f.number).count(),
            _ => memtables + l0.len() + level,
        }
    }
}

impl Sources {
    /// Every memtable and table of `sv`, a super-version of `tree`; choosing them reads nothing,
    /// so it cannot fail.
    pub(super) fn all_of(sv: Arc<SuperVersion>, tree: &Tree) -> Sources {
        let l0 = sv.version.levels[0].iter().rev().cloned().collect();
        let levels = sv
            .version
            .levels
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, files)| !files.is_empty())
            .map(|(level, files)| (level, files.clone()))
            .collect();
        Sources {
            sv,
            l0,
            levels,
            tables: Arc::clone(&tree.tables),
            expiry: Expiry::of(tree),
            range_verdicts: None,
            merging: merging_of(tree),
        }
    }
}

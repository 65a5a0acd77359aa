//! Bounded reads ask each table's range filter before reading it: a table whose filter says it
//! holds no key in the range is left out of the merge, so neither its index nor a data block is
//! read. Tables holding range tombstones are always read (their filter knows only point keys).
//!
//! Statistics: every check is counted (`range.filter.checked`, `useful`, `positive`); a "maybe"
//! is a true positive when the table held a key in the range. That is known at once when the
//! table's smallest or largest key lies in the range (those are keys of the table); for a table
//! whose keys span the whole range, once the merge is first positioned, from where the table's
//! source landed (`PendingVerdicts::settle`).

use std::ops::Bound;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::db::tree::Tree;
use crate::db::version::FileMeta;
use crate::error::Result;
use crate::filter::range::RangeCheck;
use crate::iter::MergingIterator;
use crate::key::{compare_bytes, user_key};
use crate::stats::Stats;

/// Whether `key` lies in `(lower, upper)`.
pub(crate) fn in_bounds(key: &[u8], lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>) -> bool {
    let above = match lower {
        Bound::Included(s) => compare_bytes(key, s).is_ge(),
        Bound::Excluded(s) => compare_bytes(key, s).is_gt(),
        Bound::Unbounded => true,
    };
    let below = match upper {
        Bound::Included(e) => compare_bytes(key, e).is_le(),
        Bound::Excluded(e) => compare_bytes(key, e).is_lt(),
        Bound::Unbounded => true,
    };
    above && below
}

/// A "maybe" whose truth waits for the merge.
struct Pending {
    level: usize,
    number: u64,
    width: u64,
}

/// The "maybe" answers of one bounded read whose truth is known only once its merge is
/// positioned; settled by the first of its cursors to position.
pub(crate) struct PendingVerdicts {
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    pending: Mutex<Vec<Pending>>,
    stats: Arc<Stats>,
}

impl PendingVerdicts {
    /// Counts the pending answers as true positives where a source of `merge`, just positioned
    /// at the range's first (or last) entry, sits on its table within the range. A table whose
    /// keys span the range is the only one of its level meeting it, so its level's source, if
    /// anywhere in the range, is on it.
    pub(crate) fn settle(&self, merge: &MergingIterator) {
        let pending = std::mem::take(&mut *self.pending.lock());
        if pending.is_empty() {
            return;
        }
        let mut held = Vec::new();
        merge.for_each_child(|child| {
            if child.valid()
                && in_bounds(user_key(child.key()), &self.lower, &self.upper)
                && let Some(number) = child.table_number()
            {
                held.push(number);
            }
        });
        for p in pending {
            if held.contains(&p.number) {
                self.stats
                    .record_range_filter_true_positive(p.level, p.width);
            }
        }
    }
}

/// What a bounded read of `(lower, upper)` does with one table, as far as range filters go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeAnswer {
    /// The table's key range misses the range: left out.
    OutsideRange,
    /// The table holds range tombstones: always read.
    RangeTombstones,
    /// The table has no range filter: read.
    NoRangeFilter,
    /// The range, clamped to the table's keys, is `width` integers, wider than its filter
    /// answers (or holds a whole segment of its keys): read.
    TooWide { width: u64 },
    /// The filter was asked about a range of `width` integers; `maybe` false leaves the table out.
    Filtered { width: u64, maybe: bool },
}

/// What table `f` of `tree` answers for a read of `(lower, upper)` (nothing is counted).
///
/// # Errors
/// `Error::Corruption` or `Error::Io` if the table cannot be opened.
pub(crate) fn answer(
    tree: &Tree,
    f: &FileMeta,
    lower: &Bound<Vec<u8>>,
    upper: &Bound<Vec<u8>>,
) -> Result<RangeAnswer> {
    let bounds = (
        lower.as_ref().map(Vec::as_slice),
        upper.as_ref().map(Vec::as_slice),
    );
    if !f.meets(bounds) {
        return Ok(RangeAnswer::OutsideRange);
    }
    if f.range_tombstones {
        return Ok(RangeAnswer::RangeTombstones);
    }
    let table = tree.tables.get(f)?;
    let Some(filter) = table.range_filter()? else {
        return Ok(RangeAnswer::NoRangeFilter);
    };
    // The range within the table's keys: a one-sided range becomes a bounded one.
    let lo = match lower {
        Bound::Included(k) | Bound::Excluded(k) if k.as_slice() > f.smallest_user() => {
            lower.as_ref().map(Vec::as_slice)
        }
        _ => Bound::Included(f.smallest_user()),
    };
    let hi = match upper {
        Bound::Included(k) | Bound::Excluded(k) if k.as_slice() < f.largest_user() => {
            upper.as_ref().map(Vec::as_slice)
        }
        _ => Bound::Included(f.largest_user()),
    };
    Ok(match filter.check(lo, hi) {
        // No key of the table can lie in the range: as good as a "no" of the filter.
        RangeCheck::Absent => RangeAnswer::Filtered {
            width: 1,
            maybe: false,
        },
        RangeCheck::TooWide { width } => RangeAnswer::TooWide { width },
        RangeCheck::Asked { width, maybe } => RangeAnswer::Filtered { width, maybe },
    })
}

/// Chooses the tables a read of `(lower, upper)` merges, asking their range filters.
pub(crate) struct RangeFiltering<'a> {
    tree: &'a Tree,
    lower: &'a Bound<Vec<u8>>,
    upper: &'a Bound<Vec<u8>>,
    pending: Vec<Pending>,
}

impl<'a> RangeFiltering<'a> {
    /// For a read of `(lower, upper)` in `tree`.
    pub(crate) fn new(
        tree: &'a Tree,
        lower: &'a Bound<Vec<u8>>,
        upper: &'a Bound<Vec<u8>>,
    ) -> RangeFiltering<'a> {
        RangeFiltering {
            tree,
            lower,
            upper,
            pending: Vec::new(),
        }
    }

    /// Whether table `f` may hold a key of the range: its key range meets it, and its range
    /// filter, if it has one and the range is narrow enough to ask, does not say "no".
    ///
    /// # Errors
    /// `Error::Corruption` or `Error::Io` if the table cannot be opened.
    pub(crate) fn may_hold(&mut self, f: &FileMeta) -> Result<bool> {
        let stats = &self.tree.stats;
        match answer(self.tree, f, self.lower, self.upper)? {
            RangeAnswer::OutsideRange => Ok(false),
            RangeAnswer::RangeTombstones | RangeAnswer::NoRangeFilter => Ok(true),
            RangeAnswer::TooWide { .. } => Ok(true),
            RangeAnswer::Filtered {
                width,
                maybe: false,
            } => {
                stats.record_range_filter(f.level, width, false);
                Ok(false)
            }
            RangeAnswer::Filtered { width, maybe: true } => {
                stats.record_range_filter(f.level, width, true);
                let (smallest, largest) = (f.smallest_user(), f.largest_user());
                if in_bounds(smallest, self.lower, self.upper)
                    || in_bounds(largest, self.lower, self.upper)
                {
                    stats.record_range_filter_true_positive(f.level, width);
                } else {
                    self.pending.push(Pending {
                        level: f.level,
                        number: f.number,
                        width,
                    });
                }
                Ok(true)
            }
        }
    }

    /// The answers still to settle once the merge is positioned, if any.
    pub(crate) fn into_pending(self) -> Option<Arc<PendingVerdicts>> {
        (!self.pending.is_empty()).then(|| {
            Arc::new(PendingVerdicts {
                lower: self.lower.clone(),
                upper: self.upper.clone(),
                pending: Mutex::new(self.pending),
                stats: Arc::clone(&self.tree.stats),
            })
        })
    }
}

//! Range tombstones under a cursor: each source's, gathered when the cursor is first positioned,
//! and what they make of an entry: a value a newer tombstone covers is a tombstone, and a covering
//! tombstone of a newer source lets the walk jump the older source past it.

use std::ops::Bound;
use std::sync::Arc;

use super::sources::Sources;
use crate::error::Result;
use crate::key::{ParsedKey, ValueKind};
use crate::range_tombstones::{Fragment, FragmentedRangeTombstones};

impl Sources {
    /// The range tombstones of every memtable, and of every table whose key range meets
    /// `[lower, upper]`, whether or not the table is merged (a prefix scan leaves out tables
    /// whose filter rules the prefix out, but a range tombstone there still hides older keys).
    ///
    /// # Errors
    /// `Error::Corruption` or `Error::Io` if such a table cannot be opened.
    pub(super) fn range_tombstones(
        &self,
        lower: &Bound<Vec<u8>>,
        upper: &Bound<Vec<u8>>,
    ) -> Result<Vec<SourceTombstones>> {
        let sv = &self.sv;
        let mut out: Vec<SourceTombstones> = std::iter::once(&sv.mem)
            .chain(&sv.imm)
            .enumerate()
            .filter_map(|(age, m)| {
                Some(SourceTombstones {
                    age,
                    list: m.range_tombstones()?,
                })
            })
            .collect();
        if !sv.version.range_tombstones {
            return Ok(out);
        }
        let bounds = (
            lower.as_ref().map(Vec::as_slice),
            upper.as_ref().map(Vec::as_slice),
        );
        for (level, files) in sv.version.levels.iter().enumerate() {
            for f in files {
                if f.range_tombstones
                    && f.meets(bounds)
                    && let Some(t) = self.tables.get(f)?.range_tombstones()
                {
                    out.push(SourceTombstones {
                        age: self.age_of_table(level, f),
                        list: Arc::clone(t),
                    });
                }
            }
        }
        Ok(out)
    }
}

/// One source's range tombstones, and the source's age (see `Sources::age_of_table`).
pub(crate) struct SourceTombstones {
    age: usize,
    list: Arc<FragmentedRangeTombstones>,
}

/// What entry `p` of a source of age `age()` (asked only if there are range tombstones), of `kind` so far (its own, or a tombstone if
/// expired), is to a reader at `sequence`: a value or merge operand a range tombstone covers
/// counts as a tombstone. With it, the piece of a covering tombstone of a newer source, if any: nothing of
/// this source in that piece is visible, so the walk may jump past it.
#[inline]
pub(super) fn under_range_tombstones<'t>(
    range_tombstones: &'t [SourceTombstones],
    p: &ParsedKey<'_>,
    kind: ValueKind,
    sequence: u64,
    age: impl FnOnce() -> usize,
) -> (ValueKind, Option<&'t Fragment>) {
    if !matches!(kind, ValueKind::Value | ValueKind::Merge) || range_tombstones.is_empty() {
        return (kind, None);
    }
    let age = age();
    let mut covered = false;
    for t in range_tombstones {
        if let Some(f) = t.list.covering(p.user_key, p.seq, sequence) {
            if t.age < age {
                return (ValueKind::Deletion, Some(f));
            }
            covered = true;
        }
    }
    match covered {
        true => (ValueKind::Deletion, None),
        false => (kind, None),
    }
}

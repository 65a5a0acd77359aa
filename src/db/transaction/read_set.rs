//! What a transaction's commit is checked against (`conflict.rs`): what the transaction read,
//! wrote and scanned, and what the batches ahead of it in its commit group write.

use std::collections::BTreeSet;
use std::ops::Bound;

use crate::key::ValueKind;
use crate::key_range::{above_start, below_end};
use crate::write_batch::BatchEntry;

/// A range of user keys of one keyspace, as a transaction scanned it.
pub(crate) type ScannedRange = (u32, Bound<Vec<u8>>, Bound<Vec<u8>>);

/// What a transaction's commit must find unchanged since its snapshot.
#[derive(Debug, Default)]
pub(crate) struct ConflictCheck {
    /// The sequence of the transaction's snapshot.
    pub(crate) snapshot: u64,
    /// Every key it read or wrote, by keyspace id.
    pub(crate) keys: BTreeSet<(u32, Vec<u8>)>,
    /// Every range it scanned.
    pub(crate) ranges: Vec<ScannedRange>,
}

/// What the batches of a commit group ahead of the one being checked write: they are in no
/// memtable yet, but commit before it.
#[derive(Debug, Default)]
pub(crate) struct GroupWrites {
    /// The keys they put or delete, by keyspace id.
    keys: BTreeSet<(u32, Vec<u8>)>,
    /// The ranges they delete: keyspace id, start, end (`None`: no end).
    ranges: Vec<(u32, Vec<u8>, Option<Vec<u8>>)>,
}

impl GroupWrites {
    /// Adds what entry `e` writes.
    pub(crate) fn add(&mut self, e: &BatchEntry<'_>) {
        match e.kind {
            // A range deletion without an end has an empty one until the commit fills it in.
            ValueKind::RangeDeletion => self.ranges.push((
                e.keyspace,
                e.key.to_vec(),
                (!e.value.is_empty()).then(|| e.value.to_vec()),
            )),
            _ => {
                self.keys.insert((e.keyspace, e.key.to_vec()));
            }
        }
    }

    /// Whether they write `key` of keyspace `id`.
    pub(super) fn write_key(&self, id: u32, key: &[u8]) -> bool {
        self.keys.contains(&(id, key.to_vec()))
            || self.ranges.iter().any(|(ks, start, end)| {
                *ks == id && key >= start.as_slice() && end.as_deref().is_none_or(|e| key < e)
            })
    }

    /// Whether they write a key of keyspace `id` within `bounds`.
    pub(super) fn write_within(&self, id: u32, bounds: (Bound<&[u8]>, Bound<&[u8]>)) -> bool {
        let key_within = self
            .keys
            .range((id, Vec::new())..)
            .take_while(|(ks, _)| *ks == id)
            .any(|(_, k)| above_start(k, bounds.0) && below_end(k, bounds.1));
        // Two ranges meet when each starts before the other ends.
        key_within
            || self.ranges.iter().any(|(ks, start, end)| {
                *ks == id
                    && below_end(start, bounds.1)
                    && end.as_deref().is_none_or(|e| match bounds.0 {
                        Bound::Included(s) | Bound::Excluded(s) => s < e,
                        Bound::Unbounded => true,
                    })
            })
    }
}

//! What the group commit fills in of its batches just before it logs them, under the WAL lock,
//! with one reading of the clock for the whole group:
//!
//! - **Expiry times** (`ttl.rs`). A put with a time to live of its own (`put_with_ttl`, whose
//!   value ends in that TTL until now) expires that long after the commit; a plain put in a
//!   keyspace with a TTL becomes a value that expires the keyspace's TTL after it; a plain put in
//!   a keyspace with write times gets the commit's time after its value.
//! - **The end of a range deletion without one** (`delete_range(start..)`, `delete_range(..)`):
//!   just past the largest key the keyspace holds an entry of, in any memtable or table, or that
//!   the group writes to it. Nothing else is written meanwhile, so every entry the deletion must
//!   cover (every one older than it) is at or below that key, and later ones it does not cover
//!   anyway. So every range tombstone the store keeps has an end, as before.
//!
//! A group whose batches have nothing to fill in and whose keyspaces stamp nothing is left as it
//! is, at the cost of a flag per batch and a look at each keyspace's TTL.

use std::collections::BTreeMap;

use crate::clock::unix_seconds;
use crate::db::tree::Tree;
use crate::db::ttl::{append_stamp, expiry_time, split_stamp};
use crate::key::ValueKind;
use crate::store_id::StoreId;
use crate::write_batch::{BatchEntries, Target, WriteBatch};

impl Tree {
    /// Whether the commit stamps its plain values: it has a TTL, or write times.
    #[inline]
    pub(crate) fn stamps_plain_values(&self) -> bool {
        self.write_times || self.ttl_seconds() > 0
    }
}

/// Whether a group of `batches` writing to `trees` has anything to fill in.
pub(crate) fn needs_settling<'a>(
    mut batches: impl Iterator<Item = &'a WriteBatch>,
    trees: &mut impl Iterator<Item = &'a Tree>,
) -> bool {
    trees.any(Tree::stamps_plain_values) || batches.any(WriteBatch::is_unsettled)
}

/// Fills in the expiry times, write times and range ends of `batches` (a commit group, in order)
/// that write to `trees` (every keyspace they write to) in store `store`. Returns the bytes
/// added.
pub(crate) fn settle_group(
    batches: &mut [&mut WriteBatch],
    trees: &[&Tree],
    store: StoreId,
) -> u64 {
    let Some(clock) = trees.first().map(|t| &t.clock) else {
        return 0;
    };
    let now = unix_seconds(clock.as_ref());
    let mut ends: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    let mut added = 0;
    for i in 0..batches.len() {
        let batch = &*batches[i];
        let stamps = batch
            .keyspaces()
            .any(|id| trees.iter().any(|t| t.id == id && t.stamps_plain_values()));
        if !stamps && !batch.is_unsettled() {
            continue;
        }
        let Some(settled) = settle_batch(batch, trees, now, store, |id| {
            ends.entry(id)
                .or_insert_with(|| largest_key(trees, batches, id))
                .clone()
        }) else {
            // It does not decode: it fails to apply, as it would have anyway.
            continue;
        };
        added += settled
            .encoded()
            .len()
            .saturating_sub(batch.encoded().len()) as u64;
        *batches[i] = settled;
    }
    added
}

/// `batch` settled at time `now`; `largest` gives the largest key a keyspace holds or the group
/// writes to it. `None` if it does not decode.
fn settle_batch(
    batch: &WriteBatch,
    trees: &[&Tree],
    now: u32,
    store: StoreId,
    mut largest: impl FnMut(u32) -> Vec<u8>,
) -> Option<WriteBatch> {
    let mut out = WriteBatch::with_capacity(batch.encoded().len() + 4 * batch.len());
    let mut value = Vec::new();
    for e in BatchEntries::new(batch.encoded())? {
        let e = e?;
        let to = match e.targeted {
            true => Target::In(e.keyspace, store),
            // Un-targeted by now means the default keyspace's.
            false => Target::Untargeted,
        };
        let tree = trees.iter().find(|t| t.id == e.keyspace);
        // Every kind of entry is named, so that a new kind is a decision here.
        match e.kind {
            ValueKind::Value => match tree {
                Some(t) if t.write_times => {
                    value.clear();
                    value.extend_from_slice(e.value);
                    append_stamp(&mut value, now);
                    out.entry(to, ValueKind::Value, e.key, Some(&value));
                }
                Some(t) if t.ttl_seconds() > 0 => {
                    value.clear();
                    value.extend_from_slice(e.value);
                    append_stamp(&mut value, expiry_time(now, t.ttl_seconds()));
                    out.entry(to, ValueKind::ExpiringValue, e.key, Some(&value));
                }
                _ => out.entry(to, e.kind, e.key, Some(e.value)),
            },
            ValueKind::ExpiringValue => {
                // Until now the value ends in its time to live.
                let (user, ttl) = split_stamp(e.value)?;
                value.clear();
                value.extend_from_slice(user);
                append_stamp(&mut value, expiry_time(now, u64::from(ttl)));
                out.entry(to, e.kind, e.key, Some(&value));
            }
            ValueKind::RangeDeletion if e.value.is_empty() => {
                // No end: just past the largest key there is (or the start, if it is larger).
                let mut end = largest(e.keyspace).max(e.key.to_vec());
                end.push(0);
                out.entry(to, e.kind, e.key, Some(&end));
            }
            // Operands carry no stamp: a keyspace with a TTL takes no merge operator.
            ValueKind::RangeDeletion | ValueKind::Merge => {
                out.entry(to, e.kind, e.key, Some(e.value))
            }
            ValueKind::Deletion => out.entry(to, e.kind, e.key, None),
        }
    }
    out.adopt_largest(batch);
    Some(out)
}

/// The largest user key keyspace `id` holds an entry of (any version, in any memtable or table)
/// or that one of `batches` writes to it; empty if there is none.
fn largest_key(trees: &[&Tree], batches: &[&mut WriteBatch], id: u32) -> Vec<u8> {
    let mut largest = Vec::new();
    if let Some(tree) = trees.iter().find(|t| t.id == id) {
        let sv = tree.super_version();
        let memtables = std::iter::once(&sv.mem).chain(&sv.imm);
        for k in memtables.filter_map(|m| m.largest_user_key()) {
            largest = largest.max(k);
        }
        if let Some(k) = sv.version.largest_user_key() {
            largest = largest.max(k.to_vec());
        }
    }
    for batch in batches {
        for e in BatchEntries::new(batch.encoded())
            .into_iter()
            .flatten()
            .flatten()
        {
            if e.keyspace == id && e.key > largest.as_slice() {
                largest = e.key.to_vec();
            }
        }
    }
    largest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write_batch::decode_batch;

    fn entries(b: &WriteBatch) -> Vec<(u32, ValueKind, Vec<u8>, Vec<u8>)> {
        decode_batch(b.encoded())
            .unwrap()
            .iter()
            .map(|e| (e.keyspace, e.kind, e.key.to_vec(), e.value.to_vec()))
            .collect()
    }

    #[test]
    fn times_to_live_become_expiry_times_and_open_ranges_get_an_end() {
        let store = [9u8; 16];
        let mut b = WriteBatch::new();
        b.put(b"d", b"0")
            .put_with_ttl(b"t", b"v", std::time::Duration::from_secs(30))
            .delete(b"gone")
            .delete_range(&b"m"[..]..)
            .delete_range(&b"a"[..]..&b"b"[..]);
        assert!(b.is_unsettled());
        let mut largest_asked = Vec::new();
        let settled = settle_batch(&b, &[], 1_000, store, |id| {
            largest_asked.push(id);
            b"x".to_vec()
        })
        .unwrap();
        assert_eq!(largest_asked, [0]);
        assert!(!settled.is_unsettled());
        assert_eq!(settled.len(), b.len());
        assert_eq!(settled.largest_key_and_value(), b.largest_key_and_value());
        let stamped = |v: &[u8], t: u32| [v, &t.to_le_bytes()].concat();
        assert_eq!(
            entries(&settled),
            vec![
                (0, ValueKind::Value, b"d".to_vec(), b"0".to_vec()),
                (
                    0,
                    ValueKind::ExpiringValue,
                    b"t".to_vec(),
                    stamped(b"v", 1_030)
                ),
                (0, ValueKind::Deletion, b"gone".to_vec(), vec![]),
                (0, ValueKind::RangeDeletion, b"m".to_vec(), b"x\0".to_vec()),
                (0, ValueKind::RangeDeletion, b"a".to_vec(), b"b".to_vec()),
            ]
        );
        // A start past every key ends just after the start.
        let mut late = WriteBatch::new();
        late.delete_range(&b"zz"[..]..);
        let settled = settle_batch(&late, &[], 0, store, |_| b"x".to_vec()).unwrap();
        assert_eq!(entries(&settled)[0].3, b"zz\0");
    }
}

//! A transaction's conflict check, which the group-commit leader runs under the WAL lock just
//! before it logs the group: did anyone write a key the transaction read or wrote, or a key in a
//! range it scanned, after its snapshot?
//!
//! A key changed after the snapshot iff its newest version has a sequence above the snapshot's:
//! the snapshot is registered while the transaction lives, so no flush or compaction drops,
//! merges away or zeroes the sequence of a version newer than it (`VersionRetention`). The check
//! asks the memtables, then the tables as a Get walks them, each table's filter first: a key the
//! transaction read but nobody rewrote costs a filter probe per table, not a block read.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use super::read_set::{ConflictCheck, GroupWrites};
use crate::db::read::with_lookup_key;
use crate::db::tree::Tree;
use crate::db::version::filename::table_path;
use crate::db::version::FileMeta;
use crate::db::DbInner;
use crate::error::{Error, Result};
use crate::filter::FilterProbe;
use crate::iter::InternalIterator;
use crate::key::{lookup_key, parse_internal_key, MAX_SEQUENCE};
use crate::key_range::{above_start, below_end};
use crate::memtable::NewestEntry;
use crate::sst::table_reader::TakeSequence;
use crate::stats::FilterVerdict;

impl DbInner {
    /// Why `check` fails, if it does: the first key (or range) found changed since the
    /// snapshot, in words; `None` if nothing changed. `trees` holds every live keyspace by id.
    ///
    /// # Errors
    /// `Error::InvalidArgument` if the transaction touched a keyspace since dropped;
    /// `Error::Corruption` or `Error::Io` if a table cannot be read.
    pub(crate) fn find_conflict(
        &self,
        check: &ConflictCheck,
        trees: &BTreeMap<u32, Arc<Tree>>,
        earlier: &GroupWrites,
    ) -> Result<Option<String>> {
        let tree_of = |id: u32| {
            trees.get(&id).ok_or_else(|| {
                Error::InvalidArgument("the transaction used a keyspace that was dropped".into())
            })
        };
        for (id, key) in &check.keys {
            let tree = tree_of(*id)?;
            if earlier.write_key(*id, key) || newer_version(tree, key, check.snapshot)? {
                return Ok(Some(format!(
                    "key {} of keyspace {} was written after the transaction's snapshot",
                    show(key),
                    tree.name
                )));
            }
        }
        for (id, start, end) in &check.ranges {
            let tree = tree_of(*id)?;
            let bounds = (as_ref(start), as_ref(end));
            let in_group = earlier.write_within(*id, bounds);
            if in_group || newer_in_range(&self.dir, tree, bounds, check.snapshot)? {
                return Ok(Some(format!(
                    "a key of keyspace {} in a range the transaction scanned was written after \
                     its snapshot",
                    tree.name
                )));
            }
        }
        Ok(None)
    }
}

/// Whether the newest version of `key` in `tree` is newer than `snapshot`.
fn newer_version(tree: &Tree, key: &[u8], snapshot: u64) -> Result<bool> {
    let sv = tree.super_version();
    // Any version above the snapshot will do: one survives while the snapshot lives.
    if std::iter::once(&sv.mem)
        .chain(&sv.imm)
        .any(|m| m.newest_sequence(key).is_some_and(|s| s > snapshot))
    {
        return Ok(true);
    }
    // The first table holding the key (or a range tombstone over it) holds its newest version
    // there.
    let mut range_tombstone = 0;
    let found = with_lookup_key(key, MAX_SEQUENCE, |lookup| {
        tree.search_tables::<TakeSequence>(
            &sv.version,
            lookup,
            &FilterProbe::new(key),
            |level, _, visit| {
                if let crate::db::read::TableVisit::Searched(search, lines) = visit {
                    range_tombstone = range_tombstone.max(search.range_tombstone);
                    if let Some((layout, maybe)) = search.filter {
                        let verdict = FilterVerdict::of(maybe, search.found.is_some());
                        tree.stats.record_filter(level, layout, verdict);
                        tree.stats.record_filter_lines(level, u64::from(lines));
                    }
                }
            },
        )
    })?;
    Ok(range_tombstone > snapshot
        || matches!(found, Some(NewestEntry::Value(seq)) if seq > snapshot))
}

/// Whether `tree` holds a version newer than `snapshot` of any key within `bounds`. Walks every
/// entry of the range in the memtables and in the tables whose key range meets it.
fn newer_in_range(
    dir: &Path,
    tree: &Tree,
    bounds: (Bound<&[u8]>, Bound<&[u8]>),
    snapshot: u64,
) -> Result<bool> {
    let sv = tree.super_version();
    if std::iter::once(&sv.mem)
        .chain(&sv.imm)
        .any(|m| m.has_newer_in_range(bounds, snapshot))
    {
        return Ok(true);
    }
    for file in sv.version.levels.iter().flatten() {
        if file.meets(bounds) && table_has_newer(dir, tree, file, bounds, snapshot)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// [`newer_in_range`] for one table.
fn table_has_newer(
    dir: &Path,
    tree: &Tree,
    file: &FileMeta,
    (start, end): (Bound<&[u8]>, Bound<&[u8]>),
    snapshot: u64,
) -> Result<bool> {
    let table = tree.tables.get(file)?;
    if let Some(t) = table.range_tombstones()
        && t.newest_overlapping((start, end)) > Some(snapshot)
    {
        return Ok(true);
    }
    let mut it = table.iter(true);
    match start {
        Bound::Included(k) | Bound::Excluded(k) => it.seek(&lookup_key(k, MAX_SEQUENCE))?,
        Bound::Unbounded => it.seek_to_first()?,
    }
    while it.valid() {
        let parsed = parse_internal_key(it.key()).ok_or_else(|| {
            Error::corruption(
                &table_path(dir, file.number),
                "bad internal key in data block",
            )
        })?;
        if !below_end(parsed.user_key, end) {
            break;
        }
        if above_start(parsed.user_key, start) && parsed.seq > snapshot {
            return Ok(true);
        }
        it.next()?;
    }
    Ok(false)
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A key for an error message: as text if it is printable ASCII, else in hex; long ones cut.
fn show(key: &[u8]) -> String {
    let cut = &key[..key.len().min(64)];
    let more = if key.len() > cut.len() { "…" } else { "" };
    if cut.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}{more}", String::from_utf8_lossy(cut))
    } else {
        let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}{more}")
    }
}

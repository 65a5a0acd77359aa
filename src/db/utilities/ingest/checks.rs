//! What ingest checks of a file before it changes anything: that it is a whole, undamaged table
//! a [`TableWriter`](super::TableWriter) built for this store's keyspace, and that the files of
//! one ingest do not overlap.

use std::path::{Path, PathBuf};

use crate::db::tree::Tree;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{compare_bytes, parse_internal_key, user_key, ValueKind};
use crate::store_id::StoreId;

/// A file that passed the checks.
#[derive(Debug)]
pub(crate) struct CheckedTable {
    /// The caller's file.
    pub(crate) path: PathBuf,
    pub(crate) size: u64,
    /// Its smallest and largest internal keys, at sequence 0, as the table records them.
    pub(crate) smallest: Vec<u8>,
    pub(crate) largest: Vec<u8>,
    pub(crate) entries: u64,
}

impl CheckedTable {
    pub(crate) fn smallest_user(&self) -> &[u8] {
        user_key(&self.smallest)
    }

    pub(crate) fn largest_user(&self) -> &[u8] {
        user_key(&self.largest)
    }
}

/// Checks the table at `path` for ingestion into `tree` of store `store_id`: its footer,
/// metaindex, properties, index and filter (as opening any table does), then every data block
/// (checksums, entries) in one pass: each entry a value, an expiring value or a tombstone at
/// sequence 0, user keys strictly increasing, as many entries and the same first and last keys
/// as its properties record.
///
/// # Errors
/// `Error::Corruption` naming the file if it is damaged, cut short or not a table, or disagrees
/// with itself; `Error::InvalidArgument` naming it if it is a sound table but not one to ingest
/// here: not built by a `TableWriter` (a store's own table), built for another store or another
/// keyspace; `Error::Io` if it cannot be read.
pub(crate) fn check_table(path: &Path, tree: &Tree, store_id: &StoreId) -> Result<CheckedTable> {
    let refuse = |what: String| Error::InvalidArgument(format!("{}: {what}", path.display()));
    let bad = |what: &str| Error::corruption(path, what);
    let reader = tree.tables.open_unnamed(path)?;
    let props = reader.properties();
    if !props.external {
        return Err(refuse(format!(
            "not a table built by a TableWriter (it records table number {} of a store), so its \
             entries carry sequences of their own",
            props.table_number
        )));
    }
    if props.store_id != store_id {
        return Err(refuse(
            "built by a TableWriter of another store (its identity differs)".to_string(),
        ));
    }
    if props.keyspace_id != Some(tree.id) {
        return Err(refuse(format!(
            "built for keyspace {} (id {}), not keyspace {} (id {})",
            props.keyspace,
            props
                .keyspace_id
                .map_or_else(|| "none".to_string(), |id| id.to_string()),
            tree.name,
            tree.id
        )));
    }
    if props.num_range_deletions > 0 || reader.range_tombstones().is_some() {
        return Err(bad("a table built by a TableWriter holds range tombstones"));
    }
    let size = std::fs::metadata(path)
        .map_err(crate::fs::io_at(path))?
        .len();
    let mut it = reader.iter(false);
    it.seek_to_first()?;
    let mut entries = 0u64;
    let mut last: Option<Vec<u8>> = None;
    while it.valid() {
        let parsed = parse_internal_key(it.key()).ok_or_else(|| bad("malformed internal key"))?;
        if parsed.seq != 0 {
            return Err(bad(
                "an entry of a TableWriter's table is not at sequence 0",
            ));
        }
        if parsed.kind == ValueKind::RangeDeletion {
            return Err(bad("a range tombstone in a data block"));
        }
        if let Some(last) = &last
            && compare_bytes(last, parsed.user_key).is_ge()
        {
            return Err(bad("its keys are not in strictly increasing order"));
        }
        if entries == 0 && it.key() != props.smallest_key.as_slice() {
            return Err(bad(
                "its first key is not the smallest its properties record",
            ));
        }
        let buf = last.get_or_insert_with(Vec::new);
        buf.clear();
        buf.extend_from_slice(parsed.user_key);
        entries += 1;
        it.next()?;
    }
    if entries == 0 {
        return Err(bad("the table holds no entry"));
    }
    if entries != props.num_entries {
        return Err(bad(&format!(
            "it holds {entries} entries, its properties record {}",
            props.num_entries
        )));
    }
    if last.as_deref() != Some(user_key(&props.largest_key)) {
        return Err(bad("its last key is not the largest its properties record"));
    }
    Ok(CheckedTable {
        path: path.to_path_buf(),
        size,
        smallest: props.smallest_key.clone(),
        largest: props.largest_key.clone(),
        entries,
    })
}

/// Sorts `tables` by key and checks that no two overlap.
///
/// # Errors
/// `Error::InvalidArgument` naming two that do.
pub(crate) fn sort_disjoint(tables: &mut [CheckedTable]) -> Result<()> {
    tables.sort_by(|a, b| compare_bytes(a.smallest_user(), b.smallest_user()));
    for pair in tables.windows(2) {
        if compare_bytes(pair[0].largest_user(), pair[1].smallest_user()).is_ge() {
            return Err(Error::InvalidArgument(format!(
                "{} and {} overlap: the tables of one ingest must hold disjoint key ranges",
                pair[0].path.display(),
                pair[1].path.display()
            )));
        }
    }
    Ok(())
}

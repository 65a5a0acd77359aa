//! Each deeper level's filters side by side in its version, so that a Get reaches a table's
//! filter from the level's array, without the hops through the table's `FileMeta` and reader
//! (each a cache miss once the filters crowd the table metadata out of the CPU's cache).
//!
//! A slot is filled from the table's pinned reader: when the version is made if the reader is
//! open by then, else by the first Get that finds it open. A table without a pinned reader, or
//! whose filter is not a full filter of whole keys kept in memory, leaves its slot empty, and
//! Gets reach it through its reader as before. The slot shares the reader's filter bytes; it
//! holds nothing the table's reader does not, and goes with the version.

use std::sync::{Arc, OnceLock};

use super::FileMeta;
use crate::sst::filter_block::SharedFullFilter;

/// A table's full filter kept in memory, shared with the table's reader.
pub(crate) type KeptFilter = SharedFullFilter;

/// The filter `file`'s pinned reader keeps in memory, if it is open and has one.
fn kept_by(file: &FileMeta) -> Option<KeptFilter> {
    file.pinned_reader()?.reader().shared_filter_in_memory()
}

/// One slot per table of a level, in the level's order.
pub(crate) type LevelFilters = Vec<OnceLock<KeptFilter>>;

/// The slots of `files`, filled for the tables whose readers are open.
pub(crate) fn level_filters(files: &[Arc<FileMeta>]) -> LevelFilters {
    files
        .iter()
        .map(|f| match kept_by(f) {
            Some(k) => OnceLock::from(k),
            None => OnceLock::new(),
        })
        .collect()
}

/// The filter in `slot`, `file`'s, filled from its reader if it is open by now.
#[inline(always)]
pub(crate) fn kept_filter<'a>(
    slot: &'a OnceLock<KeptFilter>,
    file: &FileMeta,
) -> Option<&'a KeptFilter> {
    match slot.get() {
        Some(k) => Some(k),
        None => fill(slot, file),
    }
}

#[cold]
#[inline(never)]
fn fill<'a>(slot: &'a OnceLock<KeptFilter>, file: &FileMeta) -> Option<&'a KeptFilter> {
    let k = kept_by(file)?;
    Some(slot.get_or_init(|| k))
}

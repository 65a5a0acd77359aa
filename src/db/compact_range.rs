//! `Db::compact_range`: the compaction of the tables that hold a range of keys, level by level
//! down to the deepest, leaving the rest of the store alone.

use std::ops::Bound;
use std::sync::Arc;

use super::compaction::CompactionJob;
use super::key_range::KeyRange;
use super::tree::Tree;
use super::version::FileMeta;
use super::{Db, DbInner};
use crate::error::Result;
use crate::key::compare_bytes;
use crate::options::NUM_LEVELS;

/// Whether `f`'s key range meets `(lo, hi)` (an excluded bound taken as included: at worst one
/// table more is compacted).
fn meets(f: &FileMeta, (lo, hi): (&Bound<Vec<u8>>, &Bound<Vec<u8>>)) -> bool {
    let after_lo = match lo {
        Bound::Included(k) | Bound::Excluded(k) => compare_bytes(f.largest_user(), k).is_ge(),
        Bound::Unbounded => true,
    };
    let before_hi = match hi {
        Bound::Included(k) | Bound::Excluded(k) => compare_bytes(f.smallest_user(), k).is_le(),
        Bound::Unbounded => true,
    };
    after_lo && before_hi
}

impl DbInner {
    /// Compacts the tables of `tree` that meet `bounds` into the next level, level by level, down
    /// to the deepest level that holds data: all of L0 if any of its tables meets them (an L0
    /// table left above newer keys moved down would hide them), and below it the tables that
    /// meet them, with what they overlap in the next level. Then, as [`Db::compact`] does, the
    /// deepest level's tables in the range that still hold range tombstones (or, with a compaction
    /// filter or a TTL, that no job rewrote) are rewritten in place.
    fn compact_range_of(
        &self,
        tree: &Arc<Tree>,
        bounds: (&Bound<Vec<u8>>, &Bound<Vec<u8>>),
    ) -> Result<()> {
        let before = self.manifest.lock().version(tree.id);
        for level in 0..NUM_LEVELS - 1 {
            self.check_open()?;
            tree.check_live()?;
            let version = self.manifest.lock().version(tree.id);
            if level >= version.deepest_nonempty_level().max(1) {
                break;
            }
            let files = &version.levels[level];
            let inputs: Vec<Arc<FileMeta>> = match level {
                0 if files.iter().any(|f| meets(f, bounds)) => files.clone(),
                0 => Vec::new(),
                _ => files.iter().filter(|f| meets(f, bounds)).cloned().collect(),
            };
            if let Some(job) = CompactionJob::new(tree, version, level, inputs) {
                self.run_compaction(job)?;
            }
        }
        for job in self.last_level_rewrites(tree, &before) {
            if job.next_level_inputs.iter().all(|f| meets(f, bounds)) {
                self.check_open()?;
                tree.check_live()?;
                self.run_compaction(job)?;
            }
        }
        Ok(())
    }
}

impl Db {
    /// Flushes the memtable and compacts the tables that hold keys of `range`, level by level,
    /// down to the deepest level that holds data; tables wholly outside the range are not
    /// rewritten (an L0 table is compacted with all of L0, and a table overlapping the range is
    /// rewritten whole). Afterwards the range holds no shadowed versions, and no tombstones that
    /// no snapshot needs: the way to reclaim the space of a [`delete_range`](Db::delete_range)
    /// without rewriting the whole store as [`compact`](Db::compact) does. Waits until done.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// for i in 0..1000 {
    ///     db.put(format!("event/{i:04}"), "...")?;
    /// }
    /// db.delete_range("event/0000".."event/0500")?;
    /// db.compact_range("event/0000".."event/0500")?; // the deleted keys leave the tables
    /// assert_eq!(db.scan("event/".."event0").count(), 500);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`compact`](Db::compact).
    pub fn compact_range<R: KeyRange>(&self, range: R) -> Result<()> {
        let (lo, hi) = range.into_bounds();
        self.compact_with(|inner, tree| inner.compact_range_of(tree, (&lo, &hi)))
    }
}

//! Compactions a caller asks for: [`Db::compact`], of every level, and [`Db::compact_range`], of
//! the tables that hold a range of keys, level by level down to the deepest.

use std::ops::Bound;
use std::sync::Arc;

use super::CompactionJob;
use crate::db::background::catch_panic;
use crate::db::tree::Tree;
use crate::db::version::FileMeta;
use crate::db::{Db, DbInner};
use crate::error::{Error, Result};
use crate::key_range::KeyRange;
use crate::options::NUM_LEVELS;

impl DbInner {
    /// Compacts the tables of `tree` that meet `bounds` (all of them, for `Db::compact`) into the
    /// next level, level by level, down to the deepest level that holds data: all of L0 if any of its tables meets them (an L0
    /// table left above newer keys moved down would hide them), and below it the tables that
    /// meet them, with what they overlap in the next level. Then, as [`Db::compact`] does, the
    /// deepest level's tables in the range that still hold range tombstones (or, with a compaction
    /// filter or a TTL, that no job rewrote) are rewritten in place.
    fn compact_range_of(
        &self,
        tree: &Arc<Tree>,
        bounds: (Bound<&[u8]>, Bound<&[u8]>),
    ) -> Result<()> {
        let before = self.manifest.lock().version(tree.id);
        let whole = matches!(bounds, (Bound::Unbounded, Bound::Unbounded));
        if whole && tree.options().compaction_style.runs_per_level().is_some() {
            // Every run and L0 in one merge into the last run: one rewrite of each byte.
            self.check_open()?;
            tree.check_live()?;
            if let Some(job) = self.pick_lazy_full_merge(tree) {
                self.run_compaction(job)?;
            }
        }
        for level in 0..NUM_LEVELS - 1 {
            self.check_open()?;
            tree.check_live()?;
            let version = self.manifest.lock().version(tree.id);
            if level >= version.deepest_nonempty_level().max(1) {
                break;
            }
            let files = &version.levels[level];
            let inputs: Vec<Arc<FileMeta>> = match level {
                0 if files.iter().any(|f| f.meets(bounds)) => files.clone(),
                0 => Vec::new(),
                _ => files.iter().filter(|f| f.meets(bounds)).cloned().collect(),
            };
            if let Some(job) = CompactionJob::new(tree, version, level, inputs) {
                self.run_compaction(job)?;
            }
        }
        for job in self.last_level_rewrites(tree, &before) {
            if job.next_level_inputs.iter().all(|f| f.meets(bounds)) {
                self.check_open()?;
                tree.check_live()?;
                self.run_compaction(job)?;
            }
        }
        Ok(())
    }
}

impl Db {
    /// Flushes the memtable and compacts every level into the next, so that all data ends in one
    /// level with no shadowed versions and no tombstones. Waits until done. It compacts the
    /// default keyspace; on a [`Keyspace`](crate::Keyspace), that keyspace.
    ///
    /// # Errors
    /// The error of a failed flush or compaction (its inputs are kept); the store then refuses
    /// writes until it is reopened. `Error::Closed` if the store is closed (a close during the
    /// call lets the job in progress finish and starts no other); `Error::InvalidArgument` if the
    /// keyspace was dropped.
    pub fn compact(&self) -> Result<()> {
        self.compact_with(|inner, tree| {
            inner.compact_range_of(tree, (Bound::Unbounded, Bound::Unbounded))
        })
    }

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
        let bounds = (
            lo.as_ref().map(Vec::as_slice),
            hi.as_ref().map(Vec::as_slice),
        );
        self.compact_with(|inner, tree| inner.compact_range_of(tree, bounds))
    }

    /// Flushes, then runs `job` on this handle's keyspace under the compaction lock; a failure
    /// (but a close or a dropped keyspace) becomes the store's background error.
    fn compact_with(&self, job: impl FnOnce(&DbInner, &Arc<Tree>) -> Result<()>) -> Result<()> {
        self.flush()?;
        let _compacting = self.inner.compaction.lock();
        self.inner.check_background_error()?;
        let result = catch_panic("compaction", || job(&self.inner, &self.tree));
        if let Err(e) = &result
            && !matches!(e, Error::Closed(_) | Error::InvalidArgument(_))
        {
            self.inner.set_background_error(e);
        }
        result
    }
}

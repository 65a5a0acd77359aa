//! Leveled compaction: merge tables of level n with the overlapping tables of level n + 1 into new
//! tables of level n + 1, keeping the newest version of each key and dropping tombstones that no
//! deeper level needs.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::background::catch_panic;
use super::filename::table_path;
use super::flush::table_options;
use super::snapshot::VersionRetention;
use super::version::{key_range, FileMeta, Version};
use super::version_edit::{NewFile, VersionEdit};
use super::{CompactPointers, Db, DbInner};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{parse_internal_key, ValueKind};
use crate::options::NUM_LEVELS;
use crate::sst::table_builder::TableBuilder;
use crate::stats::Ticker;

/// One compaction: its inputs and the version they were chosen from.
pub(crate) struct CompactionJob {
    pub(crate) level: usize,
    pub(crate) inputs: Vec<Arc<FileMeta>>,
    pub(crate) next_level_inputs: Vec<Arc<FileMeta>>,
    pub(crate) version: Arc<Version>,
}

impl CompactionJob {
    fn new(
        version: Arc<Version>,
        level: usize,
        inputs: Vec<Arc<FileMeta>>,
    ) -> Option<CompactionJob> {
        let (lo, hi) = key_range(&inputs)?;
        Some(CompactionJob {
            next_level_inputs: version.overlapping(level + 1, &lo, &hi),
            level,
            inputs,
            version,
        })
    }
}

impl DbInner {
    /// The compaction the current version most needs, if any level is over its budget.
    pub(crate) fn pick_compaction(&self, pointers: &mut CompactPointers) -> Option<CompactionJob> {
        let version = Arc::clone(self.manifest.lock().current());
        let (level, _) = version.compaction_level(&self.options)?;
        let inputs = if level == 0 {
            // L0 tables overlap each other: take them all.
            version.levels[0].clone()
        } else {
            // Round robin: the first table past where this level's last compaction ended.
            let files = &version.levels[level];
            let pointer = &pointers[level];
            let pick = files
                .iter()
                .find(|f| pointer.is_empty() || f.smallest_user() > pointer.as_slice())
                .or_else(|| files.first())?;
            vec![Arc::clone(pick)]
        };
        let job = CompactionJob::new(version, level, inputs)?;
        if let Some((_, hi)) = key_range(&job.inputs) {
            pointers[level] = hi;
        }
        Some(job)
    }

    /// Runs `job` and installs its result. On failure the inputs stay and the error is returned;
    /// outputs are deleted if the edit naming them was never written.
    pub(crate) fn run_compaction(&self, job: CompactionJob) -> Result<()> {
        let started = std::time::Instant::now();
        let out_level = job.level + 1;
        let mut outputs: Vec<NewFile> = Vec::new();
        // A panic in user code (a filter policy, a prefix extractor) fails the job like an error.
        let written = catch_panic("compaction", || {
            self.write_compaction_outputs(&job, &mut outputs)
        })
        .and_then(|()| self.fs.sync_dir(&self.dir));
        if let Err(e) = written {
            for f in &outputs {
                let _ = self.fs.remove_file(&table_path(&self.dir, f.number));
            }
            return Err(e);
        }
        let written: u64 = outputs.iter().map(|f| f.size).sum();
        {
            let edit = VersionEdit {
                deleted: job
                    .inputs
                    .iter()
                    .map(|f| (job.level, f.number))
                    .chain(job.next_level_inputs.iter().map(|f| (out_level, f.number)))
                    .collect(),
                added: outputs,
                ..Default::default()
            };
            // An edit whose write or sync failed may still reach the disk (or be read back from
            // the page cache by the next open), so the outputs it names stay; if it did not, the
            // next open removes them as garbage.
            self.install(edit)?;
        }
        // The edit is durable: the inputs' files go once no reader holds them.
        for f in job.inputs.iter().chain(&job.next_level_inputs) {
            f.mark_obsolete(Arc::clone(&self.retire));
        }
        let bytes = |files: &[Arc<FileMeta>]| files.iter().map(|f| f.size).sum::<u64>();
        let (read_upper, read_this) = (bytes(&job.inputs), bytes(&job.next_level_inputs));
        self.stats
            .add(Ticker::CompactionBytesRead, read_upper + read_this);
        self.stats.inc(Ticker::Compactions);
        self.compaction_stats
            .record(out_level, read_upper, read_this, written, started.elapsed());
        Ok(())
    }

    /// Applies `edit` to the MANIFEST and publishes the version it makes.
    fn install(&self, edit: VersionEdit) -> Result<()> {
        let mut manifest = self.manifest.lock();
        let version = manifest.log_and_apply(edit, self.next_file.load(Ordering::SeqCst))?;
        let mut st = self.state.lock();
        self.install_super_version(&mut st, |sv| sv.version = version);
        drop(st);
        drop(manifest);
        self.changed.notify_all();
        Ok(())
    }

    fn write_compaction_outputs(
        &self,
        job: &CompactionJob,
        outputs: &mut Vec<NewFile>,
    ) -> Result<()> {
        let out_level = job.level + 1;
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for f in job.inputs.iter().chain(&job.next_level_inputs) {
            children.push(Box::new(self.tables.get(f)?.iter(false)));
        }
        let mut it = MergingIterator::new(children);
        it.seek_to_first()?;
        let filter = self.filter_for_compaction(job);
        let mut builder: Option<(u64, TableBuilder)> = None;
        let mut last_key: Option<Vec<u8>> = None;
        let finish = |b: (u64, TableBuilder), outputs: &mut Vec<NewFile>| -> Result<()> {
            let (number, builder) = b;
            // A builder that fails to finish removes its own partial file.
            let summary = builder.finish()?;
            self.stats.add(Ticker::TableBytesWritten, summary.file_size);
            outputs.push(NewFile {
                level: out_level,
                number,
                size: summary.file_size,
                smallest: summary.smallest,
                largest: summary.largest,
            });
            Ok(())
        };
        let snapshots = self.snapshots.sequences();
        let mut retention = VersionRetention::new(&snapshots);
        // An output table is cut only between user keys: versions of one key (kept for snapshots)
        // never straddle two tables of a level, whose key ranges must not overlap.
        let mut cut_pending = false;
        let outcome = (|| {
            while it.valid() {
                let parsed = parse_internal_key(it.key()).ok_or_else(|| {
                    Error::corruption(&self.dir, "compaction met a malformed internal key")
                })?;
                if last_key.as_deref() != Some(parsed.user_key) {
                    last_key = Some(parsed.user_key.to_vec());
                    retention.next_key();
                    if cut_pending {
                        cut_pending = false;
                        if let Some(done) = builder.take() {
                            finish(done, outputs)?;
                        }
                    }
                }
                // Kept: the newest version, and the newest at or below each live snapshot. A
                // tombstone no snapshot can look beneath, with nothing of its key in deeper
                // levels, hides nothing: it goes too.
                let keep = retention.keep(parsed.seq)
                    && !(parsed.kind == ValueKind::Deletion
                        && !retention.snapshot_below(parsed.seq)
                        && job
                            .version
                            .is_base_level_for_key(out_level, parsed.user_key));
                if keep {
                    if builder.is_none() {
                        let number = self.new_file_number();
                        let b = TableBuilder::create(
                            &self.fs,
                            &table_path(&self.dir, number),
                            number,
                            table_options(&self.options, filter.clone(), self.store_id),
                        )?;
                        builder = Some((number, b));
                    }
                    if let Some((_, b)) = builder.as_mut() {
                        b.add(it.key(), it.value())?;
                        cut_pending = b.estimated_file_size() >= self.options.target_file_size;
                    }
                }
                it.next()?;
            }
            if let Some(done) = builder.take() {
                finish(done, outputs)?;
            }
            Ok(())
        })();
        // Only on failure is a builder still open; dropping it removes its partial file. Finished
        // outputs are removed by the caller.
        drop(builder);
        outcome
    }

    /// Compacts every level into the next, down to the deepest level that holds data.
    fn compact_all(&self, pointers: &mut CompactPointers) -> Result<()> {
        let _ = pointers;
        for level in 0..NUM_LEVELS - 1 {
            let version = Arc::clone(self.manifest.lock().current());
            if level >= version.deepest_nonempty_level().max(1) {
                break;
            }
            let inputs = version.levels[level].clone();
            if let Some(job) = CompactionJob::new(version, level, inputs) {
                self.run_compaction(job)?;
            }
        }
        Ok(())
    }
}

impl Db {
    /// Flushes the memtable and compacts every level into the next, so that all data ends in one
    /// level with no shadowed versions and no tombstones. Waits until done.
    ///
    /// # Errors
    /// The error of a failed flush or compaction (its inputs are kept); the store then refuses
    /// writes until it is reopened.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        let mut pointers = self.inner.compaction.lock();
        self.inner.check_background_error()?;
        let result = catch_panic("compaction", || self.inner.compact_all(&mut pointers));
        if let Err(e) = &result {
            self.inner.set_background_error(e);
        }
        result
    }
}

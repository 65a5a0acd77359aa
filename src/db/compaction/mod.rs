//! Leveled compaction: merge tables of level n with the overlapping tables of level n + 1 into new
//! tables of level n + 1, keeping the newest version of each key and dropping tombstones that no
//! deeper level needs.
//!
//! The room holds what decides and shapes compactions: `filtering.rs` (compaction filters and
//! TTL expiry in the merge), `stats.rs` (figures per level), `write_burst.rs`, `idle.rs` and
//! `read_triggered.rs` (when L0 is compacted: while writes flow, once they pause, once reads have
//! paid for it), `manual.rs` (`compact`, `compact_range`), `table_filter.rs` (the filter a new
//! table gets: Monkey's plan), `filter_refresh.rs` and `refreshed_tables.rs` (filters brought
//! back to their level's bits).

mod filter_refresh;
mod filtering;
pub(crate) mod idle;
mod lazy_leveling;
mod manual;
pub(crate) mod read_triggered;
pub(crate) mod refreshed_tables;
pub(crate) mod stats;
mod table_filter;
pub(crate) mod write_burst;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::background::catch_panic;
use super::flush::table_options;
use super::operand_chains::{collapse_operands, Chain, ChainRules};
use super::scan::level_iter::LevelIter;
use super::snapshot::VersionRetention;
use super::tree::Tree;
use super::version::edit::{NewFile, VersionEdit};
use super::version::filename::table_path;
use super::version::{key_range, FileMeta, Triggers, Version};
use super::DbInner;
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{
    append_internal_key, internal_key, lookup_key, parse_internal_key, ValueKind, MAX_SEQUENCE,
};
use crate::options::NUM_LEVELS;
use crate::range_tombstones::{Fragment, FragmentedRangeTombstones};
use crate::sst::table_builder::TableBuilder;
use crate::stats::Ticker;
use filtering::{CompactionInput, FilterDecisions};

/// A table moves down without a rewrite only if it overlaps at most this many tables' worth of
/// bytes two levels down (LevelDB's rule).
const MAX_MOVE_OVERLAP_TABLES: u64 = 10;

/// What became of a job's edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Installed {
    Yes,
    /// The keyspace was dropped meanwhile: nothing was written.
    KeyspaceDropped,
    /// A live snapshot is newer than the one the caller named: nothing was written.
    SnapshotNewer,
}

/// One compaction: its keyspace, its inputs and the version they were chosen from. A leveled
/// job reads `inputs` of `level` and `next_level_inputs` of `out_level`, the level below; a lazy
/// leveling job (`lazy_leveling.rs`) may also read whole runs of the levels between them
/// (`between`) and write to any level below `level`.
pub(crate) struct CompactionJob {
    pub(crate) tree: Arc<Tree>,
    pub(crate) level: usize,
    pub(crate) inputs: Vec<Arc<FileMeta>>,
    pub(crate) between: Vec<(usize, Vec<Arc<FileMeta>>)>,
    pub(crate) out_level: usize,
    pub(crate) next_level_inputs: Vec<Arc<FileMeta>>,
    pub(crate) version: Arc<Version>,
}

impl CompactionJob {
    /// The rewrite of `file`, a table of `level` ≥ 1, in place: a job from the level above with no
    /// tables of its own, whose output goes to `level` in place of the table it read there.
    pub(crate) fn rewrite_in_place(
        tree: &Arc<Tree>,
        version: &Arc<Version>,
        level: usize,
        file: &Arc<FileMeta>,
    ) -> CompactionJob {
        CompactionJob {
            tree: Arc::clone(tree),
            level: level - 1,
            inputs: Vec::new(),
            between: Vec::new(),
            out_level: level,
            next_level_inputs: vec![Arc::clone(file)],
            version: Arc::clone(version),
        }
    }

    /// The edit that replaces the job's inputs with `outputs`.
    fn edit(&self, outputs: Vec<NewFile>) -> VersionEdit {
        let out_level = self.out_level;
        let between = self
            .between
            .iter()
            .flat_map(|(level, files)| files.iter().map(|f| (*level, f.number)));
        VersionEdit {
            deleted: self
                .inputs
                .iter()
                .map(|f| (self.level, f.number))
                .chain(between)
                .chain(self.next_level_inputs.iter().map(|f| (out_level, f.number)))
                .collect(),
            added: outputs,
            ..Default::default()
        }
    }

    /// Every table the job reads: `inputs`, the runs between, `next_level_inputs`.
    pub(crate) fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        let between = self.between.iter().flat_map(|(_, files)| files);
        self.inputs
            .iter()
            .chain(between)
            .chain(&self.next_level_inputs)
    }

    pub(crate) fn new(
        tree: &Arc<Tree>,
        version: Arc<Version>,
        level: usize,
        inputs: Vec<Arc<FileMeta>>,
    ) -> Option<CompactionJob> {
        let (lo, hi) = key_range(&inputs)?;
        Some(CompactionJob {
            tree: Arc::clone(tree),
            next_level_inputs: version.overlapping(level + 1, &lo, &hi),
            between: Vec::new(),
            out_level: level + 1,
            level,
            inputs,
            version,
        })
    }
}

/// The table of `files` (a level below L0, sorted by key) whose compaction into `below` (the next
/// level, sorted) rewrites the fewest bytes there for each byte it moves down: the smallest ratio
/// of overlapped bytes below to its own size (RocksDB's `kMinOverlappingRatio`); ties go to the
/// first in key order. On random keys every table of a level spans about as much of the key
/// space, but not as many keys: the ranges compacted down longest ago have gathered the most
/// since, and moving those rewrites the fewest bytes below per byte moved.
fn least_overlapping<'f>(
    files: &'f [Arc<FileMeta>],
    below: &[Arc<FileMeta>],
) -> Option<&'f Arc<FileMeta>> {
    // Bytes of `below` before each of its tables, so that a run's bytes are one subtraction.
    let before: Vec<u64> = std::iter::once(0)
        .chain(below.iter().scan(0u64, |sum, f| {
            *sum += f.size;
            Some(*sum)
        }))
        .collect();
    let ratio = |f: &FileMeta| {
        let first = below.partition_point(|g| g.largest_user() < f.smallest_user());
        let end = below.partition_point(|g| g.smallest_user() <= f.largest_user());
        let overlapped = before[end.max(first)] - before[first];
        overlapped as f64 / f.size.max(1) as f64
    };
    files
        .iter()
        .map(|f| (ratio(f), f))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, f)| f)
}

impl DbInner {
    /// The compaction `tree`'s current version most needs, if `triggers` start one.
    ///
    /// # Errors
    /// `Error::Io` if a lazy leveled tree's move of a run cannot be written to the MANIFEST.
    pub(crate) fn pick_compaction(
        &self,
        tree: &Arc<Tree>,
        triggers: Triggers,
    ) -> Result<Option<CompactionJob>> {
        if let Some(t) = tree.options().compaction_style.runs_per_level() {
            return self.pick_lazy_merge(tree, triggers, t);
        }
        Ok(self.pick_leveled(tree, triggers))
    }

    /// [`pick_compaction`](Self::pick_compaction) under leveled compaction.
    fn pick_leveled(&self, tree: &Arc<Tree>, triggers: Triggers) -> Option<CompactionJob> {
        let version = self.manifest.lock().version(tree.id);
        let (level, _) = version.compaction_level(&tree.options(), triggers)?;
        let inputs = if level == 0 || version.grows_into_next(level) {
            // L0 tables overlap each other: take them all. A level growing into the empty
            // level below moves there whole.
            version.levels[level].clone()
        } else {
            vec![Arc::clone(least_overlapping(
                &version.levels[level],
                &version.levels[level + 1],
            )?)]
        };
        CompactionJob::new(tree, version, level, inputs)
    }

    /// L0 into L1, all of its tables, if L0 holds any: the job [`ReadRent`] asks for when reads
    /// have paid for it below the L0 trigger, and [`IdleWatch`] once writes pause.
    ///
    /// [`ReadRent`]: read_triggered::ReadRent
    /// [`IdleWatch`]: idle::IdleWatch
    pub(crate) fn pick_l0_for_reads(&self, tree: &Arc<Tree>) -> Option<CompactionJob> {
        if let Some(t) = tree.options().compaction_style.runs_per_level() {
            return self.pick_lazy_l0_merge(tree, t);
        }
        let version = self.manifest.lock().version(tree.id);
        let inputs = version.levels[0].clone();
        CompactionJob::new(tree, version, 0, inputs)
    }

    /// Runs a job the background thread picked. Input tables that overlap nothing in the next
    /// level nor each other, and hold no tombstone, move down by an edit alone (unless they would
    /// overlap much of the level below that, whose next compaction would then rewrite it all at
    /// once): keys written in order reach the last level written once, and a level growing
    /// into the empty one below moves there whole. A moved table keeps its filter; under Monkey
    /// allocation one far from its new level's bits is rewritten once writes pause
    /// (`filter_refresh.rs`). Tables holding tombstones are compacted, after the others moved;
    /// any other job is compacted. `Db::compact` does not move tables: it promises tables
    /// rewritten without tombstones.
    pub(crate) fn move_or_compact(&self, job: CompactionJob) -> Result<()> {
        let out_level = job.out_level;
        if out_level != job.level + 1 || !job.between.is_empty() {
            return self.run_compaction(job);
        }
        let mut inputs: Vec<&Arc<FileMeta>> = job.inputs.iter().collect();
        inputs.sort_by(|a, b| a.smallest_user().cmp(b.smallest_user()));
        let disjoint = inputs
            .windows(2)
            .all(|w| w[0].largest_user() < w[1].smallest_user());
        if !disjoint || !job.next_level_inputs.is_empty() {
            return self.run_compaction(job);
        }
        let below: u64 = match out_level + 1 {
            l if l < NUM_LEVELS => inputs
                .iter()
                .flat_map(|t| {
                    job.version
                        .overlapping(l, t.smallest_user(), t.largest_user())
                })
                .map(|f| f.size)
                .sum(),
            _ => 0,
        };
        let tree = &job.tree;
        if below > MAX_MOVE_OVERLAP_TABLES * tree.options().target_file_size {
            return self.run_compaction(job);
        }
        // A tombstone is dropped only by a rewrite; a table holding one is rewritten, so that
        // tombstones do not come to rest in the last level by moves. Asked last: it opens the
        // tables. The others still move; the inputs are disjoint, so the rewrite of the rest
        // meets none of them below.
        let (mut moved, mut rewritten) = (Vec::new(), Vec::new());
        for t in inputs {
            if t.range_tombstones || tree.tables.get(t)?.properties().num_deletions > 0 {
                rewritten.push(Arc::clone(t));
            } else {
                moved.push(t);
            }
        }
        if moved.is_empty() {
            return self.run_compaction(job);
        }
        // The same files, listed one level down; they stay on disk since they are not obsolete.
        self.install(
            tree,
            VersionEdit {
                deleted: moved.iter().map(|t| (job.level, t.number)).collect(),
                added: moved.iter().map(|t| t.record_at(out_level)).collect(),
                ..Default::default()
            },
        )?;
        // A reader opened for the old level may hold that level's pinning of index and filter
        // blocks; the table is reopened for its new level when next read.
        for t in &moved {
            tree.tables.evict(t.number);
        }
        tree.stats.add(Ticker::TrivialMoves, moved.len() as u64);
        if rewritten.is_empty() {
            return Ok(());
        }
        let version = self.manifest.lock().version(tree.id);
        match CompactionJob::new(tree, version, job.level, rewritten) {
            Some(rest) => self.run_compaction(rest),
            None => Ok(()),
        }
    }

    /// Runs `job` and installs its result. On failure the inputs stay and the error is returned;
    /// outputs are deleted if the edit naming them was never written. If the keyspace's
    /// compaction filter changed a value that a snapshot taken meanwhile could read, and that
    /// snapshot is still live, the outputs are thrown away and the job runs once more without
    /// asking the filter (`filtering.rs`); its bytes count in both runs.
    pub(crate) fn run_compaction(&self, job: CompactionJob) -> Result<()> {
        let started = std::time::Instant::now();
        let out_level = job.out_level;
        let outlived = &job.tree.snapshot_outlived_last_compaction;
        let mut asking_filter = !outlived.load(Ordering::Relaxed);
        let mut written = 0;
        loop {
            // Read after the inputs were chosen: a snapshot taken later is newer than they are.
            let snapshots = self.snapshots.sequences();
            let decisions = FilterDecisions::new(&self.snapshots, &snapshots, asking_filter);
            let mut outputs: Vec<NewFile> = Vec::new();
            // A panic in user code (a filter policy, a prefix extractor, a compaction filter)
            // fails the job like an error.
            let done = catch_panic("compaction", || {
                self.write_compaction_outputs(&job, &snapshots, &decisions, &mut outputs)
            })
            .and_then(|()| self.fs.sync_dir(&self.dir));
            let numbers: Vec<u64> = outputs.iter().map(|f| f.number).collect();
            if let Err(e) = done {
                self.remove_tables(numbers);
                return Err(e);
            }
            written += outputs.iter().map(|f| f.size).sum::<u64>();
            // An edit whose write or sync failed may still reach the disk (or be read back from
            // the page cache by the next open), so the outputs it names stay; if it did not, the
            // next open removes them as garbage.
            let installed = if decisions.abandoned() {
                Installed::SnapshotNewer
            } else {
                let unless_newer = decisions.changed_any().then(|| decisions.newest_listed());
                self.install_unless_snapshot_newer(&job.tree, job.edit(outputs), unless_newer)?
            };
            outlived.store(
                installed == Installed::SnapshotNewer || decisions.outlived(),
                Ordering::Relaxed,
            );
            match installed {
                Installed::Yes => {
                    decisions.count(&job.tree.stats);
                    break;
                }
                Installed::KeyspaceDropped => {
                    self.remove_tables(numbers);
                    return Ok(());
                }
                Installed::SnapshotNewer => {
                    self.remove_tables(numbers);
                    job.tree.stats.inc(Ticker::CompactionFilterReruns);
                    asking_filter = false;
                }
            }
        }
        // The edit is durable: the inputs' files go once no reader holds them.
        for f in job.all_inputs() {
            f.mark_obsolete(Arc::clone(&self.retire));
        }
        let bytes = |files: &[Arc<FileMeta>]| files.iter().map(|f| f.size).sum::<u64>();
        let between: u64 = job.between.iter().map(|(_, files)| bytes(files)).sum();
        let (read_upper, read_this) = (bytes(&job.inputs) + between, bytes(&job.next_level_inputs));
        let tree = &job.tree;
        tree.stats
            .add(Ticker::CompactionBytesRead, read_upper + read_this);
        tree.stats.inc(Ticker::Compactions);
        tree.compaction_stats
            .record(out_level, read_upper, read_this, written, started.elapsed());
        Ok(())
    }

    /// Applies `edit` (of `tree`'s tables) to the MANIFEST and publishes the version it makes;
    /// `false` if the keyspace was dropped (nothing is written).
    fn install(&self, tree: &Tree, edit: VersionEdit) -> Result<bool> {
        Ok(self.install_unless_snapshot_newer(tree, edit, None)? == Installed::Yes)
    }

    /// Removes the table files `numbers`, which no version names (errors are ignored: the next
    /// open removes what is left).
    fn remove_tables(&self, numbers: Vec<u64>) {
        for n in numbers {
            let _ = self.fs.remove_file(&table_path(&self.dir, n));
        }
    }

    /// [`install`](Self::install), unless (with `unless_newer` given) a live snapshot is newer
    /// than the sequence it holds (than none, for `Some(None)`): then nothing is written. The
    /// snapshot list's lock is held from that check until the version is published, so no
    /// snapshot is taken in between: one that is reads only the new version.
    fn install_unless_snapshot_newer(
        &self,
        tree: &Tree,
        mut edit: VersionEdit,
        unless_newer: Option<Option<u64>>,
    ) -> Result<Installed> {
        let mut manifest = self.manifest.lock();
        if tree.is_dropped() {
            return Ok(Installed::KeyspaceDropped);
        }
        edit.keyspace = tree.id;
        let publish = || -> Result<()> {
            let version = manifest.log_and_apply(edit, self.next_file.load(Ordering::SeqCst))?;
            let mut st = self.state.lock();
            self.install_super_version(&mut st, tree, |sv| sv.version = version);
            Ok(())
        };
        match unless_newer {
            None => publish()?,
            Some(sequence) => match self.snapshots.unless_any_newer_than(sequence, publish) {
                Some(published) => published?,
                None => return Ok(Installed::SnapshotNewer),
            },
        }
        drop(manifest);
        self.changed.notify_all();
        Ok(Installed::Yes)
    }

    /// Writes the job's output tables into `outputs`, keeping what `snapshots` (ascending) read
    /// and asking the compaction filter as `decisions` allow, splitting its key range between up
    /// to `max_subcompactions` threads. On failure, `outputs` still lists every finished table.
    fn write_compaction_outputs(
        &self,
        job: &CompactionJob,
        snapshots: &[u64],
        decisions: &FilterDecisions<'_>,
        outputs: &mut Vec<NewFile>,
    ) -> Result<()> {
        let filter = job.tree.filter_for_compaction(job);
        let range_tombstones = job_range_tombstones(job)?;
        // Range tombstones are cut between outputs just past a key both sides know; between
        // subcompactions no such key is known, so a job with range tombstones runs as one.
        let splits = match range_tombstones {
            Some(_) => Vec::new(),
            None => split_points(
                job,
                job.tree.options().max_subcompactions,
                job.tree.options().target_file_size,
            ),
        };
        let ranges = key_ranges(&splits);
        if ranges.len() == 1 {
            return self.write_compaction_range(
                job,
                (None, None),
                &filter,
                (snapshots, decisions),
                range_tombstones.as_ref(),
                outputs,
            );
        }
        job.tree
            .stats
            .add(Ticker::Subcompactions, ranges.len() as u64);
        let filter = &filter;
        let results: Vec<(Result<()>, Vec<NewFile>)> = std::thread::scope(|scope| {
            let run = move |range: KeyRange<'_>| {
                let mut out = Vec::new();
                let r = catch_panic("compaction", || {
                    self.write_compaction_range(
                        job,
                        range,
                        filter,
                        (snapshots, decisions),
                        None,
                        &mut out,
                    )
                });
                (r, out)
            };
            // The first range runs here; each other range on a thread of its own (or here too,
            // if no thread can be started).
            let spawned: Vec<_> = ranges[1..]
                .iter()
                .map(|&range| {
                    std::thread::Builder::new()
                        .name("siftdb-compact-sub".into())
                        .spawn_scoped(scope, move || run(range))
                        .map_err(|_| range)
                })
                .collect();
            let mut results = vec![run(ranges[0])];
            for handle in spawned {
                results.push(match handle {
                    Ok(handle) => handle.join().unwrap_or_else(|_| {
                        let e = Error::Background("a subcompaction thread panicked".into());
                        (Err(e), Vec::new())
                    }),
                    Err(range) => run(range),
                });
            }
            results
        });
        let mut failure = None;
        for (result, out) in results {
            outputs.extend(out);
            if let Err(e) = result {
                failure.get_or_insert(e);
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// Writes the output tables of the job's user keys in `range` (from `lo`, up to but not
    /// including `hi`; `None` is open-ended).
    fn write_compaction_range(
        &self,
        job: &CompactionJob,
        (lo, hi): KeyRange<'_>,
        filter: &Filter,
        (snapshots, decisions): (&[u64], &FilterDecisions<'_>),
        range_tombstones: Option<&FragmentedRangeTombstones>,
        outputs: &mut Vec<NewFile>,
    ) -> Result<()> {
        let out_level = job.out_level;
        // Tables of a level ≥ 1 do not overlap: each such level is merged as one concatenated
        // child, so the merge compares a handful of keys per entry rather than one per table.
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        if job.level == 0 {
            for f in &job.inputs {
                children.push(Box::new(job.tree.tables.get(f)?.iter(false)));
            }
        } else if !job.inputs.is_empty() {
            children.push(Box::new(level_iter(&job.tree, &job.inputs)));
        }
        for (_, run) in &job.between {
            children.push(Box::new(level_iter(&job.tree, run)));
        }
        if !job.next_level_inputs.is_empty() {
            children.push(Box::new(level_iter(&job.tree, &job.next_level_inputs)));
        }
        let merged = MergingIterator::new(children);
        let mut it = CompactionInput::new(&job.tree, out_level, decisions, &self.dir, merged);
        match lo {
            Some(lo) => it.seek(&lookup_key(lo, MAX_SEQUENCE))?,
            None => it.seek_to_first()?,
        }
        let mut builder: Option<(u64, TableBuilder)> = None;
        let mut last_key: Option<Vec<u8>> = None;
        let finish = |b: (u64, TableBuilder), outputs: &mut Vec<NewFile>| -> Result<()> {
            let (number, builder) = b;
            // A builder that fails to finish removes its own partial file.
            let summary = builder.finish()?;
            job.tree
                .stats
                .add(Ticker::TableBytesWritten, summary.file_size);
            outputs.push(NewFile {
                level: out_level,
                number,
                size: summary.file_size,
                smallest: summary.smallest,
                largest: summary.largest,
                range_tombstones: summary.range_tombstones,
                global_sequence: None,
            });
            Ok(())
        };
        let mut retention = VersionRetention::new(snapshots);
        // In the last level that holds data, a version every snapshot sees is the only one of its
        // key anywhere below the memtables' newer ones: it is written with sequence 0, whose
        // tag is the same for every key, so that the codec compresses the tags away (as RocksDB
        // does at its bottommost level). Its tables take the bottommost codec, if one is set.
        // (A range tombstone kept beside such a version is newer than it, since a snapshot lies
        // below the tombstone, so the version stays deleted at sequence 0.)
        let bottommost = out_level >= job.version.deepest_nonempty_level();
        let create = || -> Result<(u64, TableBuilder)> {
            let number = self.new_table_number()?;
            let b = TableBuilder::create(
                &self.fs,
                &table_path(&self.dir, number),
                number,
                table_options(
                    &job.tree.options(),
                    (job.tree.id, &job.tree.name),
                    out_level,
                    bottommost,
                    filter.clone(),
                    self.store_id,
                ),
            )?;
            Ok((number, b))
        };
        // The range tombstones the outputs keep, and where the next output's share of them
        // begins: each output takes the pieces up to just past its last key (see `successor`),
        // so the outputs' key ranges stay apart and every key of a tombstone stays covered.
        let kept_tombstones = range_tombstones
            .map(|t| kept_range_tombstones(t, &retention, &job.version, out_level))
            .filter(|t| !t.is_empty());
        let mut tombstones_from: Option<Vec<u8>> = lo.map(<[u8]>::to_vec);
        let mut zeroed: Vec<u8> = Vec::new();
        // An output table is cut only between user keys: versions of one key (kept for snapshots)
        // never straddle two tables of a level, whose key ranges must not overlap.
        let mut cut_pending = false;
        let target_file_size = job.tree.options().target_file_size;
        let mut grandparents =
            GrandparentBoundaries::new(job.version.levels.get(out_level + 1), lo);
        let operator = job.tree.options().merge_operator.clone();
        let outcome = (|| {
            while it.valid() {
                let parsed = parse_internal_key(it.key()).ok_or_else(|| {
                    Error::corruption(&self.dir, "compaction met a malformed internal key")
                })?;
                if hi.is_some_and(|hi| parsed.user_key >= hi) {
                    break;
                }
                if last_key.as_deref() != Some(parsed.user_key) {
                    retention.next_key();
                    let passed = grandparents.passed_by(parsed.user_key);
                    if passed && !cut_pending {
                        // Past half its size, a table ends where a table of the level below the
                        // output's does, so that it later compacts into whole tables there.
                        cut_pending = builder
                            .as_ref()
                            .is_some_and(|(_, b)| b.estimated_file_size() >= target_file_size / 2);
                    }
                    if cut_pending {
                        cut_pending = false;
                        if let Some(mut done) = builder.take() {
                            if let (Some(t), Some(last)) = (&kept_tombstones, &last_key) {
                                let end = successor(last);
                                done.1.add_range_tombstones(
                                    t.clipped(tombstones_from.as_deref(), Some(&end)),
                                );
                                tombstones_from = Some(end);
                            }
                            finish(done, outputs)?;
                        }
                    }
                    // Reuses the buffer: one allocation per job, not one per key.
                    let last = last_key.get_or_insert_with(Vec::new);
                    last.clear();
                    last.extend_from_slice(parsed.user_key);
                }
                // Kept: the newest version, and the newest at or below each live snapshot, unless
                // a range tombstone of the inputs deletes it for every reader that could see it
                // (none lies in a snapshot between them). A tombstone no snapshot can look
                // beneath, with nothing of its key in deeper levels, hides nothing: it goes too.
                let keep = retention.keep(parsed.seq)
                    && !range_tombstones.is_some_and(|t| {
                        t.oldest_newer_than(parsed.user_key, parsed.seq)
                            .is_some_and(|ts| retention.same_stripe(ts, parsed.seq))
                    })
                    && !(parsed.kind == ValueKind::Deletion
                        && !retention.snapshot_below(parsed.seq)
                        && job
                            .version
                            .is_base_level_for_key(out_level, parsed.user_key));
                if keep && parsed.kind == ValueKind::Merge {
                    let seq = parsed.seq;
                    let rules = ChainRules {
                        operator: operator.as_ref(),
                        retention: &retention,
                        range_tombstones,
                        dir: &self.dir,
                    };
                    let chain = collapse_operands(&mut it, &rules, |k| {
                        job.version.is_base_level_for_key(out_level, k)
                    })?;
                    if builder.is_none() {
                        builder = Some(create()?);
                    }
                    let user_key = last_key.as_deref().unwrap_or_default();
                    if let Some((_, b)) = builder.as_mut() {
                        match chain {
                            Chain::Resolved(v) => {
                                // A value every snapshot sees, at the bottom: sequence 0, below.
                                let seq = match bottommost && !retention.snapshot_below(seq) {
                                    true => 0,
                                    false => seq,
                                };
                                b.add(&internal_key(user_key, seq, ValueKind::Value), &v)?;
                            }
                            Chain::Partial(v) => {
                                b.add(&internal_key(user_key, seq, ValueKind::Merge), &v)?;
                                retention.keep_next();
                            }
                            Chain::AsWritten(operands) => {
                                for (k, v) in &operands {
                                    b.add(k, v)?;
                                }
                                retention.keep_next();
                            }
                        }
                        cut_pending = b.estimated_file_size() >= target_file_size;
                    }
                    continue;
                }
                if keep {
                    if builder.is_none() {
                        builder = Some(create()?);
                    }
                    let key = if bottommost && !retention.snapshot_below(parsed.seq) {
                        zeroed.clear();
                        append_internal_key(&mut zeroed, parsed.user_key, 0, parsed.kind);
                        zeroed.as_slice()
                    } else {
                        it.key()
                    };
                    if let Some((_, b)) = builder.as_mut() {
                        b.add(key, it.value())?;
                        cut_pending = b.estimated_file_size() >= target_file_size;
                    }
                }
                it.next()?;
            }
            if let Some(t) = &kept_tombstones {
                let rest = t.clipped(tombstones_from.as_deref(), hi);
                if !rest.is_empty() {
                    if builder.is_none() {
                        builder = Some(create()?);
                    }
                    if let Some((_, b)) = builder.as_mut() {
                        b.add_range_tombstones(rest);
                    }
                }
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
}

/// The range tombstones of the job's input tables, fragmented together; `None` if they have none.
///
/// # Errors
/// `Error::Corruption` or `Error::Io` if an input table cannot be opened.
fn job_range_tombstones(job: &CompactionJob) -> Result<Option<FragmentedRangeTombstones>> {
    let mut lists = Vec::new();
    for f in job.all_inputs() {
        if f.range_tombstones
            && let Some(t) = job.tree.tables.get(f)?.range_tombstones()
        {
            lists.push(Arc::clone(t));
        }
    }
    if lists.is_empty() {
        return Ok(None);
    }
    Ok(Some(FragmentedRangeTombstones::merge(
        lists.iter().map(|t| &**t),
    )))
}

/// The range tombstones of `all` that a compaction into `out_level` writes out: of the
/// tombstones over a piece that no snapshot tells apart, the newest (the others delete nothing
/// it does not); and none that no snapshot can look beneath over a range no deeper level holds
/// (what it deleted is gone from this compaction's output).
fn kept_range_tombstones(
    all: &FragmentedRangeTombstones,
    retention: &VersionRetention<'_>,
    version: &Version,
    out_level: usize,
) -> FragmentedRangeTombstones {
    let fragments = all
        .fragments()
        .iter()
        .filter_map(|f| {
            let mut seqs: Vec<u64> = Vec::new();
            for &seq in &f.seqs {
                if seqs
                    .last()
                    .is_some_and(|&newer| retention.same_stripe(newer, seq))
                {
                    continue;
                }
                // With no snapshot below it, every older one shares its stripe and goes too.
                if !retention.snapshot_below(seq)
                    && version.is_base_level_for_range(out_level, &f.start, &f.end)
                {
                    break;
                }
                seqs.push(seq);
            }
            (!seqs.is_empty()).then(|| Fragment {
                start: f.start.clone(),
                end: f.end.clone(),
                seqs,
            })
        })
        .collect();
    FragmentedRangeTombstones::from_fragments(fragments)
}

/// The smallest key after `key`: `key` and a zero byte. Nothing sorts between them, so a piece
/// of range tombstone ending there covers up to `key` exactly.
fn successor(key: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(key.len() + 1);
    s.extend_from_slice(key);
    s.push(0);
    s
}

/// The tables of one level ≥ 1 of `tree` (in key order, none overlapping) as one iterator that
/// opens each table when the walk reaches it, without filling the block cache.
fn level_iter(tree: &Tree, files: &[Arc<FileMeta>]) -> LevelIter {
    LevelIter::new(files.to_vec(), Arc::clone(&tree.tables), false)
}

/// A range of user keys: from the first, up to but not including the second; `None` is
/// open-ended.
type KeyRange<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Where the tables of the level below a compaction's output level end, passed in key order: a
/// compaction cuts an output table there once it is half grown, as RocksDB's
/// `level_compaction_dynamic_file_size` does. An output table then overlaps whole tables below
/// rather than parts of one more, so its own compaction down rewrites fewer bytes.
struct GrandparentBoundaries<'v> {
    files: &'v [Arc<FileMeta>],
    /// The first table that does not end before the last key asked about.
    next: usize,
}

impl<'v> GrandparentBoundaries<'v> {
    fn new(files: Option<&'v Vec<Arc<FileMeta>>>, lo: Option<&[u8]>) -> Self {
        let files = files.map_or(&[][..], Vec::as_slice);
        let next = lo.map_or(0, |lo| files.partition_point(|f| f.largest_user() < lo));
        GrandparentBoundaries { files, next }
    }

    /// Whether a table of the level ends between the last key asked about and `key` (keys come
    /// in ascending order).
    fn passed_by(&mut self, key: &[u8]) -> bool {
        let start = self.next;
        while self
            .files
            .get(self.next)
            .is_some_and(|f| f.largest_user() < key)
        {
            self.next += 1;
        }
        self.next > start
    }
}

/// The ranges between consecutive split points, covering every key.
fn key_ranges(splits: &[Vec<u8>]) -> Vec<KeyRange<'_>> {
    let mut bounds: Vec<Option<&[u8]>> = vec![None];
    bounds.extend(splits.iter().map(|k| Some(k.as_slice())));
    bounds.push(None);
    bounds.windows(2).map(|w| (w[0], w[1])).collect()
}

/// User keys that cut `job` into at most `n` ranges of about equal input bytes, chosen among the
/// smallest keys of its input tables. Ranges meet at user keys, so all versions of a key fall in
/// one range and the outputs of different ranges never overlap. A job under two output tables
/// is not split: a thread would cost more than it saves.
fn split_points(job: &CompactionJob, n: usize, target_file_size: u64) -> Vec<Vec<u8>> {
    let files: Vec<&Arc<FileMeta>> = job.all_inputs().collect();
    let total: u64 = files.iter().map(|f| f.size).sum();
    if n < 2 || total < target_file_size.saturating_mul(2) {
        return Vec::new();
    }
    let Some(first) = files.iter().map(|f| f.smallest_user()).min() else {
        return Vec::new();
    };
    let mut candidates: Vec<&[u8]> = files
        .iter()
        .map(|f| f.smallest_user())
        .filter(|&k| k > first)
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    // No more ranges than candidate keys can cut: the loop below runs once per range.
    let n = n.min(candidates.len() + 1) as u128;
    // Input bytes below a key: whole tables that end before it, half of those that span it.
    let bytes_below = |key: &[u8]| -> u64 {
        files
            .iter()
            .map(|f| {
                if f.largest_user() < key {
                    f.size
                } else if f.smallest_user() < key {
                    f.size / 2
                } else {
                    0
                }
            })
            .sum()
    };
    let below: Vec<u64> = candidates.iter().map(|k| bytes_below(k)).collect();
    let mut splits: Vec<Vec<u8>> = Vec::new();
    let mut next = 0;
    for part in 1..n {
        let goal = (u128::from(total) * part / n) as u64;
        // The first candidate at or past this part's share of the bytes.
        while next < candidates.len() && below[next] < goal {
            next += 1;
        }
        let Some(key) = candidates.get(next) else {
            break;
        };
        if splits.last().map(Vec::as_slice) != Some(*key) {
            splits.push(key.to_vec());
        }
    }
    splits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_overlapping_fewest_bytes_below_for_its_size_moves_down() {
        let below = [
            (2, 10, "a", "d", 300),
            (2, 11, "e", "h", 300),
            (2, 12, "i", "j", 300),
            (2, 13, "k", "m", 300),
        ];
        // L1: a wide sparse table (600 bytes below for 100: 6.0) and a dense one (600 for 400:
        // 1.5) ...
        let l1 = [(1, 1, "a", "h", 100), (1, 2, "i", "k", 400)];
        let pick = |v: &Version| least_overlapping(&v.levels[1], &v.levels[2]).map(|f| f.number);
        assert_eq!(
            pick(&Version::for_tests(&[&l1[..], &below[..]].concat())),
            Some(2)
        );
        // ... and one overlapping nothing below (0).
        let l1_and_apart = [&l1[..], &[(1, 3, "x", "y", 50)], &below[..]].concat();
        assert_eq!(pick(&Version::for_tests(&l1_and_apart)), Some(3));
        // Equal ratios: the first in key order.
        let v = Version::for_tests(&[
            (1, 1, "a", "b", 100),
            (1, 2, "c", "d", 100),
            (2, 10, "a", "b", 100),
            (2, 11, "c", "d", 100),
        ]);
        assert_eq!(pick(&v), Some(1));
        assert_eq!(least_overlapping(&[], &v.levels[2]).map(|f| f.number), None);
    }

    #[test]
    fn grandparent_boundaries_are_passed_in_key_order() {
        let v = Version::for_tests(&[
            (2, 1, "b", "d", 100),
            (2, 2, "f", "h", 100),
            (2, 3, "j", "l", 100),
        ]);
        let mut g = GrandparentBoundaries::new(v.levels.get(2), None);
        assert!(!g.passed_by(b"a"));
        assert!(!g.passed_by(b"c"));
        assert!(!g.passed_by(b"d"), "a table's last key is inside it");
        assert!(g.passed_by(b"e"));
        assert!(!g.passed_by(b"e"));
        // Two tables ended since the last key: one answer.
        assert!(g.passed_by(b"m"));
        assert!(!g.passed_by(b"z"));
        // A range starting inside the key space starts past the tables that end before it.
        let mut g = GrandparentBoundaries::new(v.levels.get(2), Some(b"g"));
        assert!(!g.passed_by(b"g"));
        assert!(g.passed_by(b"i"));
        // No level below: nothing to pass.
        let mut g = GrandparentBoundaries::new(v.levels.get(7), None);
        assert!(!g.passed_by(b"z"));
    }
}

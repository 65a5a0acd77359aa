//! Opening a store: lock the directory, read the MANIFEST (or create the store), replay the WALs
//! into L0 tables, write a fresh MANIFEST, start a new WAL, remove what no version needs, start
//! the workers.
//!
//! Every file open creates gets a number above every file already in the directory, so nothing an
//! interrupted open (or an interrupted earlier life) left behind is ever overwritten, and a WAL
//! replayed now is below the new MANIFEST's log number and is never replayed again.

use std::fs::{self, File};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

use super::background::{catch_panic, spawn_workers};
use super::filename::{
    current_path, current_temp_path, lock_path, log_path, manifest_name, parse_file_name,
    table_path, FileKind,
};
use super::flush::{table_options, write_level0_table};
use super::manifest::{read_edits, Manifest, ManifestCounters, RecoveredManifest};
use super::table_cache::{TableCache, TablePlacement};
use super::version::{Retire, Version};
use super::version_edit::VersionEdit;
use super::{Db, DbInner, State, SuperVersion, WalState};
use crate::cache::ShardedLruCache;
use crate::error::{Error, Result};
use crate::filter::PolicyRegistry;
use crate::fs::{io_at, FileSystem};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::stats::Stats;
use crate::store_id::{new_store_id, StoreId};
use crate::wal::reader::{read_log, LogTail};
use crate::wal::writer::LogWriter;
use crate::write_batch::decode_batch;

impl Db {
    /// Opens the store in directory `path`, creating it if it is missing (unless
    /// `create_if_missing(false)`), and recovers every write the WAL holds.
    ///
    /// # Errors
    /// - `Error::InvalidArgument` if `options` cannot work together (see [`Options`]), if `path`
    ///   is a file, or if it holds no store and may not be created;
    /// - `Error::Locked` if another `Db` holds the directory;
    /// - `Error::Corruption` naming the file if CURRENT, the MANIFEST, a WAL (other than a torn
    ///   tail) or a table needed to open is damaged, if a table is not the one the MANIFEST
    ///   describes, or if the directory holds a store's files but no CURRENT;
    /// - `Error::Io` naming the file for operating-system failures.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let dir = path.as_ref();
        let fs = options.file_system();
        match fs::metadata(dir) {
            Ok(m) if !m.is_dir() => {
                return Err(Error::InvalidArgument(format!(
                    "{} is not a directory",
                    dir.display()
                )));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !options.create_if_missing {
                    return Err(Error::InvalidArgument(format!(
                        "{} does not exist",
                        dir.display()
                    )));
                }
                fs::create_dir_all(dir).map_err(io_at(dir))?;
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    fs.sync_dir(parent)?;
                }
            }
            Err(e) => return Err(io_at(dir)(e)),
        }
        let lock_file = lock_path(dir);
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_file)
            .map_err(io_at(&lock_file))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked(dir.to_path_buf())),
            Err(std::fs::TryLockError::Error(e)) => return Err(io_at(&lock_file)(e)),
        }
        let stats = Arc::new(Stats::new());
        let RecoveredManifest {
            version,
            counters,
            store_id,
        } = match Manifest::recover(dir)? {
            Some(recovered) => recovered,
            None => create_store(&fs, dir, &options)?,
        };
        check_tables_present(dir, &version)?;
        // Past every file in the directory, not only those the MANIFEST knows: WALs created after
        // its last edit, and tables of an interrupted flush, carry numbers at or above its counter.
        let files = list_files(dir)?;
        let mut next_file = files
            .iter()
            .filter_map(FileKind::number)
            .map(|n| n + 1)
            .fold(counters.next_file_number, u64::max);
        let (recovered, last_sequence) = catch_panic("recovery", || {
            replay_logs(
                &fs,
                dir,
                &options,
                &stats,
                counters,
                store_id,
                &files,
                &mut next_file,
            )
        })?;
        let version = version.apply(&recovered);
        let log_number = next_file;
        let manifest_number = next_file + 1;
        next_file += 2;
        let log = LogWriter::create(&fs, &log_path(dir, log_number))?;
        let manifest = Manifest::create(
            &fs,
            dir,
            manifest_number,
            version,
            ManifestCounters {
                log_number,
                next_file_number: next_file,
                last_sequence,
            },
            store_id,
        )?;
        remove_obsolete_files(&fs, dir, manifest.current(), log_number, manifest_number);
        let policies = PolicyRegistry::new(&options.filter, options.prefix_extractor.clone());
        let blocks = Arc::new(ShardedLruCache::with_high_priority_share(
            options.block_cache_bytes,
            16,
            options.block_cache_high_priority_share,
        ));
        let tables = Arc::new(TableCache::new(
            dir.to_path_buf(),
            store_id,
            options.max_open_files,
            blocks,
            Arc::clone(&stats),
            policies,
            TablePlacement {
                cache_index_and_filter_blocks: options.cache_index_and_filter_blocks,
                pin_l0_filter_and_index_blocks: options.pin_l0_filter_and_index_blocks_in_cache,
                pin_top_level_index_and_filter: options.pin_top_level_index_and_filter,
            },
        ));
        let retire: Retire = {
            let tables = Arc::clone(&tables);
            let dir = dir.to_path_buf();
            let fs = fs.clone();
            Arc::new(move |number| {
                tables.evict(number);
                // A file that cannot be removed now is garbage the next open removes.
                let _ = fs.remove_file(&table_path(&dir, number));
            })
        };
        let sv = Arc::new(SuperVersion::first(
            Arc::new(MemTable::new(log_number)),
            Arc::clone(manifest.current()),
        ));
        let inner = Arc::new(DbInner {
            dir: dir.to_path_buf(),
            fs,
            store_id,
            stats,
            tables,
            wal: Mutex::new(WalState {
                log,
                log_number,
                older: Vec::new(),
            }),
            writers: Mutex::new(Default::default()),
            writers_done: Condvar::new(),
            current: RwLock::new(Arc::clone(&sv)),
            state: Mutex::new(State {
                sv,
                bg_error: None,
                shutting_down: false,
            }),
            changed: Condvar::new(),
            manifest: Mutex::new(manifest),
            compaction: Mutex::new(Default::default()),
            last_sequence: AtomicU64::new(last_sequence),
            next_file: AtomicU64::new(next_file),
            retire,
            options,
            _lock: lock,
        });
        let threads = spawn_workers(&inner)?;
        Ok(Db { inner, threads })
    }
}

/// A directory without CURRENT. If it holds nothing of a store, or only what an interrupted
/// creation leaves (MANIFESTs of an empty store, a `CURRENT.dbtmp`), a new store is created:
/// its MANIFEST and CURRENT are made durable before any WAL exists, so a directory without
/// CURRENT never holds a WAL of a store that was ever opened. Anything else is a store that lost
/// its CURRENT, and starting an empty store over it would delete its tables.
fn create_store(fs: &FileSystem, dir: &Path, options: &Options) -> Result<RecoveredManifest> {
    let current = current_path(dir);
    let mut leftovers = Vec::new();
    for kind in list_files(dir)? {
        match kind {
            FileKind::Log(_) | FileKind::Table(_) => {
                return Err(Error::corruption(
                    &current,
                    format!(
                        "missing, yet the directory holds {}: refusing to start an empty store \
                         over a store's files",
                        kind.name()
                    ),
                ));
            }
            FileKind::Manifest(_) => {
                let path = dir.join(kind.name());
                let empty = read_edits(&path)?
                    .iter()
                    .all(|e| e.added.is_empty() && e.deleted.is_empty());
                if !empty {
                    return Err(Error::corruption(
                        &current,
                        format!("missing, yet {} names tables", kind.name()),
                    ));
                }
                leftovers.push(path);
            }
            FileKind::Temp => leftovers.push(current_temp_path(dir)),
            FileKind::Current | FileKind::Lock => {}
        }
    }
    if !options.create_if_missing {
        return Err(Error::InvalidArgument(format!(
            "{} holds no store (no CURRENT) and create_if_missing is off",
            dir.display()
        )));
    }
    for path in leftovers {
        fs.remove_file(&path)?;
    }
    let store_id = new_store_id();
    let counters = ManifestCounters {
        log_number: 0,
        next_file_number: 2,
        last_sequence: 0,
    };
    let manifest = Manifest::create(fs, dir, 1, Version::default(), counters, store_id)?;
    Ok(RecoveredManifest {
        version: Version::clone(manifest.current()),
        counters,
        store_id,
    })
}

/// Every table the version names must be in the directory with the size the MANIFEST records. A
/// missing one is lost data; one of another size is not this store's table. Say so now, naming it,
/// before the clean-up below deletes files on the word of that MANIFEST.
fn check_tables_present(dir: &Path, version: &Version) -> Result<()> {
    for f in version.levels.iter().flatten() {
        let path = table_path(dir, f.number);
        let size = match fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::corruption(
                    &path,
                    "table named by the MANIFEST is missing",
                ));
            }
            Err(e) => return Err(io_at(&path)(e)),
        };
        if size != f.size {
            return Err(Error::corruption(
                &path,
                format!(
                    "the file is {size} bytes, the MANIFEST says {}: not this store's table",
                    f.size
                ),
            ));
        }
    }
    Ok(())
}

/// Replays every WAL the MANIFEST still needs, oldest first, into L0 tables. Returns the edit
/// adding them and the last sequence recovered.
///
/// WAL records carry consecutive sequences, the first right after the MANIFEST's last sequence.
/// Replay stops at the first torn tail or the first record that does not follow on from the one
/// before (a WAL that lost unsynced writes in a power cut, while a newer WAL kept some). A synced
/// write syncs every older WAL first, so nothing after such a point was ever acknowledged as
/// durable; replaying it would put later writes on top of a hole in the history.
#[allow(clippy::too_many_arguments)]
fn replay_logs(
    fs: &FileSystem,
    dir: &Path,
    options: &Options,
    stats: &Stats,
    counters: ManifestCounters,
    store_id: StoreId,
    files: &[FileKind],
    next_file: &mut u64,
) -> Result<(VersionEdit, u64)> {
    let mut logs: Vec<u64> = files
        .iter()
        .filter_map(|k| match *k {
            FileKind::Log(n) if n >= counters.log_number => Some(n),
            _ => None,
        })
        .collect();
    logs.sort_unstable();
    let mut edit = VersionEdit::default();
    let mut last_sequence = counters.last_sequence;
    let mut mem = Arc::new(MemTable::new(0));
    let flush = |mem: &Arc<MemTable>, next_file: &mut u64, edit: &mut VersionEdit| -> Result<()> {
        let number = *next_file;
        *next_file += 1;
        let table = table_options(options, options.filter.clone(), store_id);
        if let Some(f) = write_level0_table(fs, dir, number, table, stats, &mut mem.iter())? {
            edit.added.push(f);
        }
        Ok(())
    };
    // Where replay stopped and why.
    let mut stopped: Option<String> = None;
    for &number in &logs {
        let path = log_path(dir, number);
        let contents = read_log(&path)?;
        let mut replayed = 0;
        if stopped.is_none() {
            for record in &contents.records {
                let entries = decode_batch(record)
                    .ok_or_else(|| Error::corruption(&path, "malformed write batch record"))?;
                let Some(first) = entries.first().map(|e| e.seq) else {
                    replayed += 1;
                    continue;
                };
                if first <= last_sequence {
                    return Err(Error::corruption(
                        &path,
                        format!(
                            "a record at sequence {first} repeats sequences up to \
                             {last_sequence} already recovered"
                        ),
                    ));
                }
                if first != last_sequence + 1 {
                    stopped = Some(format!(
                        "{}: its record at sequence {first} does not follow sequence \
                         {last_sequence}: the writes between were lost before they were synced",
                        path.display()
                    ));
                    break;
                }
                for e in &entries {
                    mem.add(e.seq, e.kind, e.key, e.value);
                }
                last_sequence += entries.len() as u64;
                replayed += 1;
                if mem.approximate_bytes() >= options.write_buffer_size {
                    flush(&mem, next_file, &mut edit)?;
                    mem = Arc::new(MemTable::new(0));
                }
            }
            if let (None, LogTail::Torn { what, .. }) = (&stopped, &contents.tail) {
                stopped = Some(format!("{}: {what}", path.display()));
            }
        }
        let dropped = contents.records.len() - replayed;
        if dropped > 0 {
            if let Some(why) = &stopped {
                log::warn!(
                    "recovery stopped at {why}; {dropped} later records of {} were never \
                     synced and are dropped",
                    path.display()
                );
            }
        }
    }
    if !mem.is_empty() {
        flush(&mem, next_file, &mut edit)?;
    }
    if !edit.added.is_empty() {
        fs.sync_dir(dir)?;
    }
    Ok((edit, last_sequence))
}

fn list_files(dir: &Path) -> Result<Vec<FileKind>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_at(dir))? {
        let entry = entry.map_err(io_at(dir))?;
        if let Some(kind) = entry.file_name().to_str().and_then(parse_file_name) {
            out.push(kind);
        }
    }
    Ok(out)
}

/// Removes WALs already in tables, tables no version names, and old MANIFESTs. Failures are
/// ignored: the files are harmless and the next open tries again.
fn remove_obsolete_files(
    fs: &FileSystem,
    dir: &Path,
    version: &Version,
    log_number: u64,
    manifest_number: u64,
) {
    let live: std::collections::HashSet<u64> =
        version.levels.iter().flatten().map(|f| f.number).collect();
    let Ok(files) = list_files(dir) else {
        return;
    };
    for kind in files {
        let path = match kind {
            FileKind::Log(n) if n < log_number => log_path(dir, n),
            FileKind::Table(n) if !live.contains(&n) => table_path(dir, n),
            FileKind::Manifest(n) if n != manifest_number => dir.join(manifest_name(n)),
            FileKind::Temp => current_temp_path(dir),
            _ => continue,
        };
        let _ = fs.remove_file(&path);
    }
}

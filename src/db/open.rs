//! Opening a store: lock the directory, read the MANIFEST (or create the store) and check that it
//! accounts for every file (`file_accounting.rs`), replay the WALs into L0 tables, start a new
//! WAL, remove the leftover tables, write a fresh MANIFEST, remove the WALs it no longer needs,
//! start the workers. Opening read-only: take a shared lock, read the MANIFEST and check it,
//! replay the WALs into a memtable, and write nothing. A follower (`follower/`) is built by the
//! same `assemble` and replays WAL records with the same `replay_record`.
//!
//! Every file open creates gets a number above every file already in the directory, so nothing an
//! interrupted open (or an interrupted earlier life) left behind is ever overwritten, and a WAL
//! replayed now is below the new MANIFEST's log number and is never replayed again.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::background::{catch_panic, spawn_workers};
use super::dir_lock::{locked_error, LockedFile};
use super::file_accounting::{account_for_files, AccountedFiles};
use super::flush::{table_options, write_level0_table};
use super::follower::state::Follower;
use super::keyspace::make_tree;
use super::tree::TreeState;
use super::version::edit::VersionEdit;
use super::version::filename::{
    check_store_path, current_path, current_temp_path, list_files, lock_path, log_path,
    manifest_name, numbers_used_up, table_path, FileKind, MAX_FILE_NUMBER,
};
use super::version::keyspace_options::{missing_merge_operator, restore};
use super::version::manifest::{
    read_edits, Manifest, ManifestCounters, RecoveredManifest, TreeRecords,
};
use super::version::table_cache::{TableCache, TablePlacement};
use super::version::Retire;
use super::{Db, DbInner, Lifecycle, State, WalInfo, WalState};
use crate::error::{Error, Result};
use crate::filter::PolicyRegistry;
use crate::fs::{io_at, FileSystem};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sst::table_reader::block_cache::StoreCache;
use crate::stats::Stats;
use crate::store_id::{new_store_id, StoreId, DEFAULT_KEYSPACE, DEFAULT_KEYSPACE_ID};
use crate::wal::reader::{read_log, LogTail};
use crate::wal::writer::LogWriter;
use crate::write_batch::decode_batch;

impl Db {
    /// Opens the store in directory `path`, creating it if it is missing (unless
    /// `create_if_missing(false)`), and recovers every write the WAL holds.
    ///
    /// # Errors
    /// - `Error::InvalidArgument`, before anything is created, if `options` are out of range or
    ///   cannot work together (see [`Options`]), if `path` is empty or a file, or if it holds
    ///   no store and may not be created;
    /// - `Error::Locked` if another `Db` holds the directory (a writer, or a reader opened with
    ///   [`open_read_only`](Db::open_read_only)), or scans and cursors of a closed one do: its
    ///   message says which, as far as this process can tell;
    /// - `Error::Corruption` naming the file if CURRENT, the MANIFEST, a WAL (other than a torn
    ///   tail) or a table needed to open is damaged, if a table is not the one the MANIFEST
    ///   describes, if the directory holds a store's files but no CURRENT, if the MANIFEST
    ///   cannot account for the store's files (a table it names or a WAL it needs is missing, or
    ///   a table it does not name, or a write in a WAL, is of a keyspace it does not know or not
    ///   shown to be a leftover: it lost records the store acted on), or if a file is numbered
    ///   past the largest file number a store allocates. Open then writes and removes nothing;
    /// - `Error::Io` naming the file for operating-system failures.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let dir = path.as_ref();
        check_store_path(dir)?;
        let fs = options.file_system();
        match fs::metadata(dir) {
            Ok(m) if !m.is_dir() => return Err(not_a_directory(dir)),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !options.create_if_missing {
                    return Err(Error::InvalidArgument(format!(
                        "{} does not exist",
                        dir.display()
                    )));
                }
                fs.create_dir_all(dir)?;
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    fs.sync_dir(parent)?;
                }
            }
            Err(e) => return Err(io_at(dir)(e)),
        }
        let lock = lock_exclusive(dir)?;
        let stats = Arc::new(Stats::new());
        let recovered = match Manifest::recover(dir)? {
            Some(recovered) => recovered,
            None => create_store(&fs, dir, &options)?,
        };
        let AccountedFiles {
            files,
            mut next_file,
            obsolete_tables,
        } = account_for_files(dir, &recovered)?;
        let keyspaces = keyspace_options(&recovered, &options)?;
        let RecoveredManifest {
            path: recovered_from,
            trees: mut records,
            counters,
            store_id,
            ..
        } = recovered;
        let (added, last_sequence) = catch_panic("recovery", || {
            let mut added: BTreeMap<u32, VersionEdit> = BTreeMap::new();
            let mut flush = |id: u32, mem: &Arc<MemTable>| -> Result<()> {
                let (Some((o, _)), Some(record)) = (keyspaces.get(&id), records.get(&id)) else {
                    return Ok(());
                };
                let number = take_number(dir, &mut next_file)?;
                let keyspace = (id, record.name.as_str());
                let table = table_options(o, keyspace, 0, false, o.filter.clone(), store_id);
                // A store being opened has no snapshots.
                let operator = o.merge_operator.as_ref();
                if let Some(f) =
                    write_level0_table(&fs, dir, number, table, &stats, &[], mem, operator)?
                {
                    added.entry(id).or_default().added.push(f);
                }
                Ok(())
            };
            let (mems, last_sequence) =
                replay_logs(dir, &keyspaces, counters, &files, Some(&mut flush))?;
            for (id, mem) in &mems {
                if !mem.is_empty() {
                    flush(*id, mem)?;
                }
            }
            if !added.is_empty() {
                fs.sync_dir(dir)?;
            }
            Ok((added, last_sequence))
        })?;
        let log_number = take_number(dir, &mut next_file)?;
        let manifest_number = take_number(dir, &mut next_file)?;
        for (id, record) in records.iter_mut() {
            if let Some(edit) = added.get(id) {
                record.version = Arc::new(record.version.apply(edit));
            }
            record.log_number = log_number;
        }
        let log = LogWriter::create(&fs, &log_path(dir, log_number))?;
        remove_obsolete_tables(&fs, dir, &recovered_from, &obsolete_tables)?;
        let manifest = Manifest::create(
            &fs,
            dir,
            manifest_number,
            records,
            ManifestCounters {
                log_number,
                next_file_number: next_file,
                last_sequence,
                log_start_sequence: last_sequence,
                next_keyspace_id: counters.next_keyspace_id,
            },
            store_id,
        )?;
        remove_obsolete_files(&fs, dir, log_number, manifest_number);
        let mems = keyspaces
            .iter()
            .map(|(&id, (o, _))| {
                let mem = MemTable::for_buffer(log_number, o.write_buffer_size);
                (id, Arc::new(mem))
            })
            .collect();
        let inner = assemble(Parts {
            dir,
            fs,
            options,
            keyspaces,
            stats,
            store_id,
            manifest,
            mems,
            wal: WalState {
                log: Some(log),
                log_number,
                targets: Vec::new(),
            },
            last_sequence,
            next_file,
            lock: Some(lock),
            read_only: false,
            follower: None,
        });
        let threads = spawn_workers(&inner)?;
        Ok(Db::start(inner, threads))
    }

    /// Opens the store in directory `path` for reading only: it writes nothing to the store's
    /// files (no new WAL or MANIFEST, no CURRENT switch, no removal, no flush of the WALs into
    /// tables) and runs no background work. The WALs are replayed into memory, so it reads every
    /// write the store's last writer acknowledged before it closed or crashed, and it reads the
    /// store as of its opening: later changes by a writer are not seen (there can be none while it
    /// is open, see below). What the WALs hold stays in memory while it is open (normally a few
    /// memtables' worth: a writer flushes its WALs as they fill).
    ///
    /// It returns a [`Db`] whose reads (`get`, `scan`, `statistics`, `property`, …) work as on
    /// any store, while every write (`put`, `delete`, `write`, `write_opt`, `flush`, `compact`)
    /// fails with [`Error::ReadOnly`]; [`Db::is_read_only`] tells the two apart, and
    /// [`sync_wal`](Db::sync_wal) has nothing to sync. One type rather than two keeps every read,
    /// present and future, on both.
    ///
    /// Readers share the directory's `LOCK` (a shared `flock`): any number of read-only opens, in
    /// any processes, may be open at once, while none may be open beside a writer. So a writer's
    /// [`open`](Db::open) fails with `Error::Locked` while a reader has the store open, and a
    /// reader's fails with `Error::Locked` while a writer has it; neither waits. If the directory
    /// has no `LOCK` (a copy of a store without it), an empty one is created so that a writer can
    /// be excluded; on a read-only file system, where nothing can write, the store is opened
    /// without it. `create_if_missing` does not apply: a store must be there.
    ///
    /// ```
    /// use siftdb::{Db, Error, Options};
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.put(b"k", b"v")?;
    /// db.close()?; // the write stays in the WAL: a reader replays it in memory
    ///
    /// let a = Db::open_read_only(dir.path(), Options::default())?;
    /// let b = Db::open_read_only(dir.path(), Options::default())?; // readers share the store
    /// assert_eq!(a.get(b"k")?, Some(b"v".to_vec()));
    /// assert_eq!(b.get(b"k")?, Some(b"v".to_vec()));
    /// assert!(matches!(a.put(b"k", b"w"), Err(Error::ReadOnly(_))));
    /// assert!(matches!(Db::open(dir.path(), Options::default()), Err(Error::Locked(_))));
    /// drop((a, b));
    /// let db = Db::open(dir.path(), Options::default())?; // no reader left: a writer may open
    /// # drop(db);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// - `Error::InvalidArgument` if `options` cannot work together, if `path` is empty, missing
    ///   or a file, or if the directory holds no store;
    /// - `Error::Locked` if a writer has the store open;
    /// - `Error::Corruption` as for [`open`](Db::open) (a damaged CURRENT, MANIFEST, WAL or
    ///   table, a store's files without CURRENT, a MANIFEST that cannot account for the files);
    /// - `Error::Io` naming the file for operating-system failures.
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let dir = path.as_ref();
        check_store_path(dir)?;
        match fs::metadata(dir) {
            Ok(m) if !m.is_dir() => return Err(not_a_directory(dir)),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::InvalidArgument(format!(
                    "{} does not exist",
                    dir.display()
                )));
            }
            Err(e) => return Err(io_at(dir)(e)),
        }
        let no_store = || -> Error {
            if let Err(e) = check_storeless_dir(dir) {
                return e;
            }
            Error::InvalidArgument(format!("{} holds no store (no CURRENT)", dir.display()))
        };
        // Checked before the lock, which may create `LOCK`: nothing is added to a directory that
        // holds no store.
        if !current_path(dir).exists() {
            return Err(no_store());
        }
        let lock = lock_shared(dir)?;
        let Some(recovered) = Manifest::recover(dir)? else {
            return Err(no_store());
        };
        let AccountedFiles {
            files, next_file, ..
        } = account_for_files(dir, &recovered)?;
        let keyspaces = keyspace_options(&recovered, &options)?;
        let RecoveredManifest {
            trees: records,
            dropped,
            counters,
            store_id,
            ..
        } = recovered;
        let (mems, last_sequence) = replay_logs(dir, &keyspaces, counters, &files, None)?;
        let stats = Arc::new(Stats::new());
        let fs = options.file_system();
        let inner = assemble(Parts {
            dir,
            fs,
            options,
            keyspaces,
            stats,
            store_id,
            manifest: Manifest::read_only(records, dropped, counters),
            mems,
            wal: WalState {
                log: None,
                log_number: counters.log_number,
                targets: Vec::new(),
            },
            last_sequence,
            next_file,
            lock,
            read_only: true,
            follower: None,
        });
        Ok(Db::start(inner, Vec::new()))
    }
}

/// Each keyspace's options (the store's own for the default keyspace, the recorded ones for the
/// others) and the oldest WAL that may hold its writes in no table.
pub(super) type KeyspaceOptions = BTreeMap<u32, (Options, u64)>;

/// The options of every keyspace `recovered` names.
///
/// # Errors
/// `Error::Corruption` naming the MANIFEST if a keyspace's recorded options do not parse;
/// `Error::InvalidArgument` if they name a merge operator `options` do not hold.
pub(super) fn keyspace_options(
    recovered: &RecoveredManifest,
    options: &Options,
) -> Result<KeyspaceOptions> {
    let mut out = BTreeMap::new();
    for (&id, record) in &recovered.trees {
        let o = if id == DEFAULT_KEYSPACE_ID {
            options.clone()
        } else {
            missing_merge_operator(&record.name, &record.options, options)?;
            restore(&record.name, &record.options, options)
                .map_err(|e| Error::corruption(&recovered.path, e.to_string()))?
        };
        out.insert(id, (o, record.log_number));
    }
    Ok(out)
}

/// The next file number, counted past; checked, as every allocation of a file number is.
fn take_number(dir: &Path, next: &mut u64) -> Result<u64> {
    let n = *next;
    if n >= MAX_FILE_NUMBER {
        return Err(numbers_used_up(dir));
    }
    *next = n + 1;
    Ok(n)
}

pub(super) fn not_a_directory(dir: &Path) -> Error {
    Error::InvalidArgument(format!("{} is not a directory", dir.display()))
}

/// Opens (creating it if needed) and exclusively locks the directory's `LOCK`: no other writer,
/// and no reader, may hold it.
pub(crate) fn lock_exclusive(dir: &Path) -> Result<LockedFile> {
    let lock_file = lock_path(dir);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_file)
        .map_err(io_at(&lock_file))?;
    match lock.try_lock() {
        Ok(()) => Ok(LockedFile::new(lock)),
        Err(std::fs::TryLockError::WouldBlock) => Err(locked_error(dir)),
        Err(std::fs::TryLockError::Error(e)) => Err(io_at(&lock_file)(e)),
    }
}

/// Takes a shared lock on the directory's `LOCK`, which excludes writers but not other readers.
/// A missing `LOCK` is created (empty), except on a read-only file system, where no writer can
/// exist: then `None`.
fn lock_shared(dir: &Path) -> Result<Option<LockedFile>> {
    let lock_file = lock_path(dir);
    let lock = match File::open(&lock_file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_file)
            {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::ReadOnlyFilesystem => return Ok(None),
                Err(e) => return Err(io_at(&lock_file)(e)),
            }
        }
        Err(e) => return Err(io_at(&lock_file)(e)),
    };
    match lock.try_lock_shared() {
        Ok(()) => Ok(Some(LockedFile::new(lock))),
        Err(std::fs::TryLockError::WouldBlock) => Err(locked_error(dir)),
        Err(std::fs::TryLockError::Error(e)) => Err(io_at(&lock_file)(e)),
    }
}

/// What `assemble` builds a `DbInner` from.
pub(super) struct Parts<'a> {
    pub(super) dir: &'a Path,
    pub(super) fs: FileSystem,
    pub(super) options: Options,
    pub(super) keyspaces: KeyspaceOptions,
    pub(super) stats: Arc<Stats>,
    pub(super) store_id: StoreId,
    pub(super) manifest: Manifest,
    /// Each keyspace's memtable writes go to (a read-only store's hold the replayed WALs).
    pub(super) mems: BTreeMap<u32, Arc<MemTable>>,
    pub(super) wal: WalState,
    pub(super) last_sequence: u64,
    pub(super) next_file: u64,
    pub(super) lock: Option<LockedFile>,
    pub(super) read_only: bool,
    /// A follower's own state (`follower/`): its `dir` holds links to the writer's tables.
    pub(super) follower: Option<Follower>,
}

/// The shared state of an opened store: caches, the table cache, the first super-version.
pub(super) fn assemble(parts: Parts<'_>) -> Arc<DbInner> {
    let Parts {
        dir,
        fs,
        options,
        keyspaces,
        stats,
        store_id,
        manifest,
        mems,
        wal,
        last_sequence,
        next_file,
        lock,
        read_only,
        follower,
    } = parts;
    let removes_tables = !read_only || follower.is_some();
    let policies = PolicyRegistry::new(&options.filter, options.prefix_extractor.clone());
    let blocks = match &options.block_cache {
        Some(shared) => shared.for_store(true),
        None => StoreCache::private(
            options.block_cache_bytes,
            options.block_cache_high_priority_share,
        ),
    };
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
            // A read-only store removes nothing (it compacts nothing either); a follower removes
            // its link to a table no version of it lists.
            if removes_tables {
                // A file that cannot be removed now is garbage the next open removes.
                let _ = fs.remove_file(&table_path(&dir, number));
            }
        })
    };
    let mut trees = BTreeMap::new();
    for (id, (tree_options, _)) in keyspaces {
        let Some(record) = manifest.trees().get(&id) else {
            continue;
        };
        let mem = mems.get(&id).cloned().unwrap_or_else(|| {
            let mem = MemTable::for_buffer(wal.log_number, tree_options.write_buffer_size);
            Arc::new(mem)
        });
        let tree = make_tree(
            &tables,
            id,
            record.name.clone(),
            tree_options,
            mem,
            Arc::clone(&record.version),
        );
        let sv = tree.super_version();
        trees.insert(id, TreeState { tree, sv });
    }
    let default_tree = match trees.get(&DEFAULT_KEYSPACE_ID) {
        Some(t) => Arc::clone(&t.tree),
        // Every MANIFEST has the default keyspace (it cannot be dropped).
        None => make_tree(
            &tables,
            DEFAULT_KEYSPACE_ID,
            DEFAULT_KEYSPACE.to_string(),
            options.clone(),
            Arc::new(MemTable::new(wal.log_number)),
            Default::default(),
        ),
    };
    let mut wals = BTreeMap::new();
    if !read_only {
        wals.insert(
            wal.log_number,
            WalInfo {
                start_sequence: last_sequence,
                bytes: 0,
            },
        );
    }
    Arc::new(DbInner {
        dir: dir.to_path_buf(),
        fs,
        store_id,
        stats,
        dropped_stats: Mutex::new(None),
        dropped_names: Mutex::new(BTreeMap::new()),
        tables,
        default_tree,
        current_log: AtomicU64::new(wal.log_number),
        wal: Mutex::new(wal),
        closed_wals: Mutex::new(Vec::new()),
        writers: Mutex::new(Default::default()),
        writers_done: Condvar::new(),
        state: Mutex::new(State {
            trees,
            bg_error: None,
            wals,
        }),
        changed: Condvar::new(),
        tables_in_flight: manifest.tables_in_flight(),
        manifest: Mutex::new(manifest),
        compaction: Mutex::new(()),
        last_sequence: AtomicU64::new(last_sequence),
        next_file: AtomicU64::new(next_file),
        retire,
        snapshots: Default::default(),
        options,
        read_only,
        follower,
        lifecycle: Lifecycle::new(lock, dir),
    })
}

/// A directory without CURRENT that may hold a new store. If it holds nothing of a store, or only
/// what an interrupted creation leaves (MANIFESTs of an empty store, a `CURRENT.dbtmp`), returns
/// those leftovers. Anything else is a store that lost its CURRENT: `Error::Corruption`, since
/// starting an empty store over it would delete its tables.
fn check_storeless_dir(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
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
    Ok(leftovers)
}

/// A directory without CURRENT (see [`check_storeless_dir`]): a new store is created, its
/// MANIFEST and CURRENT made durable before any WAL exists, so a directory without CURRENT never
/// holds a WAL of a store that was ever opened.
fn create_store(fs: &FileSystem, dir: &Path, options: &Options) -> Result<RecoveredManifest> {
    let leftovers = check_storeless_dir(dir)?;
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
        log_start_sequence: 0,
        next_keyspace_id: DEFAULT_KEYSPACE_ID + 1,
    };
    let manifest = Manifest::create(fs, dir, 1, TreeRecords::new(), counters, store_id)?;
    Ok(RecoveredManifest::new_store(
        dir.join(manifest_name(1)),
        manifest.trees().clone(),
        counters,
        store_id,
    ))
}

/// What recovery does with a keyspace's memtable that reached its `write_buffer_size`.
type FlushFull<'a> = &'a mut dyn FnMut(u32, &Arc<MemTable>) -> Result<()>;

/// Replays every WAL the MANIFEST still needs, oldest first, into a memtable per keyspace: an
/// entry goes to its keyspace's if the keyspace is live and its writes in that WAL are in no
/// table yet (the WAL is at or past the keyspace's log number); entries of dropped keyspaces are
/// skipped. With `flush`, a memtable that reaches `write_buffer_size` is handed to it and replay
/// goes on in a new one; without (a read-only open), everything stays in memory. Returns the last
/// memtables (the caller flushes them or keeps them) and the last sequence recovered.
///
/// WAL records carry consecutive sequences, the first right after the MANIFEST's log start
/// sequence. Replay stops at the first torn tail or the first record that does not follow on from
/// the one before (a WAL that lost unsynced writes in a power cut, while a newer WAL kept some).
/// A synced write syncs every older WAL first, so nothing after such a point was ever
/// acknowledged as durable; replaying it would put later writes on top of a hole in the history.
fn replay_logs(
    dir: &Path,
    keyspaces: &KeyspaceOptions,
    counters: ManifestCounters,
    files: &[FileKind],
    mut flush: Option<FlushFull<'_>>,
) -> Result<(BTreeMap<u32, Arc<MemTable>>, u64)> {
    let mut logs: Vec<u64> = files
        .iter()
        .filter_map(|k| match *k {
            FileKind::Log(n) if n >= counters.log_number => Some(n),
            _ => None,
        })
        .collect();
    logs.sort_unstable();
    let mut last_sequence = counters.log_start_sequence;
    let mut mems: BTreeMap<u32, Arc<MemTable>> = keyspaces
        .keys()
        .map(|&id| (id, Arc::new(MemTable::new(0))))
        .collect();
    // Where replay stopped and why.
    let mut stopped: Option<String> = None;
    for &number in &logs {
        let path = log_path(dir, number);
        let contents = read_log(&path)?;
        let mut replayed = 0;
        if stopped.is_none() {
            for record in &contents.records {
                let step =
                    replay_record(&path, number, record, keyspaces, None, last_sequence, &mems)?;
                match step {
                    Replayed::Applied(n) => last_sequence += n,
                    Replayed::Stop(why) => {
                        stopped = Some(why);
                        break;
                    }
                }
                replayed += 1;
                if let Some(flush) = flush.as_mut() {
                    for (id, (o, _)) in keyspaces {
                        let Some(mem) = mems.get_mut(id) else {
                            continue;
                        };
                        if mem.approximate_bytes() >= o.write_buffer_size {
                            flush(*id, mem)?;
                            *mem = Arc::new(MemTable::new(0));
                        }
                    }
                }
            }
            if let (None, LogTail::Torn { what, .. }) = (&stopped, &contents.tail) {
                stopped = Some(format!("{}: {what}", path.display()));
            }
        }
        let dropped = contents.records.len() - replayed;
        if dropped > 0
            && let Some(why) = &stopped
        {
            log::warn!(
                "recovery stopped at {why}; {dropped} later records of {} were never \
                     synced and are dropped",
                path.display()
            );
        }
    }
    // Tables may hold later writes than the WALs (a keyspace flushed while another kept an
    // older WAL alive): new writes get sequences past both.
    Ok((mems, last_sequence.max(counters.last_sequence)))
}

/// What replaying one WAL record did.
pub(super) enum Replayed {
    /// Its entries (this many sequences) went into their keyspaces' memtables.
    Applied(u64),
    /// Replay stops before it, for the reason given: its sequence does not follow on from the
    /// records before, or (for a follower, given the MANIFEST's next keyspace id) it writes to a
    /// keyspace the MANIFEST read does not know yet.
    Stop(String),
}

/// Replays `record`, a record of WAL `number` at `path`, after sequence `last_sequence`: each
/// entry goes to its keyspace's memtable in `mems` if the keyspace is live and its writes in
/// that WAL are in no table yet (the WAL is at or past the keyspace's log number); entries of
/// dropped keyspaces are skipped. With `unknown_from`, an entry of a keyspace id at or past it
/// stops replay before the record: the MANIFEST read is older than the WAL (a follower's case).
///
/// # Errors
/// `Error::Corruption` naming the WAL for a record that does not decode or that repeats a
/// sequence already replayed.
pub(super) fn replay_record(
    path: &Path,
    number: u64,
    record: &[u8],
    keyspaces: &KeyspaceOptions,
    unknown_from: Option<u32>,
    last_sequence: u64,
    mems: &BTreeMap<u32, Arc<MemTable>>,
) -> Result<Replayed> {
    let entries = decode_batch(record)
        .ok_or_else(|| Error::corruption(path, "malformed write batch record"))?;
    let Some(first) = entries.first().map(|e| e.seq) else {
        return Ok(Replayed::Applied(0));
    };
    if first <= last_sequence {
        return Err(Error::corruption(
            path,
            format!(
                "a record at sequence {first} repeats sequences up to {last_sequence} already \
                 recovered"
            ),
        ));
    }
    if first != last_sequence + 1 {
        return Ok(Replayed::Stop(format!(
            "{}: its record at sequence {first} does not follow sequence {last_sequence}: the \
             writes between were lost before they were synced",
            path.display()
        )));
    }
    if let Some(from) = unknown_from
        && let Some(e) = entries.iter().find(|e| e.keyspace >= from)
    {
        return Ok(Replayed::Stop(format!(
            "{}: its record at sequence {first} writes to keyspace {}, which the MANIFEST \
                 read does not know yet",
            path.display(),
            e.keyspace
        )));
    }
    for e in &entries {
        let needed = keyspaces
            .get(&e.keyspace)
            .is_some_and(|(_, log)| number >= *log);
        if let (true, Some(mem)) = (needed, mems.get(&e.keyspace)) {
            mem.add(e.seq, e.kind, e.key, e.value);
        }
    }
    Ok(Replayed::Applied(entries.len() as u64))
}

/// Removes the tables `recovered_from` (the MANIFEST read) shows obsolete, before the new
/// MANIFEST, which no longer records why: a table left behind would be unexplained at the next
/// open. The new MANIFEST's directory sync makes the removals durable before CURRENT names it.
///
/// The edits that show them obsolete may be in the page cache alone (a crash cut their sync
/// short), so the MANIFEST and CURRENT's name for it are made durable first: a power cut must not
/// bring back a MANIFEST without them after the tables are gone.
///
/// # Errors
/// `Error::Io` naming the file whose sync or removal failed: open fails rather than leave a table
/// the next open could not account for.
fn remove_obsolete_tables(
    fs: &FileSystem,
    dir: &Path,
    recovered_from: &Path,
    tables: &[u64],
) -> Result<()> {
    if tables.is_empty() {
        return Ok(());
    }
    fs.sync_file(recovered_from)?;
    fs.sync_dir(dir)?;
    for &number in tables {
        match fs.remove_file(&table_path(dir, number)) {
            Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    Ok(())
}

/// Removes, once the new MANIFEST is current, the WALs already in tables and the old MANIFESTs
/// (obsolete tables went before it). Failures are ignored: the files are harmless and the next
/// open tries again.
fn remove_obsolete_files(fs: &FileSystem, dir: &Path, log_number: u64, manifest_number: u64) {
    let Ok(files) = list_files(dir) else {
        return;
    };
    for kind in files {
        let path = match kind {
            FileKind::Log(n) if n < log_number => log_path(dir, n),
            FileKind::Manifest(n) if n != manifest_number => dir.join(manifest_name(n)),
            FileKind::Temp => current_temp_path(dir),
            _ => continue,
        };
        let _ = fs.remove_file(&path);
    }
}

//! Opening a store: lock the directory, read the MANIFEST, replay the WAL into L0 tables, write a
//! fresh MANIFEST, start a new WAL, remove what no version needs, start the workers.

use std::fs::{self, File};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

use super::background::spawn_workers;
use super::filename::{lock_path, log_path, parse_file_name, table_path, FileKind};
use super::flush::{table_options, write_level0_table};
use super::manifest::{sync_dir, Manifest, ManifestCounters};
use super::table_cache::TableCache;
use super::version::{Retire, Version};
use super::version_edit::VersionEdit;
use super::{Db, DbInner, State, SuperVersion, WalState};
use crate::cache::ShardedLruCache;
use crate::error::{Error, Result};
use crate::filter::PolicyRegistry;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::stats::Stats;
use crate::wal::reader::{read_log, LogTail};
use crate::wal::writer::LogWriter;
use crate::write_batch::decode_batch;

impl Db {
    /// Opens the store in directory `path`, creating it if it is missing (unless
    /// `create_if_missing(false)`), and recovers every write the WAL holds.
    ///
    /// # Errors
    /// - `Error::Locked` if another `Db` holds the directory;
    /// - `Error::InvalidArgument` if `path` is a file, or is missing and may not be created;
    /// - `Error::Corruption` naming the file if CURRENT, the MANIFEST, a WAL (other than a torn
    ///   tail of the newest) or a table needed to open is damaged;
    /// - `Error::Io` for operating-system failures.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let dir = path.as_ref();
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
                fs::create_dir_all(dir)?;
            }
            Err(e) => return Err(e.into()),
        }
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(lock_path(dir))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked(dir.to_path_buf())),
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
        let stats = Arc::new(Stats::new());
        let (version, counters) = match Manifest::recover(dir)? {
            Some(recovered) => recovered,
            None => (
                Version::default(),
                ManifestCounters {
                    log_number: 0,
                    next_file_number: 1,
                    last_sequence: 0,
                },
            ),
        };
        // A table the MANIFEST names but the directory lacks is lost data: say so now, naming it,
        // rather than fail later reads with a bare "file not found" (and before the clean-up
        // below deletes files on the word of that MANIFEST).
        for f in version.levels.iter().flatten() {
            let path = table_path(dir, f.number);
            if !path.try_exists()? {
                return Err(Error::corruption(
                    &path,
                    "table named by the MANIFEST is missing",
                ));
            }
        }
        let mut next_file = counters.next_file_number;
        let (recovered, last_sequence) =
            replay_logs(dir, &options, &stats, counters, &mut next_file)?;
        let version = version.apply(&recovered);
        let log_number = next_file;
        let manifest_number = next_file + 1;
        next_file += 2;
        let log = LogWriter::create(&log_path(dir, log_number))?;
        let manifest = Manifest::create(
            dir,
            manifest_number,
            version,
            ManifestCounters {
                log_number,
                next_file_number: next_file,
                last_sequence,
            },
        )?;
        remove_obsolete_files(dir, manifest.current(), log_number, manifest_number);
        let policies = PolicyRegistry::new(&options.filter, options.prefix_extractor.clone());
        let blocks = Arc::new(ShardedLruCache::new(options.block_cache_bytes, 16));
        let tables = Arc::new(TableCache::new(
            dir.to_path_buf(),
            options.max_open_files,
            blocks,
            Arc::clone(&stats),
            policies,
        ));
        let retire: Retire = {
            let tables = Arc::clone(&tables);
            let dir = dir.to_path_buf();
            Arc::new(move |number| {
                tables.evict(number);
                // A file that cannot be removed now is garbage the next open removes.
                let _ = fs::remove_file(table_path(&dir, number));
            })
        };
        let sv = Arc::new(SuperVersion {
            mem: Arc::new(MemTable::new(log_number)),
            imm: Vec::new(),
            version: Arc::clone(manifest.current()),
        });
        let inner = Arc::new(DbInner {
            dir: dir.to_path_buf(),
            stats,
            tables,
            wal: Mutex::new(WalState { log, log_number }),
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

/// Replays every WAL the MANIFEST still needs into L0 tables. Returns the edit adding them and the
/// last sequence seen.
fn replay_logs(
    dir: &Path,
    options: &Options,
    stats: &Stats,
    counters: ManifestCounters,
    next_file: &mut u64,
) -> Result<(VersionEdit, u64)> {
    let mut logs: Vec<u64> = list_files(dir)?
        .into_iter()
        .filter_map(|k| match k {
            FileKind::Log(n) if n >= counters.log_number => Some(n),
            _ => None,
        })
        .collect();
    logs.sort_unstable();
    let mut edit = VersionEdit::default();
    let mut last_sequence = counters.last_sequence;
    let mut mem = Arc::new(MemTable::new(0));
    let mut torn: Option<(std::path::PathBuf, String)> = None;
    let flush = |mem: &Arc<MemTable>, next_file: &mut u64, edit: &mut VersionEdit| -> Result<()> {
        let number = *next_file;
        *next_file += 1;
        let table = table_options(options, options.filter.clone());
        if let Some(f) = write_level0_table(dir, number, table, stats, &mut mem.iter())? {
            edit.added.push(f);
        }
        Ok(())
    };
    for &number in &logs {
        let path = log_path(dir, number);
        let contents = read_log(&path)?;
        if let Some((torn_path, what)) = &torn {
            if !contents.records.is_empty() {
                // A damaged tail followed by newer writes would be a hole in the history.
                return Err(Error::corruption(
                    torn_path,
                    format!("{what}, and newer logs follow it"),
                ));
            }
        }
        for record in &contents.records {
            let entries = decode_batch(record)
                .ok_or_else(|| Error::corruption(&path, "malformed write batch record"))?;
            for e in &entries {
                mem.add(e.seq, e.kind, e.key, e.value);
                last_sequence = last_sequence.max(e.seq);
            }
            if mem.approximate_bytes() >= options.write_buffer_size {
                flush(&mem, next_file, &mut edit)?;
                mem = Arc::new(MemTable::new(0));
            }
        }
        if let LogTail::Torn { what, .. } = contents.tail {
            torn = Some((path, what));
        }
    }
    if !mem.is_empty() {
        flush(&mem, next_file, &mut edit)?;
    }
    if !edit.added.is_empty() {
        sync_dir(dir)?;
    }
    Ok((edit, last_sequence))
}

fn list_files(dir: &Path) -> Result<Vec<FileKind>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(kind) = entry.file_name().to_str().and_then(parse_file_name) {
            out.push(kind);
        }
    }
    Ok(out)
}

/// Removes WALs already in tables, tables no version names, and old MANIFESTs. Failures are
/// ignored: the files are harmless and the next open tries again.
fn remove_obsolete_files(dir: &Path, version: &Version, log_number: u64, manifest_number: u64) {
    let live: std::collections::HashSet<u64> =
        version.levels.iter().flatten().map(|f| f.number).collect();
    let Ok(files) = list_files(dir) else {
        return;
    };
    for kind in files {
        let path = match kind {
            FileKind::Log(n) if n < log_number => log_path(dir, n),
            FileKind::Table(n) if !live.contains(&n) => table_path(dir, n),
            FileKind::Manifest(n) if n != manifest_number => {
                dir.join(super::filename::manifest_name(n))
            }
            FileKind::Temp => super::filename::current_temp_path(dir),
            _ => continue,
        };
        let _ = fs::remove_file(path);
    }
}

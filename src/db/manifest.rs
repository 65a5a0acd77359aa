//! The MANIFEST (a record log of version edits) and CURRENT (the name of the live MANIFEST).
//!
//! Each `Db::open` writes a fresh MANIFEST whose first record is a snapshot of the whole version
//! and the store's identity, syncs it and the directory, then switches CURRENT to it by
//! write-temp, fsync, rename, fsync of the directory. Every later edit is appended and synced
//! before the version it makes is used.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::filename::{
    current_path, current_temp_path, manifest_name, parse_file_name, FileKind, MAX_FILE_NUMBER,
};
use super::version::Version;
use super::version_edit::{NewFile, VersionEdit};
use crate::error::{Error, Result};
use crate::fs::{io_at, FileSystem};
use crate::store_id::StoreId;
use crate::wal::reader::{read_log, LogTail};
use crate::wal::writer::LogWriter;

/// What the MANIFEST says besides the tables.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ManifestCounters {
    /// The oldest WAL still needed: older ones are all in tables.
    pub(crate) log_number: u64,
    pub(crate) next_file_number: u64,
    /// The sequence of the last write the tables hold. The WAL `log_number` begins right after
    /// it, and WAL records follow each other without gaps, so recovery can tell a lost write.
    pub(crate) last_sequence: u64,
}

/// The live MANIFEST and the version it describes.
pub(crate) struct Manifest {
    /// `None` in a store opened read-only, which never appends an edit.
    writer: Option<LogWriter>,
    pub(crate) counters: ManifestCounters,
    current: Arc<Version>,
}

/// What a MANIFEST says.
pub(crate) struct RecoveredManifest {
    /// The MANIFEST it was read from, for the errors recovery names it in.
    pub(crate) path: PathBuf,
    pub(crate) version: Version,
    pub(crate) counters: ManifestCounters,
    pub(crate) store_id: StoreId,
}

impl Manifest {
    /// Reads the version CURRENT points to; `Ok(None)` for a directory with no CURRENT.
    ///
    /// # Errors
    /// `Error::Corruption` naming CURRENT or the MANIFEST if either is damaged.
    pub(crate) fn recover(dir: &Path) -> Result<Option<RecoveredManifest>> {
        let current = current_path(dir);
        let text = match std::fs::read(&current) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_at(&current)(e)),
        };
        let name = std::str::from_utf8(&text)
            .ok()
            .and_then(|t| t.strip_suffix('\n'))
            .filter(|n| matches!(parse_file_name(n), Some(FileKind::Manifest(_))))
            .ok_or_else(|| Error::corruption(&current, "does not name a MANIFEST"))?;
        let path = dir.join(name);
        if !path.exists() {
            return Err(Error::corruption(
                &current,
                format!("names {name}, which does not exist"),
            ));
        }
        let edits = read_edits(&path)?;
        let mut version = Version::default();
        let mut counters = ManifestCounters::default();
        let (mut have_log, mut have_next, mut have_seq) = (false, false, false);
        let store_id = edits
            .first()
            .and_then(|e| e.store_id)
            .ok_or_else(|| Error::corruption(&path, "no store identity in the first edit"))?;
        for edit in &edits {
            if let Some(n) = edit.log_number {
                counters.log_number = n;
                have_log = true;
            }
            if let Some(n) = edit.next_file_number {
                counters.next_file_number = n;
                have_next = true;
            }
            if let Some(n) = edit.last_sequence {
                counters.last_sequence = n;
                have_seq = true;
            }
            for &(level, number) in &edit.deleted {
                if !version.levels[level].iter().any(|f| f.number == number) {
                    return Err(Error::corruption(
                        &path,
                        format!("deletes table {number} not in L{level}"),
                    ));
                }
            }
            version = version.apply(edit);
        }
        if !(have_log && have_next && have_seq) {
            return Err(Error::corruption(
                &path,
                "missing log number, next file number or last sequence",
            ));
        }
        if let Some((level, a, b)) = version.find_overlap() {
            return Err(Error::corruption(
                &path,
                format!("tables {a} and {b} overlap in L{level}"),
            ));
        }
        let max_file = version
            .levels
            .iter()
            .flatten()
            .map(|f| f.number)
            .max()
            .unwrap_or(0);
        if max_file >= counters.next_file_number || counters.log_number >= counters.next_file_number
        {
            return Err(Error::corruption(
                &path,
                "next file number is not past every file",
            ));
        }
        if counters.next_file_number > MAX_FILE_NUMBER {
            return Err(Error::corruption(
                &path,
                format!(
                    "next file number {} is beyond the largest a store allocates ({MAX_FILE_NUMBER})",
                    counters.next_file_number
                ),
            ));
        }
        Ok(Some(RecoveredManifest {
            path,
            version,
            counters,
            store_id,
        }))
    }

    /// Writes MANIFEST-`number` holding `version`, `counters` and `store_id`, makes it durable
    /// (file and directory entry), and points CURRENT at it.
    pub(crate) fn create(
        fs: &FileSystem,
        dir: &Path,
        number: u64,
        version: Version,
        counters: ManifestCounters,
        store_id: StoreId,
    ) -> Result<Manifest> {
        let path = dir.join(manifest_name(number));
        let mut writer = LogWriter::create(fs, &path)?;
        let snapshot = VersionEdit {
            log_number: Some(counters.log_number),
            next_file_number: Some(counters.next_file_number),
            last_sequence: Some(counters.last_sequence),
            deleted: Vec::new(),
            added: version
                .levels
                .iter()
                .enumerate()
                .flat_map(|(level, files)| {
                    files.iter().map(move |f| NewFile {
                        level,
                        number: f.number,
                        size: f.size,
                        smallest: f.smallest.clone(),
                        largest: f.largest.clone(),
                    })
                })
                .collect(),
            store_id: Some(store_id),
        };
        writer.add_record(&snapshot.encode())?;
        writer.sync()?;
        // CURRENT must never name a MANIFEST whose directory entry could still be lost.
        fs.sync_dir(dir)?;
        set_current(fs, dir, number)?;
        Ok(Manifest {
            writer: Some(writer),
            counters,
            current: Arc::new(version),
        })
    }

    /// The MANIFEST of a store opened read-only: `version` and `counters` as recovered, and no
    /// file to append to.
    pub(crate) fn read_only(version: Version, counters: ManifestCounters) -> Manifest {
        Manifest {
            writer: None,
            counters,
            current: Arc::new(version),
        }
    }

    pub(crate) fn current(&self) -> &Arc<Version> {
        &self.current
    }

    /// Appends `edit` (with the counters filled in: its own log number and last sequence if it
    /// has them, else the current ones), syncs it, and makes its version current.
    ///
    /// # Errors
    /// Any failure to write or sync; the MANIFEST writer then refuses further edits.
    pub(crate) fn log_and_apply(
        &mut self,
        mut edit: VersionEdit,
        next_file_number: u64,
    ) -> Result<Arc<Version>> {
        let writer = self.writer.as_mut().ok_or_else(|| {
            Error::InvalidArgument("a store opened read-only appends no MANIFEST edit".into())
        })?;
        if let Some(n) = edit.log_number {
            self.counters.log_number = n;
        }
        self.counters.next_file_number = next_file_number;
        if let Some(s) = edit.last_sequence {
            self.counters.last_sequence = self.counters.last_sequence.max(s);
        }
        edit.next_file_number = Some(self.counters.next_file_number);
        edit.last_sequence = Some(self.counters.last_sequence);
        edit.log_number = Some(self.counters.log_number);
        writer.add_record(&edit.encode())?;
        writer.sync()?;
        self.current = Arc::new(self.current.apply(&edit));
        Ok(Arc::clone(&self.current))
    }
}

/// The edits of the MANIFEST at `path`, in order.
///
/// A last record cut short by the end of the file is an edit that was never acknowledged (its
/// append was interrupted): the version before it stands. A complete last record with a bad
/// checksum may be a synced edit that later went bad; dropping it would silently lose the tables
/// it added (their WAL is already gone), so that is corruption.
///
/// # Errors
/// `Error::Corruption` naming the MANIFEST for damage or an edit that does not decode.
pub(crate) fn read_edits(path: &Path) -> Result<Vec<VersionEdit>> {
    let log = read_log(path)?;
    if let LogTail::Torn {
        what,
        interrupted: false,
        ..
    } = &log.tail
    {
        return Err(Error::corruption(
            path,
            format!("last edit damaged: {what}"),
        ));
    }
    log.records
        .iter()
        .map(|r| VersionEdit::decode(r, path))
        .collect()
}

/// Points CURRENT at MANIFEST-`number`: write a temporary file, fsync it, rename it over CURRENT,
/// fsync the directory so the rename itself is durable.
fn set_current(fs: &FileSystem, dir: &Path, number: u64) -> Result<()> {
    let tmp = current_temp_path(dir);
    // Left by an interrupted switch; the store never creates over an existing file.
    match fs.remove_file(&tmp) {
        Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
        other => other?,
    }
    let mut f = fs.create(&tmp)?;
    f.write_all(format!("{}\n", manifest_name(number)).as_bytes())?;
    f.sync()?;
    drop(f);
    fs.rename(&tmp, &current_path(dir))?;
    fs.sync_dir(dir)
}

//! `Db::destroy`: removes a store's files, and its directory if nothing else is in it.

use std::path::Path;

use crate::db::open::lock_exclusive;
use crate::db::version::filename::{parse_file_name, FileKind};
use crate::db::Db;
use crate::error::{Error, Result};
use crate::fs::{io_at, FileSystem};

impl Db {
    /// Removes the store in directory `path`: its CURRENT, MANIFESTs, WALs, tables and `LOCK`,
    /// then the directory itself if nothing else is left in it. Files siftdb did not write (by
    /// their names) stay, and so does the directory that holds them.
    ///
    /// It refuses a store that is open, here or in another process (it takes the store's `LOCK`
    /// as a writer would, and holds it while it removes), and a directory that holds no store
    /// (neither CURRENT nor a MANIFEST), so a wrong path deletes nothing. A store that lost its
    /// CURRENT, or one whose creation or an earlier `destroy` was interrupted, still has a
    /// MANIFEST and is removed. CURRENT goes first, so a `destroy` interrupted half-way leaves no
    /// store that opens as if whole; the MANIFESTs go last, so calling `destroy` again finishes
    /// the job.
    ///
    /// ```
    /// use siftdb::{Db, Options};
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("store");
    /// let db = Db::open(&path, Options::default())?;
    /// db.put(b"k", b"v")?;
    /// assert!(Db::destroy(&path).is_err()); // open: refused
    /// db.close()?;
    /// Db::destroy(&path)?;
    /// assert!(!path.exists());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// - `Error::InvalidArgument` if `path` is empty, does not exist, is not a directory, or holds
    ///   no store;
    /// - `Error::Locked` if a `Db` (writer or reader) has the store open;
    /// - `Error::Io` naming the file that could not be removed (the files removed before it stay
    ///   removed).
    pub fn destroy(path: impl AsRef<Path>) -> Result<()> {
        let dir = path.as_ref();
        crate::db::version::filename::check_store_path(dir)?;
        let fs = FileSystem::default();
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::InvalidArgument(format!(
                    "{} is not a directory",
                    dir.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::InvalidArgument(format!(
                    "{} does not exist",
                    dir.display()
                )))
            }
            Err(e) => return Err(io_at(dir)(e)),
        }
        let kinds = store_files(dir)?;
        if !kinds
            .iter()
            .any(|k| matches!(k, FileKind::Current | FileKind::Manifest(_)))
        {
            return Err(Error::InvalidArgument(format!(
                "{} holds no store (neither CURRENT nor a MANIFEST): nothing removed",
                dir.display()
            )));
        }
        let lock = lock_exclusive(dir)?;
        // Listed again under the lock: a writer that had the store open may have added files.
        let mut kinds = store_files(dir)?;
        // CURRENT first (the store no longer opens as a whole one), MANIFESTs last (a store
        // `destroy` still recognises, should it be interrupted), LOCK after the rest.
        let rank = |k: &FileKind| match k {
            FileKind::Current => 0,
            FileKind::Temp | FileKind::Log(_) | FileKind::Table(_) => 1,
            FileKind::Manifest(_) => 2,
            FileKind::Lock => 3,
        };
        kinds.sort_by_key(rank);
        for kind in kinds.iter().filter(|k| **k != FileKind::Lock) {
            match fs.remove_file(&dir.join(kind.name())) {
                Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                other => other?,
            }
        }
        // Removed while still held, so no writer can open the store in between.
        match fs.remove_file(&dir.join(FileKind::Lock.name())) {
            Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
        drop(lock);
        fs.sync_dir(dir)?;
        let empty = std::fs::read_dir(dir).map_err(io_at(dir))?.next().is_none();
        if empty {
            fs.remove_dir(dir)?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs.sync_dir(parent)?;
            }
        }
        Ok(())
    }
}

/// The files of `dir` that siftdb names (a store's files, `LOCK`, a temporary CURRENT).
fn store_files(dir: &Path) -> Result<Vec<FileKind>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_at(dir))? {
        let entry = entry.map_err(io_at(dir))?;
        if !entry.file_type().map_err(io_at(dir))?.is_file() {
            continue;
        }
        if let Some(kind) = entry.file_name().to_str().and_then(parse_file_name) {
            out.push(kind);
        }
    }
    Ok(out)
}

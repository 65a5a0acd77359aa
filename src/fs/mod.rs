//! The store's file operations that change the disk: create, append, sync, rename, remove, and
//! sync a directory. Every such operation of the store goes through [`FileSystem`], so that the
//! order of writes, fsyncs and directory changes can be read in one place, and every I/O error
//! names its file.
//!
//! Reads (tables, logs, CURRENT, directory listings) use `std::fs` directly: they change nothing
//! on disk, so a power cut cannot undo them.
//!
//! In a normal build `FileSystem` is an empty struct and each operation is the plain `std` call.
//! With the internal `__fault-injection` feature (the crate's own tests), a [`FileSystem`] may
//! carry a [`FaultInjector`](fault_injection::FaultInjector) that tracks what was fsynced and can
//! fail or cut any operation.

#[cfg(feature = "__fault-injection")]
pub mod fault_injection;

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The store's mutating file operations (see the module docs).
#[derive(Clone, Default)]
pub(crate) struct FileSystem {
    #[cfg(feature = "__fault-injection")]
    faults: Option<fault_injection::FaultInjector>,
}

impl FileSystem {
    /// A file system whose operations go through `faults`.
    #[cfg(feature = "__fault-injection")]
    pub(crate) fn with_faults(faults: Option<fault_injection::FaultInjector>) -> FileSystem {
        FileSystem { faults }
    }

    /// The injector this file system reports to, if any.
    #[cfg(feature = "__fault-injection")]
    fn faults(&self) -> Option<&fault_injection::FaultInjector> {
        self.faults.as_ref()
    }

    /// Creates a new file at `path` for appending. Never truncates: a file already there is an
    /// error, since every file the store writes has a number no other file has had.
    ///
    /// # Errors
    /// `Error::Io` naming `path` (`AlreadyExists` if the file is there).
    pub(crate) fn create(&self, path: &Path) -> Result<WritableFile> {
        #[cfg(feature = "__fault-injection")]
        if let Some(f) = self.faults() {
            let (file, tracked) = f.create(path).map_err(|e| io_error_at(path, e))?;
            return Ok(WritableFile {
                file,
                path: path.to_path_buf(),
                tracked,
            });
        }
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| io_error_at(path, e))?;
        Ok(WritableFile {
            file,
            path: path.to_path_buf(),
            #[cfg(feature = "__fault-injection")]
            tracked: None,
        })
    }

    /// Renames `from` to `to`, replacing `to` if it exists.
    ///
    /// # Errors
    /// `Error::Io` naming `from`.
    pub(crate) fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        #[cfg(feature = "__fault-injection")]
        if let Some(f) = self.faults() {
            return f.rename(from, to).map_err(io_at(from));
        }
        std::fs::rename(from, to).map_err(io_at(from))
    }

    /// Removes the file at `path`.
    ///
    /// # Errors
    /// `Error::Io` naming `path` (`NotFound` if there is no such file).
    pub(crate) fn remove_file(&self, path: &Path) -> Result<()> {
        #[cfg(feature = "__fault-injection")]
        if let Some(f) = self.faults() {
            return f.remove(path).map_err(io_at(path));
        }
        std::fs::remove_file(path).map_err(io_at(path))
    }

    /// Makes `to` a second name of the file `from` (a hard link); `to` must not exist.
    ///
    /// # Errors
    /// `Error::Io` naming `to` (`AlreadyExists` if it is there; `CrossesDevices` or another kind
    /// where the file system cannot link, for callers that then copy).
    pub(crate) fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        #[cfg(feature = "__fault-injection")]
        if let Some(f) = self.faults() {
            return f.hard_link(from, to).map_err(io_at(to));
        }
        std::fs::hard_link(from, to).map_err(io_at(to))
    }

    /// Creates the directory `dir` and any missing parents. Directories are not followed by the
    /// fault-injection layer: the caller syncs the parent to make the new entry durable.
    ///
    /// # Errors
    /// `Error::Io` naming `dir`.
    pub(crate) fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(io_at(dir))
    }

    /// Creates the directory `dir`, whose parent exists; fails if `dir` exists. Not followed by
    /// the fault-injection layer, as for [`create_dir_all`](Self::create_dir_all).
    ///
    /// # Errors
    /// `Error::Io` naming `dir` (`AlreadyExists` if it exists).
    pub(crate) fn create_dir(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir(dir).map_err(io_at(dir))
    }

    /// Removes the empty directory `dir`.
    ///
    /// # Errors
    /// `Error::Io` naming `dir` (`DirectoryNotEmpty` if it holds anything).
    pub(crate) fn remove_dir(&self, dir: &Path) -> Result<()> {
        std::fs::remove_dir(dir).map_err(io_at(dir))
    }

    /// `fdatasync` of the existing file at `path`: what an earlier writer left in the page cache
    /// survives a power cut from now on.
    ///
    /// # Errors
    /// `Error::Io` naming `path`.
    pub(crate) fn sync_file(&self, path: &Path) -> Result<()> {
        #[cfg(feature = "__fault-injection")]
        if let Some(f) = self.faults() {
            return f.sync_existing(path).map_err(io_at(path));
        }
        File::open(path)
            .and_then(|f| f.sync_data())
            .map_err(io_at(path))
    }

    /// fsyncs the directory `dir`, making the creations, renames and removals in it durable.
    ///
    /// # Errors
    /// `Error::Io` naming `dir`.
    pub(crate) fn sync_dir(&self, dir: &Path) -> Result<()> {
        #[cfg(feature = "__fault-injection")]
        if let Some(f) = self.faults() {
            return f.sync_dir(dir).map_err(io_at(dir));
        }
        sync_directory(dir).map_err(io_at(dir))
    }
}

/// fsyncs a directory (Unix: its entries are only durable once the directory itself is synced).
#[cfg(unix)]
fn sync_directory(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Windows cannot open a directory as a file without special flags, and NTFS journals directory
/// changes itself: there is nothing to sync.
#[cfg(windows)]
fn sync_directory(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// A file open for appending, made by [`FileSystem::create`]. Unbuffered: callers put a
/// `BufWriter` in front. Its `io::Write` errors name the file.
pub(crate) struct WritableFile {
    file: File,
    path: PathBuf,
    #[cfg(feature = "__fault-injection")]
    tracked: Option<fault_injection::TrackedFile>,
}

impl WritableFile {
    /// `fdatasync`: every byte written so far survives a power cut.
    ///
    /// # Errors
    /// `Error::Io` naming the file.
    pub(crate) fn sync(&mut self) -> Result<()> {
        #[cfg(feature = "__fault-injection")]
        if let Some(t) = &self.tracked {
            return t.sync().map_err(io_at(&self.path));
        }
        self.file.sync_data().map_err(io_at(&self.path))
    }
}

impl Write for WritableFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        #[cfg(feature = "__fault-injection")]
        if let Some(t) = &self.tracked {
            return t
                .write(&mut self.file, buf)
                .map_err(|e| io_error_at(&self.path, e));
        }
        self.file.write(buf).map_err(|e| io_error_at(&self.path, e))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads exactly `buf.len()` bytes at `offset` of `file`, without moving a shared cursor, so
/// several threads can read one file at once.
///
/// # Errors
/// `UnexpectedEof` if the file ends first; any other read error.
#[cfg(unix)]
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Reads exactly `buf.len()` bytes at `offset` of `file` (see the Unix version).
///
/// # Errors
/// `UnexpectedEof` if the file ends first; any other read error.
#[cfg(windows)]
pub(crate) fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// An `io::Error` that keeps `e`'s kind and says which file it happened to.
pub(crate) fn io_error_at(path: &Path, e: io::Error) -> io::Error {
    if e.get_ref().is_some_and(|inner| inner.is::<PathError>()) {
        return e; // already names its file
    }
    io::Error::new(
        e.kind(),
        PathError {
            path: path.to_path_buf(),
            source: e,
        },
    )
}

/// An `Error::Io` naming `path`, for `map_err` on `std::fs` calls.
pub(crate) fn io_at(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |e| Error::Io(io_error_at(path, e))
}

/// An I/O error and the file it happened to.
#[derive(Debug)]
struct PathError {
    path: PathBuf,
    source: io::Error,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for PathError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_never_truncates_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystem::default();
        let path = dir.path().join("000001.log");
        let mut f = fs.create(&path).unwrap();
        f.write_all(b"abc").unwrap();
        f.sync().unwrap();
        let Err(Error::Io(e)) = fs.create(&path) else {
            panic!("a second create of the same file must fail");
        };
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert!(e.to_string().contains("000001.log"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
        let missing = dir.path().join("000009.sst");
        let err = fs.remove_file(&missing).unwrap_err().to_string();
        assert!(err.contains("000009.sst"), "{err}");
    }
}

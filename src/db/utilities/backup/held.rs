//! A file a backup holds, read back by `verify` and `restore`: there, at its recorded size, with
//! its recorded checksum.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::names::StoreFile;
use super::{BackupEngine, BackupId};
use crate::error::{Error, Result};
use crate::fs::io_at;

impl BackupEngine {
    /// Opens `f`, a file backup `id` holds; returns its path and the open file.
    ///
    /// # Errors
    /// `Error::Corruption` naming it if it is missing or not of its recorded size; `Error::Io`
    /// naming it if it cannot be opened.
    pub(super) fn open_held(&self, id: BackupId, f: &StoreFile) -> Result<(PathBuf, File)> {
        let path = self.dir.join(f.shared_name());
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::corruption(
                    &path,
                    format!("missing: backup {id} holds it"),
                ))
            }
            Err(e) => return Err(io_at(&path)(e)),
        };
        let size = file.metadata().map_err(io_at(&path))?.len();
        if size != f.size {
            return Err(Error::corruption(
                &path,
                format!("{size} bytes, backup {id} recorded {}", f.size),
            ));
        }
        Ok((path, file))
    }
}

/// Checks that `crc`, computed from the held file at `path`, is the one backup `id` recorded
/// for it (`f`).
///
/// # Errors
/// `Error::Corruption` naming `path` if it is not.
pub(super) fn check_crc(path: &Path, id: BackupId, f: &StoreFile, crc: u32) -> Result<()> {
    if crc == f.crc {
        return Ok(());
    }
    Err(Error::corruption(
        path,
        format!(
            "checksum mismatch (backup {id} recorded {:08x}, the file has {crc:08x})",
            f.crc
        ),
    ))
}

//! Verifying a backup: its metadata as it is on disk, and every byte of every file it names.

use super::copy::Source;
use super::held::check_crc;
use super::metadata::BackupMeta;
use super::names::meta_path;
use super::{BackupEngine, BackupId};
use crate::db::version::filename::FileKind;
use crate::db::version::manifest::read_edits;
use crate::error::{Error, Result};
use crate::inspect::TableInfo;

impl BackupEngine {
    /// Checks backup `id` against what was recorded when it was made: its metadata file reads
    /// whole and unchanged, and each file it names is there with the recorded size and CRC-32 of
    /// its bytes; each table's blocks also pass their own checksums (so a table that was damaged
    /// in the store before it was copied is found too), and the MANIFEST's records theirs. Reads
    /// every byte of the backup; changes nothing.
    ///
    /// # Errors
    /// - `Error::Corruption` naming the first file found damaged (the metadata file, or a file
    ///   of the backup that is missing, of the wrong size or checksum, or whose blocks or records
    ///   do not pass theirs);
    /// - `Error::InvalidArgument` if there is no backup `id`;
    /// - `Error::Io` naming the file that cannot be read.
    pub fn verify(&self, id: BackupId) -> Result<()> {
        let meta = self.whole(id)?;
        let meta_file = meta_path(&self.dir, id);
        if BackupMeta::read(&meta_file, id)? != *meta {
            return Err(Error::corruption(
                &meta_file,
                "changed since the backup directory was opened",
            ));
        }
        let mut buf = Vec::new();
        for f in &meta.files {
            let (path, file) = self.open_held(id, f)?;
            let source = Source::File {
                file: &file,
                path: &path,
                len: f.size,
            };
            check_crc(&path, id, f, source.checksum(&mut buf)?)?;
            match f.kind() {
                Some(FileKind::Table(_)) => {
                    TableInfo::open(&path)?;
                }
                Some(FileKind::Manifest(_)) => {
                    read_edits(&path)?;
                }
                // A WAL prefix is whole records, which its checksum covers.
                _ => {}
            }
        }
        Ok(())
    }
}

//! The names of the files in a backup directory (format: `docs/log_format.md`, *Backup
//! directories*): each backup's metadata file, the store files the backups share, and the
//! temporaries a copy in progress writes under.

use std::path::{Path, PathBuf};

use crate::db::version::filename::{parse_file_name, FileKind};

/// The suffix of a file being written: a leftover is removed when the engine opens.
pub(crate) const TEMP_SUFFIX: &str = ".tmp";

/// The prefix of a backup's metadata file, followed by its id in at least six digits.
const META_PREFIX: &str = "BACKUP-";

/// The name of backup `id`'s metadata file.
pub(crate) fn meta_name(id: u32) -> String {
    format!("{META_PREFIX}{id:06}")
}

/// The path of backup `id`'s metadata file in `dir`.
pub(crate) fn meta_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(meta_name(id))
}

/// The temporary `path` is written under before it is renamed into place.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(TEMP_SUFFIX);
    PathBuf::from(name)
}

/// A store file as a backup holds it: its name in the store, its size and the CRC-32 of its
/// bytes. Two backups holding the same three hold the same bytes, in one shared file.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct StoreFile {
    /// Its name in a store directory: a table, a WAL or a MANIFEST.
    pub(crate) name: String,
    pub(crate) size: u64,
    pub(crate) crc: u32,
}

impl StoreFile {
    /// Its name in the backup directory: the store name with the checksum and size put before
    /// the extension, e.g. `000012_3f8a12bc_48211.sst`, `MANIFEST-000057_0badf00d_345`.
    pub(crate) fn shared_name(&self) -> String {
        let (stem, ext) = split_extension(&self.name);
        format!("{stem}_{:08x}_{}{ext}", self.crc, self.size)
    }

    /// What it is in a store; every `StoreFile` names a table, a WAL or a MANIFEST.
    pub(crate) fn kind(&self) -> Option<FileKind> {
        parse_file_name(&self.name).filter(is_store_data)
    }
}

/// Whether `kind` is a file a backup holds: a table, a WAL or a MANIFEST.
fn is_store_data(kind: &FileKind) -> bool {
    matches!(
        kind,
        FileKind::Table(_) | FileKind::Log(_) | FileKind::Manifest(_)
    )
}

/// What a file in a backup directory is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BackupFileKind {
    /// Backup `id`'s metadata.
    Meta(u32),
    /// A store file one or more backups share.
    Shared(StoreFile),
    /// A file being written (`*.tmp`).
    Temp,
}

/// Recognises a name in a backup directory; `None` for names the engine did not write (`LOCK`
/// among them), which it leaves alone.
pub(crate) fn parse_backup_name(name: &str) -> Option<BackupFileKind> {
    if name.ends_with(TEMP_SUFFIX) {
        return Some(BackupFileKind::Temp);
    }
    if let Some(id) = name.strip_prefix(META_PREFIX) {
        // Only the name `meta_name` gives: no second spelling of an id.
        let id: u32 = id.parse().ok()?;
        return (meta_name(id) == name).then_some(BackupFileKind::Meta(id));
    }
    let (stem, ext) = split_extension(name);
    let (rest, size) = stem.rsplit_once('_')?;
    let (store_stem, crc) = rest.rsplit_once('_')?;
    if crc.len() != 8 || !size.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let file = StoreFile {
        name: format!("{store_stem}{ext}"),
        size: size.parse().ok()?,
        crc: u32::from_str_radix(crc, 16).ok()?,
    };
    // The name must be the one this file would be given: no second spelling of it.
    (file.kind().is_some() && file.shared_name() == name).then_some(BackupFileKind::Shared(file))
}

/// `name` split before its extension (`.sst`, `.log`), or whole with an empty extension.
fn split_extension(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(i) => name.split_at(i),
        None => (name, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_left_alone() {
        for name in ["000012.sst", "000055.log", "MANIFEST-000057"] {
            let f = StoreFile {
                name: name.to_string(),
                size: 48211,
                crc: 0x3f8a_12bc,
            };
            let shared = f.shared_name();
            assert!(shared.contains("_3f8a12bc_48211"), "{shared}");
            assert_eq!(parse_backup_name(&shared), Some(BackupFileKind::Shared(f)));
        }
        assert_eq!(
            StoreFile {
                name: "000012.sst".into(),
                size: 7,
                crc: 1
            }
            .shared_name(),
            "000012_00000001_7.sst"
        );
        assert_eq!(
            parse_backup_name(&meta_name(3)),
            Some(BackupFileKind::Meta(3))
        );
        assert_eq!(
            parse_backup_name("BACKUP-000003.tmp"),
            Some(BackupFileKind::Temp)
        );
        for stranger in [
            "LOCK",
            "notes.txt",
            "CURRENT",
            "000012.sst",
            "000012_3f8a12bc_48211.txt",
            "000012_3f8a12b_48211.sst",
            "000012_3f8a12bc_+48211.sst",
            "BACKUP-3",
            "BACKUP-0000003",
            "BACKUP-+00003",
            "BACKUP-00000x",
            "CURRENT_00000000_0",
        ] {
            assert_eq!(parse_backup_name(stranger), None, "{stranger}");
        }
    }
}

//! The names of the files in a database directory.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The largest file number a store allocates. A file in the directory numbered above it was not
/// written by the store, and allocating past it could wrap the counter: open refuses it.
pub(crate) const MAX_FILE_NUMBER: u64 = 1 << 60;

/// What a file in the directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    Log(u64),
    Table(u64),
    Manifest(u64),
    Current,
    Lock,
    Temp,
}

pub(crate) fn log_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(FileKind::Log(number).name())
}

pub(crate) fn table_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(FileKind::Table(number).name())
}

pub(crate) fn manifest_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

pub(crate) fn current_path(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}

pub(crate) fn lock_path(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

/// The temporary name CURRENT is written under before it is renamed into place.
pub(crate) fn current_temp_path(dir: &Path) -> PathBuf {
    dir.join("CURRENT.dbtmp")
}

impl FileKind {
    /// The file number of a log, table or MANIFEST.
    pub(crate) fn number(&self) -> Option<u64> {
        match *self {
            FileKind::Log(n) | FileKind::Table(n) | FileKind::Manifest(n) => Some(n),
            FileKind::Current | FileKind::Lock | FileKind::Temp => None,
        }
    }

    /// The file's name in the directory.
    pub(crate) fn name(&self) -> String {
        match *self {
            FileKind::Log(n) => format!("{n:06}.log"),
            FileKind::Table(n) => format!("{n:06}.sst"),
            FileKind::Manifest(n) => manifest_name(n),
            FileKind::Current => "CURRENT".to_string(),
            FileKind::Lock => "LOCK".to_string(),
            FileKind::Temp => "CURRENT.dbtmp".to_string(),
        }
    }
}

/// Every file of `dir` that has a store file's name.
///
/// # Errors
/// `Error::Io` naming `dir` if it cannot be listed.
pub(crate) fn list_files(dir: &Path) -> Result<Vec<FileKind>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(crate::fs::io_at(dir))? {
        let entry = entry.map_err(crate::fs::io_at(dir))?;
        if let Some(kind) = entry.file_name().to_str().and_then(parse_file_name) {
            out.push(kind);
        }
    }
    Ok(out)
}

/// The error of an allocation past [`MAX_FILE_NUMBER`].
pub(crate) fn numbers_used_up(dir: &Path) -> Error {
    Error::InvalidArgument(format!(
        "the store in {} has used every file number (up to {MAX_FILE_NUMBER})",
        dir.display()
    ))
}

/// Refuses a path no store can live at, before anything is created: an empty path would put the
/// store's files in the working directory under a name no message can show.
///
/// # Errors
/// `Error::InvalidArgument` for an empty path.
pub(crate) fn check_store_path(dir: &Path) -> Result<()> {
    if dir.as_os_str().is_empty() {
        return Err(Error::InvalidArgument(
            "the store's path is empty: name its directory (\".\" for the working directory)"
                .into(),
        ));
    }
    Ok(())
}

/// Recognises a file name; `None` for files siftdb did not write.
pub(crate) fn parse_file_name(name: &str) -> Option<FileKind> {
    match name {
        "CURRENT" => return Some(FileKind::Current),
        "LOCK" => return Some(FileKind::Lock),
        "CURRENT.dbtmp" => return Some(FileKind::Temp),
        _ => {}
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return n.parse().ok().map(FileKind::Manifest);
    }
    let (stem, ext) = name.rsplit_once('.')?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number = stem.parse().ok()?;
    match ext {
        "log" => Some(FileKind::Log(number)),
        "sst" => Some(FileKind::Table(number)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let dir = Path::new("/d");
        let name = |p: PathBuf| p.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(
            parse_file_name(&name(log_path(dir, 7))),
            Some(FileKind::Log(7))
        );
        assert_eq!(
            parse_file_name(&name(table_path(dir, 1234567))),
            Some(FileKind::Table(1234567))
        );
        assert_eq!(
            parse_file_name(&manifest_name(3)),
            Some(FileKind::Manifest(3))
        );
        assert_eq!(parse_file_name("CURRENT"), Some(FileKind::Current));
        for kind in [
            FileKind::Log(3),
            FileKind::Table(1_234_567),
            FileKind::Manifest(9),
            FileKind::Current,
            FileKind::Lock,
            FileKind::Temp,
        ] {
            assert_eq!(parse_file_name(&kind.name()), Some(kind));
        }
        assert_eq!(parse_file_name("x.sst"), None);
        assert_eq!(parse_file_name("12.txt"), None);
    }
}

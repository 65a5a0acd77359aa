//! The crate's error type.

use std::fmt;
use std::path::{Path, PathBuf};

/// Everything that can go wrong in siftdb.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error (open, read, write, fsync, rename …).
    Io(std::io::Error),
    /// A file's bytes are not what siftdb wrote: a bad checksum, a short file, a malformed varint.
    Corruption {
        /// The file in which the damage was found.
        file: PathBuf,
        /// What was wrong, in words.
        what: String,
    },
    /// The caller passed something siftdb does not accept (an oversized key, a file as a directory …).
    InvalidArgument(String),
    /// Another `Db` (in this or another process) holds the directory's `LOCK` file.
    Locked(PathBuf),
    /// A background flush or compaction failed earlier; writes fail with this until the store is
    /// reopened, so that nothing is lost silently.
    Background(String),
}

/// `std::result::Result` with siftdb's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The same error again, for each writer of a group commit that shares one outcome (an I/O
    /// error keeps its kind and message).
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io(e) => Error::Io(std::io::Error::new(e.kind(), e.to_string())),
            Error::Corruption { file, what } => Error::Corruption {
                file: file.clone(),
                what: what.clone(),
            },
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::Locked(p) => Error::Locked(p.clone()),
            Error::Background(s) => Error::Background(s.clone()),
        }
    }

    /// An [`Error::Corruption`] for `file`.
    pub(crate) fn corruption(file: &Path, what: impl Into<String>) -> Error {
        Error::Corruption {
            file: file.to_path_buf(),
            what: what.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Corruption { file, what } => {
                write!(f, "corruption in {}: {what}", file.display())
            }
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::Locked(path) => write!(
                f,
                "database is locked: {} is held by another open Db",
                path.display()
            ),
            Error::Background(what) => write!(f, "background work failed earlier: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

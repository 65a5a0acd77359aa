//! The crate's error type.

use std::fmt;
use std::io;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// Something holds the directory's `LOCK` file: a `Db` open for writing excludes every other
    /// open, a read-only one excludes writers, and the scans and cursors of a closed `Db` keep
    /// it until they are dropped (they still read its files). The [`LockedDir`] is the
    /// directory (it reads as its path) and says, in its message, what holds it as far as this
    /// process can tell.
    Locked(LockedDir),
    /// A background flush or compaction (or a WAL write or sync) failed earlier; writes fail with
    /// this until the store is reopened, so that nothing is lost silently. The
    /// [`BackgroundError`] keeps the original error ([`BackgroundError::cause`],
    /// [`BackgroundError::io_kind`]) and reads as its message (`&str`).
    Background(BackgroundError),
    /// A write (or flush, compaction) on a store opened with
    /// [`Db::open_read_only`](crate::Db::open_read_only), which never writes; the path is the
    /// store's directory.
    ReadOnly(PathBuf),
    /// A write (or flush, compaction, backup) on a follower opened with
    /// [`Db::open_follower`](crate::Db::open_follower), which reads another process's (or
    /// thread's) store and never writes to it; the path is that store's directory, where the
    /// write belongs.
    Follower(PathBuf),
    /// A call on a store that was closed: by [`Db::close`](crate::Db::close) on any of its
    /// handles, or by dropping the last one. The path is the store's directory. Nothing was done:
    /// a write that returns it was not applied (and is in no WAL).
    Closed(PathBuf),
    /// A [`Transaction`](crate::Transaction) was not committed because another write got there
    /// first: a key it read or wrote, or a key in a range it scanned, was written by someone
    /// else after its snapshot was taken. Nothing of the transaction was applied. Retryable:
    /// run the transaction again from the start (a new [`Db::transaction`](crate::Db::transaction)
    /// reads the newer values); [`Db::update`](crate::Db::update) does so itself. The message
    /// names the key or the keyspace of the range.
    Conflict(String),
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
            Error::Locked(l) => Error::Locked(l.clone()),
            Error::Background(b) => Error::Background(b.clone()),
            Error::ReadOnly(p) => Error::ReadOnly(p.clone()),
            Error::Follower(p) => Error::Follower(p.clone()),
            Error::Closed(p) => Error::Closed(p.clone()),
            Error::Conflict(s) => Error::Conflict(s.clone()),
        }
    }

    /// Whether this is an [`Error::Conflict`]: a transaction that lost a race to another write,
    /// and may simply be run again.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict(_))
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
            Error::Locked(locked) => write!(f, "database is locked: {locked}"),
            Error::Background(what) => write!(f, "background work failed earlier: {what}"),
            Error::ReadOnly(path) => write!(
                f,
                "the store in {} is open read-only: it accepts no writes",
                path.display()
            ),
            Error::Follower(path) => write!(
                f,
                "this store is a follower of the store in {}: it accepts no writes (write to \
                 that store)",
                path.display()
            ),
            Error::Closed(path) => write!(f, "the store in {} is closed", path.display()),
            Error::Conflict(what) => write!(f, "transaction conflict: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            Error::Background(b) => Some(b),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// A store directory whose `LOCK` is held, and what holds it as far as this process can tell:
/// the value inside [`Error::Locked`].
///
/// It reads as the directory's path, as the `PathBuf` this variant held before did: it
/// dereferences to [`Path`] and compares equal to paths. Its `Display` says what holds the lock:
/// a `Db` open in this process, scans or cursors of a closed one (drop them), or a `Db` of
/// another process.
///
/// ```
/// use siftdb::{Db, Error, Options};
///
/// # fn main() -> siftdb::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// let scan = db.iter(); // reads the store's files until dropped
/// db.close()?;
/// match Db::open(dir.path(), Options::default()) {
///     Err(Error::Locked(locked)) => {
///         assert_eq!(locked, dir.path());
///         assert!(locked.to_string().contains("1 scan or cursor of a closed Db"));
///     }
///     other => panic!("expected Locked, got {:?}", other.err()),
/// }
/// drop(scan);
/// assert!(Db::open(dir.path(), Options::default()).is_ok());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedDir {
    path: PathBuf,
    holder: LockHolder,
}

/// What holds a locked directory, as far as this process can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockHolder {
    /// A `Db` open in this process (for writing or reading).
    OpenHere,
    /// This many scans and cursors of a closed `Db` of this process.
    ClosedReaders(usize),
    /// Nothing this process knows of: another process.
    Elsewhere,
}

impl LockedDir {
    pub(crate) fn new(path: PathBuf, holder: LockHolder) -> LockedDir {
        LockedDir { path, holder }
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Deref for LockedDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for LockedDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl PartialEq<Path> for LockedDir {
    fn eq(&self, other: &Path) -> bool {
        self.path == other
    }
}

impl PartialEq<&Path> for LockedDir {
    fn eq(&self, other: &&Path) -> bool {
        self.path == *other
    }
}

impl PartialEq<PathBuf> for LockedDir {
    fn eq(&self, other: &PathBuf) -> bool {
        &self.path == other
    }
}

impl fmt::Display for LockedDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match self.holder {
            LockHolder::OpenHere => write!(f, "{path} is held by a Db open in this process"),
            LockHolder::ClosedReaders(n) => {
                write!(
                f,
                "{path} is held by {n} {} of a closed Db in this process, which read{} its files \
                 until dropped",
                if n == 1 { "scan or cursor" } else { "scans or cursors" },
                if n == 1 { "s" } else { "" },
            )
            }
            LockHolder::Elsewhere => write!(f, "{path} is held by a Db open in another process"),
        }
    }
}

/// Why background work failed: the value inside [`Error::Background`].
///
/// It keeps the error the failed work returned ([`cause`](Self::cause), also its
/// [`source`](std::error::Error::source)), so an I/O error's kind survives
/// ([`io_kind`](Self::io_kind)). It also reads as its message, as the `String` this variant held
/// before did: it dereferences to `str`, displays as the message and compares equal to strings,
/// so `msg.contains("No space left")` and `format!("{msg}")` keep working. Cloning is cheap (the
/// store hands the same failure to every writer).
///
/// ```
/// use siftdb::{BackgroundError, Error};
///
/// fn explain(e: &Error) -> String {
///     match e {
///         Error::Background(b) if b.io_kind() == Some(std::io::ErrorKind::StorageFull) => {
///             format!("disk full: {b}")
///         }
///         Error::Background(b) if b.contains("panicked") => format!("a bug: {b}"),
///         other => other.to_string(),
///     }
/// }
///
/// let full = BackgroundError::from(Error::Io(std::io::ErrorKind::StorageFull.into()));
/// assert!(explain(&Error::Background(full)).starts_with("disk full"));
/// let panicked = BackgroundError::from("flush panicked: oops");
/// assert_eq!(panicked, "flush panicked: oops");
/// assert!(panicked.cause().is_none());
/// ```
#[derive(Clone)]
pub struct BackgroundError {
    inner: Arc<BackgroundInner>,
}

struct BackgroundInner {
    /// The failure in words: the cause's `Display`, or what panicked.
    message: String,
    /// The error the failed work returned; `None` when it panicked.
    cause: Option<Error>,
}

impl BackgroundError {
    /// A failure with no underlying error (a panic), described by `message`.
    pub(crate) fn message(message: impl Into<String>) -> BackgroundError {
        BackgroundError {
            inner: Arc::new(BackgroundInner {
                message: message.into(),
                cause: None,
            }),
        }
    }

    /// The error the failed work returned (an [`Error::Io`] naming its file, an
    /// [`Error::Corruption`] …); `None` when the work panicked (in a filter policy or prefix
    /// extractor: the message says what panicked).
    pub fn cause(&self) -> Option<&Error> {
        self.inner.cause.as_ref()
    }

    /// The kind of the operating-system error behind the failure, if it was one (`StorageFull`
    /// for a full disk, …).
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self.cause() {
            Some(Error::Io(e)) => Some(e.kind()),
            _ => None,
        }
    }

    /// The failure in words, as `Display` shows it.
    pub fn as_str(&self) -> &str {
        &self.inner.message
    }
}

impl From<Error> for BackgroundError {
    /// The failure `cause`; an [`Error::Background`] is unwrapped rather than nested.
    fn from(cause: Error) -> BackgroundError {
        match cause {
            Error::Background(b) => b,
            cause => BackgroundError {
                inner: Arc::new(BackgroundInner {
                    message: cause.to_string(),
                    cause: Some(cause),
                }),
            },
        }
    }
}

impl From<String> for BackgroundError {
    /// A failure with no underlying error, described by `message`.
    fn from(message: String) -> BackgroundError {
        BackgroundError::message(message)
    }
}

impl From<&str> for BackgroundError {
    /// A failure with no underlying error, described by `message`.
    fn from(message: &str) -> BackgroundError {
        BackgroundError::message(message)
    }
}

impl From<BackgroundError> for String {
    fn from(e: BackgroundError) -> String {
        e.inner.message.clone()
    }
}

impl Deref for BackgroundError {
    type Target = str;

    fn deref(&self) -> &str {
        &self.inner.message
    }
}

impl AsRef<str> for BackgroundError {
    fn as_ref(&self) -> &str {
        &self.inner.message
    }
}

impl fmt::Display for BackgroundError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.inner.message)
    }
}

impl fmt::Debug for BackgroundError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cause() {
            Some(cause) => f
                .debug_struct("BackgroundError")
                .field("cause", cause)
                .finish(),
            None => f
                .debug_tuple("BackgroundError")
                .field(&self.inner.message)
                .finish(),
        }
    }
}

impl std::error::Error for BackgroundError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl PartialEq for BackgroundError {
    /// Equal messages.
    fn eq(&self, other: &BackgroundError) -> bool {
        self.inner.message == other.inner.message
    }
}

impl PartialEq<str> for BackgroundError {
    fn eq(&self, other: &str) -> bool {
        self.inner.message == other
    }
}

impl PartialEq<&str> for BackgroundError {
    fn eq(&self, other: &&str) -> bool {
        self.inner.message == *other
    }
}

impl PartialEq<String> for BackgroundError {
    fn eq(&self, other: &String) -> bool {
        &self.inner.message == other
    }
}

impl PartialEq<BackgroundError> for str {
    fn eq(&self, other: &BackgroundError) -> bool {
        self == other.inner.message
    }
}

impl PartialEq<BackgroundError> for &str {
    fn eq(&self, other: &BackgroundError) -> bool {
        *self == other.inner.message
    }
}

impl PartialEq<BackgroundError> for String {
    fn eq(&self, other: &BackgroundError) -> bool {
        *self == other.inner.message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_background_error_reads_as_its_message_and_keeps_its_cause() {
        let io = io::Error::new(io::ErrorKind::StorageFull, "000012.sst: No space left");
        let b = BackgroundError::from(Error::Io(io));
        assert_eq!(b.io_kind(), Some(io::ErrorKind::StorageFull));
        assert!(b.contains("No space left"));
        assert_eq!(format!("{b}"), "I/O error: 000012.sst: No space left");
        assert_eq!(b, "I/O error: 000012.sst: No space left");
        assert_eq!(b, String::from("I/O error: 000012.sst: No space left"));
        assert!(matches!(b.cause(), Some(Error::Io(_))));
        let source = std::error::Error::source(&b).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some(b.as_str()));
        // Nested: not wrapped twice.
        let again = BackgroundError::from(Error::Background(b.clone()));
        assert_eq!(again.io_kind(), Some(io::ErrorKind::StorageFull));
        let e = Error::Background(again);
        let copy = e.duplicate();
        let Error::Background(s) = &copy else {
            panic!("{copy:?}")
        };
        assert!(s.starts_with("I/O error"));
        assert_eq!(
            copy.to_string(),
            "background work failed earlier: I/O error: 000012.sst: No space left"
        );
        let panic = BackgroundError::from("compaction panicked: boom");
        assert_eq!(panic.io_kind(), None);
        assert!("compaction panicked: boom" == panic);
        assert_eq!(String::from(panic), "compaction panicked: boom");
    }
}

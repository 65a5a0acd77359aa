//! The directory's `LOCK` as this process holds it: shared by an open store and the scans and
//! cursors made from it, which keep reading its files after it closes (`close.rs`). Each hold is
//! listed in a table of the process, so that an open refused the lock can say what holds it: a
//! store open here, the scans and cursors of a closed one, or (not listed) another process.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::error::{Error, LockHolder, LockedDir};

/// A `LOCK` file this process has locked, unlocked when dropped, before the file closes: a
/// `flock` belongs to the open file, which a child process forked meanwhile shares until its
/// exec, and closing only this descriptor would leave the directory locked until then. (An
/// unlock that fails leaves the close to release it.)
pub(crate) struct LockedFile(File);

impl LockedFile {
    /// `file`, whose lock was just taken.
    pub(crate) fn new(file: File) -> LockedFile {
        LockedFile(file)
    }
}

impl Drop for LockedFile {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// The directory's `LOCK` file, locked exclusively (a writer) or shared (readers) until the last
/// holder drops it. Its file is `None` only for a reader on a read-only file system.
pub(crate) struct DirLock {
    _file: Option<LockedFile>,
    /// The directory, as [`listed`] compares it.
    dir: PathBuf,
    /// Set once its store has closed: who holds it then are scans and cursors.
    store_closed: AtomicBool,
}

/// Every `LOCK` this process holds, by directory.
static HELD: Mutex<Vec<(PathBuf, Weak<DirLock>)>> = Mutex::new(Vec::new());

/// `dir` as the table of holds lists it: canonical where it can be made so, so that two
/// spellings of one directory meet.
fn listed(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

impl DirLock {
    /// The hold of an open store on `dir`'s `LOCK` (`file`, already locked), listed.
    pub(crate) fn new(file: Option<LockedFile>, dir: &Path) -> Arc<DirLock> {
        let lock = Arc::new(DirLock {
            _file: file,
            dir: listed(dir),
            store_closed: AtomicBool::new(false),
        });
        let mut held = HELD.lock();
        held.retain(|(_, w)| w.strong_count() > 0);
        held.push((lock.dir.clone(), Arc::downgrade(&lock)));
        lock
    }

    /// Records that its store closed: the holds left are scans' and cursors'.
    pub(crate) fn store_closed(&self) {
        self.store_closed.store(true, Ordering::Release);
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        HELD.lock().retain(|(_, w)| w.strong_count() > 0);
    }
}

/// The error of an open refused `dir`'s `LOCK`, saying what holds it as far as this process can
/// tell.
pub(crate) fn locked_error(dir: &Path) -> Error {
    let key = listed(dir);
    let holder = HELD
        .lock()
        .iter()
        .filter(|(d, _)| *d == key)
        .find_map(|(_, w)| w.upgrade())
        .map_or(LockHolder::Elsewhere, |lock| {
            if lock.store_closed.load(Ordering::Acquire) {
                // Less the one just taken to look.
                LockHolder::ClosedReaders(Arc::strong_count(&lock) - 1)
            } else {
                LockHolder::OpenHere
            }
        });
    Error::Locked(LockedDir::new(dir.to_path_buf(), holder))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process forked while the lock is held (by a store, or an open that then fails) holds a
    /// copy of the `LOCK` descriptor until its exec: letting go must not leave the directory
    /// locked by that copy.
    #[test]
    fn a_copy_of_the_descriptor_does_not_keep_the_directory_locked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let file = File::create(&path).unwrap();
        file.try_lock().unwrap();
        let copy = file.try_clone().unwrap();
        drop(LockedFile::new(file));
        let other = File::open(&path).unwrap();
        assert!(
            other.try_lock().is_ok(),
            "the copy kept the directory locked"
        );
        drop(copy);
    }
}

//! What keeps a follower's tables readable: a hard link to each table a version of the follower
//! lists, in the follower's own directory, made right after the MANIFEST record naming it was
//! read. The writer removes its name when it deletes the table; the follower's name keeps the
//! file until the follower's last version listing it is dropped, when `DbInner::retire` removes
//! the link.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;

use crate::db::version::filename::{list_files, table_path, FileKind};
use crate::error::{Error, Result};
use crate::fs::FileSystem;

/// Links each table of `numbers` from the writer's directory `primary` into `own`, recording the
/// links it makes in `made`. `Ok(false)` if a table is gone from `primary` (the writer deleted
/// it: a MANIFEST read that lists it is stale and must be read again); the others are linked
/// all the same. A link already there (made by an earlier try) is the same file, since the
/// writer never reuses a table number.
///
/// # Errors
/// `Error::InvalidArgument` if the two directories are on different file systems, which cannot
/// link; `Error::Io` naming the link for other failures.
pub(super) fn link_tables(
    fs: &FileSystem,
    primary: &Path,
    own: &Path,
    numbers: impl IntoIterator<Item = u64>,
    made: &mut BTreeSet<u64>,
) -> Result<bool> {
    let mut all = true;
    for number in numbers {
        let (from, to) = (table_path(primary, number), table_path(own, number));
        match fs.hard_link(&from, &to) {
            Ok(()) => {
                made.insert(number);
            }
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound && !from.exists() => {
                all = false;
            }
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::CrossesDevices => {
                return Err(Error::InvalidArgument(format!(
                    "a follower's directory must be on the file system of the store it follows, \
                     since it hard-links its tables: {} cannot link to {} ({e})",
                    own.display(),
                    primary.display()
                )));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(all)
}

/// Removes the table links in `own` left by an earlier follower, before a new one links afresh.
///
/// # Errors
/// `Error::Io` naming the directory or a link that cannot be removed.
pub(super) fn remove_links(fs: &FileSystem, own: &Path) -> Result<()> {
    for kind in list_files(own)? {
        if let FileKind::Table(number) = kind {
            fs.remove_file(&table_path(own, number))?;
        }
    }
    Ok(())
}

/// Removes the link to table `number` in `own`, if there is one.
pub(super) fn remove_link(fs: &FileSystem, own: &Path, number: u64) {
    // A link left behind is removed when the next follower opens the directory.
    let _ = fs.remove_file(&table_path(own, number));
}

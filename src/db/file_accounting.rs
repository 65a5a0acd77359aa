//! What open checks before it writes or removes any file: that the MANIFEST it read accounts for
//! every file in the directory. A MANIFEST that lost records the store acted on (a cut or damaged
//! tail, an old copy) fails a check, and the store is refused with `Error::Corruption` and nothing
//! changed; a torn last edit that nothing acted on passes them all.
//!
//! Tables are the subtle part: one that no version names is either a leftover (an input already
//! replaced, an output a crash left unfinished, a table of a dropped keyspace), which open
//! removes, or a table whose records the MANIFEST lost, which it must keep. Each table records its
//! store, number and keyspace (`docs/table_format.md`, *Properties block*), and the MANIFEST
//! records which keyspaces it dropped, which tables it replaced and which were still being written
//! at its last edit; a table none of those explains is not removed but refused.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use super::version::filename::{list_files, log_path, table_path, FileKind, MAX_FILE_NUMBER};
use super::version::manifest::RecoveredManifest;
use crate::error::{Error, Result};
use crate::fs::io_at;
use crate::sst::table_reader::read_properties;
use crate::store_id::DEFAULT_KEYSPACE;
use crate::wal::reader::read_log;
use crate::write_batch::BatchEntries;

/// The store's files, once the MANIFEST has accounted for them.
pub(crate) struct AccountedFiles {
    /// Every file of the directory that has a store file's name.
    pub(crate) files: Vec<FileKind>,
    /// The first file number open may hand out: past every file in the directory, not only those
    /// the MANIFEST knows (WALs created after its last edit, and tables of an interrupted flush,
    /// carry numbers at or above its counter). Every number is below `MAX_FILE_NUMBER`, so this
    /// does not overflow.
    pub(crate) next_file: u64,
    /// The tables no version names whose data is held elsewhere or no longer wanted: a writable
    /// open removes them before it writes its new MANIFEST, which no longer says why.
    pub(crate) obsolete_tables: Vec<u64>,
}

/// Checks that the MANIFEST `recovered` (read from `dir`) accounts for the store's files, so that
/// neither replay nor the clean-up after it loses data the MANIFEST lost track of:
///
/// - every file number leaves the counter room (below [`MAX_FILE_NUMBER`]);
/// - every table the version names is present with the size the MANIFEST records: tables are
///   removed only after a synced edit took them out of the version;
/// - the oldest WAL the MANIFEST needs is present whenever a newer WAL is: WALs are removed
///   oldest first, each only after a synced flush edit moved the log number past it;
/// - every table no version names is explained (see [`why_unnamed`]);
/// - every write in the WALs replay reads is to a keyspace the MANIFEST creates or drops: a
///   keyspace's creation is synced before anything is written to it.
///
/// # Errors
/// `Error::Corruption` naming the MANIFEST (or the file) and what it cannot explain; `Error::Io`
/// if a file cannot be read.
pub(crate) fn account_for_files(
    dir: &Path,
    recovered: &RecoveredManifest,
) -> Result<AccountedFiles> {
    let files = list_files(dir)?;
    for kind in &files {
        if let Some(n) = kind.number().filter(|&n| n >= MAX_FILE_NUMBER) {
            return Err(Error::corruption(
                &dir.join(kind.name()),
                format!(
                    "numbered {n}, beyond the largest file number a store allocates \
                     ({MAX_FILE_NUMBER}): not a file this store wrote; move it out of the directory"
                ),
            ));
        }
    }
    check_named_tables(dir, recovered)?;
    check_needed_wal(recovered, &files)?;
    let obsolete_tables = unnamed_tables(dir, recovered, &files)?;
    check_wal_keyspaces(dir, recovered, &files)?;
    let next_file = files
        .iter()
        .filter_map(FileKind::number)
        .map(|n| n + 1)
        .fold(recovered.counters.next_file_number, u64::max);
    Ok(AccountedFiles {
        files,
        next_file,
        obsolete_tables,
    })
}

/// The MANIFEST's file name, for messages.
fn manifest_name(recovered: &RecoveredManifest) -> String {
    recovered
        .path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// Every table the version names is present, at its recorded size.
fn check_named_tables(dir: &Path, recovered: &RecoveredManifest) -> Result<()> {
    let manifest_name = manifest_name(recovered);
    let tables = recovered
        .trees
        .values()
        .flat_map(|t| t.version.levels.iter().flatten());
    for f in tables {
        let path = table_path(dir, f.number);
        let size = match fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::corruption(
                    &path,
                    format!(
                        "table named by {manifest_name} is missing (removed by hand, or \
                         {manifest_name} lost the edit that replaced it)"
                    ),
                ));
            }
            Err(e) => return Err(io_at(&path)(e)),
        };
        if size != f.size {
            return Err(Error::corruption(
                &path,
                format!(
                    "the file is {size} bytes, {manifest_name} says {}: not this store's table",
                    f.size
                ),
            ));
        }
    }
    Ok(())
}

/// The WAL the MANIFEST's log number names is present whenever a newer one is.
fn check_needed_wal(recovered: &RecoveredManifest, files: &[FileKind]) -> Result<()> {
    let needed = recovered.counters.log_number;
    // 0: a store's first MANIFEST, written before its first WAL; no WAL is numbered 0.
    if needed == 0 || files.contains(&FileKind::Log(needed)) {
        return Ok(());
    }
    let newer = files
        .iter()
        .filter_map(|k| match *k {
            FileKind::Log(n) if n > needed => Some(n),
            _ => None,
        })
        .min();
    match newer {
        // No WAL at all past it: a checkpoint, whose MANIFEST needs none.
        None => Ok(()),
        Some(newer) => Err(Error::corruption(
            &recovered.path,
            format!(
                "needs {} (the oldest WAL whose writes are in no table), which is missing while \
                 the newer {} is present: the MANIFEST has lost the edit of the flush that \
                 removed it (a cut or damaged tail), or the WAL was removed by hand; replaying \
                 the newer WALs alone would lose the writes between, so nothing is opened or \
                 removed",
                FileKind::Log(needed).name(),
                FileKind::Log(newer).name()
            ),
        )),
    }
}

/// The tables of `files` that no version names, all of them obsolete; if any is not,
/// `Error::Corruption` naming the MANIFEST and every table it cannot explain.
fn unnamed_tables(
    dir: &Path,
    recovered: &RecoveredManifest,
    files: &[FileKind],
) -> Result<Vec<u64>> {
    let named: HashSet<u64> = recovered
        .trees
        .values()
        .flat_map(|t| t.version.levels.iter().flatten().map(|f| f.number))
        .collect();
    let mut obsolete = Vec::new();
    let mut unexplained = Vec::new();
    for kind in files {
        let FileKind::Table(number) = *kind else {
            continue;
        };
        if named.contains(&number) {
            continue;
        }
        match why_unnamed(dir, recovered, number)? {
            Ok(()) => obsolete.push(number),
            Err(why) => unexplained.push(format!("{} ({why})", kind.name())),
        }
    }
    if unexplained.is_empty() {
        return Ok(obsolete);
    }
    unexplained.sort();
    Err(Error::corruption(
        &recovered.path,
        format!(
            "cannot account for {}: it has lost records the store acted on (a cut or damaged \
             tail, or an older copy), so nothing is opened or removed",
            unexplained.join("; ")
        ),
    ))
}

/// Why table `number`, which no version names, is obsolete (`Ok(Ok(()))`), or why it is not
/// explained (`Ok(Err(why))`). Obsolete:
///
/// - an edit replaced it (a compaction's input, a rewritten table): its data is in the tables
///   that replaced it;
/// - its keyspace's drop is recorded;
/// - it is numbered at or past the oldest table still being written at the last edit, and its
///   keyspace is live (a flush's or compaction's output whose edit never landed: its data is
///   still in the WALs or the tables it would have replaced; or a table an ingest copied in,
///   recording number 0, whose edit never landed: the caller still has it), or it cannot be read
///   at all (such an output or copy cut short);
/// - its keyspace is live and it records no keyspace id: written by an earlier version, whose
///   edits did not record the tables in flight. Such a table's data, were its edit lost, is in a
///   WAL or table the other checks find missing.
///
/// Anything else is unexplained: a table of a keyspace no record creates (never created, or
/// created by a record the MANIFEST lost: creations are synced before any table of the keyspace
/// is written), a table of a live keyspace below that number that no edit replaced (the edit
/// that added it is lost), an unreadable table below it, another store's table.
///
/// # Errors
/// `Error::Io` if the table cannot be read.
fn why_unnamed(
    dir: &Path,
    recovered: &RecoveredManifest,
    number: u64,
) -> Result<std::result::Result<(), String>> {
    if recovered.replaced.contains(&number) {
        return Ok(Ok(()));
    }
    let in_flight_from = recovered.tables_in_flight_from;
    let in_flight = number >= in_flight_from;
    let properties = match read_properties(&table_path(dir, number)) {
        Ok(p) => p,
        Err(Error::Corruption { .. }) if in_flight => return Ok(Ok(())),
        Err(Error::Corruption { what, .. }) => {
            return Ok(Err(format!(
                "unreadable ({what}), and numbered below {in_flight_from}, where no table was \
                 being written"
            )))
        }
        Err(e) => return Err(e),
    };
    // A table built outside the store records number 0: one the ingest copied in, whose edit
    // did not land, is explained like any table in flight.
    let ingested = properties.external && properties.table_number == 0;
    if properties.store_id != recovered.store_id || (properties.table_number != number && !ingested)
    {
        return Ok(Err(format!(
            "not this store's table {number}: it records another store or number"
        )));
    }
    let name = match properties.keyspace.as_str() {
        "" => DEFAULT_KEYSPACE,
        name => name,
    };
    let (live, dropped) = match properties.keyspace_id {
        Some(id) => (
            recovered.trees.contains_key(&id),
            recovered.dropped.contains_key(&id),
        ),
        // Written before tables recorded their keyspace's id: its name, which a keyspace
        // created after a drop may have again, so either reading explains it.
        None => (
            recovered.trees.values().any(|t| t.name == name),
            recovered.dropped.values().any(|k| k.name == name),
        ),
    };
    if dropped || (live && (in_flight || properties.keyspace_id.is_none())) {
        return Ok(Ok(()));
    }
    let keyspace = match properties.keyspace_id {
        Some(id) => format!("keyspace {name} (id {id})"),
        None => format!("keyspace {name}"),
    };
    Ok(Err(if live {
        format!(
            "of {keyspace}, numbered below {in_flight_from}, where no table was being written, \
             and replaced by no edit: the edit that added it is lost"
        )
    } else {
        format!("of {keyspace}, which no record creates or drops: its records are lost")
    }))
}

/// Every write in the WALs replay reads is to a keyspace the MANIFEST creates or drops; a write
/// to another is in a keyspace whose records the MANIFEST lost, and replay would skip it.
fn check_wal_keyspaces(
    dir: &Path,
    recovered: &RecoveredManifest,
    files: &[FileKind],
) -> Result<()> {
    let known = |id: u32| recovered.trees.contains_key(&id) || recovered.dropped.contains_key(&id);
    for kind in files {
        let FileKind::Log(number) = *kind else {
            continue;
        };
        if number < recovered.counters.log_number {
            continue;
        }
        let path = log_path(dir, number);
        for record in read_log(&path)?.records {
            // A malformed record is replay's to report.
            let Some(entries) = BatchEntries::new(&record) else {
                continue;
            };
            let unknown = entries.map_while(|e| e).find(|e| !known(e.keyspace));
            if let Some(e) = unknown {
                return Err(Error::corruption(
                    &recovered.path,
                    format!(
                        "{} holds writes to keyspace {}, which no record of {} creates or drops: \
                         it has lost the records of a keyspace the store wrote to (a cut or \
                         damaged tail, or an older copy), so nothing is opened or removed",
                        kind.name(),
                        e.keyspace,
                        manifest_name(recovered)
                    ),
                ));
            }
        }
    }
    Ok(())
}

//! Helpers of the backup tests: a store's contents keyspace by keyspace, and a backup restored
//! and opened.

use std::collections::BTreeMap;
use std::path::Path;

use siftdb::{BackupEngine, BackupId, Db, Options};

/// A store's contents: each keyspace's entries, by keyspace name.
pub type Contents = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// Every keyspace's contents, read with scans.
pub fn store_contents(db: &Db) -> Contents {
    db.keyspace_names()
        .into_iter()
        .map(|name| {
            let ks = db.keyspace(&name).unwrap();
            let entries = ks
                .iter()
                .map(|r| r.unwrap_or_else(|e| panic!("scan of keyspace {name}: {e}")))
                .collect();
            (name, entries)
        })
        .collect()
}

/// Restores backup `id` into `dir` (which must not hold anything), opens it with `options` and
/// returns it; panics naming `what` if either fails.
pub fn restore_and_open(
    engine: &BackupEngine,
    id: BackupId,
    dir: &Path,
    options: Options,
    what: &str,
) -> Db {
    engine
        .restore(id, dir)
        .unwrap_or_else(|e| panic!("{what}: restore of backup {id} failed: {e}"));
    Db::open(dir, options)
        .unwrap_or_else(|e| panic!("{what}: the restore of backup {id} does not open: {e}"))
}

/// The names of the files in the backup directory `dir` the backups hold (all but `LOCK` and
/// the metadata files), sorted.
pub fn shared_files(dir: &Path) -> Vec<String> {
    super::file_names(dir)
        .into_iter()
        .filter(|n| n != "LOCK" && !n.starts_with("BACKUP-"))
        .collect()
}

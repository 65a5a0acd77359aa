//! The MANIFEST (a record log of version edits) and CURRENT (the name of the live MANIFEST).
//!
//! Each `Db::open` writes a fresh MANIFEST whose first record is a snapshot of the whole version
//! and the store's identity, syncs it and the directory, then switches CURRENT to it by
//! write-temp, fsync, rename, fsync of the directory. Every later edit is appended and synced
//! before the version it makes is used.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::edit::{KeyspaceRecord, NewFile, VersionEdit};
use super::filename::{
    current_path, current_temp_path, manifest_name, parse_file_name, FileKind, MAX_FILE_NUMBER,
};
use super::Version;
use crate::error::{Error, Result};
use crate::fs::{io_at, FileSystem};
use crate::store_id::{StoreId, DEFAULT_KEYSPACE, DEFAULT_KEYSPACE_ID};
use crate::wal::reader::{read_log, LogTail};
use crate::wal::writer::LogWriter;

/// What the MANIFEST says besides the tables.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ManifestCounters {
    /// The oldest WAL still needed: older ones are all in tables.
    pub(crate) log_number: u64,
    pub(crate) next_file_number: u64,
    /// The largest sequence any table holds: new writes get larger ones.
    pub(crate) last_sequence: u64,
    /// The sequence just before the first record of WAL `log_number`. WAL records follow each
    /// other without gaps from there, so recovery can tell a lost write. (A MANIFEST written
    /// before keyspaces existed has no such field: its `last_sequence` is that sequence.)
    pub(crate) log_start_sequence: u64,
    /// No keyspace has had this id or a larger one: ids are never reused, so a WAL record of a
    /// dropped keyspace never lands in a new one.
    pub(crate) next_keyspace_id: u32,
}

/// A keyspace as the MANIFEST describes it: its name, options and tables.
#[derive(Clone)]
pub(crate) struct TreeRecord {
    pub(crate) name: String,
    /// Its options, as `keyspace_options::describe` wrote them (empty for the default keyspace,
    /// which takes the options the store is opened with).
    pub(crate) options: String,
    /// The oldest WAL that may hold a write of this keyspace that is in no table.
    pub(crate) log_number: u64,
    pub(crate) version: Arc<Version>,
}

impl TreeRecord {
    /// The default keyspace of a new store, or of a MANIFEST written before keyspaces existed.
    pub(crate) fn default_keyspace() -> TreeRecord {
        TreeRecord {
            name: DEFAULT_KEYSPACE.to_string(),
            options: String::new(),
            log_number: 0,
            version: Arc::new(Version::default()),
        }
    }
}

/// Every keyspace's record, by id.
pub(crate) type TreeRecords = BTreeMap<u32, TreeRecord>;

/// The live MANIFEST and the keyspaces it describes.
pub(crate) struct Manifest {
    /// `None` in a store opened read-only, which never appends an edit.
    writer: Option<LogWriter>,
    pub(crate) counters: ManifestCounters,
    trees: TreeRecords,
    /// The keyspaces dropped since this MANIFEST began (or, read-only, that it records dropped):
    /// their writes may still sit in the WALs it needs, so a copy's MANIFEST records them too.
    dropped: DroppedKeyspaces,
    in_flight: Arc<TablesInFlight>,
}

/// Dropped keyspaces as their creation recorded them, by id.
pub(crate) type DroppedKeyspaces = BTreeMap<u32, KeyspaceRecord>;

/// The tables flushes and compactions are writing whose edits are not logged yet, by number.
/// Every edit records the smallest (tag 16), so that recovery can tell a table a crash left
/// unfinished, which it may remove, from a table whose edit the MANIFEST lost, which it must not
/// (`account_for_files` in `open.rs`). A number stays here if its table's fate is unknown (a
/// failed job): that only lets recovery remove more unfinished tables, never refuse a store.
#[derive(Default)]
pub(crate) struct TablesInFlight(Mutex<BTreeSet<u64>>);

impl TablesInFlight {
    /// Records the table number `allocate` hands out, under the same lock as the edits read the
    /// set, so that an edit logged with a next file number past it also sees it here.
    ///
    /// # Errors
    /// What `allocate` returns.
    pub(crate) fn start(&self, allocate: impl FnOnce() -> Result<u64>) -> Result<u64> {
        let mut tables = self.0.lock();
        let number = allocate()?;
        tables.insert(number);
        Ok(number)
    }

    /// Table `number` is written no more: named by a logged edit, or its file removed.
    pub(crate) fn finish(&self, number: u64) {
        self.0.lock().remove(&number);
    }

    /// The smallest number in flight that is not one of `named`.
    fn oldest_besides(&self, named: &[NewFile]) -> Option<u64> {
        let tables = self.0.lock();
        tables
            .iter()
            .copied()
            .find(|n| !named.iter().any(|f| f.number == *n))
    }
}

/// What a MANIFEST says.
pub(crate) struct RecoveredManifest {
    /// The MANIFEST it was read from, for the errors recovery names it in.
    pub(crate) path: PathBuf,
    pub(crate) trees: TreeRecords,
    pub(crate) counters: ManifestCounters,
    pub(crate) store_id: StoreId,
    /// The keyspaces whose drop it records, by id: their tables, and their writes still in WALs,
    /// are no longer wanted.
    pub(crate) dropped: DroppedKeyspaces,
    /// The tables its edits took out of their keyspace's version (replaced by a compaction's
    /// outputs, or rewritten): their data is held elsewhere.
    pub(crate) replaced: BTreeSet<u64>,
    /// The smallest number a table still being written at its last edit may have: a table from
    /// here on that no edit names may be an output a crash interrupted.
    pub(crate) tables_in_flight_from: u64,
}

impl RecoveredManifest {
    /// What a new store's first MANIFEST (at `path`) says: only the default keyspace, empty.
    pub(crate) fn new_store(
        path: PathBuf,
        trees: TreeRecords,
        counters: ManifestCounters,
        store_id: StoreId,
    ) -> RecoveredManifest {
        RecoveredManifest {
            path,
            trees,
            counters,
            store_id,
            dropped: BTreeMap::new(),
            replaced: BTreeSet::new(),
            tables_in_flight_from: counters.next_file_number,
        }
    }
}

impl Manifest {
    /// Reads the version CURRENT points to; `Ok(None)` for a directory with no CURRENT.
    ///
    /// # Errors
    /// `Error::Corruption` naming CURRENT or the MANIFEST if either is damaged.
    pub(crate) fn recover(dir: &Path) -> Result<Option<RecoveredManifest>> {
        let Some((number, path)) = read_current(dir)? else {
            return Ok(None);
        };
        if !path.exists() {
            return Err(Error::corruption(
                &current_path(dir),
                format!("names {}, which does not exist", manifest_name(number)),
            ));
        }
        let mut state = ManifestState::default();
        for edit in read_edits(&path)? {
            state.apply(&path, &edit)?;
        }
        state.finish(path).map(Some)
    }

    /// Writes MANIFEST-`number` holding every keyspace of `trees`, `counters` and `store_id`,
    /// makes it durable (file and directory entry), and points CURRENT at it. The first record
    /// holds the store's identity and counters and the default keyspace's tables; each other
    /// keyspace follows in a record of its own that creates it with its tables.
    pub(crate) fn create(
        fs: &FileSystem,
        dir: &Path,
        number: u64,
        mut trees: TreeRecords,
        counters: ManifestCounters,
        store_id: StoreId,
    ) -> Result<Manifest> {
        // Every store has the default keyspace, and its record comes first.
        trees
            .entry(DEFAULT_KEYSPACE_ID)
            .or_insert_with(TreeRecord::default_keyspace);
        let path = dir.join(manifest_name(number));
        let mut writer = LogWriter::create(fs, &path)?;
        // The WALs it needs hold no write of a keyspace dropped before: none is recorded.
        for edit in snapshot_edits(&trees, &DroppedKeyspaces::new(), &counters, store_id) {
            writer.add_record(&edit.encode())?;
        }
        writer.sync()?;
        // CURRENT must never name a MANIFEST whose directory entry could still be lost.
        fs.sync_dir(dir)?;
        set_current(fs, dir, number)?;
        Ok(Manifest {
            writer: Some(writer),
            counters,
            trees,
            dropped: DroppedKeyspaces::new(),
            in_flight: Default::default(),
        })
    }

    /// The MANIFEST of a store opened read-only: `trees` and `counters` as recovered, and no
    /// file to append to.
    pub(crate) fn read_only(
        trees: TreeRecords,
        dropped: DroppedKeyspaces,
        counters: ManifestCounters,
    ) -> Manifest {
        Manifest {
            writer: None,
            counters,
            trees,
            dropped,
            in_flight: Default::default(),
        }
    }

    /// The tables being written whose edits are not logged yet, which every edit records.
    pub(crate) fn tables_in_flight(&self) -> Arc<TablesInFlight> {
        Arc::clone(&self.in_flight)
    }

    /// Every keyspace, by id.
    pub(crate) fn trees(&self) -> &TreeRecords {
        &self.trees
    }

    /// The keyspaces whose writes the WALs this MANIFEST needs may hold, dropped since.
    pub(crate) fn dropped(&self) -> &DroppedKeyspaces {
        &self.dropped
    }

    /// The current version of keyspace `id` (empty if it was dropped).
    pub(crate) fn version(&self, id: u32) -> Arc<Version> {
        self.trees
            .get(&id)
            .map_or_else(Default::default, |t| Arc::clone(&t.version))
    }

    /// Appends `edit` (with the counters filled in: its own log number and last sequence if it
    /// has them, else the current ones, and the oldest table in flight), syncs it, and makes its
    /// version current; the tables it adds are no longer in flight.
    ///
    /// # Errors
    /// Any failure to write or sync; the MANIFEST writer then refuses further edits.
    pub(crate) fn log_and_apply(
        &mut self,
        mut edit: VersionEdit,
        next_file_number: u64,
    ) -> Result<Arc<Version>> {
        let writer = self.writer.as_mut().ok_or_else(|| {
            Error::InvalidArgument("a store opened read-only appends no MANIFEST edit".into())
        })?;
        if let Some(n) = edit.log_number {
            self.counters.log_number = n;
        }
        if let Some(n) = edit.log_start_sequence {
            self.counters.log_start_sequence = n;
        }
        self.counters.next_file_number = next_file_number;
        if let Some(s) = edit.last_sequence {
            self.counters.last_sequence = self.counters.last_sequence.max(s);
        }
        if let Some(k) = &edit.created {
            self.counters.next_keyspace_id = self.counters.next_keyspace_id.max(k.id + 1);
        }
        edit.next_file_number = Some(self.counters.next_file_number);
        edit.last_sequence = Some(self.counters.last_sequence);
        edit.log_number = Some(self.counters.log_number);
        edit.log_start_sequence = Some(self.counters.log_start_sequence);
        edit.next_keyspace_id = Some(self.counters.next_keyspace_id);
        edit.oldest_table_in_flight = self
            .in_flight
            .oldest_besides(&edit.added)
            .filter(|&n| n < next_file_number);
        let mut trees = self.trees.clone();
        let mut counters = self.counters;
        let dropping = edit.dropped.and_then(|id| dropped_record(&trees, id));
        apply_to_trees(&mut trees, &mut counters, &edit).map_err(Error::InvalidArgument)?;
        writer.add_record(&edit.encode())?;
        writer.sync()?;
        for f in &edit.added {
            self.in_flight.finish(f.number);
        }
        self.trees = trees;
        self.dropped.extend(dropping);
        Ok(self.version(edit.keyspace))
    }
}

/// The MANIFEST CURRENT names, by number and path; `Ok(None)` for a directory with no CURRENT.
/// The MANIFEST itself may be missing (a follower reads CURRENT while the writer switches it).
///
/// # Errors
/// `Error::Corruption` naming CURRENT if it does not name a MANIFEST; `Error::Io` naming it if it
/// cannot be read.
pub(crate) fn read_current(dir: &Path) -> Result<Option<(u64, PathBuf)>> {
    let current = current_path(dir);
    let text = match std::fs::read(&current) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_at(&current)(e)),
    };
    let named = std::str::from_utf8(&text)
        .ok()
        .and_then(|t| t.strip_suffix('\n'))
        .and_then(|n| match parse_file_name(n) {
            Some(FileKind::Manifest(number)) => Some((number, dir.join(n))),
            _ => None,
        });
    named
        .map(Some)
        .ok_or_else(|| Error::corruption(&current, "does not name a MANIFEST"))
}

/// What a MANIFEST's records make, applied one by one: the reading half of
/// [`Manifest::recover`], which a follower also keeps, applying records as the writer appends
/// them (`db/follower/`).
#[derive(Default, Clone)]
pub(crate) struct ManifestState {
    pub(crate) trees: TreeRecords,
    pub(crate) counters: ManifestCounters,
    pub(crate) dropped: DroppedKeyspaces,
    replaced: BTreeSet<u64>,
    tables_in_flight_from: u64,
    store_id: Option<StoreId>,
    log_start_sequence: Option<u64>,
    have: (bool, bool, bool),
}

impl ManifestState {
    /// Applies `edit`, the next record of the MANIFEST at `path`.
    ///
    /// # Errors
    /// `Error::Corruption` naming `path` if the edit cannot follow the ones before.
    pub(crate) fn apply(&mut self, path: &Path, edit: &VersionEdit) -> Result<()> {
        if self.store_id.is_none() {
            self.store_id =
                Some(edit.store_id.ok_or_else(|| {
                    Error::corruption(path, "no store identity in the first edit")
                })?);
            self.trees
                .insert(DEFAULT_KEYSPACE_ID, TreeRecord::default_keyspace());
            self.counters.next_keyspace_id = DEFAULT_KEYSPACE_ID + 1;
        }
        let counters = &mut self.counters;
        if let Some(n) = edit.log_number {
            counters.log_number = n;
            self.have.0 = true;
        }
        if let Some(n) = edit.next_file_number {
            counters.next_file_number = n;
            self.have.1 = true;
            self.tables_in_flight_from = match edit.oldest_table_in_flight {
                Some(t) if t > n => {
                    return Err(Error::corruption(
                        path,
                        format!("oldest table in flight {t} is past the next file number {n}"),
                    ))
                }
                Some(t) => t,
                None => n,
            };
        }
        if let Some(n) = edit.last_sequence {
            counters.last_sequence = counters.last_sequence.max(n);
            self.have.2 = true;
        }
        if let Some(n) = edit.log_start_sequence {
            self.log_start_sequence = Some(n);
        }
        if let Some(n) = edit.next_keyspace_id {
            counters.next_keyspace_id = counters.next_keyspace_id.max(n);
        }
        let dropping = edit.dropped.and_then(|id| dropped_record(&self.trees, id));
        apply_to_trees(&mut self.trees, counters, edit)
            .map_err(|what| Error::corruption(path, what))?;
        self.dropped.extend(dropping);
        self.replaced
            .extend(edit.deleted.iter().map(|&(_, number)| number));
        Ok(())
    }

    /// What the records applied so far say, read from the MANIFEST at `path`, checked whole.
    ///
    /// # Errors
    /// `Error::Corruption` naming `path` if a counter is missing or not past every file, or if
    /// two tables of a level overlap.
    pub(crate) fn finish(mut self, path: PathBuf) -> Result<RecoveredManifest> {
        let store_id = self
            .store_id
            .ok_or_else(|| Error::corruption(&path, "no store identity in the first edit"))?;
        if !(self.have.0 && self.have.1 && self.have.2) {
            return Err(Error::corruption(
                &path,
                "missing log number, next file number or last sequence",
            ));
        }
        let counters = &mut self.counters;
        counters.log_start_sequence = self.log_start_sequence.unwrap_or(counters.last_sequence);
        let mut max_file = 0;
        for tree in self.trees.values_mut() {
            // Every write in a WAL older than the store's log number is in a table.
            tree.log_number = tree.log_number.max(counters.log_number);
            if let Some((level, a, b)) = tree.version.find_overlap() {
                return Err(Error::corruption(
                    &path,
                    format!(
                        "tables {a} and {b} overlap in L{level} of keyspace {}",
                        tree.name
                    ),
                ));
            }
            let tree_max = tree.version.levels.iter().flatten().map(|f| f.number).max();
            max_file = max_file.max(tree_max.unwrap_or(0));
        }
        if max_file >= counters.next_file_number || counters.log_number >= counters.next_file_number
        {
            return Err(Error::corruption(
                &path,
                "next file number is not past every file",
            ));
        }
        if counters.next_file_number > MAX_FILE_NUMBER {
            return Err(Error::corruption(
                &path,
                format!(
                    "next file number {} is beyond the largest a store allocates ({MAX_FILE_NUMBER})",
                    counters.next_file_number
                ),
            ));
        }
        Ok(RecoveredManifest {
            path,
            trees: self.trees,
            counters: self.counters,
            store_id,
            dropped: self.dropped,
            replaced: self.replaced,
            tables_in_flight_from: self.tables_in_flight_from,
        })
    }
}

/// Keyspace `id` of `trees` as its creation records it, for the record of its drop.
fn dropped_record(trees: &TreeRecords, id: u32) -> Option<(u32, KeyspaceRecord)> {
    let tree = trees.get(&id)?;
    let record = KeyspaceRecord {
        id,
        name: tree.name.clone(),
        options: tree.options.clone(),
    };
    Some((id, record))
}

/// The records a new MANIFEST starts with (see [`Manifest::create`]): the default keyspace's
/// first, with the store's identity and `counters`; then, for each of `dropped`, one creating it
/// and one dropping it (so that the writes to it in the WALs the MANIFEST needs are known for a
/// dropped keyspace's); then one creating each other keyspace of `trees` with its tables. `trees`
/// holds the default keyspace.
pub(crate) fn snapshot_edits(
    trees: &TreeRecords,
    dropped: &DroppedKeyspaces,
    counters: &ManifestCounters,
    store_id: StoreId,
) -> Vec<VersionEdit> {
    let dropped = dropped.values().flat_map(|k| {
        let create = VersionEdit {
            keyspace: k.id,
            created: Some(k.clone()),
            ..Default::default()
        };
        let drop = VersionEdit {
            dropped: Some(k.id),
            ..Default::default()
        };
        [create, drop]
    });
    let mut edits = trees
        .iter()
        .map(|(&id, tree)| {
            let mut edit = VersionEdit {
                keyspace: id,
                keyspace_log_number: Some(tree.log_number),
                added: tables_of(&tree.version),
                ..Default::default()
            };
            if id == DEFAULT_KEYSPACE_ID {
                edit.log_number = Some(counters.log_number);
                edit.log_start_sequence = Some(counters.log_start_sequence);
                edit.next_file_number = Some(counters.next_file_number);
                edit.last_sequence = Some(counters.last_sequence);
                edit.next_keyspace_id = Some(counters.next_keyspace_id);
                edit.store_id = Some(store_id);
            } else {
                edit.created = Some(KeyspaceRecord {
                    id,
                    name: tree.name.clone(),
                    options: tree.options.clone(),
                });
            }
            edit
        })
        .collect::<Vec<_>>();
    // Right after the default keyspace's: a live keyspace may have taken a dropped one's name.
    let at = edits.len().min(1);
    edits.splice(at..at, dropped);
    edits
}

/// The tables of `version`, as a MANIFEST records them.
fn tables_of(version: &Version) -> Vec<NewFile> {
    version
        .levels
        .iter()
        .enumerate()
        .flat_map(|(level, files)| files.iter().map(move |f| f.record_at(level)))
        .collect()
}

/// Applies what `edit` does to the keyspaces: creates or drops one, changes the tables and log
/// number of its keyspace. Returns what makes the edit impossible (a damaged MANIFEST).
fn apply_to_trees(
    trees: &mut TreeRecords,
    counters: &mut ManifestCounters,
    edit: &VersionEdit,
) -> std::result::Result<(), String> {
    if let Some(k) = &edit.created {
        if trees.contains_key(&k.id) || trees.values().any(|t| t.name == k.name) {
            return Err(format!("creates keyspace {} ({}) twice", k.name, k.id));
        }
        trees.insert(
            k.id,
            TreeRecord {
                name: k.name.clone(),
                options: k.options.clone(),
                log_number: 0,
                version: Arc::new(Version::default()),
            },
        );
        counters.next_keyspace_id = counters.next_keyspace_id.max(k.id.saturating_add(1));
    }
    if let Some(id) = edit.dropped {
        if id == DEFAULT_KEYSPACE_ID || trees.remove(&id).is_none() {
            return Err(format!("drops keyspace {id}, which is not there"));
        }
        return Ok(());
    }
    let Some(tree) = trees.get_mut(&edit.keyspace) else {
        if edit.added.is_empty()
            && edit.deleted.is_empty()
            && edit.keyspace_log_number.is_none()
            && edit.options.is_none()
        {
            return Ok(());
        }
        return Err(format!(
            "changes keyspace {}, which is not there",
            edit.keyspace
        ));
    };
    for &(level, number) in &edit.deleted {
        if !tree.version.levels[level]
            .iter()
            .any(|f| f.number == number)
        {
            return Err(format!(
                "deletes table {number} not in L{level} of keyspace {}",
                tree.name
            ));
        }
    }
    if !(edit.added.is_empty() && edit.deleted.is_empty()) {
        tree.version = Arc::new(tree.version.apply(edit));
    }
    if let Some(n) = edit.keyspace_log_number {
        tree.log_number = n;
    }
    if let Some(options) = &edit.options {
        tree.options = options.clone();
    }
    Ok(())
}

/// The edits of the MANIFEST at `path`, in order.
///
/// A last record cut short by the end of the file is an edit that was never acknowledged (its
/// append was interrupted): the version before it stands. A complete last record with a bad
/// checksum may be a synced edit that later went bad; dropping it would silently lose the tables
/// it added (their WAL is already gone), so that is corruption.
///
/// # Errors
/// `Error::Corruption` naming the MANIFEST for damage or an edit that does not decode.
pub(crate) fn read_edits(path: &Path) -> Result<Vec<VersionEdit>> {
    let log = read_log(path)?;
    if let LogTail::Torn {
        what,
        interrupted: false,
        ..
    } = &log.tail
    {
        return Err(Error::corruption(
            path,
            format!("last edit damaged: {what}"),
        ));
    }
    log.records
        .iter()
        .map(|r| VersionEdit::decode(r, path))
        .collect()
}

/// Points CURRENT at MANIFEST-`number`: write a temporary file, fsync it, rename it over CURRENT,
/// fsync the directory so the rename itself is durable.
pub(crate) fn set_current(fs: &FileSystem, dir: &Path, number: u64) -> Result<()> {
    let tmp = current_temp_path(dir);
    // Left by an interrupted switch; the store never creates over an existing file.
    match fs.remove_file(&tmp) {
        Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
        other => other?,
    }
    let mut f = fs.create(&tmp)?;
    f.write_all(format!("{}\n", manifest_name(number)).as_bytes())?;
    f.sync()?;
    drop(f);
    fs.rename(&tmp, &current_path(dir))?;
    fs.sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store_id::new_store_id;

    fn table(number: u64) -> NewFile {
        NewFile {
            level: 0,
            number,
            size: 100,
            smallest: b"a\x01\0\0\0\0\0\0\0".to_vec(),
            largest: b"z\x01\0\0\0\0\0\0\0".to_vec(),
            range_tombstones: false,
            global_sequence: None,
        }
    }

    /// Each edit records the oldest table still being written besides its own, and recovery
    /// reads the last edit's: tables from there on that no edit names may be unfinished outputs.
    #[test]
    fn edits_record_the_oldest_table_in_flight_until_an_edit_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let counters = ManifestCounters {
            next_file_number: 2,
            next_keyspace_id: DEFAULT_KEYSPACE_ID + 1,
            ..Default::default()
        };
        let fs = FileSystem::default();
        let mut manifest = Manifest::create(
            &fs,
            dir.path(),
            1,
            TreeRecords::new(),
            counters,
            new_store_id(),
        )
        .unwrap();
        let recovered_from = || {
            Manifest::recover(dir.path())
                .unwrap()
                .unwrap()
                .tables_in_flight_from
        };
        assert_eq!(
            recovered_from(),
            2,
            "nothing in flight: the next file number"
        );
        let in_flight = manifest.tables_in_flight();
        for n in [4, 5] {
            assert_eq!(in_flight.start(|| Ok(n)).unwrap(), n);
        }
        // An edit naming table 4, logged while table 5 is being written.
        let edit = |n| VersionEdit {
            added: vec![table(n)],
            ..Default::default()
        };
        manifest.log_and_apply(edit(4), 8).unwrap();
        assert_eq!(recovered_from(), 5);
        // Once an edit names it too, nothing is in flight.
        manifest.log_and_apply(edit(5), 9).unwrap();
        assert_eq!(recovered_from(), 9);
    }
}

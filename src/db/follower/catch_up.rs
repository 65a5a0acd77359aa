//! A follower's catch-up: read the writer's MANIFEST on from where the last catch-up stopped (or
//! a new MANIFEST whole, once CURRENT names another), link the tables its version lists, replay
//! the WAL records written since into the follower's memtables, then install every keyspace's new
//! super-version. The writer may be appending to both logs meanwhile: a torn tail is its append
//! in progress, and reading stops quietly before it. A table or WAL the writer deleted while the
//! follower read means the MANIFEST read is stale: the follower reads it again.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::state::{Follower, FollowerState};
use super::tables::{link_tables, remove_link};
use crate::db::keyspace::make_tree;
use crate::db::open::{keyspace_options, replay_record, KeyspaceOptions, Replayed};
use crate::db::tree::{SuperVersion, TreeState};
use crate::db::version::edit::VersionEdit;
use crate::db::version::filename::{list_files, log_path, FileKind};
use crate::db::version::manifest::{
    read_current, Manifest, ManifestState, RecoveredManifest, TreeRecords,
};
use crate::db::DbInner;
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::store_id::{StoreId, DEFAULT_KEYSPACE_ID};
use crate::wal::reader::{read_log_from, read_open_log_from, LogTail};

/// How many times one catch-up reads the writer's files again when they changed under it.
const ATTEMPTS: u32 = 64;

/// The error of a follower whose writer's directory holds no store.
pub(super) fn no_store(primary: &Path) -> Error {
    Error::InvalidArgument(format!(
        "{} holds no store (no CURRENT): a follower follows an existing store",
        primary.display()
    ))
}

/// The pause before the `attempt`-th read again: none at first, then growing (the writer may be
/// opening: CURRENT can name a MANIFEST whose WAL it has not created yet).
fn pause(attempt: u32) {
    if attempt > 2 {
        std::thread::sleep(Duration::from_millis(u64::from(attempt.min(20))));
    }
}

/// The error once the writer changed its files under every attempt.
fn too_busy(primary: &Path) -> Error {
    Error::Io(io::Error::other(format!(
        "{}: the store's files changed under each of {ATTEMPTS} reads of its MANIFEST; try again",
        primary.display()
    )))
}

/// The identity of the store in `primary`, from its MANIFEST's first record.
///
/// # Errors
/// As [`DbInner::catch_up`]'s reads.
pub(super) fn store_id_of(primary: &Path) -> Result<StoreId> {
    for attempt in 0..ATTEMPTS {
        pause(attempt);
        let Some((_, path)) = read_current(primary)? else {
            return Err(no_store(primary));
        };
        let log = match read_log_from(&path, 0) {
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => continue,
            other => other?,
        };
        let Some(first) = log.records.first() else {
            continue;
        };
        return VersionEdit::decode(first, &path)?
            .store_id
            .ok_or_else(|| Error::corruption(&path, "no store identity in the first edit"));
    }
    Err(too_busy(primary))
}

/// The table numbers of every keyspace of `trees`.
fn table_numbers(trees: &TreeRecords) -> BTreeSet<u64> {
    trees
        .values()
        .flat_map(|t| t.version.levels.iter().flatten().map(|f| f.number))
        .collect()
}

/// What one read of the writer's files made, before it is installed.
struct Read {
    recovered: RecoveredManifest,
    keyspaces: KeyspaceOptions,
    mems: BTreeMap<u32, Arc<MemTable>>,
    /// The sequence readers may see once it is installed.
    visible: u64,
}

impl DbInner {
    /// Moves follower `follower` forward to what the writer's files hold now; returns the
    /// sequence it reads at from then on.
    ///
    /// # Errors
    /// `Error::Corruption` naming the writer's file if a MANIFEST record or a WAL record before
    /// the tail is damaged, `Error::InvalidArgument` if the directory no longer holds a store,
    /// `Error::Io` for operating-system failures (or if the writer's files changed under every
    /// attempt). The follower then keeps the view it had.
    pub(crate) fn catch_up(&self, follower: &Follower) -> Result<u64> {
        let mut st = follower.state.lock();
        for attempt in 0..ATTEMPTS {
            pause(attempt);
            self.check_open()?;
            if let Some(read) = self.read_primary(&follower.primary, &mut st)? {
                return Ok(self.install_read(read, &mut st));
            }
        }
        Err(too_busy(&follower.primary))
    }

    /// One read of the writer's files (see the module's doc); `None` if they changed under it.
    /// `st` is changed only where the next read needs it: the new position, once installed, is
    /// saved by [`install_read`](Self::install_read).
    fn read_primary(&self, primary: &Path, st: &mut FollowerState) -> Result<Option<Read>> {
        // Before the MANIFEST is read, a hold on what the writer may delete once the records read
        // are stale: every WAL is opened (an open file stays readable) and every table not yet
        // linked is linked. With its writer flushing and compacting fast, a follower could
        // otherwise find a WAL or a table gone at every try.
        let mut open_wals = BTreeMap::new();
        let mut tables = Vec::new();
        for kind in list_files(primary)? {
            match kind {
                FileKind::Log(n) => {
                    if let Ok(file) = std::fs::File::open(log_path(primary, n)) {
                        open_wals.insert(n, file);
                    }
                }
                FileKind::Table(n) => tables.push(n),
                _ => {}
            }
        }
        let installed = table_numbers(self.manifest.lock().trees());
        tables.retain(|n| !installed.contains(n) && !st.unused_links.contains(n));
        link_tables(&self.fs, primary, &self.dir, tables, &mut st.unused_links)?;

        let Some((number, path)) = read_current(primary)? else {
            return Err(no_store(primary));
        };
        let switched = number != st.manifest_number;
        let (mut manifest, offset) = match switched {
            true => (ManifestState::default(), 0),
            false => (st.manifest.clone(), st.manifest_offset),
        };
        let log = match read_log_from(&path, offset) {
            // CURRENT names another MANIFEST by now.
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            other => other?,
        };
        // A torn tail is the writer's append in progress: the records before it stand.
        let mut manifest_end = offset;
        for (record, &end) in log.records.iter().zip(&log.ends) {
            manifest.apply(&path, &VersionEdit::decode(record, &path)?)?;
            manifest_end = end;
        }
        if switched && log.records.is_empty() {
            return Ok(None);
        }
        let recovered = manifest.clone().finish(path.clone())?;
        if recovered.store_id != self.store_id {
            return Err(Error::corruption(
                &path,
                "belongs to another store than the one this follower opened",
            ));
        }
        let wanted = table_numbers(&recovered.trees);
        let new_tables = wanted
            .difference(&installed)
            .filter(|n| !st.unused_links.contains(n))
            .copied()
            .collect::<Vec<_>>();
        if !link_tables(
            &self.fs,
            primary,
            &self.dir,
            new_tables,
            &mut st.unused_links,
        )? {
            return Ok(None);
        }

        let counters = recovered.counters;
        let keyspaces = keyspace_options(&recovered, &self.options)?;
        let refill = switched || st.replayed_from != Some(counters.log_number);
        let live: BTreeMap<u32, Arc<MemTable>> = match refill {
            true => BTreeMap::new(),
            false => self
                .trees()
                .iter()
                .map(|t| (t.id, Arc::clone(&t.super_version().mem)))
                .collect(),
        };
        let mems: BTreeMap<u32, Arc<MemTable>> = keyspaces
            .keys()
            .map(|&id| {
                let mem = live.get(&id).cloned();
                (
                    id,
                    mem.unwrap_or_else(|| Arc::new(MemTable::new(counters.log_number))),
                )
            })
            .collect();
        let (mut position, mut sequence) = match refill {
            true => ((counters.log_number, 0), counters.log_start_sequence),
            false => (st.wal_position, st.replayed_sequence),
        };
        let mut logs: Vec<u64> = list_files(primary)?
            .into_iter()
            .filter_map(|k| match k {
                FileKind::Log(n) if n >= position.0 => Some(n),
                _ => None,
            })
            .chain(open_wals.range(position.0..).map(|(&n, _)| n))
            .collect();
        logs.sort_unstable();
        logs.dedup();
        // The WAL replay goes on from, gone: the writer flushed it, which the MANIFEST read
        // does not show yet.
        let stale = logs.first() != Some(&position.0);
        // Records replayed into memtables readers see, past the sequence they read at, unless
        // this read is installed: the next must then fill them afresh, not add the same records
        // again.
        st.replayed_from = None;
        'logs: for &n in logs.iter().take_while(|_| !stale) {
            let wal = log_path(primary, n);
            let start = if n == position.0 { position.1 } else { 0 };
            let read = match open_wals.remove(&n) {
                Some(file) => read_open_log_from(&wal, file, start),
                None => read_log_from(&wal, start),
            };
            let contents = match read {
                Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                other => other?,
            };
            for (record, &end) in contents.records.iter().zip(&contents.ends) {
                let unknown_from = Some(counters.next_keyspace_id);
                match replay_record(&wal, n, record, &keyspaces, unknown_from, sequence, &mems)? {
                    Replayed::Applied(k) => {
                        sequence += k;
                        position = (n, end);
                    }
                    // The next catch-up goes on from here.
                    Replayed::Stop(why) => {
                        log::debug!("siftdb follower: WAL replay waits: {why}");
                        break 'logs;
                    }
                }
            }
            if matches!(contents.tail, LogTail::Torn { .. }) {
                break;
            }
        }
        if stale {
            return Ok(None);
        }
        st.manifest = manifest;
        st.manifest_number = number;
        st.manifest_offset = manifest_end;
        st.replayed_from = Some(counters.log_number);
        st.wal_position = position;
        st.replayed_sequence = sequence;
        // Tables may hold writes past the WAL records read (never for a live writer, which
        // appends a write to its WAL before any table holds it); a follower's sequence never
        // goes back.
        let visible = sequence
            .max(counters.last_sequence)
            .max(self.last_sequence.load(Ordering::Acquire));
        Ok(Some(Read {
            recovered,
            keyspaces,
            mems,
            visible,
        }))
    }

    /// Makes `read` what the follower's readers see: the sequence first, then each keyspace's
    /// super-version (a read takes the super-version, then the sequence: a table a compaction
    /// wrote holds only the newest version of a key, which the sequence read after it sees).
    /// Keyspaces the writer created appear, those it dropped go; tables no longer listed are
    /// marked obsolete, their links removed once no version of the follower lists them.
    fn install_read(&self, read: Read, st: &mut FollowerState) -> u64 {
        let Read {
            recovered,
            keyspaces,
            mems,
            visible,
        } = read;
        let mut manifest = self.manifest.lock();
        let old = std::mem::replace(
            &mut *manifest,
            Manifest::read_only(
                recovered.trees.clone(),
                recovered.dropped.clone(),
                recovered.counters,
            ),
        );
        self.next_file
            .fetch_max(recovered.counters.next_file_number, Ordering::SeqCst);
        // Under the state lock, where a follower's snapshot reads both.
        let mut state = self.state.lock();
        self.last_sequence.fetch_max(visible, Ordering::AcqRel);
        for (id, record) in &recovered.trees {
            let (Some((options, _)), Some(mem)) = (keyspaces.get(id), mems.get(id)) else {
                continue;
            };
            let mem = Arc::clone(mem);
            let version = Arc::clone(&record.version);
            match state.trees.get(id).map(|t| Arc::clone(&t.tree)) {
                Some(tree) => {
                    let recorded = old.trees().get(id).map(|r| r.options.as_str());
                    if *id != DEFAULT_KEYSPACE_ID && recorded != Some(record.options.as_str()) {
                        tree.replace_options(options.clone());
                    }
                    self.install_super_version(&mut state, &tree, |sv| {
                        sv.mem = mem;
                        sv.imm.clear();
                        sv.version = version;
                    });
                }
                None => {
                    let name = record.name.clone();
                    let tree = make_tree(&self.tables, *id, name, options.clone(), mem, version);
                    let sv = tree.super_version();
                    state.trees.insert(*id, TreeState { tree, sv });
                }
            }
        }
        let gone: Vec<u32> = state
            .trees
            .keys()
            .copied()
            .filter(|id| !recovered.trees.contains_key(id))
            .collect();
        let dropped: Vec<TreeState> = gone
            .iter()
            .filter_map(|id| state.trees.remove(id))
            .collect();
        drop(state);
        drop(manifest);
        for ts in dropped {
            let tree = ts.tree;
            tree.mark_dropped();
            self.dropped_names.lock().insert(tree.id, tree.name.clone());
            let empty = SuperVersion::first(Arc::new(MemTable::new(0)), Default::default());
            drop(std::mem::replace(
                &mut *tree.current.write(),
                Arc::new(empty),
            ));
        }
        let wanted = table_numbers(&recovered.trees);
        for f in old
            .trees()
            .values()
            .flat_map(|t| t.version.levels.iter().flatten())
        {
            if !wanted.contains(&f.number) {
                f.mark_obsolete(Arc::clone(&self.retire));
            }
        }
        for n in std::mem::take(&mut st.unused_links) {
            if !wanted.contains(&n) {
                remove_link(&self.fs, &self.dir, n);
            }
        }
        self.changed.notify_all();
        visible
    }
}

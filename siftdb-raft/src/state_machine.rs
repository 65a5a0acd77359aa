//! The state machine: openraft's `RaftStateMachine` on the application's keyspaces, with
//! snapshots built from a siftdb snapshot and installed into a fresh generation of keyspaces.
//!
//! **Generations.** The application's keyspaces live as `sm.<g>.ks.<name>`, beside
//! `sm.<g>.applied`, for the live generation `g` that `raft.meta` names. Applying writes to
//! generation `g`. Installing a snapshot loads it into generation `g + 1` (fresh keyspaces,
//! plain unsynced batches), keeps the snapshot file, then moves the pointer with one synced
//! write (which makes every write before it durable too) and drops generation `g`. A crash
//! before the pointer moves leaves `g` live and `g + 1` half loaded; one after leaves `g + 1`
//! live and `g` not yet dropped; either way opening drops the generation that is not live.
//! Loading is a put per entry today; a bulk ingest of sorted tables into the fresh keyspaces
//! would slot in here unchanged, since nothing reads them until the pointer moves.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, OptionalSend,
    RaftSnapshotBuilder, StorageError, StorageIOError, StoredMembership,
};
use siftdb::{Db, KeyRange, Keyspace, WriteBatch, WriteOptions};

use crate::codec::{decode, encode, storage_error};
use crate::command::{Command, Op, Response};
use crate::config::StoreConfig;
use crate::snapshot_file::{Meta, SnapshotDir, SnapshotReader, SnapshotWriter, Tee};
use crate::store::{
    applied_keyspace, data_keyspace, encode_generation, generation_of, APPLIED, GENERATION,
    MEMBERSHIP,
};
use crate::{KeyValues, NodeId, TypeConfig};

/// The last applied log id and the last membership.
type AppliedState = (Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>);

/// A batch of applied entries is written once it holds this many bytes (entries are never
/// split between batches).
const APPLY_BATCH_BYTES: usize = 4 << 20;

/// One generation of the state machine's keyspaces.
pub(crate) struct Generation {
    number: u64,
    applied: Keyspace,
    keyspaces: BTreeMap<String, Keyspace>,
}

impl Generation {
    /// Generation `g`'s keyspaces, created if missing.
    pub(crate) fn open(db: &Db, g: u64, config: &StoreConfig) -> Result<Generation, siftdb::Error> {
        let applied = db.keyspace(&applied_keyspace(g))?;
        let mut keyspaces = BTreeMap::new();
        for (name, options) in &config.keyspaces {
            if name.is_empty() {
                return Err(siftdb::Error::InvalidArgument(
                    "a state machine keyspace needs a name".into(),
                ));
            }
            let ks = db.keyspace_with(&data_keyspace(g, name), options.clone())?;
            keyspaces.insert(name.clone(), ks);
        }
        Ok(Generation {
            number: g,
            applied,
            keyspaces,
        })
    }

    fn keyspace(&self, name: &str) -> Result<&Keyspace, siftdb::Error> {
        self.keyspaces.get(name).ok_or_else(|| {
            siftdb::Error::InvalidArgument(format!("no keyspace {name} in the state machine"))
        })
    }

    /// Why `command` cannot be applied, if it cannot.
    fn refusal(&self, command: &Command) -> Option<String> {
        command.ops.iter().find_map(|op| {
            if !self.keyspaces.contains_key(op.keyspace()) {
                return Some(format!(
                    "no keyspace {} in the state machine",
                    op.keyspace()
                ));
            }
            let (key, value) = match op {
                Op::Put { key, value, .. } => (key.len(), value.len()),
                Op::Delete { key, .. } => (key.len(), 0),
                Op::DeleteRange { start, end, .. } => (start.len().max(end.len()), 0),
            };
            (key > siftdb::MAX_KEY_BYTES || value > siftdb::MAX_VALUE_BYTES)
                .then(|| format!("a key of {key} bytes or a value of {value} bytes is too large"))
        })
    }

    fn add(&self, batch: &mut WriteBatch, command: &Command) {
        for op in &command.ops {
            // `refusal` found every keyspace.
            let Some(ks) = self.keyspaces.get(op.keyspace()) else {
                continue;
            };
            match op {
                Op::Put { key, value, .. } => batch.put_in(ks, key, value),
                Op::Delete { key, .. } => batch.delete_in(ks, key),
                Op::DeleteRange { start, end, .. } => batch.delete_range_in(ks, start..end),
            };
        }
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .keyspaces
            .values()
            .map(|k| k.name().to_string())
            .collect();
        names.push(self.applied.name().to_string());
        names
    }
}

/// What the state machine, its builders and its readers share.
struct Shared {
    db: Db,
    meta: Keyspace,
    config: StoreConfig,
    generation: RwLock<Generation>,
    snapshots: SnapshotDir,
    built: AtomicU64,
    installed: AtomicU64,
}

/// The state machine half of a node's storage: the application's keyspaces and the snapshot
/// files. Hand it to [`openraft::Raft::new`]; read it through [`reader`](Self::reader).
pub struct StateMachine {
    shared: Arc<Shared>,
}

/// Builds snapshots for openraft, beside the applying of entries.
pub struct SnapshotBuilder {
    shared: Arc<Shared>,
}

/// Reads a node's state machine: its copy of the application's keyspaces, as of the entries it
/// has applied. For a read that sees every write the cluster acknowledged, call
/// [`Raft::ensure_linearizable`](openraft::Raft::ensure_linearizable) on the leader first.
#[derive(Clone)]
pub struct StateReader {
    shared: Arc<Shared>,
}

impl StateMachine {
    pub(crate) fn new(
        db: Db,
        meta: Keyspace,
        config: StoreConfig,
        generation: Generation,
        snapshots: SnapshotDir,
    ) -> StateMachine {
        StateMachine {
            shared: Arc::new(Shared {
                db,
                meta,
                config,
                generation: RwLock::new(generation),
                snapshots,
                built: AtomicU64::new(0),
                installed: AtomicU64::new(0),
            }),
        }
    }

    /// A reader of this state machine, which stays valid across snapshot installs.
    pub fn reader(&self) -> StateReader {
        StateReader {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl StateReader {
    /// The value of `key` in the state machine's keyspace `keyspace`.
    ///
    /// # Errors
    /// `Error::InvalidArgument` if the state machine has no such keyspace; what
    /// [`Db::get`] returns.
    pub fn get(
        &self,
        keyspace: &str,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>, siftdb::Error> {
        self.shared.read_generation().keyspace(keyspace)?.get(key)
    }

    /// The entries of `keyspace` whose keys fall in `range`, in key order, at one moment.
    ///
    /// # Errors
    /// `Error::InvalidArgument` if the state machine has no such keyspace; an entry's error
    /// from [`Db::scan`].
    pub fn scan<R: KeyRange>(&self, keyspace: &str, range: R) -> Result<KeyValues, siftdb::Error> {
        self.shared
            .read_generation()
            .keyspace(keyspace)?
            .scan(range)
            .collect()
    }

    /// A handle on the live generation of `keyspace`, for the reads `StateReader` lacks
    /// (cursors, snapshots, `multi_get`). Installing a snapshot replaces the keyspace, and the
    /// handle then fails every call: take a new one.
    ///
    /// # Errors
    /// `Error::InvalidArgument` if the state machine has no such keyspace.
    pub fn keyspace(&self, keyspace: &str) -> Result<Keyspace, siftdb::Error> {
        self.shared.read_generation().keyspace(keyspace).cloned()
    }

    /// The id of the last entry applied, or `None` before any.
    ///
    /// # Errors
    /// `Error::Corruption` if the stored id does not decode; what [`Db::get`] returns.
    pub fn applied(&self) -> Result<Option<LogId<NodeId>>, siftdb::Error> {
        Ok(self.shared.applied_state()?.0)
    }

    /// Why the state machine would refuse `command`, if it would.
    pub(crate) fn refusal(&self, command: &Command) -> Option<String> {
        self.shared.read_generation().refusal(command)
    }

    /// The node's siftdb store, for its statistics and its size on disk.
    pub fn db(&self) -> &Db {
        &self.shared.db
    }

    /// How many snapshots this node has built since it was opened.
    pub fn snapshots_built(&self) -> u64 {
        self.shared.built.load(Ordering::Relaxed)
    }

    /// How many snapshots this node has installed (received from a leader) since it was opened.
    pub fn snapshots_installed(&self) -> u64 {
        self.shared.installed.load(Ordering::Relaxed)
    }
}

impl Shared {
    fn read_generation(&self) -> RwLockReadGuard<'_, Generation> {
        // A panic under the lock leaves a whole generation: the switch is one assignment.
        self.generation.read().unwrap_or_else(|p| p.into_inner())
    }

    fn applied_state(&self) -> Result<AppliedState, siftdb::Error> {
        let generation = self.read_generation();
        let path = self.db.path();
        let applied = match generation.applied.get(APPLIED)? {
            Some(v) => Some(decode(&v, path, "the last applied log id")?),
            None => None,
        };
        let membership = match generation.applied.get(MEMBERSHIP)? {
            Some(v) => decode(&v, path, "the last membership")?,
            None => StoredMembership::default(),
        };
        Ok((applied, membership))
    }

    fn apply(
        &self,
        entries: impl Iterator<Item = Entry<TypeConfig>>,
    ) -> Result<Vec<Response>, siftdb::Error> {
        let generation = self.read_generation();
        let mut replies = Vec::new();
        let mut batch = WriteBatch::new();
        let mut unwritten: Option<LogId<NodeId>> = None;
        for entry in entries {
            let reply = match &entry.payload {
                EntryPayload::Blank => Response::Applied,
                EntryPayload::Normal(command) => match generation.refusal(command) {
                    Some(reason) => Response::Refused(reason),
                    None => {
                        generation.add(&mut batch, command);
                        Response::Applied
                    }
                },
                EntryPayload::Membership(membership) => {
                    let stored = StoredMembership::new(Some(entry.log_id), membership.clone());
                    batch.put_in(&generation.applied, MEMBERSHIP, encode(&stored)?);
                    Response::Applied
                }
            };
            replies.push(reply);
            unwritten = Some(entry.log_id);
            if batch.approximate_size() >= APPLY_BATCH_BYTES {
                batch.put_in(&generation.applied, APPLIED, encode(&entry.log_id)?);
                self.db.write(std::mem::take(&mut batch))?;
                unwritten = None;
            }
        }
        if let Some(log_id) = unwritten {
            batch.put_in(&generation.applied, APPLIED, encode(&log_id)?);
            self.db.write(batch)?;
        }
        Ok(replies)
    }

    /// Writes a snapshot of the live generation, as of one siftdb snapshot, and makes it the
    /// current one. Applying goes on meanwhile; an install waits for it.
    fn build(&self) -> Result<(Meta, File), siftdb::Error> {
        let generation = self.read_generation();
        let view = self.db.snapshot();
        let path = self.db.path();
        let last_log_id: Option<LogId<NodeId>> = match generation.applied.get_at(&view, APPLIED)? {
            Some(v) => Some(decode(&v, path, "the last applied log id")?),
            None => None,
        };
        let last_membership = match generation.applied.get_at(&view, MEMBERSHIP)? {
            Some(v) => decode(&v, path, "the last membership")?,
            None => StoredMembership::default(),
        };
        let (tmp, seq) = self.snapshots.fresh("snapshot", "tmp");
        let snapshot_id = match &last_log_id {
            Some(id) => format!("{}-{}-{seq}", id.leader_id, id.index),
            None => format!("--{seq}"),
        };
        let meta = Meta {
            last_log_id,
            last_membership,
            snapshot_id,
        };
        let mut writer = SnapshotWriter::create(&tmp, &meta)?;
        let chunk_bytes = self.config.snapshot_chunk_bytes;
        for (name, ks) in &generation.keyspaces {
            let mut chunk = Vec::new();
            let mut bytes = 0;
            for item in ks.scan_at(&view, ..) {
                let (key, value) = item?;
                bytes += key.len() + value.len();
                chunk.push((key, value));
                if bytes >= chunk_bytes {
                    writer.chunk(name, &chunk)?;
                    chunk.clear();
                    bytes = 0;
                }
            }
            if !chunk.is_empty() {
                writer.chunk(name, &chunk)?;
            }
        }
        writer.finish()?;
        drop((view, generation));
        let file = File::open(&tmp)?;
        self.snapshots.publish(&tmp, seq, &meta)?;
        self.built.fetch_add(1, Ordering::Relaxed);
        Ok((meta, file))
    }

    /// Loads the snapshot in `data` into a fresh generation, keeps a copy as the current
    /// snapshot, and switches to it.
    fn install(&self, meta: &Meta, mut data: File) -> Result<(), siftdb::Error> {
        data.seek(SeekFrom::Start(0))?;
        let (tmp, seq) = self.snapshots.fresh("snapshot", "tmp");
        let tee = Tee {
            input: BufReader::with_capacity(1 << 20, data),
            copy: BufWriter::with_capacity(1 << 20, File::create(&tmp)?),
        };
        let (mut reader, header) = SnapshotReader::open(tee, &tmp)?;
        if header.last_log_id != meta.last_log_id || header.last_membership != meta.last_membership
        {
            return Err(siftdb::Error::Corruption {
                file: tmp,
                what: format!("the snapshot holds {header}, not {meta}"),
            });
        }

        let next = self.read_generation().number + 1;
        for name in self.db.keyspace_names() {
            if generation_of(&name) == Some(next) {
                self.db.drop_keyspace(&name)?;
            }
        }
        let fresh = Generation::open(&self.db, next, &self.config)?;
        let mut last: Option<(String, Vec<u8>)> = None;
        while let Some((name, entries)) = reader.next_chunk()? {
            let ks = fresh.keyspaces.get(&name).ok_or_else(|| {
                siftdb::Error::InvalidArgument(format!(
                    "the snapshot holds keyspace {name}, which this node's state machine lacks"
                ))
            })?;
            let mut batch = WriteBatch::new();
            for (key, value) in &entries {
                if last.as_ref().is_some_and(|(n, k)| *n == name && k >= key) {
                    return Err(siftdb::Error::Corruption {
                        file: tmp,
                        what: format!("keyspace {name}'s keys are out of order"),
                    });
                }
                last = Some((name.clone(), key.clone()));
                batch.put_in(ks, key, value);
            }
            self.db.write(batch)?;
        }
        let mut batch = WriteBatch::new();
        if let Some(log_id) = &meta.last_log_id {
            batch.put_in(&fresh.applied, APPLIED, encode(log_id)?);
        }
        batch.put_in(&fresh.applied, MEMBERSHIP, encode(&meta.last_membership)?);
        self.db.write(batch)?;

        let mut copy = reader.into_input().copy;
        copy.flush()?;
        copy.get_ref().sync_all()?;
        drop(copy);
        self.snapshots.publish(&tmp, seq, meta)?;
        self.snapshots.remove_incoming()?;

        let mut pointer = WriteBatch::new();
        pointer.put_in(&self.meta, GENERATION, encode_generation(next)?);
        self.db
            .write_opt(pointer, &WriteOptions::new().sync(true))?;
        let old = {
            let mut live = self.generation.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *live, fresh)
        };
        for name in old.names() {
            self.db.drop_keyspace(&name)?;
        }
        self.installed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn state_machine_error(verb: ErrorVerb) -> impl Fn(siftdb::Error) -> StorageError<NodeId> {
    move |e| storage_error(ErrorSubject::StateMachine, verb, e)
}

fn snapshot_error(
    meta: Option<&Meta>,
    verb: ErrorVerb,
) -> impl Fn(siftdb::Error) -> StorageError<NodeId> + '_ {
    move |e| storage_error(ErrorSubject::Snapshot(meta.map(|m| m.signature())), verb, e)
}

/// A blocking task's panic or cancellation, as a storage error.
fn join_error(e: tokio::task::JoinError) -> StorageError<NodeId> {
    StorageIOError::new(
        ErrorSubject::StateMachine,
        ErrorVerb::Write,
        AnyError::new(&e),
    )
    .into()
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let shared = Arc::clone(&self.shared);
        let (meta, file) = tokio::task::spawn_blocking(move || shared.build())
            .await
            .map_err(join_error)?
            .map_err(snapshot_error(None, ErrorVerb::Write))?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(tokio::fs::File::from_std(file)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<AppliedState, StorageError<NodeId>> {
        self.shared
            .applied_state()
            .map_err(state_machine_error(ErrorVerb::Read))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.shared
            .apply(entries.into_iter())
            .map_err(state_machine_error(ErrorVerb::Write))
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder {
            shared: Arc::clone(&self.shared),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<tokio::fs::File>, StorageError<NodeId>> {
        let (path, _) = self.shared.snapshots.fresh("incoming", "part");
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .await
            .map_err(|e| snapshot_error(None, ErrorVerb::Write)(siftdb::Error::Io(e)))?;
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_std().await;
        let shared = Arc::clone(&self.shared);
        let owned = meta.clone();
        tokio::task::spawn_blocking(move || shared.install(&owned, data))
            .await
            .map_err(join_error)?
            .map_err(snapshot_error(Some(meta), ErrorVerb::Write))
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let current = self
            .shared
            .snapshots
            .current()
            .map_err(snapshot_error(None, ErrorVerb::Read))?;
        Ok(current.map(|(meta, file)| Snapshot {
            meta,
            snapshot: Box::new(tokio::fs::File::from_std(file)),
        }))
    }
}

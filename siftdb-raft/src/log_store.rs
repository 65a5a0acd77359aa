//! The Raft log and vote: openraft's `RaftLogStorage` on the `raft.log` and `raft.meta`
//! keyspaces.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::PathBuf;
use std::sync::mpsc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{
    Entry, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader, StorageError, Vote,
};
use siftdb::{Db, Keyspace, WriteBatch, WriteOptions};

use crate::codec::{
    after_index, decode, encode, index_key, key_index, storage_error, PAST_LAST_INDEX,
};
use crate::store::{LAST_PURGED, VOTE};
use crate::{NodeId, TypeConfig};

/// The log half of a node's storage: entries in `raft.log`, the vote and the last purged log
/// id in `raft.meta`. Hand it to [`openraft::Raft::new`].
pub struct LogStore {
    db: Db,
    log: Keyspace,
    meta: Keyspace,
    sync: bool,
    vote: Option<Vote<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
    /// Callbacks of appends waiting for the syncer thread's fsync; `None` without sync.
    syncer: Option<mpsc::Sender<LogFlushed<TypeConfig>>>,
    syncer_thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for LogStore {
    /// Stops the syncer thread once it has acknowledged every append, so that the store's
    /// directory is free to open again when the node's handles are gone.
    fn drop(&mut self) {
        self.syncer = None;
        if let Some(thread) = self.syncer_thread.take() {
            let _ = thread.join();
        }
    }
}

impl LogStore {
    pub(crate) fn open(
        db: Db,
        log: Keyspace,
        meta: Keyspace,
        sync: bool,
    ) -> Result<LogStore, siftdb::Error> {
        let path = db.path().to_path_buf();
        let vote = meta
            .get(VOTE)?
            .map(|v| decode(&v, &path, "the saved vote"))
            .transpose()?;
        let last_purged = meta
            .get(LAST_PURGED)?
            .map(|v| decode(&v, &path, "the last purged log id"))
            .transpose()?;
        let (syncer, syncer_thread) = if sync {
            let (tx, thread) = spawn_syncer(db.clone())?;
            (Some(tx), Some(thread))
        } else {
            (None, None)
        };
        Ok(LogStore {
            db,
            log,
            meta,
            sync,
            vote,
            last_purged,
            syncer,
            syncer_thread,
        })
    }

    fn reader(&self) -> LogReader {
        LogReader {
            log: self.log.clone(),
            path: self.db.path().to_path_buf(),
        }
    }

    fn write(&self, batch: WriteBatch, sync: bool) -> Result<(), siftdb::Error> {
        self.db
            .write_opt(batch, &WriteOptions::new().sync(sync && self.sync))
    }
}

/// Starts the thread that fsyncs the WAL for appends and then acknowledges them: the appends
/// that arrive while one fsync runs are acknowledged by the next one together.
type Syncer = (
    mpsc::Sender<LogFlushed<TypeConfig>>,
    std::thread::JoinHandle<()>,
);

fn spawn_syncer(db: Db) -> Result<Syncer, siftdb::Error> {
    let (tx, rx) = mpsc::channel::<LogFlushed<TypeConfig>>();
    let thread = std::thread::Builder::new()
        .name("siftdb-raft-sync".into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut waiting = vec![first];
                waiting.extend(rx.try_iter());
                let result = db.sync_wal();
                for callback in waiting {
                    callback.log_io_completed(
                        result
                            .as_ref()
                            .map(|_| ())
                            .map_err(|e| std::io::Error::other(e.to_string())),
                    );
                }
            }
        })?;
    Ok((tx, thread))
}

/// Reads the log for openraft's replication tasks: a handle on the `raft.log` keyspace.
#[derive(Clone)]
pub struct LogReader {
    log: Keyspace,
    path: PathBuf,
}

impl LogReader {
    /// The entries whose indexes fall in `range`, in index order.
    fn entries(
        &self,
        range: impl RangeBounds<u64>,
    ) -> Result<Vec<Entry<TypeConfig>>, siftdb::Error> {
        let start = match range.start_bound() {
            Bound::Included(&i) => Some(i),
            Bound::Excluded(&i) => i.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let Some(start) = start else {
            return Ok(Vec::new());
        };
        let end = match range.end_bound() {
            Bound::Included(&i) => after_index(i),
            Bound::Excluded(&i) => index_key(i).to_vec(),
            Bound::Unbounded => PAST_LAST_INDEX.to_vec(),
        };
        let start = index_key(start).to_vec();
        if start >= end {
            return Ok(Vec::new());
        }
        let mut entries = Vec::new();
        for item in self.log.scan(start..end) {
            let (key, value) = item?;
            entries.push(self.decode_entry(&key, &value)?);
        }
        Ok(entries)
    }

    fn decode_entry(&self, key: &[u8], value: &[u8]) -> Result<Entry<TypeConfig>, siftdb::Error> {
        let index = key_index(key, &self.path)?;
        let entry: Entry<TypeConfig> = decode(value, &self.path, "a log entry")?;
        if entry.log_id.index != index {
            return Err(siftdb::Error::Corruption {
                file: self.path.clone(),
                what: format!(
                    "the log entry under index {index} is entry {}",
                    entry.log_id.index
                ),
            });
        }
        Ok(entry)
    }
}

fn read_logs(e: siftdb::Error) -> StorageError<NodeId> {
    storage_error(ErrorSubject::Logs, ErrorVerb::Read, e)
}

fn write_logs(e: siftdb::Error) -> StorageError<NodeId> {
    storage_error(ErrorSubject::Logs, ErrorVerb::Write, e)
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        self.entries(range).map_err(read_logs)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        self.reader().entries(range).map_err(read_logs)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let reader = self.reader();
        let last = match self.log.last_key_value().map_err(read_logs)? {
            Some((key, value)) => {
                Some(reader.decode_entry(&key, &value).map_err(read_logs)?.log_id)
            }
            None => None,
        };
        Ok(LogState {
            last_purged_log_id: self.last_purged,
            last_log_id: last.or(self.last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        self.reader()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let vote_error = |e| storage_error(ErrorSubject::Vote, ErrorVerb::Write, e);
        let mut batch = WriteBatch::new();
        batch.put_in(&self.meta, VOTE, encode(vote).map_err(vote_error)?);
        self.write(batch, true).map_err(vote_error)?;
        self.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.vote)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = WriteBatch::new();
        for entry in entries {
            let value = encode(&entry).map_err(write_logs)?;
            batch.put_in(&self.log, index_key(entry.log_id.index), value);
        }
        // Readable once written; durable once the syncer's fsync covers it.
        self.write(batch, false).map_err(write_logs)?;
        match &self.syncer {
            Some(syncer) => {
                if let Err(mpsc::SendError(callback)) = syncer.send(callback) {
                    callback
                        .log_io_completed(Err(std::io::Error::other("the sync thread stopped")));
                }
            }
            None => callback.log_io_completed(Ok(())),
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut batch = WriteBatch::new();
        batch.delete_range_in(
            &self.log,
            index_key(log_id.index).to_vec()..PAST_LAST_INDEX.to_vec(),
        );
        self.write(batch, false).map_err(write_logs)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut batch = WriteBatch::new();
        batch.put_in(
            &self.meta,
            LAST_PURGED,
            encode(&log_id).map_err(write_logs)?,
        );
        batch.delete_range_in(&self.log, Vec::new()..after_index(log_id.index));
        self.write(batch, false).map_err(write_logs)?;
        self.last_purged = Some(log_id);
        Ok(())
    }
}

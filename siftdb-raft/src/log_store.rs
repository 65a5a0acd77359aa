//! The Raft log and vote: openraft's `RaftLogStorage` on the `raft.log` and `raft.meta`
//! keyspaces.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{
    Entry, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader, StorageError, Vote,
};
use siftdb::{Db, Keyspace, WriteBatch};
use tokio::sync::{oneshot, watch};

use crate::codec::{
    after_index, decode, encode, index_key, key_index, storage_error, PAST_LAST_INDEX,
};
use crate::store::{LAST_PURGED, VOTE};
use crate::{NodeId, TypeConfig};

/// The log half of a node's storage: entries in `raft.log`, the vote and the last purged log
/// id in `raft.meta`. Hand it to [`openraft::Raft::new`].
///
/// Every write to the log goes through one writer thread, in the order openraft asks for them:
/// the appends, truncations and purges queued while the writer was busy become one batch, and
/// one `sync_wal` then acknowledges every append (and vote) in it. openraft's core never waits
/// for an fsync (siftdb holds its WAL lock while it syncs), so it goes on batching client
/// writes; readers of the log wait until the writer has written what was queued before they
/// read (which is what "readable once `append` returns" needs).
pub struct LogStore {
    db: Db,
    log: Keyspace,
    vote: Option<Vote<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
    writer: Option<mpsc::Sender<LogOp>>,
    writer_thread: Option<std::thread::JoinHandle<()>>,
    /// How many writes were queued, and (from the writer) how many are in the store.
    queued: Arc<AtomicU64>,
    written: watch::Receiver<u64>,
}

impl Drop for LogStore {
    /// Stops the writer once it has written and acknowledged what was queued, so that the
    /// store's directory is free to open again when the node's handles are gone.
    fn drop(&mut self) {
        self.writer = None;
        if let Some(thread) = self.writer_thread.take() {
            let _ = thread.join();
        }
    }
}

/// A write queued for the writer thread.
enum LogOp {
    /// Entries to put (index, encoded entry), acknowledged once durable.
    Append(Vec<(u64, Vec<u8>)>, LogFlushed<TypeConfig>),
    /// Removes the entries from this index on.
    Truncate(u64),
    /// Removes the entries up to this log id, and records it as the last purged.
    Purge(u64, Vec<u8>),
    /// The encoded vote, answered once durable.
    Vote(Vec<u8>, oneshot::Sender<Result<(), siftdb::Error>>),
}

/// Groups of log writes stop growing at about this many bytes.
const MAX_GROUP_BYTES: usize = 8 << 20;

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
        let (tx, rx) = mpsc::channel();
        let (written_tx, written) = watch::channel(0);
        let writer = Writer {
            db: db.clone(),
            log: log.clone(),
            meta,
            sync,
        };
        let writer_thread = std::thread::Builder::new()
            .name("siftdb-raft-log".into())
            .spawn(move || writer.run(rx, written_tx))?;
        Ok(LogStore {
            db,
            log,
            vote,
            last_purged,
            writer: Some(tx),
            writer_thread: Some(writer_thread),
            queued: Arc::new(AtomicU64::new(0)),
            written,
        })
    }

    fn reader(&self) -> LogReader {
        LogReader {
            log: self.log.clone(),
            path: self.db.path().to_path_buf(),
            queued: Arc::clone(&self.queued),
            written: self.written.clone(),
        }
    }

    /// Queues `op` for the writer thread.
    fn queue(&self, op: LogOp) -> Result<(), siftdb::Error> {
        self.queued.fetch_add(1, Ordering::SeqCst);
        let writer = self.writer.as_ref().ok_or_else(writer_gone)?;
        writer.send(op).map_err(|_| writer_gone())
    }
}

fn writer_gone() -> siftdb::Error {
    siftdb::Error::Io(std::io::Error::other("the log's writer thread stopped"))
}

/// The writer thread's handles.
struct Writer {
    db: Db,
    log: Keyspace,
    meta: Keyspace,
    sync: bool,
}

impl Writer {
    fn run(self, ops: mpsc::Receiver<LogOp>, written: watch::Sender<u64>) {
        let mut count = 0u64;
        while let Ok(first) = ops.recv() {
            let mut batch = WriteBatch::new();
            let mut appended = Vec::new();
            let mut votes = Vec::new();
            let mut next = Some(first);
            while let Some(op) = next.take() {
                count += 1;
                match op {
                    LogOp::Append(entries, callback) => {
                        for (index, value) in entries {
                            batch.put_in(&self.log, index_key(index), value);
                        }
                        appended.push(callback);
                    }
                    LogOp::Truncate(index) => {
                        batch.delete_range_in(
                            &self.log,
                            index_key(index).to_vec()..PAST_LAST_INDEX.to_vec(),
                        );
                    }
                    LogOp::Purge(index, log_id) => {
                        batch.put_in(&self.meta, LAST_PURGED, log_id);
                        batch.delete_range_in(&self.log, Vec::new()..after_index(index));
                    }
                    LogOp::Vote(vote, done) => {
                        batch.put_in(&self.meta, VOTE, vote);
                        votes.push(done);
                    }
                }
                if batch.approximate_size() < MAX_GROUP_BYTES {
                    next = ops.try_recv().ok();
                }
            }
            let mut result = self.db.write(batch);
            // Readable now: readers waiting for these writes may go on.
            written.send_replace(count);
            if result.is_ok() && self.sync && !(appended.is_empty() && votes.is_empty()) {
                result = self.db.sync_wal();
            }
            let outcome = || {
                result
                    .as_ref()
                    .map(|_| ())
                    .map_err(|e| std::io::Error::other(e.to_string()))
            };
            for callback in appended {
                callback.log_io_completed(outcome());
            }
            for done in votes {
                let _ = done.send(outcome().map_err(siftdb::Error::Io));
            }
        }
    }
}

/// Reads the log for openraft's replication tasks: a handle on the `raft.log` keyspace.
#[derive(Clone)]
pub struct LogReader {
    log: Keyspace,
    path: PathBuf,
    queued: Arc<AtomicU64>,
    written: watch::Receiver<u64>,
}

impl LogReader {
    /// Waits until the writer thread has written every write queued before the call.
    async fn caught_up(&mut self) -> Result<(), siftdb::Error> {
        let target = self.queued.load(Ordering::SeqCst);
        self.written
            .wait_for(|&w| w >= target)
            .await
            .map(|_| ())
            .map_err(|_| writer_gone())
    }

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
        self.caught_up().await.map_err(read_logs)?;
        self.entries(range).map_err(read_logs)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        self.reader().try_get_log_entries(range).await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let mut reader = self.reader();
        reader.caught_up().await.map_err(read_logs)?;
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
        let (done, durable) = oneshot::channel();
        self.queue(LogOp::Vote(encode(vote).map_err(vote_error)?, done))
            .map_err(vote_error)?;
        durable
            .await
            .map_err(|_| vote_error(writer_gone()))?
            .map_err(vote_error)?;
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
        let mut encoded = Vec::new();
        for entry in entries {
            encoded.push((entry.log_id.index, encode(&entry).map_err(write_logs)?));
        }
        self.queue(LogOp::Append(encoded, callback))
            .map_err(write_logs)
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.queue(LogOp::Truncate(log_id.index))
            .map_err(write_logs)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let encoded = encode(&log_id).map_err(write_logs)?;
        self.queue(LogOp::Purge(log_id.index, encoded))
            .map_err(write_logs)?;
        self.last_purged = Some(log_id);
        Ok(())
    }
}

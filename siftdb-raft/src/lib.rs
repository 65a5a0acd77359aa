//! siftdb as the log and the state machine of an [openraft] cluster: the storage half of a
//! replicated key-value store whose every node keeps its Raft log, its vote and its copy of the
//! application's keyspaces in one siftdb store.
//!
//! [`open`] opens (or creates) a node's directory and returns the two halves openraft 0.9 asks
//! for: [`LogStore`] ([`RaftLogStorage`](openraft::storage::RaftLogStorage)) and
//! [`StateMachine`] ([`RaftStateMachine`](openraft::storage::RaftStateMachine)). A write is a
//! [`Command`]: puts, deletes and range deletes in the keyspaces [`StoreConfig`] names. Reads go
//! to [`StateReader`], after [`Raft::ensure_linearizable`](openraft::Raft::ensure_linearizable)
//! when they must see every acknowledged write.
//!
//! # Layout in the store
//!
//! | keyspace | holds |
//! | --- | --- |
//! | `raft.log` | one entry per key, the key the entry's index as 8 big-endian bytes, so that the log is in index order and purging or truncating it is one range delete |
//! | `raft.meta` | the vote, the last purged log id, and which generation of the state machine is live |
//! | `sm.<g>.applied` | the last applied log id and the last membership of generation `g` |
//! | `sm.<g>.ks.<name>` | the application's keyspace `name`, generation `g` |
//!
//! An entry's writes go to the live generation's keyspaces in the same batch as its log id in
//! `sm.<g>.applied`, so a crash never applies an entry twice or in part. Installing a snapshot
//! loads it into generation `g + 1`, then moves the pointer in `raft.meta` with one synced
//! write, then drops generation `g`: a crash at any point leaves one whole generation live (see
//! [`StateMachine`]).
//!
//! # Durability
//!
//! An append is readable as soon as it is written and acknowledged to openraft once a
//! background thread's `sync_wal` covers it, so appends arriving together share an fsync. The
//! vote is written with `sync`. A purge or a truncation need not be synced: siftdb never keeps a
//! write without the writes before it, and every acknowledgement syncs them. With
//! [`StoreConfig::sync`] off, appends and votes survive a crash of the process but not of the
//! machine.
//!
//! # Example
//!
//! ```
//! use siftdb_raft::{open, StoreConfig};
//!
//! # fn main() -> Result<(), siftdb::Error> {
//! let dir = tempfile::tempdir()?;
//! let config = StoreConfig::new().keyspace("users", siftdb::Options::default());
//! let (log_store, state_machine) = open(dir.path(), config)?;
//! let reader = state_machine.reader();
//! assert_eq!(reader.get("users", b"ada")?, None);
//! // Hand `log_store` and `state_machine` to `openraft::Raft::new`.
//! # drop((log_store, state_machine));
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod batcher;
mod codec;
mod command;
mod config;
mod log_store;
pub mod network;
mod node;
mod snapshot_file;
mod state_machine;
mod store;

pub use command::{Command, Op, Response};
pub use config::StoreConfig;
pub use log_store::{LogReader, LogStore};
pub use node::{ClusterNode, NodeError};
pub use state_machine::{SnapshotBuilder, StateMachine, StateReader};
pub use store::open;

/// A node's id in the cluster.
pub type NodeId = u64;

/// Entries read from a keyspace: keys and values, in key order.
pub type KeyValues = Vec<(Vec<u8>, Vec<u8>)>;

openraft::declare_raft_types!(
    /// The openraft type configuration of a siftdb cluster: [`Command`]s in, [`Response`]s out,
    /// nodes named by a [`BasicNode`](openraft::BasicNode) address, snapshots as files.
    pub TypeConfig:
        D = Command,
        R = Response,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
        AsyncRuntime = openraft::TokioRuntime,
);

/// An openraft node whose storage is siftdb.
pub type Raft = openraft::Raft<TypeConfig>;

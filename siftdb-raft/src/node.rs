//! A node of a replicated key-value store: its [`Raft`] and its state machine's reader, with
//! the client calls an application makes.

use std::fmt;

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::BasicNode;
use siftdb::KeyRange;

use crate::batcher::Batcher;
use crate::{Command, KeyValues, NodeId, Raft, StateReader};

/// Why a client call failed.
#[derive(Debug)]
pub enum NodeError {
    /// This node is not the leader; the leader, if it knows one, with its address.
    NotLeader(Option<(NodeId, String)>),
    /// The cluster refused the command (see [`Response::Refused`](crate::Response::Refused)).
    Refused(String),
    /// Raft failed otherwise (no quorum, shutting down, a membership change in progress).
    Raft(String),
    /// The local state machine could not be read.
    Store(siftdb::Error),
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeError::NotLeader(Some((id, addr))) => {
                write!(f, "not the leader; node {id} at {addr} is")
            }
            NodeError::NotLeader(None) => write!(f, "not the leader, and no leader is known"),
            NodeError::Refused(why) => write!(f, "refused: {why}"),
            NodeError::Raft(why) => write!(f, "raft: {why}"),
            NodeError::Store(e) => write!(f, "store: {e}"),
        }
    }
}

impl std::error::Error for NodeError {}

impl NodeError {
    /// The same error, for each write of a group (a store error as its message).
    pub(crate) fn copy(&self) -> NodeError {
        match self {
            NodeError::NotLeader(l) => NodeError::NotLeader(l.clone()),
            NodeError::Refused(why) => NodeError::Refused(why.clone()),
            NodeError::Raft(why) => NodeError::Raft(why.clone()),
            NodeError::Store(e) => NodeError::Raft(e.to_string()),
        }
    }
}

impl From<siftdb::Error> for NodeError {
    fn from(e: siftdb::Error) -> Self {
        NodeError::Store(e)
    }
}

impl From<RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>> for NodeError {
    fn from(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> Self {
        match e.forward_to_leader() {
            Some(f) => NodeError::NotLeader(leader(f.leader_id, f.leader_node.as_ref())),
            None => NodeError::Raft(e.to_string()),
        }
    }
}

impl From<RaftError<NodeId, CheckIsLeaderError<NodeId, BasicNode>>> for NodeError {
    fn from(e: RaftError<NodeId, CheckIsLeaderError<NodeId, BasicNode>>) -> Self {
        match e.forward_to_leader() {
            Some(f) => NodeError::NotLeader(leader(f.leader_id, f.leader_node.as_ref())),
            None => NodeError::Raft(e.to_string()),
        }
    }
}

fn leader(id: Option<NodeId>, node: Option<&BasicNode>) -> Option<(NodeId, String)> {
    Some((id?, node.map(|n| n.addr.clone()).unwrap_or_default()))
}

/// One node of the cluster, as the application talks to it. Writes and linearizable reads
/// succeed on the leader; elsewhere they fail with [`NodeError::NotLeader`] naming it.
#[derive(Clone)]
pub struct ClusterNode {
    /// The node's id.
    pub id: NodeId,
    /// Its Raft.
    pub raft: Raft,
    /// Its state machine.
    pub reader: StateReader,
    batcher: Batcher,
}

impl ClusterNode {
    /// The node `id` of `raft` and `reader`. Starts the task that groups its writes, in the
    /// current tokio runtime.
    pub fn new(id: NodeId, raft: Raft, reader: StateReader) -> ClusterNode {
        let batcher = Batcher::start(raft.clone());
        ClusterNode {
            id,
            raft,
            reader,
            batcher,
        }
    }

    /// Commits `command` through the cluster and applies it; returns once the leader's state
    /// machine has applied it. Writes that arrive while the previous ones are being committed
    /// are committed together, as one Raft entry (each still atomic on its own).
    ///
    /// # Errors
    /// [`NodeError::Refused`] if the state machine refuses it (checked before it is grouped),
    /// the others as above.
    pub async fn write(&self, command: Command) -> Result<(), NodeError> {
        if let Some(why) = self.reader.refusal(&command) {
            return Err(NodeError::Refused(why));
        }
        self.batcher.write(command).await
    }

    /// Sets `key` to `value` in `keyspace`, through the cluster.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    pub async fn put(&self, keyspace: &str, key: &[u8], value: &[u8]) -> Result<(), NodeError> {
        self.write(Command::new().put(keyspace, key, value)).await
    }

    /// Removes `key` from `keyspace`, through the cluster.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    pub async fn delete(&self, keyspace: &str, key: &[u8]) -> Result<(), NodeError> {
        self.write(Command::new().delete(keyspace, key)).await
    }

    /// The value of `key` in `keyspace`, reflecting every write acknowledged before the call
    /// (a linearizable read: the leader confirms it still leads, then waits for its state
    /// machine to apply what was committed).
    ///
    /// # Errors
    /// [`NodeError::NotLeader`] off the leader; [`NodeError::Store`] for a failed read.
    pub async fn get(&self, keyspace: &str, key: &[u8]) -> Result<Option<Vec<u8>>, NodeError> {
        self.raft.ensure_linearizable().await?;
        Ok(self.reader.get(keyspace, key)?)
    }

    /// The entries of `keyspace` in `range`, linearizable as [`get`](Self::get).
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub async fn scan<R: KeyRange>(
        &self,
        keyspace: &str,
        range: R,
    ) -> Result<KeyValues, NodeError> {
        self.raft.ensure_linearizable().await?;
        Ok(self.reader.scan(keyspace, range)?)
    }
}

//! Nodes in separate processes: a small TCP protocol carrying Raft's RPCs and the clients'
//! calls, one request and one reply at a time per connection. [`serve`] answers them, and
//! [`TcpNetwork`] and [`TcpClient`] send them.
//!
//! A frame is a 4-byte big-endian length and that many bytes of postcard-encoded [`Request`]
//! or [`Reply`].

mod client;
mod server;

pub use client::{TcpClient, TcpConnection, TcpNetwork};
pub use server::{serve, start, NodeArgs};

use std::collections::{BTreeMap, BTreeSet};

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{Command, KeyValues, NodeError, NodeId, TypeConfig};

/// The largest frame either end accepts.
const MAX_FRAME: usize = 1 << 30;

/// What a connection asks a node.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    /// Raft's AppendEntries RPC.
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    /// Raft's InstallSnapshot RPC (one chunk).
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// Raft's RequestVote RPC.
    Vote(VoteRequest<NodeId>),
    /// A client's write.
    Write(Command),
    /// A client's read of one key; linearizable ones only on the leader.
    Get {
        /// The keyspace.
        keyspace: String,
        /// The key.
        key: Vec<u8>,
        /// Whether the read must see every acknowledged write.
        linearizable: bool,
    },
    /// A client's read of the keys from `start` (to `end`, exclusive, if given).
    Scan {
        /// The keyspace.
        keyspace: String,
        /// The first key.
        start: Vec<u8>,
        /// The end, exclusive; `None` for the keyspace's end.
        end: Option<Vec<u8>>,
        /// Whether the read must see every acknowledged write.
        linearizable: bool,
    },
    /// Makes the cluster of these voters (to a node that has never been part of one).
    Initialize(BTreeMap<NodeId, BasicNode>),
    /// Adds a learner and waits until it has caught up.
    AddLearner(NodeId, BasicNode),
    /// Makes these nodes the voters.
    ChangeMembership(BTreeSet<NodeId>),
    /// The node's view of the cluster.
    Status,
}

/// What a node answers.
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    /// To [`Request::AppendEntries`].
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    /// To [`Request::InstallSnapshot`].
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    /// To [`Request::Vote`].
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    /// To a write or a membership change.
    Done(Result<(), ClientError>),
    /// To [`Request::Get`].
    Value(Result<Option<Vec<u8>>, ClientError>),
    /// To [`Request::Scan`].
    Entries(Result<KeyValues, ClientError>),
    /// To [`Request::Status`].
    Status(Status),
}

/// A client call's failure, as sent over the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientError {
    /// Not the leader; the leader's id and address, if known.
    NotLeader(Option<(NodeId, String)>),
    /// The cluster refused the command.
    Refused(String),
    /// Anything else, in words.
    Failed(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::NotLeader(l) => write!(f, "not the leader (leader: {l:?})"),
            ClientError::Refused(why) => write!(f, "refused: {why}"),
            ClientError::Failed(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<NodeError> for ClientError {
    fn from(e: NodeError) -> Self {
        match e {
            NodeError::NotLeader(l) => ClientError::NotLeader(l),
            NodeError::Refused(why) => ClientError::Refused(why),
            other => ClientError::Failed(other.to_string()),
        }
    }
}

/// A node's view of the cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    /// The node's id.
    pub id: NodeId,
    /// The leader it knows.
    pub leader: Option<NodeId>,
    /// Its term.
    pub term: u64,
    /// The index of its last log entry.
    pub last_log_index: Option<u64>,
    /// The index of the last entry its state machine applied.
    pub last_applied: Option<u64>,
    /// The voters of its membership.
    pub voters: Vec<NodeId>,
    /// How many snapshots it installed since it started.
    pub snapshots_installed: u64,
}

pub(crate) async fn read_frame<T: for<'de> Deserialize<'de>>(
    stream: &mut TcpStream,
) -> std::io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    postcard::from_bytes(&body)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

pub(crate) async fn write_frame<T: Serialize>(
    stream: &mut TcpStream,
    value: &T,
) -> std::io::Result<()> {
    let body = postcard::to_stdvec(value).map_err(std::io::Error::other)?;
    let len = u32::try_from(body.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame too large"))?;
    stream.write_all(&len.to_be_bytes()).await?;
    stream.write_all(&body).await?;
    stream.flush().await
}

//! The sending end: a node's connections to its peers, and a client of the cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use openraft::error::{InstallSnapshotError, RPCError, RaftError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::{read_frame, write_frame, ClientError, Reply, Request, Status};
use crate::network::{network, remote, unreachable};
use crate::{Command, KeyValues, NodeId, TypeConfig};

/// The network of a node whose peers are reached over TCP at their [`BasicNode`] address.
pub struct TcpNetwork;

/// A connection to one peer, opened when first needed and again after a failure.
pub struct TcpConnection {
    addr: String,
    target: NodeId,
    stream: Option<TcpStream>,
}

impl RaftNetworkFactory<TypeConfig> for TcpNetwork {
    type Network = TcpConnection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> TcpConnection {
        TcpConnection {
            addr: node.addr.clone(),
            target,
            stream: None,
        }
    }
}

/// Sends `request` on `stream` (connecting to `addr` first if there is none) and reads the
/// reply; on failure the connection is dropped.
async fn call(
    stream: &mut Option<TcpStream>,
    addr: &str,
    request: &Request,
) -> std::io::Result<Reply> {
    if stream.is_none() {
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        *stream = Some(s);
    }
    let Some(s) = stream.as_mut() else {
        return Err(std::io::Error::other("not connected"));
    };
    let result = async {
        write_frame(s, request).await?;
        read_frame::<Reply>(s).await?.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the peer closed the connection",
            )
        })
    }
    .await;
    if result.is_err() {
        *stream = None;
    }
    result
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl TcpConnection {
    async fn rpc<E: std::error::Error>(
        &mut self,
        request: Request,
        option: RPCOption,
    ) -> RpcResult<Reply, E> {
        match tokio::time::timeout(
            option.hard_ttl(),
            call(&mut self.stream, &self.addr, &request),
        )
        .await
        {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Err(unreachable(&e)),
            Ok(Err(e)) => Err(network(&e)),
            Err(elapsed) => {
                self.stream = None;
                Err(network(&elapsed))
            }
        }
    }
}

fn unexpected<E: std::error::Error>(
    reply: Reply,
) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    let e = std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("unexpected reply {reply:?}"),
    );
    network(&e)
}

impl RaftNetwork<TypeConfig> for TcpConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        match self.rpc(Request::AppendEntries(rpc), option).await? {
            Reply::AppendEntries(r) => r.map_err(|e| remote(self.target, e)),
            other => Err(unexpected(other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self.rpc(Request::InstallSnapshot(rpc), option).await? {
            Reply::InstallSnapshot(r) => r.map_err(|e| remote(self.target, e)),
            other => Err(unexpected(other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        match self.rpc(Request::Vote(rpc), option).await? {
            Reply::Vote(r) => r.map_err(|e| remote(self.target, e)),
            other => Err(unexpected(other)),
        }
    }
}

/// A client of a cluster whose nodes listen at known addresses: it finds the leader and follows
/// it as it changes.
pub struct TcpClient {
    nodes: BTreeMap<NodeId, String>,
    leader: AtomicU64,
    connections: Mutex<BTreeMap<NodeId, Option<TcpStream>>>,
    /// How long a call keeps looking for a leader before it gives up.
    pub patience: Duration,
}

impl TcpClient {
    /// A client of the nodes `nodes` (id to address).
    pub fn new(nodes: BTreeMap<NodeId, String>) -> TcpClient {
        let first = nodes.keys().next().copied().unwrap_or(0);
        TcpClient {
            nodes,
            leader: AtomicU64::new(first),
            connections: Mutex::new(BTreeMap::new()),
            patience: Duration::from_secs(10),
        }
    }

    /// Adds (or moves) node `id` at `addr`.
    pub fn add_node(&mut self, id: NodeId, addr: String) {
        self.nodes.insert(id, addr);
    }

    /// Sends `request` to node `id` and returns its reply.
    ///
    /// # Errors
    /// The connection's I/O error, or `NotFound` for a node the client does not know.
    pub async fn call(&self, id: NodeId, request: &Request) -> std::io::Result<Reply> {
        let addr = self.nodes.get(&id).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, format!("no node {id}"))
        })?;
        let mut stream = self.connections.lock().await.remove(&id).flatten();
        let reply = call(&mut stream, addr, request).await;
        self.connections.lock().await.insert(id, stream);
        reply
    }

    /// Sends `request` to the leader, following redirections and trying the other nodes while
    /// there is none, for up to [`patience`](Self::patience); `done` picks the answer out of a
    /// reply.
    async fn to_leader<T>(
        &self,
        request: Request,
        done: impl Fn(Reply) -> Option<Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        let deadline = tokio::time::Instant::now() + self.patience;
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        let mut last = ClientError::NotLeader(None);
        while tokio::time::Instant::now() < deadline {
            let id = self.leader.load(Ordering::Relaxed);
            let outcome = match self.call(id, &request).await {
                Ok(reply) => done(reply)
                    .unwrap_or_else(|| Err(ClientError::Failed("unexpected reply".into()))),
                Err(e) => Err(ClientError::Failed(format!("node {id}: {e}"))),
            };
            match outcome {
                Err(ClientError::NotLeader(Some((leader, _))))
                    if self.nodes.contains_key(&leader) && leader != id =>
                {
                    self.leader.store(leader, Ordering::Relaxed);
                    continue;
                }
                Err(e @ (ClientError::NotLeader(_) | ClientError::Failed(_))) => {
                    last = e;
                    let at = ids.iter().position(|&i| i == id).unwrap_or(0);
                    self.leader
                        .store(ids[(at + 1) % ids.len()], Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => return other,
            }
        }
        Err(last)
    }

    /// Commits `command` through the leader.
    ///
    /// # Errors
    /// The last failure once [`patience`](Self::patience) is spent; a refusal at once.
    pub async fn write(&self, command: Command) -> Result<(), ClientError> {
        self.to_leader(Request::Write(command), |r| match r {
            Reply::Done(r) => Some(r),
            _ => None,
        })
        .await
    }

    /// The value of `key` in `keyspace`, a linearizable read at the leader.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    pub async fn get(&self, keyspace: &str, key: &[u8]) -> Result<Option<Vec<u8>>, ClientError> {
        let request = Request::Get {
            keyspace: keyspace.to_string(),
            key: key.to_vec(),
            linearizable: true,
        };
        self.to_leader(request, |r| match r {
            Reply::Value(r) => Some(r),
            _ => None,
        })
        .await
    }

    /// The entries of `keyspace` from `start` (to `end`, exclusive), a linearizable read at the
    /// leader.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    pub async fn scan(
        &self,
        keyspace: &str,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<KeyValues, ClientError> {
        let request = Request::Scan {
            keyspace: keyspace.to_string(),
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
            linearizable: true,
        };
        self.to_leader(request, |r| match r {
            Reply::Entries(r) => Some(r),
            _ => None,
        })
        .await
    }

    /// Asks the leader to add `id` at `addr` as a learner, waiting until it has caught up.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    pub async fn add_learner(&self, id: NodeId, addr: &str) -> Result<(), ClientError> {
        let request = Request::AddLearner(id, BasicNode::new(addr));
        self.to_leader(request, |r| match r {
            Reply::Done(r) => Some(r),
            _ => None,
        })
        .await
    }

    /// Asks the leader to make `voters` the voting members.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    pub async fn change_membership(&self, voters: BTreeSet<NodeId>) -> Result<(), ClientError> {
        self.to_leader(Request::ChangeMembership(voters), |r| match r {
            Reply::Done(r) => Some(r),
            _ => None,
        })
        .await
    }

    /// Node `id`'s status.
    ///
    /// # Errors
    /// The connection's I/O error, or `InvalidData` for another reply.
    pub async fn status(&self, id: NodeId) -> std::io::Result<Status> {
        match self.call(id, &Request::Status).await? {
            Reply::Status(s) => Ok(s),
            other => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{other:?}"),
            )),
        }
    }
}

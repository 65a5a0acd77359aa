//! Nodes in separate processes: a small TCP protocol carrying Raft's RPCs and the clients'
//! calls, one request and one reply at a time per connection.
//!
//! A frame is a 4-byte big-endian length and that many bytes of postcard-encoded [`Request`]
//! or [`Reply`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, RPCError, RaftError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

use super::{network, remote, unreachable};
use crate::{
    open, ClusterNode, Command, KeyValues, NodeError, NodeId, Raft, StoreConfig, TypeConfig,
};

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

async fn read_frame<T: for<'de> Deserialize<'de>>(
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

async fn write_frame<T: Serialize>(stream: &mut TcpStream, value: &T) -> std::io::Result<()> {
    let body = postcard::to_stdvec(value).map_err(std::io::Error::other)?;
    let len = u32::try_from(body.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame too large"))?;
    stream.write_all(&len.to_be_bytes()).await?;
    stream.write_all(&body).await?;
    stream.flush().await
}

/// Answers requests on `listener` for `node` until the listener fails.
///
/// # Errors
/// The listener's accept error.
pub async fn serve(listener: TcpListener, node: ClusterNode) -> std::io::Result<()> {
    loop {
        let (mut stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let node = node.clone();
        tokio::spawn(async move {
            while let Ok(Some(request)) = read_frame::<Request>(&mut stream).await {
                let reply = answer(&node, request).await;
                if write_frame(&mut stream, &reply).await.is_err() {
                    break;
                }
            }
        });
    }
}

async fn answer(node: &ClusterNode, request: Request) -> Reply {
    let raft = &node.raft;
    match request {
        Request::AppendEntries(rpc) => Reply::AppendEntries(raft.append_entries(rpc).await),
        Request::InstallSnapshot(rpc) => Reply::InstallSnapshot(raft.install_snapshot(rpc).await),
        Request::Vote(rpc) => Reply::Vote(raft.vote(rpc).await),
        Request::Write(command) => Reply::Done(node.write(command).await.map_err(Into::into)),
        Request::Get {
            keyspace,
            key,
            linearizable,
        } => Reply::Value(
            async {
                if linearizable {
                    node.get(&keyspace, &key).await
                } else {
                    Ok(node.reader.get(&keyspace, &key)?)
                }
            }
            .await
            .map_err(Into::into),
        ),
        Request::Scan {
            keyspace,
            start,
            end,
            linearizable,
        } => Reply::Entries(
            async {
                if linearizable {
                    raft.ensure_linearizable().await?;
                }
                Ok::<_, NodeError>(match end {
                    Some(end) => node.reader.scan(&keyspace, start..end)?,
                    None => node.reader.scan(&keyspace, start..)?,
                })
            }
            .await
            .map_err(Into::into),
        ),
        Request::Initialize(members) => Reply::Done(
            raft.initialize(members)
                .await
                .map_err(|e| ClientError::Failed(e.to_string())),
        ),
        Request::AddLearner(id, addr) => Reply::Done(
            raft.add_learner(id, addr, true)
                .await
                .map(|_| ())
                .map_err(|e| ClientError::from(NodeError::from(e))),
        ),
        Request::ChangeMembership(voters) => Reply::Done(
            raft.change_membership(voters, false)
                .await
                .map(|_| ())
                .map_err(|e| ClientError::from(NodeError::from(e))),
        ),
        Request::Status => {
            let m = raft.metrics().borrow().clone();
            Reply::Status(Status {
                id: m.id,
                leader: m.current_leader,
                term: m.current_term,
                last_log_index: m.last_log_index,
                last_applied: m.last_applied.map(|l| l.index),
                voters: m.membership_config.voter_ids().collect(),
                snapshots_installed: node.reader.snapshots_installed(),
            })
        }
    }
}

/// Opens the node `id` in `dir` and serves it on `listener`: what one process of a cluster
/// runs. Returns once the node is running; the server runs in a task of the current runtime.
///
/// # Errors
/// [`open`]'s errors, or Raft's if it cannot start.
pub async fn start(
    id: NodeId,
    dir: &Path,
    store: StoreConfig,
    raft: openraft::Config,
    listener: TcpListener,
) -> Result<ClusterNode, Box<dyn std::error::Error + Send + Sync>> {
    let (log_store, state_machine) = open(dir, store)?;
    let reader = state_machine.reader();
    let raft = Raft::new(
        id,
        Arc::new(raft.validate()?),
        TcpNetwork,
        log_store,
        state_machine,
    )
    .await?;
    let node = ClusterNode { id, raft, reader };
    tokio::spawn(serve(listener, node.clone()));
    Ok(node)
}

/// A node process's settings, from its command line:
/// `--id N --listen HOST:PORT --dir DIR [--keyspace NAME]... [--no-sync]` (the keyspace `kv`
/// when none is named).
#[derive(Debug, Clone)]
pub struct NodeArgs {
    /// The node's id.
    pub id: NodeId,
    /// The address it listens at, which is also its address in the cluster.
    pub listen: String,
    /// Its directory.
    pub dir: std::path::PathBuf,
    /// The state machine's keyspaces.
    pub keyspaces: Vec<String>,
    /// Whether appends and votes are fsynced.
    pub sync: bool,
}

impl NodeArgs {
    /// Reads the flags in `args` (without the program name).
    ///
    /// # Errors
    /// A message naming the flag that is unknown, lacks its value or has a bad one.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<NodeArgs, String> {
        let (mut id, mut listen, mut dir) = (None, None, None);
        let (mut keyspaces, mut sync) = (Vec::new(), true);
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let mut value = || args.next().ok_or(format!("{flag} needs a value"));
            match flag.as_str() {
                "--id" => id = Some(value()?.parse().map_err(|e| format!("--id: {e}"))?),
                "--listen" => listen = Some(value()?),
                "--dir" => dir = Some(std::path::PathBuf::from(value()?)),
                "--keyspace" => keyspaces.push(value()?),
                "--no-sync" => sync = false,
                other => return Err(format!("unknown flag {other}")),
            }
        }
        if keyspaces.is_empty() {
            keyspaces.push("kv".to_string());
        }
        Ok(NodeArgs {
            id: id.ok_or("--id is required")?,
            listen: listen.ok_or("--listen is required")?,
            dir: dir.ok_or("--dir is required")?,
            keyspaces,
            sync,
        })
    }

    /// The Raft settings of a node process: heartbeats every 100 ms, elections after 500 to
    /// 1000 ms without one, a snapshot every 1000 entries with the 200 before it kept.
    pub fn raft_config() -> openraft::Config {
        openraft::Config {
            heartbeat_interval: 100,
            election_timeout_min: 500,
            election_timeout_max: 1000,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(1000),
            max_in_snapshot_log_to_keep: 200,
            ..Default::default()
        }
    }

    /// Opens the node and serves it until the process ends.
    ///
    /// # Errors
    /// The listener's bind error, [`start`]'s errors, or the server's accept error.
    pub async fn run(self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let mut store = StoreConfig::new().sync(self.sync);
        for name in &self.keyspaces {
            store = store.keyspace(name, siftdb::Options::default());
        }
        let listener = TcpListener::bind(&self.listen).await?;
        let node = start_with(self.id, &self.dir, store, Self::raft_config()).await?;
        serve(listener, node).await?;
        Ok(())
    }
}

/// Opens node `id` in `dir` with a [`TcpNetwork`], without serving it.
async fn start_with(
    id: NodeId,
    dir: &Path,
    store: StoreConfig,
    raft: openraft::Config,
) -> Result<ClusterNode, Box<dyn std::error::Error + Send + Sync>> {
    let (log_store, state_machine) = open(dir, store)?;
    let reader = state_machine.reader();
    let raft = Raft::new(
        id,
        Arc::new(raft.validate()?),
        TcpNetwork,
        log_store,
        state_machine,
    )
    .await?;
    Ok(ClusterNode { id, raft, reader })
}

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
        unreachable!("connected above")
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

//! The node's end: answering requests, and a node process's settings.

use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::{read_frame, write_frame, ClientError, Reply, Request, Status, TcpNetwork};
use crate::{open, ClusterNode, NodeError, NodeId, Raft, StoreConfig};

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
    let node = open_node(id, dir, store, raft).await?;
    tokio::spawn(serve(listener, node.clone()));
    Ok(node)
}

/// Opens node `id` in `dir` with a [`TcpNetwork`], without serving it.
async fn open_node(
    id: NodeId,
    dir: &Path,
    store: StoreConfig,
    raft: openraft::Config,
) -> Result<ClusterNode, Box<dyn std::error::Error + Send + Sync>> {
    let (log_store, state_machine) = open(dir, store)?;
    let reader = state_machine.reader();
    let config = Arc::new(raft.validate()?);
    let raft = Raft::new(id, config, TcpNetwork, log_store, state_machine).await?;
    Ok(ClusterNode::new(id, raft, reader))
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
        let node = open_node(self.id, &self.dir, store, Self::raft_config()).await?;
        serve(listener, node).await?;
        Ok(())
    }
}

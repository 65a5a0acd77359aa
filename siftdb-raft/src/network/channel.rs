//! Nodes of one process calling each other's [`Raft`] directly: a router that can cut a node
//! off, for tests that take a leader away.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::error::{InstallSnapshotError, RPCError, RaftError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;

use super::{remote, unreachable};
use crate::{open, ClusterNode, NodeId, Raft, StoreConfig, TypeConfig};

/// The nodes of an in-process cluster, by id. Cloning shares it.
#[derive(Clone, Default)]
pub struct Router {
    state: Arc<Mutex<RouterState>>,
}

#[derive(Default)]
struct RouterState {
    nodes: BTreeMap<NodeId, Raft>,
    cut_off: BTreeSet<NodeId>,
}

impl Router {
    /// An empty router.
    pub fn new() -> Router {
        Router::default()
    }

    /// The network node `id` sends its RPCs through: pass it to [`openraft::Raft::new`], then
    /// [`add`](Self::add) the node.
    pub fn network(&self, id: NodeId) -> ChannelNetwork {
        ChannelNetwork {
            router: self.clone(),
            from: id,
        }
    }

    /// Opens node `id` in `dir`, starts its Raft with `config` and routes RPCs to it.
    ///
    /// # Errors
    /// [`open`]'s errors, or Raft's if it cannot start.
    pub async fn start(
        &self,
        id: NodeId,
        dir: &Path,
        store: StoreConfig,
        config: Arc<openraft::Config>,
    ) -> Result<ClusterNode, Box<dyn std::error::Error + Send + Sync>> {
        let (log_store, state_machine) = open(dir, store)?;
        let reader = state_machine.reader();
        let raft = Raft::new(id, config, self.network(id), log_store, state_machine).await?;
        self.add(id, raft.clone());
        Ok(ClusterNode::new(id, raft, reader))
    }

    /// Routes RPCs for `id` to `raft`.
    pub fn add(&self, id: NodeId, raft: Raft) {
        self.lock().nodes.insert(id, raft);
    }

    /// Stops routing RPCs to `id`, and returns its node.
    pub fn remove(&self, id: NodeId) -> Option<Raft> {
        self.lock().nodes.remove(&id)
    }

    /// Cuts node `id` off (`true`: RPCs from and to it fail as unreachable) or joins it again.
    pub fn cut_off(&self, id: NodeId, yes: bool) {
        let mut state = self.lock();
        if yes {
            state.cut_off.insert(id);
        } else {
            state.cut_off.remove(&id);
        }
    }

    /// The target's node, unless either end is cut off or the target is not routed.
    fn route(&self, from: NodeId, to: NodeId) -> Result<Raft, std::io::Error> {
        let state = self.lock();
        if state.cut_off.contains(&from) || state.cut_off.contains(&to) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                format!("node {from} or {to} is cut off"),
            ));
        }
        state.nodes.get(&to).cloned().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, format!("no node {to}"))
        })
    }

    fn lock(&self) -> MutexGuard<'_, RouterState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The network one node of a [`Router`] sends through.
pub struct ChannelNetwork {
    router: Router,
    from: NodeId,
}

/// A connection from one node to another over a [`Router`].
pub struct ChannelConnection {
    router: Router,
    from: NodeId,
    to: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for ChannelNetwork {
    type Network = ChannelConnection;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> ChannelConnection {
        ChannelConnection {
            router: self.router.clone(),
            from: self.from,
            to: target,
        }
    }
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl RaftNetwork<TypeConfig> for ChannelConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        let raft = self
            .router
            .route(self.from, self.to)
            .map_err(|e| unreachable(&e))?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| remote(self.to, e))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        let raft = self
            .router
            .route(self.from, self.to)
            .map_err(|e| unreachable(&e))?;
        raft.install_snapshot(rpc)
            .await
            .map_err(|e| remote(self.to, e))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        let raft = self
            .router
            .route(self.from, self.to)
            .map_err(|e| unreachable(&e))?;
        raft.vote(rpc).await.map_err(|e| remote(self.to, e))
    }
}

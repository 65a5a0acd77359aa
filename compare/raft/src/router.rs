//! Nodes of one process calling each other's `Raft` directly, for any type config.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft, RaftTypeConfig};

pub struct Router<C: RaftTypeConfig> {
    nodes: Arc<Mutex<BTreeMap<u64, Raft<C>>>>,
}

impl<C: RaftTypeConfig> Default for Router<C> {
    fn default() -> Self {
        Router {
            nodes: Arc::default(),
        }
    }
}

impl<C: RaftTypeConfig> Clone for Router<C> {
    fn clone(&self) -> Self {
        Router {
            nodes: Arc::clone(&self.nodes),
        }
    }
}

impl<C: RaftTypeConfig<NodeId = u64, Node = BasicNode>> Router<C> {
    pub fn network(&self, _id: u64) -> Router<C> {
        self.clone()
    }

    pub fn add(&self, id: u64, raft: Raft<C>) {
        self.nodes.lock().expect("router lock").insert(id, raft);
    }

    fn get(&self, id: u64) -> Result<Raft<C>, std::io::Error> {
        let nodes = self.nodes.lock().expect("router lock");
        nodes.get(&id).cloned().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, format!("no node {id}"))
        })
    }
}

pub struct Connection<C: RaftTypeConfig> {
    router: Router<C>,
    target: u64,
}

impl<C: RaftTypeConfig<NodeId = u64, Node = BasicNode>> RaftNetworkFactory<C> for Router<C> {
    type Network = Connection<C>;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Connection<C> {
        Connection {
            router: self.clone(),
            target,
        }
    }
}

fn remote<E: std::error::Error>(
    target: u64,
    e: RaftError<u64, E>,
) -> RPCError<u64, BasicNode, RaftError<u64, E>> {
    RPCError::RemoteError(RemoteError::new(target, e))
}

impl<C: RaftTypeConfig<NodeId = u64, Node = BasicNode>> RaftNetwork<C> for Connection<C> {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<C>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let raft = self
            .router
            .get(self.target)
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| remote(self.target, e))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<C>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        let raft = self
            .router
            .get(self.target)
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        raft.install_snapshot(rpc)
            .await
            .map_err(|e| remote(self.target, e))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let raft = self
            .router
            .get(self.target)
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        raft.vote(rpc).await.map_err(|e| remote(self.target, e))
    }
}

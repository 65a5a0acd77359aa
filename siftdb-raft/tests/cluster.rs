//! A three-node cluster in one process, over the in-process router: a leader taken away, a
//! node reopened from its directory, a node brought back by a snapshot, and every node's state
//! machine compared with a model of the acknowledged writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Config, SnapshotPolicy};
use siftdb_raft::network::channel::Router;
use siftdb_raft::{ClusterNode, Command, NodeError, NodeId, StoreConfig};

const KS: &str = "kv";

/// The acknowledged writes: what every state machine must end up holding.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn store_config() -> StoreConfig {
    // Small memtables so that the state machine and the log reach tables and compactions.
    let small = siftdb::Options::default().write_buffer_size(64 << 10);
    StoreConfig::new()
        .keyspace(KS, small.clone())
        .log_options(small.filter(siftdb::Filter::none()))
}

fn raft_config() -> Arc<Config> {
    let config = Config {
        heartbeat_interval: 50,
        election_timeout_min: 300,
        election_timeout_max: 600,
        // A snapshot every 150 entries, and the log purged up to it: a node cut off for longer
        // can only come back through a snapshot.
        snapshot_policy: SnapshotPolicy::LogsSinceLast(150),
        max_in_snapshot_log_to_keep: 0,
        purge_batch_size: 1,
        ..Default::default()
    };
    Arc::new(config.validate().expect("a valid raft config"))
}

struct Cluster {
    router: Router,
    dirs: BTreeMap<NodeId, PathBuf>,
    nodes: BTreeMap<NodeId, ClusterNode>,
    _root: tempfile::TempDir,
}

impl Cluster {
    async fn start(ids: &[NodeId]) -> Cluster {
        let root = tempfile::tempdir().expect("a temporary directory");
        let mut cluster = Cluster {
            router: Router::new(),
            dirs: BTreeMap::new(),
            nodes: BTreeMap::new(),
            _root: root,
        };
        for &id in ids {
            let dir = cluster._root.path().join(format!("node{id}"));
            cluster.dirs.insert(id, dir);
            cluster.open(id).await;
        }
        let members: BTreeMap<NodeId, BasicNode> = ids
            .iter()
            .map(|&id| (id, BasicNode::new(format!("node{id}"))))
            .collect();
        cluster.nodes[&ids[0]]
            .raft
            .initialize(members)
            .await
            .expect("the cluster initializes");
        cluster
    }

    /// Opens node `id` from its directory, waiting while the previous incarnation's last
    /// handles close.
    async fn open(&mut self, id: NodeId) {
        let dir: &Path = &self.dirs[&id];
        for _ in 0..200 {
            match self
                .router
                .start(id, dir, store_config(), raft_config())
                .await
            {
                Ok(node) => {
                    self.nodes.insert(id, node);
                    return;
                }
                Err(e) if e.to_string().contains("lock") => {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Err(e) => panic!("node {id} does not open: {e}"),
            }
        }
        panic!("node {id}'s directory stays locked");
    }

    /// Shuts node `id` down and drops every handle on it.
    async fn stop(&mut self, id: NodeId) {
        self.router.remove(id);
        let node = self.nodes.remove(&id).expect("a running node");
        node.raft.shutdown().await.expect("the node shuts down");
    }

    /// The leader, once the running nodes agree on one.
    async fn leader(&self) -> ClusterNode {
        for _ in 0..400 {
            let leaders: Vec<Option<NodeId>> = self
                .nodes
                .values()
                .map(|n| n.raft.metrics().borrow().current_leader)
                .collect();
            if let Some(Some(l)) = leaders.first() {
                if leaders.iter().all(|x| *x == Some(*l)) && self.nodes.contains_key(l) {
                    let node = &self.nodes[l];
                    if node.raft.ensure_linearizable().await.is_ok() {
                        return node.clone();
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no leader elected");
    }

    /// Writes `n` keys from `first` through the leader, with a delete of every fifth key
    /// before it; records each acknowledged write in `model`.
    async fn write(&self, model: &mut Model, first: u32, n: u32) {
        let mut leader = self.leader().await;
        for i in first..first + n {
            let key = format!("key{i:06}").into_bytes();
            let value = format!("value{i}-{}", "x".repeat(i as usize % 50)).into_bytes();
            let mut command = Command::new().put(KS, key.clone(), value.clone());
            let deleted =
                (i.is_multiple_of(5) && i > 0).then(|| format!("key{:06}", i - 1).into_bytes());
            if let Some(d) = &deleted {
                command = command.delete(KS, d.clone());
            }
            loop {
                match leader.write(command.clone()).await {
                    Ok(()) => break,
                    Err(NodeError::NotLeader(_)) | Err(NodeError::Raft(_)) => {
                        leader = self.leader().await;
                    }
                    Err(e) => panic!("write {i} failed: {e}"),
                }
            }
            model.insert(key, value);
            if let Some(d) = deleted {
                model.remove(&d);
            }
        }
    }

    /// Waits until node `id` has applied everything the leader has, then checks its state
    /// machine equals `model`.
    async fn check_node(&self, id: NodeId, model: &Model) {
        // The leader's state machine: a linearizable scan (again if leadership moved meanwhile).
        let (leader, on_leader) = loop {
            let leader = self.leader().await;
            if let Ok(entries) = leader.scan(KS, ..).await {
                break (leader, entries.into_iter().collect::<Model>());
            }
        };
        assert_eq!(
            &on_leader, model,
            "the leader {} lost or invented writes",
            leader.id
        );
        let target = leader.raft.metrics().borrow().last_applied.map(|l| l.index);
        let node = &self.nodes[&id];
        node.raft
            .wait(Some(Duration::from_secs(30)))
            .applied_index_at_least(target, "catch up")
            .await
            .expect("the node catches up");
        let local: Model = node
            .reader
            .scan(KS, ..)
            .expect("a scan")
            .into_iter()
            .collect();
        assert_eq!(
            &local, model,
            "node {id}'s state machine differs from the model"
        );
        let applied = node
            .reader
            .applied()
            .expect("the applied id")
            .map(|l| l.index);
        assert!(
            applied >= target,
            "node {id} applied {applied:?}, the leader {target:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_lose_a_leader_reopen_a_node_and_install_a_snapshot() {
    let mut cluster = Cluster::start(&[1, 2, 3]).await;
    let mut model = Model::new();

    // Writes through the leader reach every node.
    cluster.write(&mut model, 0, 100).await;
    for id in [1, 2, 3] {
        cluster.check_node(id, &model).await;
    }

    // The leader's node goes away: a new leader is elected and has every acknowledged write.
    let old_leader = cluster.leader().await.id;
    cluster.stop(old_leader).await;
    let new_leader = cluster.leader().await;
    assert_ne!(new_leader.id, old_leader);
    cluster.write(&mut model, 100, 100).await;
    for &id in cluster.nodes.keys() {
        cluster.check_node(id, &model).await;
    }

    // The dropped node reopens from its directory and catches up.
    cluster.open(old_leader).await;
    cluster.check_node(old_leader, &model).await;

    // A follower is down while the log moves far past its last entry and is purged: it can
    // only come back through a snapshot.
    let leader = cluster.leader().await.id;
    let behind = *cluster
        .nodes
        .keys()
        .find(|&&id| id != leader)
        .expect("a follower");
    let behind_last = cluster.nodes[&behind]
        .raft
        .metrics()
        .borrow()
        .last_log_index;
    cluster.stop(behind).await;
    cluster.write(&mut model, 200, 400).await;
    // The leader purges once no replication to the stopped node holds the range (it retries
    // after each failed attempt).
    let leader = cluster.leader().await;
    let mut purged = None;
    for _ in 0..600 {
        purged = leader.raft.metrics().borrow().purged;
        if purged.map(|p| p.index) > behind_last {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        purged.map(|p| p.index) > behind_last,
        "the leader purged up to {purged:?}, the stopped node has {behind_last:?}"
    );
    cluster.open(behind).await;
    cluster.check_node(behind, &model).await;
    assert!(
        cluster.nodes[&behind].reader.snapshots_installed() > 0,
        "node {behind} caught up without installing a snapshot"
    );

    // It serves from the installed generation, and survives a reopen of its directory.
    cluster.write(&mut model, 600, 50).await;
    cluster.stop(behind).await;
    cluster.open(behind).await;
    for id in [1, 2, 3] {
        cluster.check_node(id, &model).await;
    }
    for id in [1, 2, 3] {
        cluster.stop(id).await;
    }
}

//! A replicated key-value store of three nodes in one process, over the in-process router:
//! puts, a linearizable get, a delete and a scan through the leader; then a fourth node joins
//! and the third leaves.
//!
//! `cargo run -p siftdb-raft --example cluster_in_process`

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use openraft::BasicNode;
use siftdb_raft::network::channel::Router;
use siftdb_raft::{ClusterNode, Command, NodeId, StoreConfig};

type Error = Box<dyn std::error::Error + Send + Sync>;

fn store_config() -> StoreConfig {
    StoreConfig::new().keyspace("users", siftdb::Options::default())
}

async fn leader_of(nodes: &BTreeMap<NodeId, ClusterNode>) -> ClusterNode {
    loop {
        for node in nodes.values() {
            if node.raft.metrics().borrow().current_leader == Some(node.id) {
                return node.clone();
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let root = tempfile::tempdir()?;
    let config = Arc::new(
        openraft::Config {
            heartbeat_interval: 50,
            election_timeout_min: 200,
            election_timeout_max: 400,
            ..Default::default()
        }
        .validate()?,
    );
    let router = Router::new();
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        let dir = root.path().join(format!("node{id}"));
        let node = router
            .start(id, &dir, store_config(), config.clone())
            .await?;
        nodes.insert(id, node);
    }
    let members: BTreeMap<NodeId, BasicNode> = (1..=3)
        .map(|id| (id, BasicNode::new(format!("node{id}"))))
        .collect();
    nodes[&1].raft.initialize(members).await?;
    let leader = leader_of(&nodes).await;
    println!("leader: node {}", leader.id);

    leader.put("users", b"ada", b"Ada Lovelace").await?;
    leader.put("users", b"alan", b"Alan Turing").await?;
    leader
        .write(Command::new().put("users", "grace", "Grace Hopper").put(
            "users",
            "edsger",
            "Edsger Dijkstra",
        ))
        .await?;
    let ada = leader.get("users", b"ada").await?; // linearizable: the leader confirms it leads
    println!("get ada -> {:?}", ada.map(String::from_utf8));
    leader.delete("users", b"alan").await?;
    let users = leader.scan("users", ..).await?;
    let names: Vec<String> = users
        .iter()
        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
        .collect();
    println!("scan users -> {names:?}");
    assert_eq!(names, ["ada", "edsger", "grace"]);

    // Node 4 joins as a learner (it catches up from the log), then becomes a voter in place of
    // node 3.
    let dir = root.path().join("node4");
    let node4 = router
        .start(4, &dir, store_config(), config.clone())
        .await?;
    leader
        .raft
        .add_learner(4, BasicNode::new("node4"), true)
        .await?;
    leader
        .raft
        .change_membership(BTreeSet::from([1, 2, 4]), false)
        .await?;
    nodes.insert(4, node4.clone());
    let voters: Vec<NodeId> = leader
        .raft
        .metrics()
        .borrow()
        .membership_config
        .voter_ids()
        .collect();
    println!("voters after the change: {voters:?}");
    if let Some(node3) = nodes.remove(&3) {
        node3.raft.shutdown().await?;
        router.remove(3);
    }
    let leader = leader_of(&nodes).await;
    leader.put("users", b"barbara", b"Barbara Liskov").await?;
    let target = leader.raft.metrics().borrow().last_applied.map(|l| l.index);
    node4
        .raft
        .wait(Some(Duration::from_secs(10)))
        .applied_index_at_least(target, "node 4")
        .await?;
    let on_node4 = node4.reader.scan("users", ..)?;
    println!("node 4 holds {} users", on_node4.len());
    assert_eq!(on_node4.len(), 4);
    for node in nodes.values() {
        node.raft.shutdown().await?;
    }
    Ok(())
}

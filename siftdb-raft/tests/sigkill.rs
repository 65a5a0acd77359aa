//! Three node processes on localhost; one of them is killed with SIGKILL and restarted from its
//! directory, again and again, while a client keeps writing through the leader. After each
//! restart the node's state machine must catch up to the leader's, and the leader's must hold
//! every acknowledged write.
//!
//! Three rounds by default; `SIFTDB_RAFT_KILL_ROUNDS=200 cargo test -p siftdb-raft --test
//! sigkill` for a long run.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command as Process};
use std::time::Duration;

use siftdb_raft::network::tcp::{ClientError, Reply, Request, TcpClient};
use siftdb_raft::{Command, NodeId};

const KS: &str = "kv";

/// The node processes, killed when the test ends however it ends.
struct Nodes {
    children: BTreeMap<NodeId, Child>,
    addrs: BTreeMap<NodeId, String>,
    root: tempfile::TempDir,
}

impl Nodes {
    fn spawn(&mut self, id: NodeId) {
        let dir = self.root.path().join(format!("node{id}"));
        let child = Process::new(env!("CARGO_BIN_EXE_siftdb-raft-node"))
            .args(["--id", &id.to_string(), "--listen", &self.addrs[&id]])
            .arg("--dir")
            .arg(&dir)
            .spawn()
            .expect("the node process starts");
        self.children.insert(id, child);
    }

    fn kill(&mut self, id: NodeId) {
        let mut child = self.children.remove(&id).expect("a running node");
        child.kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
        child.wait().expect("the killed node is reaped");
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

async fn scan(
    client: &TcpClient,
    id: NodeId,
    linearizable: bool,
) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, String> {
    let request = Request::Scan {
        keyspace: KS.into(),
        start: Vec::new(),
        end: None,
        linearizable,
    };
    match client.call(id, &request).await {
        Ok(Reply::Entries(Ok(entries))) => Ok(entries.into_iter().collect()),
        other => Err(format!("{other:?}")),
    }
}

/// Waits until node `id` answers its status.
async fn wait_up(client: &TcpClient, id: NodeId) {
    for _ in 0..400 {
        if client.status(id).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("node {id} does not answer");
}

/// The leader's id and its state machine, a linearizable scan.
async fn leader_state(client: &TcpClient, ids: &[NodeId]) -> (NodeId, BTreeMap<Vec<u8>, Vec<u8>>) {
    for _ in 0..400 {
        for &id in ids {
            if let Ok(s) = client.status(id).await {
                if s.leader == Some(id) {
                    if let Ok(state) = scan(client, id, true).await {
                        return (id, state);
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no leader");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_and_restarted_catches_up_and_nothing_acknowledged_is_lost() {
    let rounds: usize = std::env::var("SIFTDB_RAFT_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let ids = [1, 2, 3];
    let mut nodes = Nodes {
        children: BTreeMap::new(),
        addrs: ids
            .iter()
            .map(|&id| (id, format!("127.0.0.1:{}", free_port())))
            .collect(),
        root: tempfile::tempdir().expect("a temporary directory"),
    };
    for id in ids {
        nodes.spawn(id);
    }
    let client = TcpClient::new(nodes.addrs.clone());
    for id in ids {
        wait_up(&client, id).await;
    }
    let members = nodes
        .addrs
        .iter()
        .map(|(&id, addr)| (id, openraft::BasicNode::new(addr)))
        .collect();
    match client.call(1, &Request::Initialize(members)).await {
        Ok(Reply::Done(Ok(()))) => {}
        other => panic!("the cluster does not initialize: {other:?}"),
    }

    // Each write puts a key of its own, so a write whose answer was lost with a killed leader
    // is "maybe" written, and everything else is known.
    let mut acknowledged: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut maybe: BTreeSet<Vec<u8>> = BTreeSet::new();
    let mut next = 0u64;
    for round in 0..rounds {
        let victim = ids[round % ids.len()];
        let writes = async {
            for _ in 0..150 {
                let key = format!("key{next:08}").into_bytes();
                let value = format!("round{round}-{next}").into_bytes();
                next += 1;
                match client
                    .write(Command::new().put(KS, key.clone(), value.clone()))
                    .await
                {
                    Ok(()) => {
                        acknowledged.insert(key, value);
                    }
                    Err(ClientError::Refused(why)) => panic!("refused: {why}"),
                    Err(_) => {
                        maybe.insert(key);
                    }
                }
            }
        };
        // Kill the victim (each node in turn, so the leader too) in the middle of the
        // writes; the two others go on serving.
        let killer = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            nodes.kill(victim);
            tokio::time::sleep(Duration::from_millis(300)).await;
            nodes.spawn(victim);
        };
        tokio::join!(writes, killer);
        wait_up(&client, victim).await;

        // The leader holds every acknowledged write and nothing never written.
        let (leader, on_leader) = leader_state(&client, &ids).await;
        for (key, value) in &acknowledged {
            assert_eq!(
                on_leader.get(key),
                Some(value),
                "round {round}: acknowledged {key:?} lost"
            );
        }
        for key in on_leader.keys() {
            assert!(
                acknowledged.contains_key(key) || maybe.contains(key),
                "round {round}: {key:?} was never written"
            );
        }

        // The restarted node catches up to the leader: same applied index, same state.
        let target = client
            .status(leader)
            .await
            .expect("the leader's status")
            .last_applied;
        let mut caught_up = false;
        for _ in 0..800 {
            let status = client.status(victim).await.expect("the victim's status");
            if status.last_applied >= target {
                caught_up = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(
            caught_up,
            "round {round}: node {victim} does not catch up to {target:?}"
        );
        let on_victim = scan(&client, victim, false)
            .await
            .expect("the victim's scan");
        assert_eq!(
            on_victim, on_leader,
            "round {round}: node {victim} differs from the leader"
        );
    }
    assert!(
        acknowledged.len() > rounds * 50,
        "too few writes went through"
    );
    drop(nodes);
}

//! The same store as three processes on localhost, talking TCP: this program starts three
//! copies of itself as nodes, writes and reads through the leader for a few seconds, adds a
//! fourth node, removes the third, and stops them all.
//!
//! `cargo run -p siftdb-raft --example cluster_processes -- [--secs 3]`
//! (A copy started with `--node --id N --listen ADDR --dir DIR` is one node.)

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command as Process};
use std::time::{Duration, Instant};

use openraft::BasicNode;
use siftdb_raft::network::tcp::{NodeArgs, Reply, Request, TcpClient};
use siftdb_raft::{Command, NodeId};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The node processes, stopped however the program ends.
struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn spawn_node(id: NodeId, addr: &str, root: &std::path::Path) -> Result<Child, Error> {
    Ok(Process::new(std::env::current_exe()?)
        .args(["--node", "--id", &id.to_string(), "--listen", addr, "--dir"])
        .arg(root.join(format!("node{id}")))
        .spawn()?)
}

fn free_addr() -> Result<String, Error> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.to_string())
}

async fn wait_up(client: &TcpClient, id: NodeId) -> Result<(), Error> {
    for _ in 0..400 {
        if client.status(id).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(format!("node {id} does not answer").into())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--node") {
        args.next();
        return NodeArgs::parse(args)?.run().await;
    }
    let mut secs = 3u64;
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--secs" => secs = args.next().ok_or("--secs needs a value")?.parse()?,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }

    let root = tempfile::tempdir()?;
    let mut addrs = BTreeMap::new();
    let mut processes = Processes(Vec::new());
    for id in 1..=3 {
        let addr = free_addr()?;
        processes.0.push(spawn_node(id, &addr, root.path())?);
        addrs.insert(id, addr);
    }
    let mut client = TcpClient::new(addrs.clone());
    for id in 1..=3 {
        wait_up(&client, id).await?;
    }
    let members = addrs
        .iter()
        .map(|(&id, addr)| (id, BasicNode::new(addr)))
        .collect();
    match client.call(1, &Request::Initialize(members)).await? {
        Reply::Done(Ok(())) => {}
        other => return Err(format!("initialize: {other:?}").into()),
    }

    let started = Instant::now();
    let mut writes = 0u64;
    while started.elapsed() < Duration::from_secs(secs) {
        let key = format!("key{:06}", writes % 1000);
        client
            .write(Command::new().put("kv", key.clone(), format!("value{writes}")))
            .await?;
        if writes.is_multiple_of(7) {
            client.write(Command::new().delete("kv", key)).await?;
        }
        writes += 1;
    }
    client
        .write(Command::new().put("kv", "hello", "world"))
        .await?;
    let value = client.get("kv", b"hello").await?; // linearizable, at the leader
    let entries = client.scan("kv", b"key", Some(b"kez")).await?;
    println!(
        "{writes} writes in {secs} s through the leader; get hello -> {:?}; scan key.. -> {} keys",
        value.clone().map(String::from_utf8),
        entries.len()
    );
    if value.as_deref() != Some(b"world".as_slice()) {
        return Err("the linearizable get missed the write before it".into());
    }

    // A fourth node joins as a learner, then takes the third's place among the voters.
    let addr4 = free_addr()?;
    processes.0.push(spawn_node(4, &addr4, root.path())?);
    client.add_node(4, addr4.clone());
    wait_up(&client, 4).await?;
    client.add_learner(4, &addr4).await?;
    client.change_membership(BTreeSet::from([1, 2, 4])).await?;
    client
        .write(Command::new().put("kv", "after", "the change"))
        .await?;
    // Node 4 counts toward the quorum now, but a quorum of two may commit without it: wait
    // until it has applied the change too.
    let mut status = client.status(4).await?;
    for _ in 0..400 {
        if status.voters == [1, 2, 4] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        status = client.status(4).await?;
    }
    println!(
        "node 4: voters {:?}, applied {:?}",
        status.voters, status.last_applied
    );
    if status.voters != [1, 2, 4] {
        return Err(format!("node 4 sees voters {:?}, not [1, 2, 4]", status.voters).into());
    }
    drop(processes);
    Ok(())
}

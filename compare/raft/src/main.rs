//! A three-node openraft cluster in one process, its nodes calling each other directly, on one
//! storage backend: siftdb-raft (`--features siftdb`) or openraft-rocksstore
//! (`--features rocksdb`).
//!
//! ```text
//! cargo run --release --features siftdb  -- [--writes 1000000] [--tasks 32] [--single-secs 10] \
//!     [--catch-up 100000] [--value-bytes 100] [--no-sync] [--group] [--dir DIR]
//! cargo run --release --features rocksdb -- [the same]
//! ```
//!
//! Phases, each on a fresh cluster (the same openraft `Config` for both backends: heartbeat
//! 100 ms, elections after 1-2 s without one, a snapshot every 100 000 entries):
//! 1. `single`: one client task writes through the leader for `--single-secs`;
//! 2. `load`: `--tasks` client tasks write `--writes` puts through the leader; then, once every
//!    node has applied them, the bytes each node's directory holds;
//! 3. `catch-up`: a cluster of two voters takes `--catch-up` puts, then a third node is added as
//!    a learner and the time until it has them all is taken (log replication: that cluster never
//!    snapshots, so nothing is purged).
//!
//! `--no-sync` and `--group` are siftdb-raft's: appends and votes without fsync (the durability
//! of openraft-rocksstore, which has no such setting), and writes through `ClusterNode::write`,
//! which commits the writes that wait together as one entry.
//!
//! A put's key is `key` and 12 decimal digits, its value `--value-bytes` bytes. Each write's
//! latency is from the call to the leader's answer (committed by a quorum and applied).

mod backend;
mod router;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use openraft::{BasicNode, Config, SnapshotPolicy};

use backend::{Backend, Node};
use router::Router;

struct Args {
    writes: u64,
    tasks: u64,
    single_secs: u64,
    catch_up: u64,
    value_bytes: usize,
    sync: bool,
    dir: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        writes: 1_000_000,
        tasks: 32,
        single_secs: 10,
        catch_up: 100_000,
        value_bytes: 100,
        sync: true,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match flag.as_str() {
            "--writes" => {
                args.writes = value("--writes")?
                    .parse()
                    .map_err(|e| format!("--writes: {e}"))?
            }
            "--tasks" => {
                args.tasks = value("--tasks")?
                    .parse()
                    .map_err(|e| format!("--tasks: {e}"))?
            }
            "--single-secs" => {
                args.single_secs = value("--single-secs")?
                    .parse()
                    .map_err(|e| format!("--single-secs: {e}"))?
            }
            "--catch-up" => {
                args.catch_up = value("--catch-up")?
                    .parse()
                    .map_err(|e| format!("--catch-up: {e}"))?
            }
            "--value-bytes" => {
                args.value_bytes = value("--value-bytes")?
                    .parse()
                    .map_err(|e| format!("--value-bytes: {e}"))?
            }
            "--no-sync" => args.sync = false,
            "--group" => backend::GROUP.store(true, Ordering::Relaxed),
            "--dir" => args.dir = Some(PathBuf::from(value("--dir")?)),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if args.tasks == 0 {
        return Err("--tasks must be at least 1".into());
    }
    Ok(args)
}

fn raft_config(snapshots: bool) -> Arc<Config> {
    let config = Config {
        heartbeat_interval: 100,
        election_timeout_min: 1000,
        election_timeout_max: 2000,
        snapshot_policy: if snapshots {
            SnapshotPolicy::LogsSinceLast(100_000)
        } else {
            SnapshotPolicy::Never
        },
        ..Default::default()
    };
    Arc::new(config.validate().expect("a valid config"))
}

struct Cluster {
    router: Router<backend::C>,
    nodes: BTreeMap<u64, Node>,
    dirs: BTreeMap<u64, PathBuf>,
}

impl Cluster {
    async fn start(root: &Path, voters: &[u64], snapshots: bool, sync: bool) -> Cluster {
        let mut cluster = Cluster {
            router: Router::default(),
            nodes: BTreeMap::new(),
            dirs: BTreeMap::new(),
        };
        for &id in voters {
            cluster.add_node(root, id, snapshots, sync).await;
        }
        let members: BTreeMap<u64, BasicNode> =
            voters.iter().map(|&id| (id, BasicNode::new(""))).collect();
        cluster.nodes[&voters[0]]
            .raft
            .initialize(members)
            .await
            .expect("initialize");
        cluster.leader().await;
        cluster
    }

    async fn add_node(&mut self, root: &Path, id: u64, snapshots: bool, sync: bool) -> &Node {
        let dir = root.join(format!("node{id}"));
        let node = Backend::start(
            id,
            &dir,
            raft_config(snapshots),
            self.router.network(id),
            sync,
        )
        .await;
        self.router.add(id, node.raft.clone());
        self.dirs.insert(id, dir);
        self.nodes.entry(id).or_insert(node)
    }

    async fn leader(&self) -> Node {
        loop {
            for node in self.nodes.values() {
                let m = node.raft.metrics().borrow().clone();
                if m.current_leader == Some(node.id)
                    && node.raft.ensure_linearizable().await.is_ok()
                {
                    return node.clone();
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every node has applied what the leader has.
    async fn settle(&self) {
        let leader = self.leader().await;
        let target = leader.raft.metrics().borrow().last_applied.map(|l| l.index);
        for node in self.nodes.values() {
            node.raft
                .wait(None)
                .applied_index_at_least(target, "settle")
                .await
                .expect("applied");
        }
    }

    async fn shutdown(self) {
        for node in self.nodes.values() {
            let _ = node.raft.shutdown().await;
        }
    }
}

/// `tasks` client tasks writing `count` puts through the leader (or, with `for_secs`, as many as
/// they can in that time), following it if it changes (a write is timed from its first try to
/// its success); returns the writes made, their latencies in µs, and the time taken.
async fn write_load(
    cluster: &Cluster,
    tasks: u64,
    count: u64,
    for_secs: Option<u64>,
    value_bytes: usize,
    first_key: u64,
) -> (u64, Histogram<u64>, Duration) {
    let next = Arc::new(AtomicU64::new(first_key));
    let end = first_key + count;
    let deadline = for_secs.map(|s| Instant::now() + Duration::from_secs(s));
    let start = Instant::now();
    let mut handles = Vec::new();
    let nodes: Arc<BTreeMap<u64, Node>> = Arc::new(cluster.nodes.clone());
    let leader = Arc::new(AtomicU64::new(cluster.leader().await.id));
    for _ in 0..tasks {
        let (nodes, leader) = (Arc::clone(&nodes), Arc::clone(&leader));
        let next = Arc::clone(&next);
        handles.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new(3).expect("a histogram");
            let mut made = 0u64;
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if deadline.is_none() && i >= end {
                    break;
                }
                let key = format!("key{i:012}");
                let value = value_of(i, value_bytes);
                let t = Instant::now();
                loop {
                    let id = leader.load(Ordering::Relaxed);
                    match Backend::put(&nodes[&id], &key, &value).await {
                        Ok(()) => break,
                        Err(Some(l)) if nodes.contains_key(&l) => {
                            leader.store(l, Ordering::Relaxed)
                        }
                        Err(_) => {
                            let ids: Vec<u64> = nodes.keys().copied().collect();
                            let at = ids.iter().position(|&i| i == id).unwrap_or(0);
                            leader.store(ids[(at + 1) % ids.len()], Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
                hist.record(t.elapsed().as_micros() as u64)
                    .expect("a latency");
                made += 1;
            }
            (made, hist)
        }));
    }
    let mut total = 0;
    let mut hist = Histogram::<u64>::new(3).expect("a histogram");
    for h in handles {
        let (made, part) = h.await.expect("a client task");
        total += made;
        hist.add(part).expect("histograms add");
    }
    (total, hist, start.elapsed())
}

/// A value of `n` bytes for key `i`: printable, about half compressible.
fn value_of(i: u64, n: usize) -> String {
    let mut state = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|j| {
            if j % 2 == 0 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (b'a' + (state % 26) as u8) as char
            } else {
                'x'
            }
        })
        .collect()
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.metadata() {
                Ok(m) if m.is_dir() => total += dir_bytes(&path),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

fn report(phase: &str, tasks: u64, writes: u64, hist: &Histogram<u64>, took: Duration) {
    println!(
        "{} {phase}: tasks {tasks}, {writes} writes in {:.1} s = {:.0} writes/s; commit latency p50 {:.2} ms, p99 {:.2} ms",
        Backend::NAME,
        took.as_secs_f64(),
        writes as f64 / took.as_secs_f64(),
        hist.value_at_quantile(0.5) as f64 / 1000.0,
        hist.value_at_quantile(0.99) as f64 / 1000.0,
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let tmp;
    let root = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir().expect("a temporary directory");
            tmp.path().to_path_buf()
        }
    };
    println!(
        "{} (sync {}, grouped {}), value {} bytes, in {}",
        Backend::NAME,
        args.sync,
        backend::GROUP.load(Ordering::Relaxed),
        args.value_bytes,
        root.display()
    );

    if args.single_secs > 0 {
        let cluster = Cluster::start(&root.join("single"), &[1, 2, 3], true, args.sync).await;
        let (writes, hist, took) =
            write_load(&cluster, 1, 0, Some(args.single_secs), args.value_bytes, 0).await;
        report("single", 1, writes, &hist, took);
        cluster.shutdown().await;
    }

    if args.writes > 0 {
        let cluster = Cluster::start(&root.join("load"), &[1, 2, 3], true, args.sync).await;
        let (writes, hist, took) =
            write_load(&cluster, args.tasks, args.writes, None, args.value_bytes, 0).await;
        report("load", args.tasks, writes, &hist, took);
        cluster.settle().await;
        let sizes: Vec<String> = cluster
            .dirs
            .values()
            .map(|d| format!("{:.1}", dir_bytes(d) as f64 / (1 << 20) as f64))
            .collect();
        println!(
            "{} load: MiB on disk per node after {writes} writes: {}",
            Backend::NAME,
            sizes.join(", ")
        );
        cluster.shutdown().await;
    }

    if args.catch_up > 0 {
        let root = root.join("catch-up");
        let mut cluster = Cluster::start(&root, &[1, 2], false, args.sync).await;
        write_load(
            &cluster,
            args.tasks,
            args.catch_up,
            None,
            args.value_bytes,
            0,
        )
        .await;
        let leader = cluster.leader().await;
        let start = Instant::now();
        cluster.add_node(&root, 3, false, args.sync).await;
        leader
            .raft
            .add_learner(3, BasicNode::new(""), true)
            .await
            .expect("the learner catches up");
        let target = leader.raft.metrics().borrow().last_applied.map(|l| l.index);
        cluster.nodes[&3]
            .raft
            .wait(None)
            .applied_index_at_least(target, "caught up")
            .await
            .expect("applied");
        println!(
            "{} catch-up: a node {} entries behind applied them all in {:.2} s",
            Backend::NAME,
            args.catch_up,
            start.elapsed().as_secs_f64()
        );
        cluster.shutdown().await;
    }
}

//! The storage backend this build measures: the same few calls over siftdb-raft or
//! openraft-rocksstore.

use std::path::Path;
use std::sync::Arc;

use crate::router::Router;

#[cfg(all(feature = "siftdb", feature = "rocksdb"))]
compile_error!("build with one of the features `siftdb` and `rocksdb`, not both");
#[cfg(not(any(feature = "siftdb", feature = "rocksdb")))]
compile_error!("build with `--features siftdb` or `--features rocksdb`");

#[cfg(feature = "siftdb")]
pub use siftdb_raft::TypeConfig as C;

#[cfg(feature = "rocksdb")]
pub use openraft_rocksstore::TypeConfig as C;

/// A running node.
#[derive(Clone)]
pub struct Node {
    pub id: u64,
    pub raft: openraft::Raft<C>,
    /// siftdb-raft's client-side handle, whose writes are grouped into entries.
    #[cfg(feature = "siftdb")]
    pub cluster: siftdb_raft::ClusterNode,
}

/// Whether siftdb-raft's writes go through `ClusterNode::write`, grouped (`--group`).
pub static GROUP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub struct Backend;

#[cfg(feature = "siftdb")]
impl Backend {
    pub const NAME: &'static str = "siftdb-raft";

    pub async fn start(
        id: u64,
        dir: &Path,
        config: Arc<openraft::Config>,
        network: Router<C>,
        sync: bool,
    ) -> Node {
        let store = siftdb_raft::StoreConfig::new()
            .keyspace("kv", siftdb::Options::default())
            .sync(sync);
        let (log, sm) = siftdb_raft::open(dir, store).expect("the node opens");
        let reader = sm.reader();
        let raft = openraft::Raft::new(id, config, network, log, sm)
            .await
            .expect("raft starts");
        let cluster = siftdb_raft::ClusterNode::new(id, raft.clone(), reader);
        Node { id, raft, cluster }
    }

    /// Writes through `node`; on failure, the leader it names, if any.
    pub async fn put(node: &Node, key: &str, value: &str) -> Result<(), Option<u64>> {
        let command = siftdb_raft::Command::new().put("kv", key, value);
        if GROUP.load(std::sync::atomic::Ordering::Relaxed) {
            return match node.cluster.write(command).await {
                Ok(()) => Ok(()),
                Err(siftdb_raft::NodeError::NotLeader(leader)) => Err(leader.map(|(id, _)| id)),
                Err(_) => Err(None),
            };
        }
        match node.raft.client_write(command).await {
            Ok(reply) => {
                assert_eq!(reply.data, siftdb_raft::Response::Applied);
                Ok(())
            }
            Err(e) => Err(e.forward_to_leader().and_then(|f| f.leader_id)),
        }
    }
}

#[cfg(feature = "rocksdb")]
impl Backend {
    pub const NAME: &'static str = "openraft-rocksstore";

    /// openraft-rocksstore has no durability setting: its appends and vote are written without
    /// fsync, and each apply ends with a synced flush of RocksDB's WAL.
    pub async fn start(
        id: u64,
        dir: &Path,
        config: Arc<openraft::Config>,
        network: Router<C>,
        _sync: bool,
    ) -> Node {
        std::fs::create_dir_all(dir).expect("a directory");
        let store = openraft_rocksstore::RocksStore::new(dir).await;
        let (log, sm) = openraft::storage::Adaptor::new(store);
        let raft = openraft::Raft::new(id, config, network, log, sm)
            .await
            .expect("raft starts");
        Node { id, raft }
    }

    /// Writes through `node`; on failure, the leader it names, if any.
    pub async fn put(node: &Node, key: &str, value: &str) -> Result<(), Option<u64>> {
        let request = openraft_rocksstore::RocksRequest::Set {
            key: key.to_string(),
            value: value.to_string(),
        };
        match node.raft.client_write(request).await {
            Ok(_) => Ok(()),
            Err(e) => Err(e.forward_to_leader().and_then(|f| f.leader_id)),
        }
    }
}

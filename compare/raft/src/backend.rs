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
}

pub struct Backend;

#[cfg(feature = "siftdb")]
impl Backend {
    pub const NAME: &'static str = "siftdb-raft";

    pub async fn start(id: u64, dir: &Path, config: Arc<openraft::Config>, network: Router<C>, sync: bool) -> Node {
        let store = siftdb_raft::StoreConfig::new()
            .keyspace("kv", siftdb::Options::default())
            .sync(sync);
        let (log, sm) = siftdb_raft::open(dir, store).expect("the node opens");
        let raft = openraft::Raft::new(id, config, network, log, sm).await.expect("raft starts");
        Node { id, raft }
    }

    pub async fn put(node: &Node, key: String, value: String) {
        let command = siftdb_raft::Command::new().put("kv", key, value);
        let reply = node.raft.client_write(command).await.expect("a write");
        assert_eq!(reply.data, siftdb_raft::Response::Applied);
    }
}

#[cfg(feature = "rocksdb")]
impl Backend {
    pub const NAME: &'static str = "openraft-rocksstore";

    /// openraft-rocksstore has no durability setting: its appends and vote are written without
    /// fsync, and each apply ends with a synced flush of RocksDB's WAL.
    pub async fn start(id: u64, dir: &Path, config: Arc<openraft::Config>, network: Router<C>, _sync: bool) -> Node {
        std::fs::create_dir_all(dir).expect("a directory");
        let store = openraft_rocksstore::RocksStore::new(dir).await;
        let (log, sm) = openraft::storage::Adaptor::new(store);
        let raft = openraft::Raft::new(id, config, network, log, sm).await.expect("raft starts");
        Node { id, raft }
    }

    pub async fn put(node: &Node, key: String, value: String) {
        let request = openraft_rocksstore::RocksRequest::Set { key, value };
        node.raft.client_write(request).await.expect("a write");
    }
}

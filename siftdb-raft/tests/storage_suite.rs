//! openraft's own storage conformance suite (`openraft::testing::Suite`), the one its RocksDB
//! backends pass, run against the siftdb backend.

use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use siftdb_raft::{open, LogStore, NodeId, StateMachine, StoreConfig, TypeConfig};
use tempfile::TempDir;

struct SiftBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for SiftBuilder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError<NodeId>> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = StoreConfig::new().keyspace("kv", siftdb::Options::default());
        let (log, sm) = open(dir.path(), config).expect("a fresh store opens");
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    if let Err(e) = Suite::test_all(SiftBuilder) {
        panic!("the siftdb backend fails openraft's storage suite: {e}");
    }
}

//! Opening a node's directory: the store, its keyspaces, the live generation of the state
//! machine, the snapshot files.

use std::path::Path;

use siftdb::Db;

use crate::codec::{decode, encode};
use crate::config::StoreConfig;
use crate::log_store::LogStore;
use crate::snapshot_file::SnapshotDir;
use crate::state_machine::{Generation, StateMachine};

/// The log's keyspace.
pub(crate) const LOG: &str = "raft.log";
/// The keyspace of the vote, the last purged log id and the live generation.
pub(crate) const META: &str = "raft.meta";
/// Keys in `raft.meta`.
pub(crate) const VOTE: &[u8] = b"vote";
pub(crate) const LAST_PURGED: &[u8] = b"last_purged";
pub(crate) const GENERATION: &[u8] = b"generation";
/// Keys in a generation's `applied` keyspace.
pub(crate) const APPLIED: &[u8] = b"applied";
pub(crate) const MEMBERSHIP: &[u8] = b"membership";

/// The name of generation `g`'s keyspace of applied ids.
pub(crate) fn applied_keyspace(g: u64) -> String {
    format!("sm.{g}.applied")
}

/// The name of generation `g`'s copy of the application's keyspace `name`.
pub(crate) fn data_keyspace(g: u64, name: &str) -> String {
    format!("sm.{g}.ks.{name}")
}

/// The generation a state machine keyspace belongs to, if `name` is one.
pub(crate) fn generation_of(name: &str) -> Option<u64> {
    name.strip_prefix("sm.")?.split('.').next()?.parse().ok()
}

/// Opens the node whose files are in `dir` (creating it if needed): the siftdb store in
/// `dir/db`, snapshot files in `dir/snapshots`. Returns the log half and the state machine
/// half of its storage, for [`openraft::Raft::new`].
///
/// Opening finishes what a crash interrupted: keyspaces of a generation that is not live (a
/// snapshot half installed, or an old generation not yet dropped) are dropped, and snapshot
/// files half written or received are removed.
///
/// # Errors
/// What [`Db::open`] and [`Db::keyspace_with`] return (`Error::Locked` while another process
/// has the node open, `Error::InvalidArgument` if a keyspace's recorded options differ from
/// `config`'s); `Error::Corruption` naming the file if a saved vote, log id or generation does
/// not decode; `Error::Io` if the snapshot directory cannot be read.
pub fn open(
    dir: impl AsRef<Path>,
    config: StoreConfig,
) -> Result<(LogStore, StateMachine), siftdb::Error> {
    let dir = dir.as_ref();
    std::fs::create_dir_all(dir)?;
    let db = Db::open(dir.join("db"), config.db_options.clone())?;
    let log = db.keyspace_with(LOG, config.log_options.clone())?;
    let meta = db.keyspace(META)?;
    let live = match meta.get(GENERATION)? {
        Some(bytes) => decode(&bytes, db.path(), "the live generation")?,
        None => 0u64,
    };
    for name in db.keyspace_names() {
        if generation_of(&name).is_some_and(|g| g != live) {
            db.drop_keyspace(&name)?;
        }
    }
    let generation = Generation::open(&db, live, &config)?;
    let snapshots = SnapshotDir::open(dir.join("snapshots"))?;
    let log_store = LogStore::open(db.clone(), log, meta.clone(), config.sync)?;
    let state_machine = StateMachine::new(db, meta, config, generation, snapshots);
    Ok((log_store, state_machine))
}

/// The value stored under [`GENERATION`].
pub(crate) fn encode_generation(g: u64) -> Result<Vec<u8>, siftdb::Error> {
    encode(&g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_drops_the_keyspaces_of_a_generation_that_is_not_live() {
        let dir = tempfile::tempdir().expect("a directory");
        let config = || StoreConfig::new().keyspace("kv", siftdb::Options::default());
        drop(open(dir.path(), config()).expect("open"));
        {
            // What a crash in the middle of an install leaves: generation 1 half loaded.
            let db =
                Db::open(dir.path().join("db"), siftdb::Options::default()).expect("the store");
            db.keyspace(&data_keyspace(1, "kv"))
                .expect("a keyspace")
                .put(b"half", b"loaded")
                .expect("a put");
            db.keyspace(&applied_keyspace(1)).expect("a keyspace");
        }
        let (_log, sm) = open(dir.path(), config()).expect("reopen");
        let names = sm.reader().db().keyspace_names();
        assert!(names.contains(&data_keyspace(0, "kv")), "{names:?}");
        assert!(
            !names.iter().any(|n| generation_of(n) == Some(1)),
            "{names:?}"
        );
        assert_eq!(sm.reader().get("kv", b"half").expect("a read"), None);
    }
}

//! What a follower keeps between catch-ups: how far it has read the writer's MANIFEST and WALs.

use std::collections::BTreeSet;
use std::path::PathBuf;

use parking_lot::Mutex;

use crate::db::version::manifest::ManifestState;

/// A follower: the writer's directory, and its reading position, which `catch_up` holds locked.
pub(crate) struct Follower {
    /// The directory of the store it follows.
    pub(crate) primary: PathBuf,
    pub(crate) state: Mutex<FollowerState>,
}

impl Follower {
    /// A follower of the store in `primary` that has read nothing yet.
    pub(crate) fn new(primary: PathBuf) -> Follower {
        Follower {
            primary,
            state: Mutex::new(FollowerState::default()),
        }
    }
}

/// How far a follower has read, and what it made of it.
#[derive(Default)]
pub(crate) struct FollowerState {
    /// The number of the MANIFEST it reads (0: none yet).
    pub(crate) manifest_number: u64,
    /// The end of the last record of it applied: the next catch-up reads on from there.
    pub(crate) manifest_offset: u64,
    /// What the records applied make: every keyspace's tables, the counters.
    pub(crate) manifest: ManifestState,
    /// The writer's log number the follower's memtables were filled from (replay began at that
    /// WAL); `None` when they must be filled again from the log number the MANIFEST gives.
    pub(crate) replayed_from: Option<u64>,
    /// Where WAL replay goes on: a WAL's number and the end of its last record replayed.
    pub(crate) wal_position: (u64, u64),
    /// The sequence of the last WAL entry replayed.
    pub(crate) replayed_sequence: u64,
    /// Tables linked for a version a catch-up then found stale, and did not install: removed
    /// once a version is installed that does not list them.
    pub(crate) unused_links: BTreeSet<u64>,
}

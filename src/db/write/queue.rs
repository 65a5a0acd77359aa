//! What the write path keeps in the store's state: the writers waiting for their group commit,
//! and the keyspaces a group writes to.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::db::transaction::ConflictCheck;
use crate::db::tree::Tree;
use crate::error::Result;
use crate::memtable::MemTable;
use crate::write_batch::WriteBatch;

/// A keyspace a commit group writes to: its memtable, and what the group wrote into it.
pub(crate) struct WriteTarget {
    pub(super) tree: Arc<Tree>,
    pub(super) mem: Arc<MemTable>,
    pub(super) entries: u64,
    pub(super) bytes: u64,
}

/// A write waiting for its group commit.
pub(super) struct PendingWrite {
    pub(super) id: u64,
    pub(super) batch: WriteBatch,
    pub(super) sync: bool,
    /// A transaction's: what must be unchanged since its snapshot for the batch to commit.
    pub(super) check: Option<Box<ConflictCheck>>,
}

/// Writers waiting to commit, oldest first, and the outcomes of those a leader committed.
#[derive(Default)]
pub(crate) struct WriteQueue {
    pub(super) next_id: u64,
    pub(super) waiting: VecDeque<PendingWrite>,
    /// A leader is committing a group taken from the front.
    pub(super) leader_busy: bool,
    /// Each committed batch's last sequence, or its error.
    pub(super) finished: HashMap<u64, Result<u64>>,
}

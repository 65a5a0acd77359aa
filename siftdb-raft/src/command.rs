//! What a client asks the cluster to write, and what applying it answered.

use serde::{Deserialize, Serialize};

/// One write to one of the state machine's keyspaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Sets `key` to `value` in `keyspace`.
    Put {
        /// The keyspace, one [`StoreConfig::keyspace`](crate::StoreConfig::keyspace) named.
        keyspace: String,
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Removes `key` from `keyspace`.
    Delete {
        /// The keyspace.
        keyspace: String,
        /// The key.
        key: Vec<u8>,
    },
    /// Removes every key from `start` up to (not including) `end` from `keyspace`.
    DeleteRange {
        /// The keyspace.
        keyspace: String,
        /// The first key removed.
        start: Vec<u8>,
        /// The first key kept.
        end: Vec<u8>,
    },
}

impl Op {
    /// The keyspace it writes to.
    pub fn keyspace(&self) -> &str {
        match self {
            Op::Put { keyspace, .. }
            | Op::Delete { keyspace, .. }
            | Op::DeleteRange { keyspace, .. } => keyspace,
        }
    }
}

/// A group of writes the cluster applies atomically, on every node, in log order: the
/// application data of a Raft entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// The writes, applied in order.
    pub ops: Vec<Op>,
}

impl Command {
    /// An empty command.
    pub fn new() -> Command {
        Command::default()
    }

    /// Adds a put of `key` = `value` in `keyspace`.
    pub fn put(
        mut self,
        keyspace: &str,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
    ) -> Command {
        self.ops.push(Op::Put {
            keyspace: keyspace.to_string(),
            key: key.into(),
            value: value.into(),
        });
        self
    }

    /// Adds a delete of `key` in `keyspace`.
    pub fn delete(mut self, keyspace: &str, key: impl Into<Vec<u8>>) -> Command {
        self.ops.push(Op::Delete {
            keyspace: keyspace.to_string(),
            key: key.into(),
        });
        self
    }

    /// Adds a delete of the keys in `start..end` in `keyspace`.
    pub fn delete_range(
        mut self,
        keyspace: &str,
        start: impl Into<Vec<u8>>,
        end: impl Into<Vec<u8>>,
    ) -> Command {
        self.ops.push(Op::DeleteRange {
            keyspace: keyspace.to_string(),
            start: start.into(),
            end: end.into(),
        });
        self
    }
}

/// What applying an entry answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The entry's writes are in the state machine (or it had none: a blank or membership entry).
    Applied,
    /// The command names a keyspace the state machine does not have, or a key or value larger
    /// than siftdb takes: none of its writes were made. Every node refuses it alike, so the
    /// replicas stay equal. The reason, in words.
    Refused(String),
}

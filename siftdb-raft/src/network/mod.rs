//! Two networks for a cluster of siftdb nodes: [`channel`], nodes of one process calling each
//! other directly (tests, examples, benchmarks), and [`tcp`], nodes in separate processes.

pub mod channel;
pub mod tcp;

use openraft::error::{NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::BasicNode;

use crate::NodeId;

/// The error an RPC returns when the target answered with `Err(e)`.
pub(crate) fn remote<E: std::error::Error>(
    target: NodeId,
    e: RaftError<NodeId, E>,
) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    RPCError::RemoteError(RemoteError::new(target, e))
}

/// The error an RPC returns when the target cannot be reached (openraft backs off).
pub(crate) fn unreachable<E: std::error::Error>(
    why: &(impl std::error::Error + 'static),
) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    RPCError::Unreachable(Unreachable::new(why))
}

/// The error an RPC returns when it failed on the way (openraft retries at once).
pub(crate) fn network<E: std::error::Error>(
    why: &(impl std::error::Error + 'static),
) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    RPCError::Network(NetworkError::new(why))
}

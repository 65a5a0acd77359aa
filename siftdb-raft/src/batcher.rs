//! Concurrent writes through one node, grouped: while one group is being committed, the writes
//! that arrive wait, and go together as the next group, one Raft entry.
//!
//! openraft 0.9 appends a leader's entries one at a time, each waiting for its fsync, so a
//! leader that gives each write an entry of its own commits at most one write per fsync however
//! many clients wait. Grouping gives each fsync all the writes that arrived during the last one.
//! A group is one [`Command`] holding the writes' operations in arrival order: applied
//! atomically as a whole, and so each write atomically, as alone.

use tokio::sync::{mpsc, oneshot};

use crate::{Command, NodeError, Op, Raft, Response};

/// A group stops growing at about this many bytes of keys and values.
const MAX_GROUP_BYTES: usize = 1 << 20;

type Waiting = (Command, oneshot::Sender<Result<(), NodeError>>);

/// The queue of a node's writes, and the task that commits them in groups.
#[derive(Clone)]
pub(crate) struct Batcher {
    queue: mpsc::UnboundedSender<Waiting>,
}

impl Batcher {
    /// Starts the task that commits the writes queued for `raft`; it ends when the last handle
    /// on the queue is dropped.
    pub(crate) fn start(raft: Raft) -> Batcher {
        let (queue, waiting) = mpsc::unbounded_channel();
        tokio::spawn(commit_groups(raft, waiting));
        Batcher { queue }
    }

    /// Commits `command` in the next group; returns once the group is applied on the leader.
    pub(crate) async fn write(&self, command: Command) -> Result<(), NodeError> {
        let (answer, answered) = oneshot::channel();
        self.queue
            .send((command, answer))
            .map_err(|_| NodeError::Raft("the node's writer stopped".into()))?;
        answered
            .await
            .map_err(|_| NodeError::Raft("the node's writer stopped".into()))?
    }
}

fn bytes(command: &Command) -> usize {
    command
        .ops
        .iter()
        .map(|op| match op {
            Op::Put { key, value, .. } => key.len() + value.len(),
            Op::Delete { key, .. } => key.len(),
            Op::DeleteRange { start, end, .. } => start.len() + end.len(),
        })
        .sum()
}

async fn commit_groups(raft: Raft, mut waiting: mpsc::UnboundedReceiver<Waiting>) {
    while let Some(first) = waiting.recv().await {
        let mut size = bytes(&first.0);
        let mut group = vec![first];
        while size < MAX_GROUP_BYTES {
            match waiting.try_recv() {
                Ok(next) => {
                    size += bytes(&next.0);
                    group.push(next);
                }
                Err(_) => break,
            }
        }
        let mut merged = Command::new();
        let mut answers = Vec::with_capacity(group.len());
        for (command, answer) in group {
            merged.ops.extend(command.ops);
            answers.push(answer);
        }
        let outcome = match raft.client_write(merged).await {
            Ok(reply) => match reply.data {
                Response::Applied => Ok(()),
                Response::Refused(why) => Err(NodeError::Refused(why)),
            },
            Err(e) => Err(NodeError::from(e)),
        };
        for answer in answers {
            let _ = answer.send(outcome.as_ref().map(|_| ()).map_err(NodeError::copy));
        }
    }
}

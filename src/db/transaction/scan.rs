//! A transaction's scan: the snapshot's keys with the transaction's own writes merged in, both
//! ways.

use std::collections::VecDeque;

use crate::db::scan::Scan;
use crate::error::{Error, Result};

/// A key and its value.
type Entry = (Vec<u8>, Vec<u8>);

/// The iterator of [`Transaction::scan`](super::Transaction::scan): `(key, value)` pairs in key
/// order, the snapshot's with the transaction's own writes merged in (a key it put appears with
/// its value, a key it deleted, alone or in a range, does not). It runs both ways (`.rev()`, or
/// `next` and `next_back` meeting in the middle), like [`Scan`]. It owns what it reads; the
/// transaction may go on meanwhile (its later writes are not seen by this scan).
pub struct TransactionScan {
    base: Option<Scan>,
    /// The snapshot's next entry from the front, and from the back, taken from `base` to be
    /// compared with the transaction's writes.
    front: Option<Entry>,
    back: Option<Entry>,
    /// The transaction's writes in the range, in key order: a value, or `None` for a delete.
    own: VecDeque<(Vec<u8>, Option<Vec<u8>>)>,
    /// The ranges the transaction deleted (start, end; `None`: no end): the snapshot's keys in
    /// them are hidden.
    deleted: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Why it cannot scan: its only item.
    refused: Option<Error>,
    done: bool,
}

/// Which end of the scan a step takes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Front,
    Back,
}

impl TransactionScan {
    pub(super) fn new(
        base: Scan,
        own: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        deleted: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> TransactionScan {
        TransactionScan {
            base: Some(base),
            front: None,
            back: None,
            own: own.into(),
            deleted,
            refused: None,
            done: false,
        }
    }

    pub(super) fn refused(e: Error) -> TransactionScan {
        TransactionScan {
            base: None,
            front: None,
            back: None,
            own: VecDeque::new(),
            deleted: Vec::new(),
            refused: Some(e),
            done: false,
        }
    }

    /// Takes from the base scan, if not taken already, the snapshot's next entry at `end` not in
    /// a range the transaction deleted (once the base is exhausted, the one the other end took
    /// is the last).
    fn fill(&mut self, end: End) -> Result<()> {
        let held = match end {
            End::Front => self.front.is_some(),
            End::Back => self.back.is_some(),
        };
        if !held {
            let next = loop {
                let Some(base) = self.base.as_mut() else {
                    break None;
                };
                let item = match end {
                    End::Front => base.next(),
                    End::Back => base.next_back(),
                };
                match item {
                    Some(Ok((k, v))) if !self.hidden(&k) => break Some((k, v)),
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e),
                    None => {
                        break match end {
                            End::Front => self.back.take(),
                            End::Back => self.front.take(),
                        }
                    }
                }
            };
            match end {
                End::Front => self.front = next,
                End::Back => self.back = next,
            }
        }
        Ok(())
    }

    /// Whether the transaction deleted `key` with a range deletion.
    fn hidden(&self, key: &[u8]) -> bool {
        self.deleted
            .iter()
            .any(|(start, end)| key >= start.as_slice() && end.as_deref().is_none_or(|e| key < e))
    }

    /// The next entry from `end`: the nearer of the snapshot's next key and the transaction's
    /// next write; on a tie the write replaces the snapshot's.
    fn step(&mut self, end: End) -> Option<Result<Entry>> {
        if let Some(e) = self.refused.take() {
            self.done = true;
            return Some(Err(e));
        }
        loop {
            if let Err(e) = self.fill(end) {
                self.done = true;
                return Some(Err(e));
            }
            let (base, own) = match end {
                End::Front => (self.front.as_ref(), self.own.front()),
                End::Back => (self.back.as_ref(), self.own.back()),
            };
            let base = base.map(|(k, _)| k.as_slice());
            let (take_own, tie) = match (base, own) {
                (None, None) => return None,
                (None, Some(_)) => (true, false),
                (Some(_), None) => (false, false),
                (Some(b), Some((o, _))) => match end {
                    End::Front => (o.as_slice() <= b, o.as_slice() == b),
                    End::Back => (o.as_slice() >= b, o.as_slice() == b),
                },
            };
            let held = match end {
                End::Front => &mut self.front,
                End::Back => &mut self.back,
            };
            if !take_own {
                return held.take().map(Ok);
            }
            if tie {
                held.take();
            }
            let (key, value) = match end {
                End::Front => self.own.pop_front(),
                End::Back => self.own.pop_back(),
            }?;
            if let Some(value) = value {
                return Some(Ok((key, value)));
            }
            // Deleted by the transaction: skipped.
        }
    }

    fn next_from(&mut self, end: End) -> Option<Result<Entry>> {
        if self.done {
            return None;
        }
        let item = self.step(end);
        if item.is_none() {
            self.done = true;
        }
        item
    }
}

impl Iterator for TransactionScan {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_from(End::Front)
    }
}

impl DoubleEndedIterator for TransactionScan {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.next_from(End::Back)
    }
}

impl std::iter::FusedIterator for TransactionScan {}

impl std::fmt::Debug for TransactionScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TransactionScan")
    }
}

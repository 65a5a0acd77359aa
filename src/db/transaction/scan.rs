//! A transaction's scan: the snapshot's keys with the transaction's own writes merged in.

use std::iter::Peekable;

use crate::db::Scan;
use crate::error::{Error, Result};

/// The iterator of [`Transaction::scan`](super::Transaction::scan): `(key, value)` pairs in key
/// order, the snapshot's with the transaction's own writes merged in. It owns what it reads; the
/// transaction may go on meanwhile (its later writes are not seen by this scan).
pub struct TransactionScan {
    base: Option<Peekable<Scan>>,
    /// The transaction's writes in the range, in key order: a value, or `None` for a delete.
    own: std::vec::IntoIter<(Vec<u8>, Option<Vec<u8>>)>,
    own_next: Option<(Vec<u8>, Option<Vec<u8>>)>,
    /// Why it cannot scan: its only item.
    refused: Option<Error>,
    done: bool,
}

impl TransactionScan {
    pub(super) fn new(base: Scan, own: Vec<(Vec<u8>, Option<Vec<u8>>)>) -> TransactionScan {
        let mut own = own.into_iter();
        TransactionScan {
            base: Some(base.peekable()),
            own_next: own.next(),
            own,
            refused: None,
            done: false,
        }
    }

    pub(super) fn refused(e: Error) -> TransactionScan {
        TransactionScan {
            base: None,
            own: Vec::new().into_iter(),
            own_next: None,
            refused: Some(e),
            done: false,
        }
    }

    fn step(&mut self) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if let Some(e) = self.refused.take() {
            self.done = true;
            return Some(Err(e));
        }
        loop {
            let base = self.base.as_mut()?;
            // The smaller of the next base key and the next own write; on a tie the own write
            // replaces the snapshot's.
            let take_own = match (base.peek(), &self.own_next) {
                (Some(Err(_)), _) => {
                    self.done = true;
                    return base.next();
                }
                (None, None) => return None,
                (None, Some(_)) => true,
                (Some(Ok(_)), None) => false,
                (Some(Ok((k, _))), Some((own, _))) => {
                    if own <= k {
                        if own == k {
                            base.next();
                        }
                        true
                    } else {
                        false
                    }
                }
            };
            if !take_own {
                return base.next();
            }
            let (key, value) = self.own_next.take()?;
            self.own_next = self.own.next();
            if let Some(value) = value {
                return Some(Ok((key, value)));
            }
            // Deleted by the transaction: skipped.
        }
    }
}

impl Iterator for TransactionScan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step();
        if item.is_none() {
            self.done = true;
        }
        item
    }
}

impl std::iter::FusedIterator for TransactionScan {}

impl std::fmt::Debug for TransactionScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TransactionScan")
    }
}

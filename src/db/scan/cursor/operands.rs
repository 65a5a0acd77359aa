//! Merge operands under a cursor: the operands of the key being resolved, gathered in buffers
//! the cursor reuses, and the walks that resolve a key forward and backward.
//!
//! Forward, the merge is on the newest visible operand: the walk gathers it and the older visible
//! versions of its key until one is not an operand (a value, which is the base; a tombstone, a
//! range tombstone over it or an expired value, which leave none) or the key ends, then leaves
//! the merge there and the result in `saved_key`/`saved_value` (`Cursor::resolved`). Backward, the
//! walk of `find_prev_user_entry` meets a key's versions oldest first and gathers its operands on
//! the way; this resolves them once it has passed the key.

use super::{malformed, Cursor};
use crate::db::scan::tombstone_skipping::under_range_tombstones;
use crate::db::ttl::judge;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, user_key, ValueKind};
use crate::merge_operator::resolve;

/// The operands of one key, in the order gathered, in buffers kept for the next key.
#[derive(Default)]
pub(super) struct Operands {
    buffers: Vec<Vec<u8>>,
    len: usize,
}

impl Operands {
    pub(super) fn clear(&mut self) {
        self.len = 0;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn push(&mut self, operand: &[u8]) {
        if self.len == self.buffers.len() {
            self.buffers.push(Vec::new());
        }
        let b = &mut self.buffers[self.len];
        b.clear();
        b.extend_from_slice(operand);
        self.len += 1;
    }

    /// The operands, as gathered.
    fn gathered(&self) -> impl Iterator<Item = &[u8]> {
        self.buffers[..self.len].iter().map(Vec::as_slice)
    }
}

impl Cursor {
    /// Resolves the key of the operand the merge is on (the newest visible version of its key,
    /// see the module docs), leaving the cursor on the result.
    ///
    /// # Errors
    /// As `resolve`, or `Error::Corruption` for a malformed entry met on the way.
    pub(super) fn resolve_forward(&mut self) -> Result<()> {
        let Some(it) = self.merged.as_mut() else {
            return Ok(());
        };
        self.saved_key.clear();
        self.saved_key.extend_from_slice(user_key(it.key()));
        self.operands.clear();
        self.operands.push(it.value());
        let mut base = false;
        it.next()?;
        while it.valid() {
            let Some(p) = parse_internal_key(it.key()) else {
                return Err(malformed(&self.inner.dir));
            };
            if p.user_key != self.saved_key.as_slice() {
                break;
            }
            if p.seq <= self.sequence {
                let (kind, stamp) =
                    judge(self.sources.expiry, p.kind, it.value(), &self.inner.dir)?;
                let age = || it.current_child().map_or(0, |c| self.child_ages[c]);
                let (kind, _) =
                    under_range_tombstones(&self.range_tombstones, &p, kind, self.sequence, age);
                match kind {
                    ValueKind::Merge => self.operands.push(it.value()),
                    ValueKind::Value => {
                        let v = it.value();
                        self.saved_value.clear();
                        self.saved_value.extend_from_slice(&v[..v.len() - stamp]);
                        base = true;
                        break;
                    }
                    // A tombstone, or a range tombstone or expiry made one: nothing beneath.
                    _ => break,
                }
            }
            it.next()?;
        }
        // Gathered newest first.
        self.resolve_gathered(true, base.then_some(self.saved_value.len()))?;
        self.valid = true;
        self.resolved = true;
        Ok(())
    }

    /// Resolves the operands `find_prev_user_entry` gathered (oldest first) for `saved_key`, on
    /// the value in `saved_value` if `base`, into `saved_value`.
    ///
    /// # Errors
    /// As `resolve`.
    pub(super) fn resolve_backward(&mut self, base: bool) -> Result<()> {
        let base = base.then(|| self.saved_value.len() - self.stamp);
        self.resolve_gathered(false, base)
    }

    /// Resolves the operands gathered (`newest_first`, or oldest first) for `saved_key` on the
    /// first `base` bytes of `saved_value` (if given), into `saved_value`.
    ///
    /// # Errors
    /// As `resolve`.
    fn resolve_gathered(&mut self, newest_first: bool, base: Option<usize>) -> Result<()> {
        let mut operands: Vec<&[u8]> = self.operands.gathered().collect();
        if newest_first {
            operands.reverse();
        }
        let (operator, keyspace) = &self.sources.merging;
        let value = resolve(
            operator.as_ref(),
            (&self.inner.dir, keyspace),
            &self.saved_key,
            base.map(|len| &self.saved_value[..len]),
            &operands,
        )?;
        self.saved_value = value;
        self.stamp = 0;
        Ok(())
    }
}

//! Merge writes: `Db::merge`, and the check every write holding merge operands passes, that each
//! keyspace it merges into has a merge operator (`merge_operator.rs`).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::key::ValueKind;
use crate::merge_operator::no_operator;
use crate::write_batch::{BatchEntries, WriteBatch};

impl Db {
    /// Adds merge operand `operand` to `key`: the keyspace's
    /// [`MergeOperator`](crate::MergeOperator) combines it, when the key is read (and when
    /// compaction rewrites it), with the operands and the value written before it. No read is
    /// made: a counter increment or a list append is one write, however many writers share the
    /// key, and never a [conflict](crate::Error::Conflict).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use siftdb::{Append, Db, Options};
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default().merge_operator(Arc::new(Append::new("|"))))?;
    /// db.put("log", "opened")?;
    /// db.merge("log", "read")?;
    /// db.merge("log", "closed")?;
    /// assert_eq!(db.get("log")?, Some(b"opened|read|closed".to_vec()));
    /// db.delete("log")?; // a delete ends the chain: later operands start afresh
    /// db.merge("log", "reopened")?;
    /// assert_eq!(db.get("log")?, Some(b"reopened".to_vec()));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` if the keyspace has no merge operator
    /// ([`Options::merge_operator`](crate::Options::merge_operator)); otherwise as
    /// [`put`](Db::put).
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let (key, operand) = (key.as_ref(), operand.as_ref());
        let mut b = WriteBatch::with_capacity(16 + key.len() + operand.len());
        b.merge_to(self.target(), key, operand);
        self.write(b)
    }

    /// `Ok` unless `batch` (its entries targeted already) merges into a keyspace without a merge
    /// operator.
    ///
    /// # Errors
    /// `Error::InvalidArgument` naming that keyspace.
    pub(super) fn check_merge_operators(&self, batch: &WriteBatch) -> Result<()> {
        if !batch.has_merges() {
            return Ok(());
        }
        let tree_of = |id: u32| match id == self.tree.id {
            true => Some(Arc::clone(&self.tree)),
            false => {
                let st = self.inner.state.lock();
                st.trees.get(&id).map(|t| Arc::clone(&t.tree))
            }
        };
        // A keyspace that is gone is refused further on, as for every write.
        let lacking = |id: u32| tree_of(id).filter(|t| t.options().merge_operator.is_none());
        // Usually every keyspace the batch writes to has an operator: no need to decode it.
        if batch.keyspaces().all(|id| lacking(id).is_none()) {
            return Ok(());
        }
        let malformed = || Error::InvalidArgument("malformed write batch".into());
        let mut ids = BTreeSet::new();
        for e in BatchEntries::new(batch.encoded()).ok_or_else(malformed)? {
            let e = e.ok_or_else(malformed)?;
            if e.kind == ValueKind::Merge {
                ids.insert(e.keyspace);
            }
        }
        if let Some(tree) = ids.into_iter().find_map(lacking) {
            return Err(no_operator(&tree.name));
        }
        Ok(())
    }
}

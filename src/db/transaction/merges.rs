//! A transaction's merges: buffered as operands on top of what it wrote to the key before (or
//! of the snapshot's value), resolved by the keyspace's merge operator when the transaction
//! reads the key, and committed as merge operands. A merge reads nothing, so it joins the commit's
//! check as every write does, and no more (as in RocksDB).

use super::{Transaction, Write};
use crate::db::{Db, Keyspace, Snapshot};
use crate::error::Result;
use crate::merge_operator::{no_operator, resolve};

impl Transaction {
    /// Adds merge operand `operand` to `key` in the transaction's keyspace when it commits (see
    /// [`Db::merge`]). Its own reads see the key merged.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use siftdb::{Db, Options, U64Add};
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default().merge_operator(Arc::new(U64Add)))?;
    /// db.put("stock", 10u64.to_le_bytes())?;
    /// let mut txn = db.transaction();
    /// txn.merge("stock", 5u64.to_le_bytes())?;
    /// assert_eq!(txn.get("stock")?, Some(15u64.to_le_bytes().to_vec()));
    /// txn.commit()?;
    /// assert_eq!(db.get("stock")?, Some(15u64.to_le_bytes().to_vec()));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `Error::InvalidArgument` if the keyspace has no merge operator, or as
    /// [`put`](Self::put).
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let db = self.db.clone();
        self.buffer_merge(&db, key.as_ref(), operand.as_ref())
    }

    /// [`merge`](Self::merge) into `keyspace`.
    ///
    /// # Errors
    /// As [`merge`](Self::merge); `Error::InvalidArgument` for a keyspace of another store.
    pub fn merge_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.check_store(keyspace)?;
        self.buffer_merge(keyspace, key.as_ref(), operand.as_ref())
    }

    /// Buffers operand `operand` of `key` in the keyspace of `db`, on what the transaction
    /// wrote to it before.
    fn buffer_merge(&mut self, db: &Db, key: &[u8], operand: &[u8]) -> Result<()> {
        if db.tree.options().merge_operator.is_none() {
            return Err(no_operator(&db.tree.name));
        }
        let id = db.tree.id;
        let under = match self.writes.remove(&(id, key.to_vec())) {
            Some(Write::Merge {
                under,
                mut operands,
            }) => {
                operands.push(operand.to_vec());
                return self.buffer(id, key, Write::Merge { under, operands });
            }
            Some(w) => Some(Box::new(w)),
            // Under one of its own range deletions, the key starts afresh.
            None if self.covers(id, key) => Some(Box::new(Write::Delete)),
            None => None,
        };
        let operands = vec![operand.to_vec()];
        self.buffer(id, key, Write::Merge { under, operands })
    }

    /// Whether one of the transaction's range deletions covers `key` of keyspace `id`.
    fn covers(&self, id: u32, key: &[u8]) -> bool {
        self.deleted.iter().any(|(ks, start, end)| {
            *ks == id && key >= start.as_slice() && end.as_deref().is_none_or(|e| key < e)
        })
    }
}

/// What a transaction's read of `key` (in the keyspace of `db`) sees of its write `write`: the
/// value, `None` for a delete, operands resolved on the write beneath them or, if none, on the
/// snapshot's value (`read_snapshot` reads it, and records the read).
///
/// # Errors
/// As [`Db::get_at`]; `Error::InvalidArgument` or `Error::Corruption` as a read of operands.
pub(super) fn seen(
    db: &Db,
    key: &[u8],
    write: &Write,
    read_snapshot: impl FnOnce() -> Result<Option<Vec<u8>>>,
) -> Result<Option<Vec<u8>>> {
    let (under, operands) = match write {
        Write::Put(v) | Write::PutWithTtl(v, _) => return Ok(Some(v.clone())),
        Write::Delete => return Ok(None),
        Write::Merge { under, operands } => (under, operands),
    };
    let base = match under.as_deref() {
        Some(Write::Put(v) | Write::PutWithTtl(v, _)) => Some(v.clone()),
        Some(Write::Delete) => None,
        // A merge is never beneath another: a merge on a merge joins its operands.
        Some(Write::Merge { .. }) | None => read_snapshot()?,
    };
    let operands: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
    let operator = db.tree.options().merge_operator.clone();
    resolve(
        operator.as_ref(),
        (&db.inner.dir, &db.tree.name),
        key,
        base.as_deref(),
        &operands,
    )
    .map(Some)
}

/// A key a transaction wrote and what its reads see of it (`None`: deleted).
pub(super) type OwnEntry = (Vec<u8>, Option<Vec<u8>>);

/// The transaction's own writes to keyspace `id` of `db` among `writes`, in `lo..` up to `end`,
/// as its scans see them (operands resolved on the snapshot's values).
///
/// # Errors
/// As [`seen`].
pub(super) fn own_in_range<'w>(
    db: &Db,
    snapshot: &Snapshot,
    writes: impl Iterator<Item = (&'w Vec<u8>, &'w Write)>,
) -> Result<Vec<OwnEntry>> {
    writes
        .map(|(k, w)| Ok((k.clone(), seen(db, k, w, || db.get_at(snapshot, k))?)))
        .collect()
}

//! Point reads of a key whose newest visible version is a merge operand: the Get walk stops at
//! the first entry it finds, so such a key is read again by a [`Cursor`] over that key alone, in
//! the same super-version and at the same sequence, which gathers every operand down to the
//! first version that is not one and resolves them (`cursor/operands.rs`). So `get`,
//! `get_pinned`, `multi_get` and their snapshot forms resolve operands exactly as scans do; the
//! cost is a seek of every memtable and every table whose range holds the key.

use std::ops::Bound;
use std::sync::Arc;

use super::cursor::Cursor;
use super::sources::Sources;
use crate::db::tree::SuperVersion;
use crate::db::Db;
use crate::error::Result;

impl Db {
    /// The value of `key` at `seq` in `sv` (this handle's keyspace's super-version), its merge
    /// operands resolved.
    ///
    /// # Errors
    /// As a cursor's seek; `Error::InvalidArgument` if the keyspace has no merge operator,
    /// `Error::Corruption` if the operator refuses the operands.
    pub(crate) fn read_merged(
        &self,
        sv: &Arc<SuperVersion>,
        key: &[u8],
        seq: u64,
    ) -> Result<Option<Vec<u8>>> {
        let (lower, upper) = (Bound::Included(key.to_vec()), Bound::Included(key.to_vec()));
        let sources = Sources::for_range(Arc::clone(sv), &self.tree, &lower, &upper, |_| Ok(true))?;
        let mut cursor = Cursor::new(&self.inner, sources, seq).bounded(lower, upper);
        cursor.seek(key)?;
        Ok(cursor.valid().then(|| cursor.value().to_vec()))
    }
}

//! Merge operators: writes that say how to change a value rather than what it is (RocksDB's
//! `MergeOperator`, sled's `merge`). [`Db::merge`](crate::Db::merge) writes an *operand*; every
//! read resolves the operands of its key, newest last, against the version below them (a value,
//! or nothing: a delete, a range delete, an expired value or the bottom of the tree) with the
//! keyspace's [`MergeOperator`]; flushes and compactions combine them the same way so that a key
//! read often does not keep a long chain. Built-in operators: [`U64Add`], [`Append`].
//!
//! The internal side, [`resolve`], is what every read path calls once it has gathered a chain.

mod builtin;

use std::sync::Arc;

use crate::error::{Error, Result};

pub use builtin::{Append, U64Add};

/// How a keyspace combines merge operands (written by [`Db::merge`](crate::Db::merge) and its
/// batch and transaction forms) with the value beneath them. Set with
/// [`Options::merge_operator`](crate::Options::merge_operator).
///
/// Operands are resolved lazily: a read of a key gathers its operands, newest last, down to the
/// first version that is not one (a value, a delete, a range delete, an expired value, or
/// nothing at all), and calls [`full_merge`](Self::full_merge) with them; flushes and compactions
/// call it too once a key's operands reach such a version, and
/// [`partial_merge`](Self::partial_merge) otherwise. Both must be deterministic functions of
/// their arguments: a key must read the same whichever of them ran first. A live snapshot is
/// never merged across: what it sees stays as it was.
///
/// The operator is recorded by [`name`](Self::name) in a keyspace's options, so a store reopened
/// without an operator of that name refuses to open the keyspace (`Error::InvalidArgument`
/// naming it). The default keyspace takes the options the store is opened with: there a read of
/// a key holding operands fails with `Error::InvalidArgument` if no operator is set.
///
/// ```
/// use std::sync::Arc;
/// use siftdb::{Db, Options, U64Add};
///
/// # fn main() -> siftdb::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default().merge_operator(Arc::new(U64Add)))?;
/// for _ in 0..3 {
///     db.merge("visits", 1u64.to_le_bytes())?; // no read: a write of 8 bytes
/// }
/// assert_eq!(db.get("visits")?, Some(3u64.to_le_bytes().to_vec()));
/// # Ok(()) }
/// ```
pub trait MergeOperator: Send + Sync {
    /// The operator's name, recorded in the keyspace's options: a reopened store must be given
    /// an operator of this name. Change it whenever the meaning of the operands changes.
    fn name(&self) -> &str;

    /// The value of `key` given the version beneath its operands (`existing`, `None` if there is
    /// none) and the operands themselves, oldest first. `None` refuses them (an operand or value
    /// it cannot read): the read returns `Error::Corruption` naming the keyspace and the key,
    /// and compactions keep the operands as they are, so nothing is lost.
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Option<Vec<u8>>;

    /// One operand that does what `operands` (two or more, oldest first) do together, used by
    /// flushes and compactions when the version beneath them is not in reach; `None` (the
    /// default) keeps them as they are.
    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        let _ = (key, operands);
        None
    }
}

/// The value of `key` in keyspace `keyspace` (of the store in `dir`) given what lies beneath its
/// operands and the operands, oldest first, by `operator`.
///
/// # Errors
/// `Error::InvalidArgument` if the keyspace has no merge operator; `Error::Corruption` naming the
/// store's directory if the operator refuses the operands.
pub(crate) fn resolve(
    operator: Option<&Arc<dyn MergeOperator>>,
    (dir, keyspace): (&std::path::Path, &str),
    key: &[u8],
    existing: Option<&[u8]>,
    operands: &[&[u8]],
) -> Result<Vec<u8>> {
    let Some(operator) = operator else {
        return Err(no_operator(keyspace));
    };
    operator.full_merge(key, existing, operands).ok_or_else(|| {
        Error::corruption(
            dir,
            format!(
                "keyspace {keyspace}: merge operator {} refused the operands of key {}",
                operator.name(),
                String::from_utf8_lossy(key)
            ),
        )
    })
}

/// The error for merge operands in a keyspace without a merge operator.
pub(crate) fn no_operator(keyspace: &str) -> Error {
    Error::InvalidArgument(format!(
        "keyspace {keyspace} has no merge operator (Options::merge_operator): it cannot take or \
         read merge operands"
    ))
}

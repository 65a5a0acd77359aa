//! [`PinnedValue`]: a value read without copying it out of the block that holds it.

use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

use crate::sst::block::Block;

/// A value returned by [`Db::get_pinned`](crate::Db::get_pinned): a view of the bytes inside the
/// cached data block that holds it (the block stays alive, in memory, as long as the view does),
/// or the value itself when it came from a memtable. Dereferences to `[u8]`.
///
/// ```
/// # fn main() -> siftdb::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
/// db.put(b"k", vec![7u8; 4096])?;
/// db.flush()?;
/// let v = db.get_pinned(b"k")?.expect("written");
/// assert_eq!(v.len(), 4096);
/// assert_eq!(&v[..2], &[7, 7]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PinnedValue(Pinned);

#[derive(Clone)]
enum Pinned {
    /// A range of a data block.
    InBlock(Arc<Block>, Range<usize>),
    /// A memtable's copy.
    Owned(Vec<u8>),
}

impl PinnedValue {
    /// The value at `range` of `block`.
    pub(crate) fn in_block(block: &Arc<Block>, range: Range<usize>) -> PinnedValue {
        PinnedValue(Pinned::InBlock(Arc::clone(block), range))
    }

    /// A value held on its own.
    pub(crate) fn owned(value: Vec<u8>) -> PinnedValue {
        PinnedValue(Pinned::Owned(value))
    }

    /// Keeps the first `len` bytes (all of them if it is shorter).
    pub(crate) fn truncate(&mut self, len: usize) {
        match &mut self.0 {
            Pinned::InBlock(_, range) => range.end = range.end.min(range.start.saturating_add(len)),
            Pinned::Owned(v) => v.truncate(len),
        }
    }
}

impl Deref for PinnedValue {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Pinned::InBlock(block, range) => block.bytes(range.clone()),
            Pinned::Owned(v) => v,
        }
    }
}

impl AsRef<[u8]> for PinnedValue {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl PartialEq<[u8]> for PinnedValue {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl fmt::Debug for PinnedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PinnedValue({} bytes)", self.len())
    }
}

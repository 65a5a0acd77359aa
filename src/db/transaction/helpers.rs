//! Read-modify-write helpers on transactions, retried on conflict: `Db::update` and
//! `Db::compare_and_swap`. On a [`Keyspace`](crate::Keyspace) handle they act on its keyspace.

use crate::db::Db;
use crate::error::Result;

impl Db {
    /// Sets `key` to what `f` makes of its current value (`None`: absent; `f` returning `None`
    /// deletes it), atomically: in a [`Transaction`](crate::Transaction) run again, with the newer
    /// value, for as long as it meets a conflict (each conflict means another write to the key
    /// committed, so the store as a whole always progresses). `f` may therefore run several
    /// times. If `f` returns the value unchanged, nothing is written. Returns the new value. On
    /// a [`Keyspace`](crate::Keyspace) it acts on that keyspace (`users.update(..)`).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// let add_one = |old: Option<&[u8]>| {
    ///     let n = old.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap_or([0; 8])));
    ///     Some((n + 1).to_be_bytes().to_vec())
    /// };
    /// db.update("hits", add_one)?;
    /// let hits = db.update("hits", add_one)?;
    /// assert_eq!(hits, Some(2u64.to_be_bytes().to_vec()));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Transaction::commit`](crate::Transaction::commit), but never `Error::Conflict`.
    pub fn update<F>(&self, key: impl AsRef<[u8]>, mut f: F) -> Result<Option<Vec<u8>>>
    where
        F: FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        let key = key.as_ref();
        loop {
            let mut tx = self.transaction();
            let old = tx.get(key)?;
            let new = f(old.as_deref());
            if new != old {
                match &new {
                    Some(v) => tx.put(key, v),
                    None => tx.delete(key),
                }
            }
            match tx.commit() {
                Err(e) if e.is_conflict() => std::thread::yield_now(),
                Err(e) => return Err(e),
                Ok(()) => return Ok(new),
            }
        }
    }

    /// Sets `key` to `new` (`None` deletes it) if its current value is `expected` (`None`:
    /// absent), atomically. Returns whether it did; `false` leaves the store unchanged. A
    /// conflict with a concurrent write is retried against the newer value, so `false` means the
    /// value really differed.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// assert!(db.compare_and_swap("leader", None, Some(b"node-1"))?); // was absent
    /// assert!(!db.compare_and_swap("leader", None, Some(b"node-2"))?); // taken
    /// assert!(db.compare_and_swap("leader", Some(b"node-1"), None)?); // released
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`update`](Db::update).
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        let mut swapped = false;
        self.update(key, |old| {
            swapped = old == expected;
            if swapped {
                new.map(<[u8]>::to_vec)
            } else {
                old.map(<[u8]>::to_vec)
            }
        })?;
        Ok(swapped)
    }
}

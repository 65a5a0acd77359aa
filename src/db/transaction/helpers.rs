//! Read-modify-write helpers on transactions, retried on conflict: `Db::update`,
//! `Db::try_update`, `Db::compare_and_swap` and `Db::transaction_with`. On a
//! [`Keyspace`](crate::Keyspace) handle they act on its keyspace.

use super::Transaction;
use crate::db::Db;
use crate::error::{Error, Result};

impl Db {
    /// Sets `key` to what `f` makes of its current value (`None`: absent), atomically: in a
    /// [`Transaction`] run again, with the newer value, for as long as it meets a conflict (each
    /// conflict means another write to the key committed, so the store as a whole always
    /// progresses). `f` may therefore run several times. If `f` returns the value unchanged,
    /// nothing is written. Returns the new value. On a [`Keyspace`](crate::Keyspace) it acts on
    /// that keyspace (`users.update(..)`).
    ///
    /// **`f` returning `None` deletes the key.** A closure that may fail (one that parses the
    /// old value, say) belongs in [`try_update`](Db::try_update), whose `Err` writes nothing:
    /// here, `?` on an `Option` inside `f` would delete the key.
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
    /// As [`Transaction::commit`], but never `Error::Conflict`.
    pub fn update<F>(&self, key: impl AsRef<[u8]>, mut f: F) -> Result<Option<Vec<u8>>>
    where
        F: FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        self.try_update(key, |old| Ok::<_, Error>(f(old)))
    }

    /// [`update`](Db::update) with a closure that may fail: `Ok(Some(v))` sets the key to `v`,
    /// `Ok(None)` deletes it, and `Err(e)` writes nothing and returns `e` as it is. The error is
    /// the caller's own type, which only has to take siftdb's errors in (`E: From<Error>`), so
    /// an app's error enum passes through without boxing.
    ///
    /// ```
    /// #[derive(Debug)]
    /// enum AppError {
    ///     NotANumber,
    ///     Store(siftdb::Error),
    /// }
    /// impl From<siftdb::Error> for AppError {
    ///     fn from(e: siftdb::Error) -> Self {
    ///         AppError::Store(e)
    ///     }
    /// }
    ///
    /// # fn main() -> Result<(), AppError> {
    /// # let dir = tempfile::tempdir().map_err(siftdb::Error::from)?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("visits", "forty-one")?;
    /// let bump = |old: Option<&[u8]>| -> Result<Option<String>, AppError> {
    ///     let text = std::str::from_utf8(old.unwrap_or(b"0")).map_err(|_| AppError::NotANumber)?;
    ///     let n: u64 = text.parse().map_err(|_| AppError::NotANumber)?;
    ///     Ok(Some((n + 1).to_string()))
    /// };
    /// assert!(matches!(db.try_update("visits", bump), Err(AppError::NotANumber)));
    /// assert_eq!(db.get("visits")?, Some(b"forty-one".to_vec())); // untouched
    /// db.put("visits", "41")?;
    /// assert_eq!(db.try_update("visits", bump)?, Some(b"42".to_vec()));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `f`'s own error, unchanged; otherwise as [`update`](Db::update), converted into `E`.
    pub fn try_update<V, E, F>(
        &self,
        key: impl AsRef<[u8]>,
        mut f: F,
    ) -> std::result::Result<Option<Vec<u8>>, E>
    where
        V: Into<Vec<u8>>,
        E: From<Error>,
        F: FnMut(Option<&[u8]>) -> std::result::Result<Option<V>, E>,
    {
        let key = key.as_ref();
        loop {
            let mut tx = self.transaction();
            let old = tx.get(key)?;
            // An `Err` returns here: the transaction, which wrote nothing, is dropped.
            let new = f(old.as_deref())?.map(Into::into);
            if new != old {
                match &new {
                    Some(v) => tx.put(key, v)?,
                    None => tx.delete(key)?,
                }
            }
            match tx.commit() {
                Err(e) if e.is_conflict() => std::thread::yield_now(),
                Err(e) => return Err(e.into()),
                Ok(()) => return Ok(new),
            }
        }
    }

    /// Runs `f` in a [`Transaction`] and commits what it wrote, in the style of redb's and
    /// sled's transaction closures: `f` returns `Ok(value)` to commit, or its own error to roll
    /// back (nothing it wrote is applied) and return that error as it is. A commit that meets
    /// an [`Error::Conflict`] runs `f` again in a new transaction, up to
    /// [`Options::transaction_retries`](crate::Options::transaction_retries) times (default
    /// 10), then returns the last conflict. `f` may therefore run several times: keep effects
    /// outside the store out of it.
    ///
    /// The error type is the caller's, which only has to take siftdb's errors in
    /// (`E: From<siftdb::Error>`), so `?` works on both inside `f`.
    ///
    /// ```
    /// #[derive(Debug)]
    /// enum TransferError {
    ///     InsufficientFunds { balance: u64 },
    ///     Store(siftdb::Error),
    /// }
    /// impl From<siftdb::Error> for TransferError {
    ///     fn from(e: siftdb::Error) -> Self {
    ///         TransferError::Store(e)
    ///     }
    /// }
    ///
    /// # fn main() -> Result<(), TransferError> {
    /// # let dir = tempfile::tempdir().map_err(siftdb::Error::from)?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// let balance = |v: Option<Vec<u8>>| v.map_or(0, |b| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])));
    /// db.put("alice", 50u64.to_be_bytes())?;
    /// let transfer = |amount: u64| {
    ///     db.transaction_with(|tx| {
    ///         let from = balance(tx.get("alice")?);
    ///         if from < amount {
    ///             return Err(TransferError::InsufficientFunds { balance: from });
    ///         }
    ///         let to = balance(tx.get("bob")?);
    ///         tx.put("alice", (from - amount).to_be_bytes())?;
    ///         tx.put("bob", (to + amount).to_be_bytes())?;
    ///         Ok(to + amount)
    ///     })
    /// };
    /// assert_eq!(transfer(30)?, 30);
    /// assert!(matches!(transfer(30), Err(TransferError::InsufficientFunds { balance: 20 })));
    /// assert_eq!(balance(db.get("bob")?), 30); // the refused transfer wrote nothing
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `f`'s own error, unchanged (the transaction rolled back); `Error::Conflict` once the
    /// retries are used up; otherwise as [`Transaction::commit`], converted into `E`.
    pub fn transaction_with<T, E, F>(&self, mut f: F) -> std::result::Result<T, E>
    where
        E: From<Error>,
        F: FnMut(&mut Transaction) -> std::result::Result<T, E>,
    {
        let mut retries = self.inner.options.transaction_retries;
        loop {
            let mut tx = self.transaction();
            let value = match f(&mut tx) {
                Ok(value) => value,
                Err(e) => {
                    tx.rollback();
                    return Err(e);
                }
            };
            match tx.commit() {
                Ok(()) => return Ok(value),
                Err(e) if e.is_conflict() && retries > 0 => {
                    retries -= 1;
                    std::thread::yield_now();
                }
                Err(e) => return Err(e.into()),
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

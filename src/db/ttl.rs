//! Time to live ([`Options::ttl`]): the write time stamped on every value of a keyspace with a
//! TTL, and the expiry every read judges by it.
//!
//! The stored value is the user's value followed by its write time (byte layout:
//! `docs/table_format.md`, *Values of a keyspace with a time to live*). It is stamped once, as
//! the group commit logs the batch ([`stamp_write_times`]), so the WAL, the memtable and the
//! tables hold the same time and recovery restores it. Reads treat an expired value as a
//! tombstone (its key is absent; an older version does not show through) and return the others
//! without the stamp; compaction removes expired values (`compaction_filtering.rs`). A keyspace
//! without a TTL pays one branch on its options per read.

use std::path::Path;
use std::time::Duration;

use super::tree::Tree;
use crate::clock::unix_seconds;
use crate::error::{Error, Result};
use crate::key::ValueKind;
use crate::memtable::NewestEntry;
use crate::options::Options;
use crate::pinned_value::PinnedValue;
use crate::write_batch::{BatchEntries, WriteBatch};

/// Bytes of the write time at the end of each stored value.
pub(crate) const WRITE_TIME_BYTES: usize = 4;

/// `ttl` in whole seconds, rounded up (as the MANIFEST records it and expiry counts it).
pub(crate) fn ttl_seconds(ttl: Duration) -> u64 {
    ttl.as_secs()
        .saturating_add(u64::from(ttl.subsec_nanos() > 0))
}

/// Appends write time `seconds` (since the Unix epoch) to `value`.
pub(crate) fn append_write_time(value: &mut Vec<u8>, seconds: u32) {
    value.extend_from_slice(&seconds.to_le_bytes());
}

/// The user's value and the write time of a stored value; `None` if it is too short to hold one.
pub(crate) fn split_write_time(stored: &[u8]) -> Option<(&[u8], u32)> {
    let at = stored.len().checked_sub(WRITE_TIME_BYTES)?;
    let (value, time) = stored.split_at(at);
    Some((value, u32::from_le_bytes(time.try_into().ok()?)))
}

/// The error for a stored value of a keyspace with a TTL that holds no write time.
pub(crate) fn missing_write_time(dir: &Path, keyspace: &str) -> Error {
    Error::corruption(
        dir,
        format!(
            "a value of keyspace {keyspace}, which has a ttl, is too short to hold its write time"
        ),
    )
}

/// Refuses a time to live on the default keyspace, whose options the store does not record: a
/// reopen could not tell its values' layout.
///
/// # Errors
/// `Error::InvalidArgument` if `options` (the default keyspace's) have a TTL.
pub(crate) fn check_no_default_ttl(options: &Options) -> Result<()> {
    if options.ttl.is_some() {
        return Err(Error::InvalidArgument(
            "the default keyspace cannot have a ttl (its options are not recorded): open a \
             keyspace with it through Db::keyspace_with"
                .into(),
        ));
    }
    Ok(())
}

/// Which values a read (or a compaction) judges expired: those of a keyspace with a TTL written at
/// or before a second fixed when the read began. `Copy`, so a cursor keeps its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// The keyspace has no TTL: values are stored as written.
    Never,
    /// Values carry their write time; those written at or before `cutoff` have expired (`None`:
    /// none have, the clock is not yet a TTL past the epoch).
    Stamped { cutoff: Option<u64> },
}

impl Expiry {
    /// The expiry of a keyspace with `options`, as of its clock's time now.
    pub(crate) fn now(options: &Options) -> Expiry {
        match options.ttl {
            None => Expiry::Never,
            Some(ttl) => {
                let now = u64::from(unix_seconds(options.clock.as_ref()));
                Expiry::Stamped {
                    cutoff: now.checked_sub(ttl_seconds(ttl)),
                }
            }
        }
    }

    /// Whether a value written at `seconds` has expired (written + ttl ≤ now).
    pub(crate) fn expired(self, seconds: u32) -> bool {
        match self {
            Expiry::Never => false,
            Expiry::Stamped { cutoff } => cutoff.is_some_and(|c| u64::from(seconds) <= c),
        }
    }

    /// What a read sees of an entry of `kind` whose stored value is `stored`: an expired value is
    /// a tombstone. `None` for a value too short to hold its write time.
    #[inline]
    pub(crate) fn visible_kind(self, kind: ValueKind, stored: &[u8]) -> Option<ValueKind> {
        if self == Expiry::Never || kind != ValueKind::Value {
            return Some(kind);
        }
        let (_, written) = split_write_time(stored)?;
        Some(if self.expired(written) {
            ValueKind::Deletion
        } else {
            kind
        })
    }

    /// The user's value of a stored value (of a value entry [`visible_kind`](Self::visible_kind)
    /// accepted).
    #[inline]
    pub(crate) fn user_value(self, stored: &[u8]) -> &[u8] {
        match self {
            Expiry::Never => stored,
            Expiry::Stamped { .. } => &stored[..stored.len().saturating_sub(WRITE_TIME_BYTES)],
        }
    }
}

/// What a cursor sees of an entry of `kind` whose stored value is `stored` (see
/// [`Expiry::visible_kind`]).
///
/// # Errors
/// `Error::Corruption` naming the store's directory `dir` for a value too short to hold its write
/// time.
#[inline]
pub(crate) fn visible_kind(
    expiry: Expiry,
    kind: ValueKind,
    stored: &[u8],
    dir: &Path,
) -> Result<ValueKind> {
    expiry.visible_kind(kind, stored).ok_or_else(|| {
        Error::corruption(
            dir,
            "a value of a keyspace with a ttl is too short to hold its write time",
        )
    })
}

/// A value a Get returns (copied or pinned), whose write time can be read and cut off.
pub(crate) trait StoredValue {
    fn stored(&self) -> &[u8];
    fn cut_to(&mut self, len: usize);
}

impl StoredValue for Vec<u8> {
    fn stored(&self) -> &[u8] {
        self
    }
    fn cut_to(&mut self, len: usize) {
        self.truncate(len);
    }
}

impl StoredValue for PinnedValue {
    fn stored(&self) -> &[u8] {
        self
    }
    fn cut_to(&mut self, len: usize) {
        self.truncate(len);
    }
}

impl Tree {
    /// What a Get of this keyspace found, as the user sees it: with a TTL, an expired value is
    /// absent and a live one loses its write time; without one, `found` itself.
    ///
    /// # Errors
    /// `Error::Corruption` (naming the store's directory `dir`) for a value too short to hold its
    /// write time.
    #[inline(always)]
    pub(crate) fn expire_found<V: StoredValue>(
        &self,
        dir: &Path,
        found: Option<NewestEntry<V>>,
    ) -> Result<Option<NewestEntry<V>>> {
        if self.options.ttl.is_none() {
            return Ok(found);
        }
        let Some(NewestEntry::Value(mut v)) = found else {
            return Ok(found);
        };
        let expiry = Expiry::now(&self.options);
        let (user, written) =
            split_write_time(v.stored()).ok_or_else(|| missing_write_time(dir, &self.name))?;
        if expiry.expired(written) {
            return Ok(Some(NewestEntry::Deleted));
        }
        let len = user.len();
        v.cut_to(len);
        Ok(Some(NewestEntry::Value(v)))
    }

    /// [`expire_found`](Self::expire_found) for the answers of a `multi_get` (`found` counts the
    /// values among them).
    pub(crate) fn expire_answers(
        &self,
        dir: &Path,
        answers: &mut [Result<Option<Vec<u8>>>],
        found: &mut u64,
    ) {
        if self.options.ttl.is_none() {
            return;
        }
        let expiry = Expiry::now(&self.options);
        for answer in answers.iter_mut() {
            let Ok(Some(v)) = answer else {
                continue;
            };
            match split_write_time(v) {
                None => *answer = Err(missing_write_time(dir, &self.name)),
                Some((_, written)) if expiry.expired(written) => *answer = Ok(None),
                Some((user, _)) => {
                    let len = user.len();
                    v.truncate(len);
                    continue;
                }
            }
            *found = found.saturating_sub(1);
        }
    }
}

/// Stamps the current time on the values that the batches of a commit group write to keyspaces
/// with a TTL, before the group is logged: `trees` are the keyspaces the group writes to. Returns
/// the bytes added. A group that writes to no keyspace with a TTL is left as it is, at the cost of
/// a look at each keyspace's options.
pub(crate) fn stamp_write_times<'a>(
    batches: impl Iterator<Item = &'a mut WriteBatch>,
    trees: impl Iterator<Item = &'a Tree>,
) -> u64 {
    let mut stamped: Vec<u32> = Vec::new();
    let mut clock = None;
    for tree in trees {
        if tree.options.ttl.is_some() {
            stamped.push(tree.id);
            clock = Some(&tree.options.clock);
        }
    }
    let Some(clock) = clock else {
        return 0;
    };
    let now = unix_seconds(clock.as_ref());
    let mut added = 0;
    for batch in batches {
        if !batch.keyspaces().any(|id| stamped.contains(&id)) {
            continue;
        }
        if let Some(b) = stamped_batch(batch, &stamped, now) {
            added += (b.encoded().len() - batch.encoded().len()) as u64;
            *batch = b;
        }
    }
    added
}

/// `batch` with write time `now` appended to each value it writes to a keyspace of `stamped`;
/// `None` if it does not decode (it then fails to apply, as it would have anyway).
fn stamped_batch(batch: &WriteBatch, stamped: &[u32], now: u32) -> Option<WriteBatch> {
    let entries = BatchEntries::new(batch.encoded())?;
    let store = batch.store().ok().flatten()?;
    let extra = WRITE_TIME_BYTES * batch.len();
    let mut out = WriteBatch::with_capacity(batch.encoded().len() + extra);
    let mut value = Vec::new();
    for e in entries {
        let e = e?;
        // Every kind of entry is named, so that a new kind is a decision here.
        match e.kind {
            ValueKind::Value if stamped.contains(&e.keyspace) => {
                value.clear();
                value.extend_from_slice(e.value);
                append_write_time(&mut value, now);
                out.put_to(e.keyspace, store, e.key, &value);
            }
            ValueKind::Value => {
                out.put_to(e.keyspace, store, e.key, e.value);
            }
            ValueKind::Deletion => {
                out.delete_to(e.keyspace, store, e.key);
            }
            // A range deletion's value is its end key, not a value to stamp.
            ValueKind::RangeDeletion => {
                out.delete_range_to(e.keyspace, store, e.key, e.value);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write_batch::decode_batch;

    #[test]
    fn the_write_time_is_four_little_endian_bytes_after_the_value() {
        let mut v = b"value".to_vec();
        append_write_time(&mut v, 0x0102_0304);
        assert_eq!(v, b"value\x04\x03\x02\x01");
        assert_eq!(split_write_time(&v), Some((&b"value"[..], 0x0102_0304)));
        let mut empty = Vec::new();
        append_write_time(&mut empty, u32::MAX);
        assert_eq!(split_write_time(&empty), Some((&b""[..], u32::MAX)));
        for short in [&b""[..], b"a", b"abc"] {
            assert_eq!(split_write_time(short), None);
        }
    }

    #[test]
    fn ttls_count_whole_seconds_rounded_up() {
        assert_eq!(ttl_seconds(Duration::from_secs(5)), 5);
        assert_eq!(ttl_seconds(Duration::from_millis(5_001)), 6);
        assert_eq!(ttl_seconds(Duration::from_nanos(1)), 1);
        assert_eq!(ttl_seconds(Duration::MAX), u64::MAX);
    }

    #[test]
    fn a_value_expires_a_ttl_after_its_write_time() {
        let expiry = Expiry::Stamped { cutoff: Some(100) };
        assert!(expiry.expired(100));
        assert!(expiry.expired(0));
        assert!(!expiry.expired(101));
        assert!(!Expiry::Stamped { cutoff: None }.expired(0));
        assert!(!Expiry::Never.expired(0));
        let mut live = b"v".to_vec();
        append_write_time(&mut live, 101);
        let mut dead = b"v".to_vec();
        append_write_time(&mut dead, 100);
        assert_eq!(
            expiry.visible_kind(ValueKind::Value, &live),
            Some(ValueKind::Value)
        );
        assert_eq!(
            expiry.visible_kind(ValueKind::Value, &dead),
            Some(ValueKind::Deletion)
        );
        assert_eq!(expiry.visible_kind(ValueKind::Value, b"v"), None);
        assert_eq!(
            expiry.visible_kind(ValueKind::Deletion, b""),
            Some(ValueKind::Deletion)
        );
        assert_eq!(expiry.user_value(&live), b"v");
        assert_eq!(Expiry::Never.user_value(&live), &live[..]);
        assert_eq!(
            Expiry::Never.visible_kind(ValueKind::Value, b""),
            Some(ValueKind::Value)
        );
    }

    #[test]
    fn only_values_of_keyspaces_with_a_ttl_are_stamped() {
        let store = [9u8; 16];
        let mut b = WriteBatch::new();
        b.put(b"d", b"0")
            .put_to(3, store, b"k", b"v")
            .delete_to(3, store, b"gone")
            .put_to(4, store, b"x", b"y");
        let stamped = stamped_batch(&b, &[3], 0x0A0B_0C0D).unwrap();
        assert_eq!(stamped.len(), b.len());
        assert_eq!(stamped.store(), Ok(Some(store)));
        let got: Vec<_> = decode_batch(stamped.encoded())
            .unwrap()
            .iter()
            .map(|e| (e.keyspace, e.kind, e.key.to_vec(), e.value.to_vec()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, ValueKind::Value, b"d".to_vec(), b"0".to_vec()),
                (
                    3,
                    ValueKind::Value,
                    b"k".to_vec(),
                    b"v\x0D\x0C\x0B\x0A".to_vec()
                ),
                (3, ValueKind::Deletion, b"gone".to_vec(), vec![]),
                (4, ValueKind::Value, b"x".to_vec(), b"y".to_vec()),
            ]
        );
    }
}

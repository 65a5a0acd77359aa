//! Time to live: which values expire, when, and how every read judges them.
//!
//! A value that expires is an entry of its own kind (`ValueKind::ExpiringValue`) whose stored
//! value is the user's value followed by its expiry time (byte layout: `docs/table_format.md`,
//! *Values that expire*). The group commit stamps it as it logs the batch
//! (`write/batch_settling.rs`): a put with a time to live of its own (`put_with_ttl`) expires that long
//! after, a plain put in a keyspace with a [`ttl`](Options::ttl) that long after. So the WAL, the
//! memtable and the tables hold the same time, recovery restores it, and a keyspace's TTL may
//! change at any time: it applies to the puts that follow.
//!
//! A keyspace created with a TTL by an older store stores every plain value with its write time
//! instead (`Tree::write_times`, fixed for its life): those expire a TTL (the keyspace's, as it is
//! now) after it.
//!
//! Reads treat an expired value as a tombstone (its key is absent; an older version does not show
//! through) and return the others without the stamp; compaction removes expired values
//! (`compaction/filtering.rs`). A Get in a keyspace without write times tests the kind of the
//! entry it found, once: a plain value is returned as found, without a look at the clock.

use std::path::Path;

use super::tree::Tree;
use crate::clock::unix_seconds;
use crate::error::{Error, Result};
use crate::key::ValueKind;
use crate::memtable::NewestEntry;
use crate::pinned_value::PinnedValue;

/// Bytes of the time (expiry or write time) at the end of a stamped value.
pub(crate) const STAMP_BYTES: usize = 4;

/// The expiry time of a value written at `now` with a time to live of `ttl` seconds; a time past
/// what four bytes hold (the year 2106) is held at the largest.
pub(crate) fn expiry_time(now: u32, ttl: u64) -> u32 {
    u32::try_from(u64::from(now).saturating_add(ttl)).unwrap_or(u32::MAX)
}

/// Appends time `seconds` (since the Unix epoch) to `value`.
pub(crate) fn append_stamp(value: &mut Vec<u8>, seconds: u32) {
    value.extend_from_slice(&seconds.to_le_bytes());
}

/// The user's value and the time stamped after it; `None` if it is too short to hold one.
pub(crate) fn split_stamp(stored: &[u8]) -> Option<(&[u8], u32)> {
    let at = stored.len().checked_sub(STAMP_BYTES)?;
    let (value, time) = stored.split_at(at);
    Some((value, u32::from_le_bytes(time.try_into().ok()?)))
}

/// The error for a stored value of keyspace `keyspace` too short to hold its stamp.
pub(crate) fn missing_stamp(dir: &Path, keyspace: &str) -> Error {
    Error::corruption(
        dir,
        format!("a value of keyspace {keyspace} is too short to hold its expiry or write time"),
    )
}

/// How a read (or a compaction) judges expiry, as of a second fixed when it began. `Copy`, so a
/// cursor keeps its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expiry {
    /// Seconds since the epoch: a value whose expiry time is at or before it has expired.
    now: u64,
    /// Whether plain values carry their write time (`Tree::write_times`).
    write_times: bool,
    /// Those written at or before this have expired (`None`: none has).
    written_by: Option<u64>,
}

impl Expiry {
    /// The expiry of `tree`'s values as of its clock's time now.
    pub(crate) fn of(tree: &Tree) -> Expiry {
        let now = u64::from(unix_seconds(tree.clock.as_ref()));
        let ttl = tree.ttl_seconds();
        Expiry {
            now,
            write_times: tree.write_times,
            written_by: (tree.write_times && ttl > 0)
                .then(|| now.checked_sub(ttl))
                .flatten(),
        }
    }

    /// Whether a value of `kind` stamped with `seconds` has expired: an expiring value at its
    /// expiry time, a value of a keyspace with write times a TTL after it.
    pub(crate) fn expired(self, kind: ValueKind, seconds: u32) -> bool {
        match kind {
            ValueKind::ExpiringValue => u64::from(seconds) <= self.now,
            ValueKind::Value => self.written_by.is_some_and(|c| u64::from(seconds) <= c),
            ValueKind::Deletion | ValueKind::RangeDeletion | ValueKind::Merge => false,
        }
    }

    /// Whether an entry of `kind` carries a stamp: an expiring value, or a value of a keyspace
    /// with write times.
    #[inline]
    pub(crate) fn stamped(self, kind: ValueKind) -> bool {
        kind == ValueKind::ExpiringValue || (kind == ValueKind::Value && self.write_times)
    }

    /// What a read sees of an entry of `kind` whose stored value is `stored`: `Value` (an
    /// expiring value not yet expired too) or `Deletion` (an expired value too), or the kind
    /// itself for the others; and the bytes of stamp to cut from its value. `None` for a
    /// stamped value too short to hold its stamp.
    #[inline]
    pub(crate) fn judge(self, kind: ValueKind, stored: &[u8]) -> Option<(ValueKind, usize)> {
        if !self.stamped(kind) {
            return Some((kind, 0));
        }
        let (_, seconds) = split_stamp(stored)?;
        Some(match self.expired(kind, seconds) {
            true => (ValueKind::Deletion, 0),
            false => (ValueKind::Value, STAMP_BYTES),
        })
    }
}

/// [`Expiry::judge`] for a cursor.
///
/// # Errors
/// `Error::Corruption` naming the store's directory `dir` for a stamped value too short to hold
/// its stamp.
#[inline]
pub(crate) fn judge(
    expiry: Expiry,
    kind: ValueKind,
    stored: &[u8],
    dir: &Path,
) -> Result<(ValueKind, usize)> {
    expiry.judge(kind, stored).ok_or_else(|| {
        Error::corruption(dir, "a value is too short to hold its expiry or write time")
    })
}

/// A value a Get returns (copied or pinned), whose stamp can be read and cut off.
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
    /// What a Get of this keyspace found, as the user sees it: an expired value is deleted, a
    /// live stamped one loses its stamp, anything else is `found` itself. One branch in a
    /// keyspace without write times, unless the entry expires.
    ///
    /// # Errors
    /// `Error::Corruption` (naming the store's directory `dir`) for a stamped value too short to
    /// hold its stamp.
    #[inline(always)]
    pub(crate) fn expire_found<V: StoredValue>(
        &self,
        dir: &Path,
        found: Option<NewestEntry<V>>,
    ) -> Result<Option<NewestEntry<V>>> {
        // `|`, not `||`: both tests in one branch.
        if !(self.write_times | matches!(found, Some(NewestEntry::Expiring(_)))) {
            return Ok(found);
        }
        self.judge_found(dir, found)
    }

    /// [`expire_found`](Self::expire_found) for an entry that may be stamped.
    fn judge_found<V: StoredValue>(
        &self,
        dir: &Path,
        found: Option<NewestEntry<V>>,
    ) -> Result<Option<NewestEntry<V>>> {
        let (mut v, kind) = match found {
            Some(NewestEntry::Expiring(v)) => (v, ValueKind::ExpiringValue),
            Some(NewestEntry::Value(v)) if self.write_times => (v, ValueKind::Value),
            other => return Ok(other),
        };
        let (seen, stamp) = Expiry::of(self)
            .judge(kind, v.stored())
            .ok_or_else(|| missing_stamp(dir, &self.name))?;
        if seen == ValueKind::Deletion {
            return Ok(Some(NewestEntry::Deleted));
        }
        let len = v.stored().len() - stamp;
        v.cut_to(len);
        Ok(Some(NewestEntry::Value(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ttl_seconds;
    use std::time::Duration;

    #[test]
    fn the_stamp_is_four_little_endian_bytes_after_the_value() {
        let mut v = b"value".to_vec();
        append_stamp(&mut v, 0x0102_0304);
        assert_eq!(v, b"value\x04\x03\x02\x01");
        assert_eq!(split_stamp(&v), Some((&b"value"[..], 0x0102_0304)));
        let mut empty = Vec::new();
        append_stamp(&mut empty, u32::MAX);
        assert_eq!(split_stamp(&empty), Some((&b""[..], u32::MAX)));
        for short in [&b""[..], b"a", b"abc"] {
            assert_eq!(split_stamp(short), None);
        }
    }

    #[test]
    fn ttls_count_whole_seconds_rounded_up_and_expiry_times_stop_at_the_largest() {
        assert_eq!(ttl_seconds(Duration::from_secs(5)), 5);
        assert_eq!(ttl_seconds(Duration::from_millis(5_001)), 6);
        assert_eq!(ttl_seconds(Duration::from_nanos(1)), 1);
        assert_eq!(ttl_seconds(Duration::MAX), u64::MAX);
        assert_eq!(expiry_time(100, 30), 130);
        assert_eq!(expiry_time(u32::MAX - 1, 30), u32::MAX);
        assert_eq!(expiry_time(5, u64::MAX), u32::MAX);
    }

    #[test]
    fn an_expiring_value_expires_at_its_time_and_a_written_one_a_ttl_after() {
        let plain = Expiry {
            now: 100,
            write_times: false,
            written_by: None,
        };
        let written = Expiry {
            now: 100,
            write_times: true,
            written_by: Some(90),
        };
        let stamped = |seconds: u32| {
            let mut v = b"v".to_vec();
            append_stamp(&mut v, seconds);
            v
        };
        let (value, expiring) = (ValueKind::Value, ValueKind::ExpiringValue);
        for e in [plain, written] {
            // An expiring value: gone at its expiry time, whatever the keyspace.
            assert_eq!(e.judge(expiring, &stamped(101)), Some((value, STAMP_BYTES)));
            assert_eq!(
                e.judge(expiring, &stamped(100)),
                Some((ValueKind::Deletion, 0))
            );
            assert_eq!(e.judge(expiring, b"v"), None);
            assert_eq!(
                e.judge(ValueKind::Deletion, b""),
                Some((ValueKind::Deletion, 0))
            );
        }
        // A plain value of a keyspace without write times is as written.
        assert_eq!(plain.judge(value, b""), Some((value, 0)));
        assert!(!plain.expired(value, 0));
        // With write times: gone a TTL after its write time.
        assert_eq!(
            written.judge(value, &stamped(91)),
            Some((value, STAMP_BYTES))
        );
        assert_eq!(
            written.judge(value, &stamped(90)),
            Some((ValueKind::Deletion, 0))
        );
        assert_eq!(written.judge(value, b"v"), None);
        let young = Expiry {
            written_by: None,
            ..written
        };
        assert!(!young.expired(value, 0));
    }
}

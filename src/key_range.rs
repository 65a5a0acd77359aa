//! [`KeyRange`]: the ranges of keys [`Db::scan`](crate::Db::scan) accepts.

use std::ops::{Bound, Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// A range of keys, as [`Db::scan`](crate::Db::scan), [`Db::scan_at`](crate::Db::scan_at) and
/// [`Db::delete_range`](crate::Db::delete_range) take it: any of Rust's range expressions over keys of any type that is `AsRef<[u8]>`
/// (`&str`, `String`, `&[u8]`, `Vec<u8>`, `&[u8; N]` …), `..` for every key, or a pair of
/// [`Bound`]s.
///
/// A trait of its own rather than `RangeBounds<K>`: with `RangeBounds`, `..` says nothing about
/// the key type and `"a".."m"` is a range of both `str` and `&str`, so neither compiles.
///
/// ```
/// use std::ops::Bound;
///
/// # fn main() -> siftdb::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
/// for k in ["a", "b", "c", "d"] {
///     db.put(k, k)?;
/// }
/// let count = |range: std::ops::RangeInclusive<&str>| db.scan(range).count();
/// assert_eq!(db.scan(..).count(), 4);
/// assert_eq!(db.scan("b".."d").count(), 2);
/// assert_eq!(count("b"..="d"), 3);
/// assert_eq!(db.scan(b"c".to_vec()..).count(), 2);
/// assert_eq!(db.scan(..&b"b"[..]).count(), 1);
/// assert_eq!(db.scan((Bound::Excluded("a"), Bound::Unbounded)).count(), 3);
/// # Ok(()) }
/// ```
pub trait KeyRange {
    /// The range's start and end bounds, owned.
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>);
}

fn own<K: AsRef<[u8]>>(bound: Bound<K>) -> Bound<Vec<u8>> {
    match bound {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl KeyRange for RangeFull {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Unbounded, Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for Range<K> {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (
            own(Bound::Included(self.start)),
            own(Bound::Excluded(self.end)),
        )
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeInclusive<K> {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let (start, end) = self.into_inner();
        (own(Bound::Included(start)), own(Bound::Included(end)))
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeFrom<K> {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (own(Bound::Included(self.start)), Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeTo<K> {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Unbounded, own(Bound::Excluded(self.end)))
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeToInclusive<K> {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Unbounded, own(Bound::Included(self.end)))
    }
}

impl<K: AsRef<[u8]>> KeyRange for (Bound<K>, Bound<K>) {
    fn into_bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (own(self.0), own(self.1))
    }
}

/// Whether `key` is at or before `end` (inside a range that ends there).
pub(crate) fn below_end(key: &[u8], end: Bound<&[u8]>) -> bool {
    match end {
        Bound::Included(e) => key <= e,
        Bound::Excluded(e) => key < e,
        Bound::Unbounded => true,
    }
}

/// Whether `key` is at or after `start` (inside a range that starts there).
pub(crate) fn above_start(key: &[u8], start: Bound<&[u8]>) -> bool {
    match start {
        Bound::Included(s) => key >= s,
        Bound::Excluded(s) => key > s,
        Bound::Unbounded => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(r: impl KeyRange) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        r.into_bounds()
    }

    #[test]
    fn every_range_expression_becomes_owned_bounds() {
        let (a, m) = (b"a".to_vec(), b"m".to_vec());
        assert_eq!(bounds(..), (Bound::Unbounded, Bound::Unbounded));
        assert_eq!(
            bounds("a".."m"),
            (Bound::Included(a.clone()), Bound::Excluded(m.clone()))
        );
        assert_eq!(
            bounds(String::from("a")..=String::from("m")),
            (Bound::Included(a.clone()), Bound::Included(m.clone()))
        );
        assert_eq!(
            bounds(a.clone()..),
            (Bound::Included(a.clone()), Bound::Unbounded)
        );
        assert_eq!(
            bounds(..&m[..]),
            (Bound::Unbounded, Bound::Excluded(m.clone()))
        );
        assert_eq!(
            bounds(..=b"m"),
            (Bound::Unbounded, Bound::Included(m.clone()))
        );
        assert_eq!(
            bounds((Bound::Excluded(&a), Bound::Unbounded)),
            (Bound::Excluded(a), Bound::Unbounded)
        );
    }
}

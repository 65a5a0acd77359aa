//! How byte-string keys become the 64-bit integers a range filter holds, keeping their order.
//!
//! Every key of a table starts with the bytes all of them share (the table's *common prefix*);
//! the filter keeps the first `s` of them, `s` being the common prefix's length but at most the
//! longest key's length less 8, and a key maps to the 8 bytes after those `s`, big-endian,
//! zero-padded if the key ends sooner. So keys of one length map to their last 8 bytes once the
//! prefix is long enough, and a range's width in integers is its width in those bytes, however
//! narrow the table's key range (a longer stripped prefix would scale widths by 256 a byte). Keys in order map to integers in order (equal integers for keys that differ only
//! past those 8 bytes, or in trailing zero bytes), so a key in `[a, b]` maps into
//! `[map(a), map(b)]`: the filter never misses a key for a range of bounds mapped the same way.
//! A bound that does not start with the prefix sorts below or above every key of the table, and
//! is clamped there ([`Position`]).

use std::ops::Bound;

use super::spare_integers;

/// Where a query bound falls among the integers a table's keys map to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Position {
    /// Below every key that starts with the prefix.
    Below,
    /// At this integer.
    At(u64),
    /// Above every key that starts with the prefix.
    Above,
}

/// The 8 bytes of `key` from `from` on, big-endian, zero-padded.
pub(crate) fn window(key: &[u8], from: usize) -> u64 {
    // The common case, a whole window, as one load: the padding's copy of a variable length is a
    // call to `memcpy`.
    if let Some(whole) = key.get(from..).and_then(|tail| tail.first_chunk::<8>()) {
        return u64::from_be_bytes(*whole);
    }
    let mut bytes = [0u8; 8];
    if let Some(tail) = key.get(from..) {
        let n = tail.len().min(8);
        bytes[..n].copy_from_slice(&tail[..n]);
    }
    u64::from_be_bytes(bytes)
}

/// Where `bound` falls for keys that all start with `prefix`.
pub(crate) fn position(prefix: &[u8], bound: &[u8]) -> Position {
    let shared = prefix.len().min(bound.len());
    match bound[..shared].cmp(&prefix[..shared]) {
        std::cmp::Ordering::Less => Position::Below,
        std::cmp::Ordering::Greater => Position::Above,
        // A proper prefix of the prefix sorts before every key that extends it.
        std::cmp::Ordering::Equal if bound.len() < prefix.len() => Position::Below,
        std::cmp::Ordering::Equal => Position::At(window(bound, prefix.len())),
    }
}

/// The integer range `[lo, hi]` that the keys in `(lower, upper)` (each bound included, excluded
/// or unbounded) starting with `prefix` map into, or `None` if no such key can lie there. An
/// excluded upper bound that is the prefix and 1 to 8 more bytes, the last not zero, excludes its
/// own integer: every key below it maps below it (a key mapping to the same integer would be the
/// bound with zero bytes after it, so above it). So `[a, a + w)` asks about `w` integers, not
/// `w + 1`.
pub(crate) fn integer_range(
    prefix: &[u8],
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
) -> Option<(u64, u64)> {
    let lo = match lower {
        Bound::Unbounded => 0,
        Bound::Included(k) | Bound::Excluded(k) => match position(prefix, k) {
            Position::Below => 0,
            Position::At(x) => x,
            Position::Above => return None,
        },
    };
    let hi = match upper {
        Bound::Unbounded => u64::MAX,
        Bound::Included(k) | Bound::Excluded(k) => match position(prefix, k) {
            Position::Above => u64::MAX,
            Position::Below => return None,
            Position::At(x) if matches!(upper, Bound::Excluded(_)) && maps_exactly(prefix, k) => {
                x.checked_sub(1)?
            }
            Position::At(x) => x,
        },
    };
    (lo <= hi).then_some((lo, hi))
}

/// Whether `bound`, which starts with `prefix`, is the prefix and 1 to 8 more bytes, the last not
/// zero: then no key below it maps to its integer.
fn maps_exactly(prefix: &[u8], bound: &[u8]) -> bool {
    let tail = bound.len().saturating_sub(prefix.len());
    (1..=8).contains(&tail) && bound.last().is_some_and(|&b| b != 0)
}

/// The length of the common prefix of `a` and `b`.
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Whether `key` starts with `prefix`, compared eight bytes at a time: called for every key a
/// table gets, where the prefix is short and a call to `memcmp` costs more than the comparison.
pub(super) fn has_prefix(key: &[u8], prefix: &[u8]) -> bool {
    let Some(head) = key.get(..prefix.len()) else {
        return false;
    };
    let mut a = prefix.chunks_exact(8);
    let mut b = head.chunks_exact(8);
    for (x, y) in a.by_ref().zip(b.by_ref()) {
        let (x, y): (&[u8; 8], &[u8; 8]) = match (x.try_into(), y.try_into()) {
            (Ok(x), Ok(y)) => (x, y),
            _ => return false,
        };
        if u64::from_ne_bytes(*x) != u64::from_ne_bytes(*y) {
            return false;
        }
    }
    a.remainder().iter().zip(b.remainder()).all(|(x, y)| x == y)
}

/// Collects keys, arriving in order, as integers, while the common prefix is still shrinking:
/// each key is mapped at the prefix known when it comes, and [`finish`](Self::finish) shifts the
/// integers of keys mapped at a longer prefix to the final one, the bytes between the two being
/// the first key's (every earlier key shares them).
#[derive(Debug, Default)]
pub(crate) struct KeyMapper {
    first: Option<Vec<u8>>,
    /// The common prefix length of the keys so far.
    prefix_len: usize,
    /// The longest key's length.
    max_len: usize,
    values: Vec<u64>,
    /// `(index of the first value, prefix length)` each time the prefix shrank.
    runs: Vec<(usize, usize)>,
}

impl KeyMapper {
    /// Adds `key`, not below the last key added. A repeat adds a repeated integer, which
    /// [`finish`](Self::finish) leaves for the caller to drop.
    pub(crate) fn add(&mut self, key: &[u8]) {
        match &self.first {
            None => {
                if self.values.capacity() == 0 {
                    self.values = spare_integers::take();
                }
                self.first = Some(key.to_vec());
                self.prefix_len = key.len();
                self.runs.push((0, key.len()));
            }
            Some(first) if !has_prefix(key, &first[..self.prefix_len]) => {
                let shared = common_prefix_len(&first[..self.prefix_len], key);
                self.prefix_len = shared;
                self.runs.push((self.values.len(), shared));
            }
            Some(_) => {}
        }
        self.max_len = self.max_len.max(key.len());
        self.values.push(window(key, self.prefix_len));
    }

    /// Keys added (repeats counted).
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// The stripped prefix and every key's integer after it, ascending (repeats possible); the
    /// mapper starts empty again.
    pub(crate) fn finish(&mut self) -> (Vec<u8>, Vec<u64>) {
        let mut values = std::mem::take(&mut self.values);
        let runs = std::mem::take(&mut self.runs);
        let first = self.first.take().unwrap_or_default();
        let prefix_len = self.prefix_len.min(self.max_len.saturating_sub(8));
        for (i, &(start, at)) in runs.iter().enumerate() {
            let end = runs.get(i + 1).map_or(values.len(), |r| r.0);
            let shift = at - prefix_len;
            if shift == 0 {
                continue;
            }
            let high = window(&first, prefix_len);
            for v in &mut values[start..end] {
                *v = if shift >= 8 {
                    high
                } else {
                    // The `shift` bytes of the first key, then the top of the old window.
                    let keep_bits = 8 * shift as u32;
                    (high >> (64 - keep_bits) << (64 - keep_bits)) | (*v >> keep_bits)
                };
            }
        }
        self.prefix_len = 0;
        self.max_len = 0;
        let prefix = first.get(..prefix_len).unwrap_or_default().to_vec();
        (prefix, values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bounds_outside_the_prefix_are_clamped() {
        let prefix = b"tenant7/";
        assert_eq!(position(prefix, b"tenant6/zzz"), Position::Below);
        assert_eq!(position(prefix, b"tenant"), Position::Below);
        assert_eq!(position(prefix, b""), Position::Below);
        assert_eq!(position(prefix, b"tenant8"), Position::Above);
        assert_eq!(position(prefix, b"tenant7/"), Position::At(0));
        assert_eq!(
            position(prefix, b"tenant7/\x01\x02"),
            Position::At(0x0102 << 48)
        );
    }

    proptest! {
        #[test]
        fn the_prefix_test_agrees_with_starts_with(
            key in proptest::collection::vec(0u8..4, 0..40),
            prefix in proptest::collection::vec(0u8..4, 0..24),
            cut in 0usize..40,
        ) {
            prop_assert_eq!(has_prefix(&key, &prefix), key.starts_with(&prefix));
            let own = &key[..cut.min(key.len())];
            prop_assert!(has_prefix(&key, own));
        }

        #[test]
        fn the_mapper_agrees_with_mapping_at_the_final_prefix(
            mut keys in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(b'b'), any::<u8>()], 0..14),
                1..60),
            shared in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            for k in &mut keys {
                k.splice(0..0, shared.iter().copied());
            }
            keys.sort();
            keys.dedup();
            let mut mapper = KeyMapper::default();
            for k in &keys {
                mapper.add(k);
            }
            let (prefix, values) = mapper.finish();
            let longest = keys.iter().map(Vec::len).max().unwrap_or(0);
            let lcp = common_prefix_len(&keys[0], &keys[keys.len() - 1]).min(longest.saturating_sub(8));
            prop_assert_eq!(&prefix[..], &keys[0][..lcp]);
            let expected: Vec<u64> = keys.iter().map(|k| window(k, lcp)).collect();
            prop_assert_eq!(&values, &expected);
            prop_assert!(values.windows(2).all(|w| w[0] <= w[1]));
            for k in &keys {
                prop_assert_eq!(position(&prefix, k), Position::At(window(k, lcp)));
            }
        }
    }
}

//! Internal keys: a user key followed by a tag of sequence and kind (format:
//! `docs/table_format.md`, *Internal keys*).
//!
//! Internal keys sort by user key ascending, then by sequence descending, so the newest version of a
//! key comes first and a lookup for `(key, snapshot)` lands on the newest version visible to it.

use std::cmp::Ordering;

/// The largest sequence number (56 bits; the low byte of the tag holds the kind).
pub(crate) const MAX_SEQUENCE: u64 = (1 << 56) - 1;

/// Bytes of the tag that ends every internal key.
pub(crate) const TAG_LEN: usize = 8;

/// What an internal key's entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueKind {
    /// A tombstone: the key was deleted at this sequence.
    Deletion = 0,
    /// A value.
    Value = 1,
    /// A range tombstone: every key from this user key up to an end key (the entry's value) is
    /// deleted at this sequence. Only in WAL records and range tombstone blocks, never in data
    /// blocks or the memtable's skiplist.
    RangeDeletion = 2,
    /// A value that expires: the stored value ends in its expiry time (`db/ttl.rs`).
    ExpiringValue = 3,
    /// A merge operand: the keyspace's merge operator combines it with the older versions of its
    /// key when a read or a compaction resolves it (`merge_operator.rs`). The largest kind, so it
    /// is the one lookup keys carry ([`SEEK_KIND`]).
    Merge = 4,
}

/// The kind a lookup key carries: the largest, so that `(key, s, SEEK_KIND)` sorts before every
/// entry of `key` at sequence `s` and a seek lands on the newest entry visible at `s`.
pub(crate) const SEEK_KIND: ValueKind = ValueKind::Merge;

impl ValueKind {
    pub(crate) fn from_byte(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::RangeDeletion),
            3 => Some(ValueKind::ExpiringValue),
            4 => Some(ValueKind::Merge),
            _ => None,
        }
    }

    /// Whether an entry of this kind holds a value (one that may expire, or not).
    #[inline]
    pub(crate) fn is_value(self) -> bool {
        matches!(self, ValueKind::Value | ValueKind::ExpiringValue)
    }
}

/// Appends the internal key for `(user_key, seq, kind)` to `buf`.
pub(crate) fn append_internal_key(buf: &mut Vec<u8>, user_key: &[u8], seq: u64, kind: ValueKind) {
    buf.extend_from_slice(user_key);
    buf.extend_from_slice(&tag_bytes(seq, kind));
}

/// The 8-byte tag that ends an internal key.
fn tag_bytes(seq: u64, kind: ValueKind) -> [u8; TAG_LEN] {
    ((seq << 8) | kind as u64).to_le_bytes()
}

/// Builds the internal key for `(user_key, seq, kind)`.
pub(crate) fn internal_key(user_key: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
    let mut buf = Vec::with_capacity(user_key.len() + TAG_LEN);
    append_internal_key(&mut buf, user_key, seq, kind);
    buf
}

/// The key a point lookup seeks to: the newest entry of `user_key` visible at `seq`.
pub(crate) fn lookup_key(user_key: &[u8], seq: u64) -> Vec<u8> {
    internal_key(user_key, seq, SEEK_KIND)
}

/// An internal key taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParsedKey<'a> {
    pub(crate) user_key: &'a [u8],
    pub(crate) seq: u64,
    pub(crate) kind: ValueKind,
}

/// Splits an internal key, or `None` if it is too short or its kind byte is unknown.
pub(crate) fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    let split = ikey.len().checked_sub(TAG_LEN)?;
    let (user_key, tag) = ikey.split_at(split);
    let mut t = [0u8; 8];
    t.copy_from_slice(tag);
    let tag = u64::from_le_bytes(t);
    Some(ParsedKey {
        user_key,
        seq: tag >> 8,
        kind: ValueKind::from_byte(tag as u8)?,
    })
}

/// Gives the internal key `ikey` sequence `seq`, keeping its user key and kind (nothing if it is
/// shorter than a tag): how an ingested table's entries, written at 0, are read at the sequence
/// the store assigned the table.
#[inline]
pub(crate) fn set_sequence(ikey: &mut [u8], seq: u64) {
    if let Some(split) = ikey.len().checked_sub(TAG_LEN) {
        let tag = &mut ikey[split..];
        let kind = tag[0];
        tag.copy_from_slice(&((seq << 8) | u64::from(kind)).to_le_bytes());
    }
}

/// The user key of an internal key (the whole slice if it is shorter than a tag).
#[inline]
pub(crate) fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(TAG_LEN)]
}

fn tag(ikey: &[u8]) -> u64 {
    let n = ikey.len();
    if n < TAG_LEN {
        return 0;
    }
    let mut t = [0u8; 8];
    t.copy_from_slice(&ikey[n - TAG_LEN..]);
    u64::from_le_bytes(t)
}

/// Orders internal keys: user key ascending, then tag (sequence, kind) descending.
#[inline]
pub(crate) fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    compare_bytes(user_key(a), user_key(b)).then_with(|| tag(b).cmp(&tag(a)))
}

/// Bytewise order, as `a.cmp(b)`, inlined: keys are short and a `memcmp` call costs more than
/// comparing them eight bytes at a time (the Get path compares a key with several file bounds,
/// index entries and block keys).
#[inline]
pub(crate) fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut a_rest, mut b_rest) = (&a[..n], &b[..n]);
    while let (Some((x, a_next)), Some((y, b_next))) = (
        a_rest.split_first_chunk::<8>(),
        b_rest.split_first_chunk::<8>(),
    ) {
        if x != y {
            // Big-endian words order as their bytes do.
            return u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y));
        }
        a_rest = a_next;
        b_rest = b_next;
    }
    for (x, y) in a_rest.iter().zip(b_rest) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// Bytes of internal key stored inside an [`InternalKey`] itself (user keys up to 32 bytes).
pub(crate) const INLINE_KEY_BYTES: usize = 40;

/// An owned internal key whose `Ord` is [`compare_internal`]; the memtable's skiplist key.
///
/// A short key is stored inline, so it lives inside the skiplist node: a search compares keys
/// without chasing a pointer per node, and a Get builds its lookup key without allocating.
#[derive(Debug, Clone)]
pub(crate) enum InternalKey {
    Inline {
        len: u8,
        bytes: [u8; INLINE_KEY_BYTES],
    },
    Heap(Vec<u8>),
}

impl InternalKey {
    /// The internal key `(user_key, seq, kind)`.
    pub(crate) fn new(user_key: &[u8], seq: u64, kind: ValueKind) -> InternalKey {
        InternalKey::concat(user_key, &tag_bytes(seq, kind))
    }

    /// Wraps encoded internal-key bytes.
    #[cfg(test)]
    pub(crate) fn from_bytes(bytes: &[u8]) -> InternalKey {
        InternalKey::concat(bytes, &[])
    }

    /// The key whose bytes are `head` then `tail`, inline if they fit.
    fn concat(head: &[u8], tail: &[u8]) -> InternalKey {
        let len = head.len() + tail.len();
        if len > INLINE_KEY_BYTES {
            return InternalKey::Heap([head, tail].concat());
        }
        let mut bytes = [0u8; INLINE_KEY_BYTES];
        bytes[..head.len()].copy_from_slice(head);
        bytes[head.len()..len].copy_from_slice(tail);
        InternalKey::Inline {
            // At most INLINE_KEY_BYTES, so it fits.
            len: len as u8,
            bytes,
        }
    }

    /// The encoded internal key.
    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            InternalKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            InternalKey::Heap(v) => v,
        }
    }
}

impl AsRef<[u8]> for InternalKey {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialEq for InternalKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for InternalKey {}

impl Ord for InternalKey {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(self.as_bytes(), other.as_bytes())
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The first 16 bytes of `key` as a big-endian integer, zeros standing in for missing bytes:
/// keys whose integers differ compare as their integers do; equal integers leave the order to
/// the bytes (a key may end where another has zeros). Sorting by it first orders short keys at
/// a fraction of the cost of comparing their bytes.
#[inline]
pub(crate) fn leading_bytes(key: &[u8]) -> u128 {
    if let Some(first) = key.first_chunk::<16>() {
        // One load: a short key's copy through the stack below costs a stalled store.
        return u128::from_be_bytes(*first);
    }
    let mut bytes = [0u8; 16];
    let n = key.len().min(16);
    bytes[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn internal_keys_hold_the_encoded_bytes_inline_or_not() {
        for len in 0..60 {
            let user = vec![b'k'; len];
            let want = internal_key(&user, 77, ValueKind::Deletion);
            let k = InternalKey::new(&user, 77, ValueKind::Deletion);
            assert_eq!(k.as_bytes(), &want[..]);
            let inline = matches!(k, InternalKey::Inline { .. });
            assert_eq!(
                inline,
                want.len() <= INLINE_KEY_BYTES,
                "user key of {len} bytes"
            );
            assert_eq!(InternalKey::from_bytes(&want), k);
        }
    }

    proptest! {
        #[test]
        fn compare_bytes_orders_as_slices_do(
            a in proptest::collection::vec(0u8..4, 0..40),
            b in proptest::collection::vec(0u8..4, 0..40),
        ) {
            // Small alphabets make long shared prefixes, so every word and tail branch is hit.
            prop_assert_eq!(compare_bytes(&a, &b), a.cmp(&b));
            prop_assert_eq!(compare_bytes(&a, &a), Ordering::Equal);
        }
    }

    #[test]
    fn newer_versions_sort_first_and_user_keys_ascend() {
        let a5 = internal_key(b"a", 5, ValueKind::Value);
        let a7 = internal_key(b"a", 7, ValueKind::Deletion);
        let b1 = internal_key(b"b", 1, ValueKind::Value);
        assert_eq!(compare_internal(&a7, &a5), Ordering::Less);
        assert_eq!(compare_internal(&a5, &b1), Ordering::Less);
        // A prefix user key sorts before its extension whatever the tags say.
        let ab = internal_key(b"ab", 1, ValueKind::Value);
        assert_eq!(compare_internal(&a5, &ab), Ordering::Less);
        assert_eq!(compare_internal(&lookup_key(b"a", 6), &a5), Ordering::Less);
        assert_eq!(compare_internal(&lookup_key(b"a", 7), &a7), Ordering::Less);
        // A lookup at a sequence finds an entry of that sequence, whatever its kind.
        for kind in [
            ValueKind::Deletion,
            ValueKind::Value,
            ValueKind::ExpiringValue,
        ] {
            let e = internal_key(b"a", 7, kind);
            assert_ne!(
                compare_internal(&lookup_key(b"a", 7), &e),
                Ordering::Greater
            );
        }
    }

    #[test]
    fn parse_round_trips_and_rejects_bad_tags() {
        let k = internal_key(b"key", MAX_SEQUENCE, ValueKind::Deletion);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"key"[..], MAX_SEQUENCE, ValueKind::Deletion)
        );
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = internal_key(b"k", 1, ValueKind::Value);
        bad[1] = 9;
        assert!(parse_internal_key(&bad).is_none());
    }

    /// Sorting by the leading bytes, ties broken by the bytes, orders keys as the bytes do: keys
    /// shorter and longer than 16 bytes, prefixes of each other, zero bytes inside and after.
    #[test]
    fn leading_bytes_order_keys_as_their_bytes_do() {
        let mut keys: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"a\0\0".to_vec(),
            b"a\x01".to_vec(),
            b"abcdefghijklmnop".to_vec(),
            b"abcdefghijklmnop\0".to_vec(),
            b"abcdefghijklmnopq".to_vec(),
            b"abcdefghijklmnoq".to_vec(),
            vec![0xff; 17],
            vec![0xff; 16],
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 20) as usize;
            // Few distinct byte values, so that long shared prefixes and ties are common.
            keys.push((0..len).map(|i| ((state >> (i % 60)) & 3) as u8).collect());
        }
        let mut by_bytes = keys.clone();
        by_bytes.sort();
        keys.sort_by(|a, b| {
            leading_bytes(a)
                .cmp(&leading_bytes(b))
                .then_with(|| compare_bytes(a, b))
        });
        assert_eq!(keys, by_bytes);
    }
}

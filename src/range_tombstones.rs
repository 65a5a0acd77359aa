//! Range tombstones: "every key in `[start, end)` is deleted at sequence `seq`", as
//! [`Db::delete_range`](crate::Db::delete_range) writes them, and the fragmented form memtables,
//! tables and reads keep them in.
//!
//! Fragmenting (RocksDB's scheme) cuts overlapping tombstones at every start and end, so that the
//! pieces never overlap: two pieces either cover the same keys or none in common, and each piece
//! lists the sequences of every tombstone over it. Whether a key is deleted at a read's sequence
//! is then one binary search. A table stores its pieces in its range tombstone block (format:
//! `docs/table_format.md`, *Range tombstone block*).

use std::ops::Bound;
use std::sync::Arc;

use crate::key::{compare_bytes, internal_key, parse_internal_key, ValueKind};
use crate::key_range::below_end;
use crate::sst::block::{Block, KeyOrder};
use crate::sst::block_builder::BlockBuilder;

/// One range deletion: every key from `start` up to (not including) `end`, at `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RangeTombstone {
    pub(crate) start: Vec<u8>,
    pub(crate) end: Vec<u8>,
    pub(crate) seq: u64,
}

/// A piece of the key space that the same tombstones cover: `[start, end)`, with their sequences,
/// newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fragment {
    pub(crate) start: Vec<u8>,
    pub(crate) end: Vec<u8>,
    pub(crate) seqs: Vec<u64>,
}

impl Fragment {
    /// The newest sequence at or below `read_seq`, if any.
    fn newest_at(&self, read_seq: u64) -> Option<u64> {
        // Newest first: the first at or below the read's sequence.
        self.seqs.iter().copied().find(|&s| s <= read_seq)
    }
}

/// Non-overlapping fragments, in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FragmentedRangeTombstones {
    fragments: Vec<Fragment>,
}

impl FragmentedRangeTombstones {
    /// Fragments `tombstones` (in any order, overlapping or not; empty ranges are left out).
    pub(crate) fn new(tombstones: impl IntoIterator<Item = RangeTombstone>) -> Self {
        let mut tombstones: Vec<RangeTombstone> = tombstones
            .into_iter()
            .filter(|t| compare_bytes(&t.start, &t.end).is_lt())
            .collect();
        tombstones.sort_by(|a, b| compare_bytes(&a.start, &b.start));
        let mut points: Vec<&[u8]> = tombstones
            .iter()
            .flat_map(|t| [t.start.as_slice(), t.end.as_slice()])
            .collect();
        points.sort_by(|a, b| compare_bytes(a, b));
        points.dedup();
        let mut fragments = Vec::new();
        // The tombstones that began at or before the current point, not yet known to have ended.
        let mut active: Vec<&RangeTombstone> = Vec::new();
        let mut next = 0;
        for w in points.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            while next < tombstones.len() && compare_bytes(&tombstones[next].start, lo).is_le() {
                active.push(&tombstones[next]);
                next += 1;
            }
            active.retain(|t| compare_bytes(&t.end, lo).is_gt());
            if active.is_empty() {
                continue;
            }
            let mut seqs: Vec<u64> = active.iter().map(|t| t.seq).collect();
            seqs.sort_unstable_by(|a, b| b.cmp(a));
            seqs.dedup();
            fragments.push(Fragment {
                start: lo.to_vec(),
                end: hi.to_vec(),
                seqs,
            });
        }
        FragmentedRangeTombstones { fragments }
    }

    /// Fragments already cut apart and in key order, as a compaction filters them.
    pub(crate) fn from_fragments(fragments: Vec<Fragment>) -> Self {
        debug_assert!(fragments
            .windows(2)
            .all(|w| compare_bytes(&w[0].end, &w[1].start).is_le()));
        FragmentedRangeTombstones { fragments }
    }

    /// Every tombstone of every list in `lists`, fragmented together.
    pub(crate) fn merge<'a>(
        lists: impl IntoIterator<Item = &'a FragmentedRangeTombstones>,
    ) -> Self {
        FragmentedRangeTombstones::new(lists.into_iter().flat_map(|l| l.tombstones()))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    pub(crate) fn fragments(&self) -> &[Fragment] {
        &self.fragments
    }

    /// The tombstones the fragments stand for (one per fragment and sequence).
    pub(crate) fn tombstones(&self) -> impl Iterator<Item = RangeTombstone> + '_ {
        self.fragments.iter().flat_map(|f| {
            f.seqs.iter().map(|&seq| RangeTombstone {
                start: f.start.clone(),
                end: f.end.clone(),
                seq,
            })
        })
    }

    /// The fragment holding `key`, if any.
    fn fragment_for(&self, key: &[u8]) -> Option<&Fragment> {
        let i = self
            .fragments
            .partition_point(|f| compare_bytes(&f.start, key).is_le());
        let f = self.fragments.get(i.checked_sub(1)?)?;
        compare_bytes(key, &f.end).is_lt().then_some(f)
    }

    /// The sequence of the newest tombstone over `key` at or below `read_seq`; 0 if none (no
    /// tombstone has sequence 0: sequences start at 1). An entry of `key` at a sequence below
    /// it is deleted for a read at `read_seq`.
    pub(crate) fn covering_sequence(&self, key: &[u8], read_seq: u64) -> u64 {
        self.fragment_for(key)
            .and_then(|f| f.newest_at(read_seq))
            .unwrap_or(0)
    }

    /// The piece over `key` if a tombstone of it at or below `read_seq` is newer than `seq`.
    pub(crate) fn covering(&self, key: &[u8], seq: u64, read_seq: u64) -> Option<&Fragment> {
        self.fragment_for(key)
            .filter(|f| f.newest_at(read_seq).is_some_and(|t| t > seq))
    }

    /// The oldest tombstone over `key` newer than `seq`, if any: what a compaction weighs against
    /// the snapshots before it drops an entry at `seq`.
    pub(crate) fn oldest_newer_than(&self, key: &[u8], seq: u64) -> Option<u64> {
        self.fragment_for(key)?
            .seqs
            .iter()
            .copied()
            .rev()
            .find(|&s| s > seq)
    }

    /// The newest sequence of any tombstone over a key of `(start, end)`, if any: what a
    /// transaction's conflict check asks. An excluded start counts as included: at worst a
    /// tombstone that covers only the start itself counts, which makes a check stricter, never
    /// looser.
    pub(crate) fn newest_overlapping(
        &self,
        (start, end): (Bound<&[u8]>, Bound<&[u8]>),
    ) -> Option<u64> {
        self.fragments
            .iter()
            .filter(|f| {
                let after_start = match start {
                    Bound::Included(s) | Bound::Excluded(s) => compare_bytes(&f.end, s).is_gt(),
                    Bound::Unbounded => true,
                };
                after_start && below_end(&f.start, end)
            })
            .filter_map(|f| f.seqs.first().copied())
            .max()
    }

    /// The fragments cut to `[lo, hi)` (either bound open if `None`).
    pub(crate) fn clipped(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Vec<Fragment> {
        self.fragments
            .iter()
            .filter_map(|f| {
                let start = match lo {
                    Some(lo) if compare_bytes(&f.start, lo).is_lt() => lo,
                    _ => &f.start,
                };
                let end = match hi {
                    Some(hi) if compare_bytes(hi, &f.end).is_lt() => hi,
                    _ => &f.end,
                };
                compare_bytes(start, end).is_lt().then(|| Fragment {
                    start: start.to_vec(),
                    end: end.to_vec(),
                    seqs: f.seqs.clone(),
                })
            })
            .collect()
    }

    /// Decodes a table's range tombstone block, or says what is wrong with it.
    pub(crate) fn decode(block: Vec<u8>) -> Result<Self, &'static str> {
        let block = Arc::new(Block::new(block).ok_or("malformed range tombstone block")?);
        let mut it = block.iter(KeyOrder::Internal);
        it.seek_to_first();
        let mut fragments: Vec<Fragment> = Vec::new();
        while it.valid() {
            let p = parse_internal_key(it.key()).ok_or("bad key in range tombstone block")?;
            if p.kind != ValueKind::RangeDeletion {
                return Err("a range tombstone block holds another kind of entry");
            }
            let end = it.value();
            match fragments.last_mut() {
                Some(f) if f.start == p.user_key => {
                    if f.end != end || f.seqs.last().is_none_or(|&s| s <= p.seq) {
                        return Err("range tombstone fragments out of order");
                    }
                    f.seqs.push(p.seq);
                }
                last => {
                    if last.is_some_and(|f| compare_bytes(&f.end, p.user_key).is_gt())
                        || compare_bytes(p.user_key, end).is_ge()
                    {
                        return Err("range tombstone fragments overlap or are empty");
                    }
                    fragments.push(Fragment {
                        start: p.user_key.to_vec(),
                        end: end.to_vec(),
                        seqs: vec![p.seq],
                    });
                }
            }
            it.next();
        }
        if it.is_corrupt() {
            return Err("malformed entry in range tombstone block");
        }
        Ok(FragmentedRangeTombstones { fragments })
    }
}

/// Encodes `fragments` (non-overlapping, in key order) as a table's range tombstone block: one
/// entry per fragment and sequence, its key the internal key `(start, seq, range deletion)`, its
/// value `end`.
pub(crate) fn encode_block(fragments: &[Fragment]) -> Vec<u8> {
    let mut b = BlockBuilder::new(1);
    for f in fragments {
        for &seq in &f.seqs {
            b.add(
                &internal_key(&f.start, seq, ValueKind::RangeDeletion),
                &f.end,
            );
        }
    }
    b.finish().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone {
            start: start.into(),
            end: end.into(),
            seq,
        }
    }

    #[test]
    fn overlapping_tombstones_are_cut_into_pieces_that_list_every_sequence() {
        let f = FragmentedRangeTombstones::new([t("c", "g", 5), t("a", "e", 7), t("x", "x", 9)]);
        let pieces: Vec<_> = f
            .fragments()
            .iter()
            .map(|f| (f.start.clone(), f.end.clone(), f.seqs.clone()))
            .collect();
        assert_eq!(
            pieces,
            vec![
                (b"a".to_vec(), b"c".to_vec(), vec![7]),
                (b"c".to_vec(), b"e".to_vec(), vec![7, 5]),
                (b"e".to_vec(), b"g".to_vec(), vec![5]),
            ]
        );
        assert_eq!(f.covering_sequence(b"d", 100), 7);
        assert_eq!(f.covering_sequence(b"d", 6), 5);
        assert_eq!(f.covering_sequence(b"d", 4), 0);
        assert_eq!(f.covering_sequence(b"g", 100), 0, "the end is not deleted");
        assert_eq!(f.covering_sequence(b"", 100), 0);
        assert!(f.covering(b"f", 4, 10).is_some() && f.covering(b"f", 5, 10).is_none());
        assert_eq!(f.oldest_newer_than(b"d", 5), Some(7));
        assert_eq!(f.oldest_newer_than(b"d", 4), Some(5));
        assert_eq!(f.oldest_newer_than(b"d", 7), None);
        let from = |k: &'static [u8]| (Bound::Included(k), Bound::Unbounded);
        assert_eq!(f.newest_overlapping(from(b"e")), Some(5));
        assert_eq!(f.newest_overlapping(from(b"g")), None);
        assert_eq!(
            f.newest_overlapping((Bound::Unbounded, Bound::Included(&b"a"[..]))),
            Some(7)
        );
        assert_eq!(
            f.newest_overlapping((Bound::Unbounded, Bound::Excluded(&b"a"[..]))),
            None
        );
    }

    #[test]
    fn the_block_round_trips_and_refuses_overlaps() {
        let f = FragmentedRangeTombstones::new([t("c", "g", 5), t("a", "e", 7)]);
        let block = encode_block(f.fragments());
        assert_eq!(FragmentedRangeTombstones::decode(block), Ok(f));
        let bad = encode_block(&[
            Fragment {
                start: b"a".to_vec(),
                end: b"d".to_vec(),
                seqs: vec![3],
            },
            Fragment {
                start: b"c".to_vec(),
                end: b"e".to_vec(),
                seqs: vec![3],
            },
        ]);
        assert!(FragmentedRangeTombstones::decode(bad).is_err());
        assert!(FragmentedRangeTombstones::decode(vec![1, 2, 3]).is_err());
    }

    #[test]
    fn clipping_keeps_what_lies_inside() {
        let f = FragmentedRangeTombstones::new([t("b", "m", 3), t("p", "z", 4)]);
        let c = f.clipped(Some(b"d"), Some(b"q"));
        let got: Vec<_> = c.iter().map(|f| (f.start.clone(), f.end.clone())).collect();
        assert_eq!(
            got,
            vec![
                (b"d".to_vec(), b"m".to_vec()),
                (b"p".to_vec(), b"q".to_vec())
            ]
        );
        assert!(f.clipped(Some(b"m"), Some(b"p")).is_empty());
        assert_eq!(f.clipped(None, None), f.fragments().to_vec());
    }

    proptest! {
        /// Fragmenting changes no answer: for every key and read sequence, the newest covering
        /// tombstone is the one a walk over the raw tombstones finds.
        #[test]
        fn fragments_answer_as_the_raw_tombstones_do(
            raw in proptest::collection::vec((0u8..20, 0u8..20, 1u64..30), 0..12),
            key in 0u8..21,
            read in 0u64..32,
        ) {
            let tombstones: Vec<RangeTombstone> = raw
                .iter()
                .map(|&(a, b, s)| RangeTombstone { start: vec![a], end: vec![b], seq: s })
                .collect();
            let want = tombstones
                .iter()
                .filter(|t| t.start[0] <= key && key < t.end[0] && t.seq <= read)
                .map(|t| t.seq)
                .max()
                .unwrap_or(0);
            let f = FragmentedRangeTombstones::new(tombstones.clone());
            prop_assert_eq!(f.covering_sequence(&[key], read), want);
            // Fragmenting the fragments changes nothing either.
            let again = FragmentedRangeTombstones::merge([&f]);
            prop_assert_eq!(&again, &f);
            let decoded = FragmentedRangeTombstones::decode(encode_block(f.fragments()));
            prop_assert_eq!(decoded, Ok(f));
        }
    }
}

//! What flushes and compactions write for a chain of merge operands (RocksDB's `MergeHelper`).
//!
//! The writer meets a key's versions newest first. When the version it keeps for a snapshot
//! stripe (the newest, or the newest at or below a live snapshot: `VersionRetention`) is a merge
//! operand, [`collapse_operands`] gathers it and the older operands of the same stripe, never
//! crossing a live snapshot, and stops at the first entry that is not one of them:
//!
//! - a value of the stripe: the chain resolves on it ([`Chain::Resolved`], a value at the newest
//!   operand's sequence, which the value beneath then shares a stripe with and so is dropped);
//! - a tombstone of the stripe, or an entry under a range tombstone of the stripe (or, in a
//!   compaction, a value the TTL expired, which it made a tombstone), or the end of the key's
//!   entries where no deeper level holds it: the chain resolves on nothing;
//! - anything else (a version of another stripe, a value that expires, which may still expire
//!   under the operands; the end of a flush's memtable, with tables beneath it): the chain stays
//!   operands, one if the operator's `partial_merge` combines them ([`Chain::Partial`]), else as
//!   written ([`Chain::AsWritten`]); the writer then keeps the next entry too, which they build
//!   on.
//!
//! An operator that refuses a chain (or a keyspace without one) leaves it as written: the reads
//! report the refusal, and nothing is lost.

use std::sync::Arc;

use super::snapshot::VersionRetention;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, ValueKind};
use crate::memtable::MemTableIter;
use crate::merge_operator::MergeOperator;
use crate::range_tombstones::FragmentedRangeTombstones;

/// A forward walk over internal keys and their values: a flush's memtable or a compaction's
/// merged input.
pub(crate) trait ForwardEntries {
    fn valid(&self) -> bool;
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
    /// # Errors
    /// As the walk's source.
    fn next(&mut self) -> Result<()>;
}

impl ForwardEntries for MemTableIter {
    fn valid(&self) -> bool {
        InternalIterator::valid(self)
    }
    fn key(&self) -> &[u8] {
        InternalIterator::key(self)
    }
    fn value(&self) -> &[u8] {
        InternalIterator::value(self)
    }
    fn next(&mut self) -> Result<()> {
        InternalIterator::next(self)
    }
}

/// What a chain of operands becomes in the writer's output.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Chain {
    /// A value at the newest operand's sequence.
    Resolved(Vec<u8>),
    /// One operand at the newest operand's sequence.
    Partial(Vec<u8>),
    /// The operands as written: internal key and value, newest first.
    AsWritten(Vec<(Vec<u8>, Vec<u8>)>),
}

/// What a writer knows when it meets a chain.
pub(crate) struct ChainRules<'a> {
    pub(crate) operator: Option<&'a Arc<dyn MergeOperator>>,
    pub(crate) retention: &'a VersionRetention<'a>,
    /// The range tombstones over the writer's input.
    pub(crate) range_tombstones: Option<&'a FragmentedRangeTombstones>,
    /// The directory of the store, which errors name.
    pub(crate) dir: &'a std::path::Path,
}

/// Gathers the chain of operands that starts at the entry `entries` is on (a merge operand the
/// writer keeps), leaving `entries` on the first entry it does not take. `bottom` says whether
/// nothing beneath the input holds the key. See the module docs.
///
/// # Errors
/// As `entries`, or `Error::Corruption` for a malformed internal key.
pub(crate) fn collapse_operands(
    entries: &mut impl ForwardEntries,
    rules: &ChainRules<'_>,
    bottom: impl FnOnce(&[u8]) -> bool,
) -> Result<Chain> {
    let malformed = || Error::corruption(rules.dir, "a merge met a malformed internal key");
    let top = parse_internal_key(entries.key()).ok_or_else(malformed)?;
    let (user_key, top_seq) = (top.user_key.to_vec(), top.seq);
    let mut operands = vec![(entries.key().to_vec(), entries.value().to_vec())];
    // `Some(base)` once the chain resolves on `base` (`None`: on nothing).
    let mut resolves_on: Option<Option<Vec<u8>>> = None;
    entries.next()?;
    loop {
        if !entries.valid() {
            break;
        }
        let p = parse_internal_key(entries.key()).ok_or_else(malformed)?;
        if p.user_key != user_key.as_slice() {
            break;
        }
        let stripe = |seq: u64| rules.retention.same_stripe(seq, top_seq);
        if let Some(t) = rules
            .range_tombstones
            .and_then(|t| t.oldest_newer_than(p.user_key, p.seq))
        {
            if stripe(t) {
                resolves_on = Some(None);
            }
            return finish(rules, &user_key, operands, resolves_on);
        }
        if !stripe(p.seq) {
            return finish(rules, &user_key, operands, None);
        }
        match p.kind {
            ValueKind::Merge => operands.push((entries.key().to_vec(), entries.value().to_vec())),
            ValueKind::Value => {
                resolves_on = Some(Some(entries.value().to_vec()));
                return finish(rules, &user_key, operands, resolves_on);
            }
            ValueKind::Deletion => return finish(rules, &user_key, operands, Some(None)),
            ValueKind::ExpiringValue | ValueKind::RangeDeletion => {
                return finish(rules, &user_key, operands, None)
            }
        }
        entries.next()?;
    }
    // The key's entries ended.
    let resolves_on = bottom(&user_key).then_some(None);
    finish(rules, &user_key, operands, resolves_on)
}

/// The chain of `operands` (newest first) of `key`, resolved on `resolves_on` if given.
fn finish(
    rules: &ChainRules<'_>,
    key: &[u8],
    operands: Vec<(Vec<u8>, Vec<u8>)>,
    resolves_on: Option<Option<Vec<u8>>>,
) -> Result<Chain> {
    let Some(operator) = rules.operator else {
        return Ok(Chain::AsWritten(operands));
    };
    let oldest_first: Vec<&[u8]> = operands.iter().rev().map(|(_, v)| v.as_slice()).collect();
    if let Some(base) = resolves_on {
        if let Some(v) = operator.full_merge(key, base.as_deref(), &oldest_first) {
            return Ok(Chain::Resolved(v));
        }
    } else if operands.len() > 1
        && let Some(v) = operator.partial_merge(key, &oldest_first)
    {
        return Ok(Chain::Partial(v));
    }
    Ok(Chain::AsWritten(operands))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::internal_key;
    use crate::merge_operator::{Append, U64Add};

    /// Entries in order, walked forward.
    struct Listed {
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        at: usize,
    }

    impl ForwardEntries for Listed {
        fn valid(&self) -> bool {
            self.at < self.entries.len()
        }
        fn key(&self) -> &[u8] {
            &self.entries[self.at].0
        }
        fn value(&self) -> &[u8] {
            &self.entries[self.at].1
        }
        fn next(&mut self) -> Result<()> {
            self.at += 1;
            Ok(())
        }
    }

    /// `(seq, kind, value)` versions of key "k", newest first, then one of key "l".
    fn listed(versions: &[(u64, ValueKind, &str)]) -> Listed {
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = versions
            .iter()
            .map(|&(seq, kind, v)| (internal_key(b"k", seq, kind), v.as_bytes().to_vec()))
            .collect();
        entries.push((internal_key(b"l", 1, ValueKind::Value), b"other".to_vec()));
        Listed { entries, at: 0 }
    }

    fn collapse(
        operator: &Arc<dyn MergeOperator>,
        snapshots: &[u64],
        versions: &[(u64, ValueKind, &str)],
        bottom: bool,
    ) -> (Chain, usize) {
        let retention = VersionRetention::new(snapshots);
        let rules = ChainRules {
            operator: Some(operator),
            retention: &retention,
            range_tombstones: None,
            dir: std::path::Path::new("test"),
        };
        let mut entries = listed(versions);
        let chain = collapse_operands(&mut entries, &rules, |_| bottom).unwrap();
        (chain, entries.at)
    }

    use ValueKind::{Deletion, ExpiringValue, Merge, Value};

    #[test]
    fn a_chain_resolves_on_a_value_a_tombstone_or_the_bottom_of_its_stripe() {
        let append: Arc<dyn MergeOperator> = Arc::new(Append::new(","));
        let ops = [(9, Merge, "c"), (8, Merge, "b")];
        let on = |base: (u64, ValueKind, &'static str)| [ops[0], ops[1], base];
        // On a value, which the walk is left on (the writer drops it: same stripe).
        let (chain, at) = collapse(&append, &[], &on((7, Value, "a")), false);
        assert_eq!((chain, at), (Chain::Resolved(b"a,b,c".to_vec()), 2));
        let (chain, _) = collapse(&append, &[], &on((7, Deletion, "")), false);
        assert_eq!(chain, Chain::Resolved(b"b,c".to_vec()));
        let (chain, at) = collapse(&append, &[], &ops, true);
        assert_eq!((chain, at), (Chain::Resolved(b"b,c".to_vec()), 2));
        // Not at the bottom, or on a value that may expire: one operand, by partial merge.
        let (chain, _) = collapse(&append, &[], &ops, false);
        assert_eq!(chain, Chain::Partial(b"b,c".to_vec()));
        let (chain, at) = collapse(&append, &[], &on((7, ExpiringValue, "a....")), false);
        assert_eq!((chain, at), (Chain::Partial(b"b,c".to_vec()), 2));
    }

    #[test]
    fn a_chain_never_crosses_a_snapshot_and_refused_operands_stay_as_written() {
        let append: Arc<dyn MergeOperator> = Arc::new(Append::new(","));
        let versions = [(9, Merge, "c"), (8, Merge, "b"), (7, Value, "a")];
        // A snapshot at 8 sees "a,b": the chain of 9 stops before 8.
        let (chain, at) = collapse(&append, &[8], &versions, false);
        assert_eq!(
            chain,
            Chain::AsWritten(vec![(internal_key(b"k", 9, Merge), b"c".to_vec())])
        );
        assert_eq!(at, 1);
        let counter: Arc<dyn MergeOperator> = Arc::new(U64Add);
        let (chain, _) = collapse(&counter, &[], &versions, true);
        assert!(
            matches!(chain, Chain::AsWritten(ref o) if o.len() == 2),
            "{chain:?}"
        );
    }
}

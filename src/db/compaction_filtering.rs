//! What a compaction's merged input looks like once the keyspace's compaction filter and its time
//! to live have had their say: [`CompactionInput`] wraps the merge and rewrites entries on the
//! way, so the compaction loop keeps its own rules (which versions to keep, which tombstones to
//! drop) and applies them to the rewritten entries.
//!
//! - **Time to live.** An expired value (`ttl.rs`) becomes a tombstone at its own sequence,
//!   whichever version of its key it is, snapshots or not. Every read already treats an expired
//!   value as a tombstone at that sequence (at any snapshot, since expiry only ever comes closer),
//!   so the rewrite changes nothing any reader sees; it lets the loop drop the value and, where
//!   nothing below holds the key, the tombstone too. In a keyspace without a filter, a TTL or write
//!   times, only values with an expiry time of their own are looked at: the kind byte of each
//!   key.
//! - **Compaction filter.** It is asked about the newest version of each key in the merge, if that
//!   version is a value newer than every live snapshot, so no snapshot can read it: snapshots keep
//!   seeing what they saw. `Remove` turns the value into a tombstone at its sequence, so that an
//!   older version in a deeper level does not show through; `ChangeValue` replaces the value (with
//!   a stamp, the new value keeps it). A value that expired is not shown to it.
//!
//! Both count in `compaction.filter.removed` and `compaction.filter.changed`.
//!
//! `Db::compact` of such a keyspace also rewrites the tables of its last level that none of its
//! jobs rewrote ([`DbInner::last_level_rewrites`]), so that the filter and the TTL reach every
//! entry (RocksDB's `kIfHaveCompactionFilter`).

use std::path::Path;
use std::sync::Arc;

use super::compaction::CompactionJob;
use super::tree::Tree;
use super::ttl::{append_stamp, missing_stamp, split_stamp, Expiry};
use super::version::Version;
use super::DbInner;
use crate::compaction_filter::{CompactionDecision, CompactionFilter};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{append_internal_key, parse_internal_key, ValueKind, TAG_LEN};
use crate::stats::{Stats, Ticker};

/// What the rules make of the entry the merge is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rewrite {
    /// Written as merged.
    AsIs,
    /// A tombstone at the entry's sequence: `key` holds its internal key, its value is empty.
    Tombstone,
    /// The value in `value` instead.
    Value,
}

/// The rules of one compaction of a keyspace.
struct Rules<'a> {
    /// Whether every value is looked at (a compaction filter, or stamped plain values); else
    /// only values with an expiry time of their own.
    all: bool,
    filter: Option<Arc<dyn CompactionFilter>>,
    expiry: Expiry,
    /// The level the compaction writes, which the filter is told.
    level: usize,
    /// The newest live snapshot: the filter sees only versions newer than it.
    newest_snapshot: Option<u64>,
    keyspace: &'a str,
    stats: &'a Stats,
    dir: &'a Path,
}

/// A compaction's merged input, with the keyspace's compaction filter and TTL applied to each
/// entry (see the module docs). The compaction loop moves it forward only: `seek_to_first` or
/// `seek`, then `next`.
pub(crate) struct CompactionInput<'a, I> {
    input: I,
    rules: Rules<'a>,
    rewrite: Rewrite,
    key: Vec<u8>,
    value: Vec<u8>,
    /// The user key of the last entry, to tell the newest version of each key (`None` after a
    /// seek).
    last_user_key: Option<Vec<u8>>,
}

impl<'a, I: InternalIterator> CompactionInput<'a, I> {
    /// `input` (the merge of a compaction of `tree` into `level`) under `tree`'s compaction filter
    /// and TTL, with `snapshots` (ascending) live. Expiry is judged as of now. `dir` is the
    /// store's directory, which errors name.
    pub(crate) fn new(
        tree: &'a Tree,
        level: usize,
        snapshots: &[u64],
        dir: &'a Path,
        input: I,
    ) -> Self {
        let filter = tree.options().compaction_filter.clone();
        let rules = Rules {
            all: filter.is_some() || tree.stamps_plain_values(),
            filter,
            expiry: Expiry::of(tree),
            level,
            newest_snapshot: snapshots.last().copied(),
            keyspace: &tree.name,
            stats: &tree.stats,
            dir,
        };
        CompactionInput {
            input,
            rules,
            rewrite: Rewrite::AsIs,
            key: Vec::new(),
            value: Vec::new(),
            last_user_key: None,
        }
    }

    pub(crate) fn seek_to_first(&mut self) -> Result<()> {
        self.input.seek_to_first()?;
        self.last_user_key = None;
        self.apply_rules()
    }

    pub(crate) fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.input.seek(target)?;
        self.last_user_key = None;
        self.apply_rules()
    }

    pub(crate) fn next(&mut self) -> Result<()> {
        self.input.next()?;
        self.apply_rules()
    }

    #[inline]
    pub(crate) fn valid(&self) -> bool {
        self.input.valid()
    }

    /// The current internal key (a tombstone's, for a value the rules removed).
    #[inline]
    pub(crate) fn key(&self) -> &[u8] {
        match self.rewrite {
            Rewrite::Tombstone => &self.key,
            Rewrite::AsIs | Rewrite::Value => self.input.key(),
        }
    }

    /// The current value (empty for a tombstone).
    #[inline]
    pub(crate) fn value(&self) -> &[u8] {
        match self.rewrite {
            Rewrite::AsIs => self.input.value(),
            Rewrite::Tombstone | Rewrite::Value => &self.value,
        }
    }

    /// Decides what the entry the input is on becomes.
    fn apply_rules(&mut self) -> Result<()> {
        self.rewrite = Rewrite::AsIs;
        let rules = &self.rules;
        if !self.input.valid() || !(rules.all || expiring(self.input.key())) {
            return Ok(());
        }
        // A malformed key is the compaction loop's to report.
        let Some(parsed) = parse_internal_key(self.input.key()) else {
            return Ok(());
        };
        let newest = self.last_user_key.as_deref() != Some(parsed.user_key);
        if newest {
            let last = self.last_user_key.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(parsed.user_key);
        }
        if !parsed.kind.is_value() {
            return Ok(());
        }
        let stored = self.input.value();
        let (value, stamp) = match rules.expiry.stamped(parsed.kind) {
            false => (stored, None),
            true => {
                let (value, stamp) =
                    split_stamp(stored).ok_or_else(|| missing_stamp(rules.dir, rules.keyspace))?;
                (value, Some(stamp))
            }
        };
        if stamp.is_some_and(|t| rules.expiry.expired(parsed.kind, t)) {
            rules.stats.inc(Ticker::CompactionFilterRemoved);
            tombstone(&mut self.key, &mut self.value, parsed.user_key, parsed.seq);
            self.rewrite = Rewrite::Tombstone;
            return Ok(());
        }
        let Some(filter) = &rules.filter else {
            return Ok(());
        };
        let visible_to_snapshot = rules.newest_snapshot.is_some_and(|s| parsed.seq <= s);
        if !newest || visible_to_snapshot {
            return Ok(());
        }
        match filter.filter(rules.level, parsed.user_key, value) {
            CompactionDecision::Keep => {}
            CompactionDecision::Remove => {
                rules.stats.inc(Ticker::CompactionFilterRemoved);
                tombstone(&mut self.key, &mut self.value, parsed.user_key, parsed.seq);
                self.rewrite = Rewrite::Tombstone;
            }
            CompactionDecision::ChangeValue(new) => {
                rules.stats.inc(Ticker::CompactionFilterChanged);
                self.value = new;
                if let Some(stamp) = stamp {
                    append_stamp(&mut self.value, stamp);
                }
                self.rewrite = Rewrite::Value;
            }
        }
        Ok(())
    }
}

/// Whether internal key `ikey` is a value's with an expiry time of its own: its tag's low byte,
/// the first of the eight, says.
#[inline]
fn expiring(ikey: &[u8]) -> bool {
    ikey.len()
        .checked_sub(TAG_LEN)
        .is_some_and(|at| ikey[at] == ValueKind::ExpiringValue as u8)
}

/// Makes `key` and `value` a tombstone of `user_key` at sequence `seq`.
fn tombstone(key: &mut Vec<u8>, value: &mut Vec<u8>, user_key: &[u8], seq: u64) {
    key.clear();
    append_internal_key(key, user_key, seq, ValueKind::Deletion);
    value.clear();
}

impl DbInner {
    /// For `Db::compact` of `tree`, once it has compacted every level into the next: jobs that
    /// rewrite in place, one table each, the tables of the last level that still hold range
    /// tombstones (kept for a snapshot since released: otherwise they, and the keys they cover,
    /// would stay until the level is next compacted) and, if the keyspace has a compaction filter
    /// or a TTL, those that were there before (`before`, the version it started from) and that no
    /// job rewrote since, so that the filter and the TTL see their entries too; without either,
    /// those holding values with an expiry time of their own. One table per
    /// job: a job's outputs span its inputs' key range, which for two tables of a level apart
    /// would take in the tables between them.
    pub(crate) fn last_level_rewrites(
        &self,
        tree: &Arc<Tree>,
        before: &Version,
    ) -> Vec<CompactionJob> {
        let filtering = tree.options().compaction_filter.is_some() || tree.stamps_plain_values();
        let version = self.manifest.lock().version(tree.id);
        let last = version.deepest_nonempty_level();
        if last == 0 {
            return Vec::new();
        }
        version.levels[last]
            .iter()
            .filter(|f| {
                let expiring = || {
                    let table = tree.tables.get(f);
                    table.is_ok_and(|t| t.properties().num_expiring > 0)
                };
                f.range_tombstones
                    || (before.levels[last].iter().any(|g| g.number == f.number)
                        && (filtering || expiring()))
            })
            .map(|f| CompactionJob::rewrite_in_place(tree, &version, last, f))
            .collect()
    }
}

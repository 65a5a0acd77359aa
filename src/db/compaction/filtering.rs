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
//! **Snapshots taken while a job runs.** The job reads the list of live snapshots once, after
//! choosing its inputs; a snapshot taken later is newer than every entry the job reads, so it sees
//! each key's newest version, the very one the filter rewrites: in the old tables until the job
//! installs, in the new ones after. So the filter's decisions ([`FilterDecisions`]) stand only if
//! no such snapshot is live as the job installs, checked under the snapshot list's lock, held
//! until the new version is published so that none is taken in between. Otherwise the outputs are
//! thrown away and the job runs once more without asking the filter (`compaction.filter.reruns`),
//! which no snapshot can object to. So that this stays rare under a stream of transactions (each
//! holds a snapshot), a job that sees such a snapshot live (one atomic load per key it would ask
//! about) asks no more, and if it had changed a value already, gives up at once rather than write
//! the rest of its outputs for nothing; and the next compaction of a keyspace whose last one such
//! a snapshot outlived does not ask at all (`Tree::snapshot_outlived_last_compaction`), since its
//! decisions would most likely be thrown away too. A snapshot released before the install costs
//! nothing, nor does expiry by the TTL, which changes no read.
//!
//! Both count in `compaction.filter.removed` and `compaction.filter.changed`, once the job's
//! outputs are installed.
//!
//! `Db::compact` of such a keyspace also rewrites the tables of its last level that none of its
//! jobs rewrote ([`DbInner::last_level_rewrites`]), so that the filter and the TTL reach every
//! entry (RocksDB's `kIfHaveCompactionFilter`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::CompactionJob;
use crate::compaction_filter::{CompactionDecision, CompactionFilter};
use crate::db::operand_chains::ForwardEntries;
use crate::db::snapshot::SnapshotList;
use crate::db::tree::Tree;
use crate::db::ttl::{append_stamp, missing_stamp, split_stamp, Expiry};
use crate::db::version::Version;
use crate::db::DbInner;
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

/// What one run of a compaction job may ask its filter, and what the filter and the TTL made of
/// its entries; shared by the job's subcompactions. See the module docs.
pub(crate) struct FilterDecisions<'a> {
    snapshots: &'a SnapshotList,
    /// The newest snapshot of the list the job read: the filter sees only versions newer than it.
    newest_listed: Option<u64>,
    /// Whether the filter is asked at all: not in a run again, nor in the first run of a job after
    /// a compaction of the keyspace that a snapshot outlived.
    asking: bool,
    /// Set once a snapshot newer than the job's list was seen live: the filter is asked no more.
    paused: AtomicBool,
    expired: AtomicU64,
    removed: AtomicU64,
    changed: AtomicU64,
}

impl<'a> FilterDecisions<'a> {
    /// For a run of a job that read `listed` (ascending) from `snapshots`; `asking` the filter, or
    /// not.
    pub(crate) fn new(snapshots: &'a SnapshotList, listed: &[u64], asking: bool) -> Self {
        FilterDecisions {
            snapshots,
            newest_listed: listed.last().copied(),
            asking,
            paused: AtomicBool::new(false),
            expired: AtomicU64::new(0),
            removed: AtomicU64::new(0),
            changed: AtomicU64::new(0),
        }
    }

    /// Whether the filter may be asked about the newest version of a key, at `sequence`: no
    /// snapshot of the job's list can read it, and no snapshot taken since is live. Once the
    /// filter changed a value, every key looks for such a snapshot, so that the run is given up
    /// ([`abandoned`](Self::abandoned)) as soon as one appears.
    fn may_ask(&self, sequence: u64) -> bool {
        if !self.asking || self.paused.load(Ordering::Relaxed) {
            return false;
        }
        let newer_than_list = self.newest_listed.is_none_or(|s| sequence > s);
        if (newer_than_list || self.changed_any())
            && self.snapshots.any_newer_than(self.newest_listed)
        {
            self.paused.store(true, Ordering::Relaxed);
            return false;
        }
        newer_than_list
    }

    /// Whether the filter removed or changed a value: the run's outputs then stand only if no
    /// snapshot newer than [`newest_listed`](Self::newest_listed) is live as they are installed.
    pub(crate) fn changed_any(&self) -> bool {
        self.removed.load(Ordering::Relaxed) + self.changed.load(Ordering::Relaxed) > 0
    }

    /// Whether the run was given up: the filter changed a value, then a snapshot newer than the
    /// job's list was seen live, which would most likely still be live at the install. The job
    /// runs again at once rather than write the rest of its outputs for nothing.
    pub(crate) fn abandoned(&self) -> bool {
        self.paused.load(Ordering::Relaxed) && self.changed_any()
    }

    /// The newest snapshot of the list the job read.
    pub(crate) fn newest_listed(&self) -> Option<u64> {
        self.newest_listed
    }

    /// Whether a snapshot newer than the job's list is live now, as the job ends: a keyspace
    /// whose snapshots outlive its compactions does not ask the filter in its next one, whose
    /// decisions would most likely be thrown away.
    pub(crate) fn outlived(&self) -> bool {
        self.snapshots.any_newer_than(self.newest_listed)
    }

    /// Counts the run's decisions in `stats`, once its outputs are installed.
    pub(crate) fn count(&self, stats: &Stats) {
        let removed = self.expired.load(Ordering::Relaxed) + self.removed.load(Ordering::Relaxed);
        stats.add(Ticker::CompactionFilterRemoved, removed);
        stats.add(
            Ticker::CompactionFilterChanged,
            self.changed.load(Ordering::Relaxed),
        );
    }
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
    decisions: &'a FilterDecisions<'a>,
    keyspace: &'a str,
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
    /// and TTL, as `decisions` allow and count. Expiry is judged as of now. `dir` is the store's
    /// directory, which errors name.
    pub(crate) fn new(
        tree: &'a Tree,
        level: usize,
        decisions: &'a FilterDecisions<'a>,
        dir: &'a Path,
        input: I,
    ) -> Self {
        let filter = tree.options().compaction_filter.clone();
        let rules = Rules {
            all: filter.is_some() || tree.stamps_plain_values(),
            filter,
            expiry: Expiry::of(tree),
            level,
            decisions,
            keyspace: &tree.name,
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

    /// Whether the input is on an entry: not at its end, nor in a run given up
    /// ([`FilterDecisions::abandoned`]).
    #[inline]
    pub(crate) fn valid(&self) -> bool {
        self.input.valid() && !self.rules.decisions.abandoned()
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
            rules.decisions.expired.fetch_add(1, Ordering::Relaxed);
            tombstone(&mut self.key, &mut self.value, parsed.user_key, parsed.seq);
            self.rewrite = Rewrite::Tombstone;
            return Ok(());
        }
        let Some(filter) = &rules.filter else {
            return Ok(());
        };
        if !newest || !rules.decisions.may_ask(parsed.seq) {
            return Ok(());
        }
        match filter.filter(rules.level, parsed.user_key, value) {
            CompactionDecision::Keep => {}
            CompactionDecision::Remove => {
                rules.decisions.removed.fetch_add(1, Ordering::Relaxed);
                tombstone(&mut self.key, &mut self.value, parsed.user_key, parsed.seq);
                self.rewrite = Rewrite::Tombstone;
            }
            CompactionDecision::ChangeValue(new) => {
                rules.decisions.changed.fetch_add(1, Ordering::Relaxed);
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

impl<I: InternalIterator> ForwardEntries for CompactionInput<'_, I> {
    fn valid(&self) -> bool {
        CompactionInput::valid(self)
    }
    fn key(&self) -> &[u8] {
        CompactionInput::key(self)
    }
    fn value(&self) -> &[u8] {
        CompactionInput::value(self)
    }
    fn next(&mut self) -> Result<()> {
        CompactionInput::next(self)
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

//! Batched point lookups, [`Db::multi_get`]: one view of the store for the whole batch, each
//! distinct key looked up once, and each table asked once for all the keys it may hold, so that a
//! full filter answers them together and a data block is read once for the keys it holds
//! (`TableReader::search_batch`).

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::version::{FileMeta, Version};
use super::{Db, DbInner, Snapshot};
use crate::error::Result;
use crate::filter::FilterProbe;
use crate::key::{compare_bytes, InternalKey, ValueKind};
use crate::memtable::NewestEntry;
use crate::options::NUM_LEVELS;
use crate::sst::table_reader::{CopyValue, TableSearch};
use crate::stats::{FilterVerdict, Ticker};

/// What a lookup found: the newest entry, or an error. `None` while it is still looking.
type Answer = Option<Result<Option<NewestEntry>>>;

/// The distinct keys of a batch, sorted, and their lookups in progress: one entry per key in
/// each vector.
struct Batch<'k> {
    keys: Vec<&'k [u8]>,
    /// Each key's probe, its hash kept once a filter has computed it.
    probes: Vec<FilterProbe<'k>>,
    answers: Vec<Answer>,
}

/// The buffers one table's question is built in, kept from table to table.
struct Scratch<'a, 'k> {
    lookups: Vec<&'a [u8]>,
    probes: Vec<FilterProbe<'k>>,
    maybe: Vec<bool>,
    outcomes: Vec<(usize, TableSearch)>,
}

impl Db {
    /// The values of `keys`, as [`get`](Db::get) would return them one by one, from one view
    /// of the store: every answer sees the same writes. `result[i]` answers `keys[i]`;
    /// duplicate keys are looked up once.
    ///
    /// The keys are sorted, each table is asked once for all the keys it may hold, the filter
    /// bits of every key in every table of a level are prefetched before any is tested, and a
    /// data block is read once for all the keys it holds. So far this is about as fast as Gets one
    /// at a time (0.8–1.3 × their speed per key in `examples/multi_get_cost.rs`: slower on small
    /// stores whose filters sit in the CPU caches, level or faster at a million keys): use it for
    /// the one view of the store, not yet for speed. The filter statistics count each distinct
    /// key as a Get would.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("a", "1")?;
    /// db.put("c", "3")?;
    /// db.flush()?;
    /// let values = db.multi_get(&["c", "b", "a", "c"]);
    /// let values: Vec<Option<Vec<u8>>> = values.into_iter().collect::<Result<_, _>>()?;
    /// assert_eq!(values, [Some(b"3".to_vec()), None, Some(b"1".to_vec()), Some(b"3".to_vec())]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Each answer is `Err` on its own: `Error::Corruption` naming the file if a table that
    /// key's lookup must read is damaged, `Error::Io` if one cannot be read.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_at_sequence(keys, None)
    }

    /// [`multi_get`](Db::multi_get) at `snapshot`.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("a", "old")?;
    /// let snapshot = db.snapshot();
    /// db.put("a", "new")?;
    /// let values = db.multi_get_at(&snapshot, &["a"]);
    /// assert_eq!(values[0].as_ref().ok(), Some(&Some(b"old".to_vec())));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`multi_get`](Db::multi_get).
    ///
    /// # Panics
    /// If `snapshot` was taken from another `Db`.
    pub fn multi_get_at<K: AsRef<[u8]>>(
        &self,
        snapshot: &Snapshot,
        keys: &[K],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        self.check_snapshot(snapshot);
        self.multi_get_at_sequence(keys, Some(snapshot.sequence()))
    }

    fn multi_get_at_sequence<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        sequence: Option<u64>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let inner = &self.inner;
        inner.stats.add(Ticker::NumberKeysRead, keys.len() as u64);
        // As a Get: the super-version first, then the sequence, one view for the whole batch.
        let sv = inner.current.read();
        let seq = sequence.unwrap_or_else(|| inner.last_sequence.load(Ordering::Acquire));

        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_unstable_by(|&a, &b| compare_bytes(keys[a].as_ref(), keys[b].as_ref()));
        // `distinct_of[i]`: the distinct key `keys[i]` is; `uses[d]`: how many keys are `d`.
        let mut distinct_of = vec![0; keys.len()];
        let mut uses: Vec<usize> = Vec::with_capacity(keys.len());
        let mut batch = Batch {
            keys: Vec::with_capacity(keys.len()),
            probes: Vec::with_capacity(keys.len()),
            answers: Vec::with_capacity(keys.len()),
        };
        let mut lookups = Vec::with_capacity(keys.len());
        for &i in &order {
            let key = keys[i].as_ref();
            if batch.keys.last() != Some(&key) {
                batch.keys.push(key);
                lookups.push(InternalKey::new(key, seq, ValueKind::Value));
                batch.probes.push(FilterProbe::new(key));
                batch.answers.push(None);
                uses.push(0);
            }
            let d = batch.keys.len() - 1;
            distinct_of[i] = d;
            uses[d] += 1;
        }

        for (lookup, answer) in lookups.iter().zip(&mut batch.answers) {
            let hit = sv
                .mem
                .get(lookup)
                .or_else(|| sv.imm.iter().find_map(|m| m.get(lookup)));
            if let Some(hit) = hit {
                inner.stats.inc(Ticker::MemtableHit);
                *answer = Some(Ok(Some(hit)));
            }
        }
        inner.search_tables_batch(&sv.version, &lookups, &mut batch);
        drop(sv);

        let mut found = 0;
        let results = distinct_of
            .iter()
            .map(|&d| {
                uses[d] -= 1;
                // The last key to ask takes the value; earlier duplicates get copies.
                let answer = if uses[d] == 0 {
                    batch.answers[d].take()
                } else {
                    batch.answers[d].as_ref().map(|a| match a {
                        Ok(entry) => Ok(entry.clone()),
                        Err(e) => Err(e.duplicate()),
                    })
                };
                match answer {
                    Some(Ok(Some(NewestEntry::Value(v)))) => {
                        found += 1;
                        Ok(Some(v))
                    }
                    Some(Ok(Some(NewestEntry::Deleted) | None)) | None => Ok(None),
                    Some(Err(e)) => Err(e),
                }
            })
            .collect();
        inner.stats.add(Ticker::NumberKeysFound, found);
        results
    }
}

impl DbInner {
    /// The table walk of a Get, for every unanswered key of `batch` at once (`lookups[d]` the
    /// lookup key of key `d`): the L0 tables newest first, then each level, every table asked
    /// once for the unanswered keys in its range. Before a level's tables are asked, every
    /// (key, table) pair's filter bits are prefetched, so that their cache misses overlap.
    fn search_tables_batch(
        &self,
        version: &Version,
        lookups: &[InternalKey],
        batch: &mut Batch<'_>,
    ) {
        let n = batch.keys.len();
        let mut scratch = Scratch {
            lookups: Vec::with_capacity(n),
            probes: Vec::with_capacity(n),
            maybe: Vec::with_capacity(n),
            outcomes: Vec::with_capacity(n),
        };
        // One level's questions: (table, the range of `members` holding its keys).
        let mut groups: Vec<(&Arc<FileMeta>, Range<usize>)> = Vec::new();
        let mut members: Vec<usize> = Vec::with_capacity(n);
        let mut consulted = 0;
        for (level, files) in version.levels.iter().enumerate().take(NUM_LEVELS) {
            groups.clear();
            members.clear();
            if level == 0 {
                // Newest first; a key a newer table answers is not asked again (`ask_table`).
                for file in files.iter().rev() {
                    let from = members.len();
                    members.extend((0..n).filter(|&d| {
                        batch.answers[d].is_none() && file.overlaps(batch.keys[d], batch.keys[d])
                    }));
                    groups.push((file, from..members.len()));
                }
            } else {
                // The keys are sorted and the level's tables disjoint and sorted: one walk of both.
                let (mut d, mut f) = (0, 0);
                while d < n && f < files.len() {
                    let key = batch.keys[d];
                    if compare_bytes(files[f].largest_user(), key).is_lt() {
                        f += 1;
                        continue;
                    }
                    if compare_bytes(files[f].smallest_user(), key).is_gt() {
                        d += 1; // between two tables
                        continue;
                    }
                    let from = members.len();
                    while d < n && compare_bytes(batch.keys[d], files[f].largest_user()).is_le() {
                        if batch.answers[d].is_none() {
                            members.push(d);
                        }
                        d += 1;
                    }
                    groups.push((&files[f], from..members.len()));
                    f += 1;
                }
            }
            for (file, range) in &groups {
                // Only readers already open: prefetching must not open a table.
                if let Some(pinned) = file.pinned_reader() {
                    let table = pinned.reader();
                    for &d in &members[range.clone()] {
                        table.prefetch_filter(&batch.probes[d]);
                    }
                }
            }
            for (file, range) in &groups {
                consulted += self.ask_table(
                    level,
                    file,
                    lookups,
                    &members[range.clone()],
                    batch,
                    &mut scratch,
                );
            }
        }
        self.stats.add(Ticker::TablesConsulted, consulted);
    }

    /// Asks the table of `file` (at `level`) for the keys `members` of `batch` still unanswered
    /// and records what it found and what its filter said; returns how many keys it was asked
    /// for.
    /// A failed batch is asked again key by key, so that only the keys whose blocks are damaged
    /// get the error.
    fn ask_table<'a, 'k>(
        &self,
        level: usize,
        file: &FileMeta,
        lookups: &'a [InternalKey],
        members: &[usize],
        batch: &mut Batch<'k>,
        scratch: &mut Scratch<'a, 'k>,
    ) -> u64 {
        let unanswered: Vec<usize>;
        let members = if members.iter().all(|&d| batch.answers[d].is_none()) {
            members
        } else {
            unanswered = members
                .iter()
                .copied()
                .filter(|&d| batch.answers[d].is_none())
                .collect();
            &unanswered
        };
        if members.is_empty() {
            return 0;
        }
        let table = match self.tables.get(file) {
            Ok(t) => t,
            Err(e) => {
                for &d in members {
                    batch.answers[d] = Some(Err(e.duplicate()));
                }
                return 0;
            }
        };
        if let [d] = *members {
            // One key: the single Get's search, without building a batch.
            let outcome = table.search::<CopyValue>(lookups[d].as_bytes(), &batch.probes[d]);
            self.record_search(level, d, outcome, batch);
            return 1;
        }
        scratch.lookups.clear();
        scratch
            .lookups
            .extend(members.iter().map(|&d| lookups[d].as_bytes()));
        scratch.probes.clear();
        scratch
            .probes
            .extend(members.iter().map(|&d| batch.probes[d].clone()));
        let searched = table.search_batch::<CopyValue>(
            &scratch.lookups,
            &scratch.probes,
            &mut scratch.maybe,
            &mut scratch.outcomes,
        );
        // Keep the hashes the filter computed, for the next tables.
        for (&d, probe) in members.iter().zip(scratch.probes.drain(..)) {
            batch.probes[d] = probe;
        }
        match searched {
            Ok(Some(layout)) => {
                // The filter's "no"s, then the searches of the keys it let through.
                for _ in scratch.maybe.iter().filter(|&&maybe| !maybe) {
                    self.stats
                        .record_filter(level, layout, FilterVerdict::Useful);
                }
                for (i, search) in scratch.outcomes.drain(..) {
                    self.record_search(level, members[i], Ok(search), batch);
                }
            }
            Ok(None) => {
                for (i, search) in scratch.outcomes.drain(..) {
                    self.record_search(level, members[i], Ok(search), batch);
                }
            }
            Err(_) => {
                // Again key by key: only the keys whose blocks are damaged get the error.
                for &d in members {
                    let outcome =
                        table.search::<CopyValue>(lookups[d].as_bytes(), &batch.probes[d]);
                    self.record_search(level, d, outcome, batch);
                }
            }
        }
        members.len() as u64
    }

    /// Records what a table's search for key `d` found and what its filter said (at `level`).
    fn record_search(
        &self,
        level: usize,
        d: usize,
        outcome: Result<TableSearch>,
        batch: &mut Batch<'_>,
    ) {
        match outcome {
            Ok(search) => {
                if let Some((layout, maybe)) = search.filter {
                    let verdict = FilterVerdict::of(maybe, search.found.is_some());
                    self.stats.record_filter(level, layout, verdict);
                }
                if let Some(entry) = search.found {
                    batch.answers[d] = Some(Ok(Some(entry)));
                }
            }
            Err(e) => batch.answers[d] = Some(Err(e)),
        }
    }
}

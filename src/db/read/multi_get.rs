//! Batched point lookups, [`Db::multi_get`]: one view of the store for the whole batch, each
//! distinct key looked up once. The keys walk the tables whose filters are kept in memory
//! together, unsorted, table by table along a Get's way, their cache misses overlapped; keys
//! that meet a table whose filter only a search can ask go on sorted, so that each table is
//! asked once for all the keys it may hold (`TableReader::search_batch`).

use std::cell::Cell;
use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::with_lookup_key;
use crate::db::tree::{SuperVersion, Tree};
use crate::db::version::table_cache::TableRef;
use crate::db::version::{FileMeta, Version};
use crate::db::{Db, Snapshot};
use crate::error::Result;
use crate::filter::{FilterLayout, FilterPolicy, FilterProbe};
use crate::key::{compare_bytes, leading_bytes, InternalKey, SEEK_KIND};
use crate::memtable::NewestEntry;
use crate::options::NUM_LEVELS;
use crate::sst::block::KeyOrder;
use crate::sst::filter_block::InMemoryFilter;
use crate::sst::table_reader::{CopyValue, Located, TableReader, TableSearch};
use crate::stats::{FilterVerdict, Ticker};

/// What a lookup found: the newest entry, or an error. `None` while it is still looking.
type Answer = Option<Result<Option<NewestEntry>>>;

/// Where lookups record what they found, by distinct key.
trait RecordAnswer {
    /// Records `found` as distinct key `d`'s answer; the key is then done.
    fn record(&mut self, d: usize, found: Result<Option<NewestEntry>>);
}

impl RecordAnswer for Vec<Answer> {
    fn record(&mut self, d: usize, found: Result<Option<NewestEntry>>) {
        self[d] = Some(found);
    }
}

/// Each distinct key's answer, kept as `multi_get` returns it, so that a batch without repeated
/// keys returns these very values; beside them, which keys are done (a deleted key is done and
/// `Ok(None)`, as is an absent one).
struct Answers<'t> {
    values: Vec<Result<Option<Vec<u8>>>>,
    done: Vec<bool>,
    /// How many values were found.
    found: u64,
    /// The keyspace asked, which judges expiry, and the store's directory, which its errors name.
    tree: &'t Tree,
    dir: &'t Path,
    /// The distinct keys whose newest entry is a merge operand, resolved once the walk is done.
    operands: Vec<usize>,
}

impl Answers<'_> {
    /// Whether distinct key `d` is still looking.
    #[inline]
    fn open(&self, d: usize) -> bool {
        !self.done[d]
    }
}

impl RecordAnswer for Answers<'_> {
    fn record(&mut self, d: usize, found: Result<Option<NewestEntry>>) {
        self.done[d] = true;
        self.values[d] = match found.and_then(|f| self.tree.expire_found(self.dir, f)) {
            Ok(Some(NewestEntry::Value(v))) => {
                self.found += 1;
                Ok(Some(v))
            }
            Ok(Some(NewestEntry::Merge(_))) => {
                self.operands.push(d);
                Ok(None)
            }
            // `expire_found` made an expiring value a value or a tombstone.
            Ok(
                Some(NewestEntry::Deleted | NewestEntry::RangeDeleted | NewestEntry::Expiring(_))
                | None,
            ) => Ok(None),
            Err(e) => Err(e),
        };
    }
}

/// The distinct keys of a batch that [`DbInner::sift`] stopped, sorted, and their lookups in
/// progress: one entry per key in each vector.
struct Batch<'k> {
    keys: Vec<&'k [u8]>,
    /// Each key's probe, its hash kept once a filter has computed it.
    probes: Vec<FilterProbe<'k>>,
    answers: Vec<Answer>,
    /// The position along the walk of the first table each key is searched in (see `sift`).
    resume: Vec<usize>,
}

/// The buffers one table's question is built in, kept from table to table.
struct Scratch<'a, 'k> {
    lookups: Vec<&'a [u8]>,
    probes: Vec<FilterProbe<'k>>,
    maybe: Vec<bool>,
    outcomes: Vec<(usize, TableSearch)>,
}

/// The buffers of a batch that borrow nothing, kept by each thread from one batch to the next
/// so that a batch allocates little beyond its answers (see [`BUFFERS`]).
#[derive(Default)]
struct Buffers {
    /// The hash table of [`distinct_keys`].
    slots: Vec<usize>,
    /// For each key of the batch, the distinct key it is.
    distinct_of: Vec<usize>,
    /// Which distinct keys are done (see [`Answers`]).
    done: Vec<bool>,
    /// Each distinct key's position along the walk where [`DbInner::sift`] stopped it.
    resume: Vec<usize>,
    /// The distinct keys still walking.
    walking: Vec<usize>,
    /// Each distinct key's [`leading_bytes`].
    leads: Vec<u128>,
    /// What the filters said of the keys asked at one stage.
    maybe: Vec<bool>,
    /// The allocations of the vectors that borrow the batch's keys and tables, kept empty
    /// between batches and [`recycle`]d.
    spare: Spare,
}

/// The vectors of [`distinct_keys`] and [`DbInner::sift`] that borrow a batch's keys or its
/// view of the store, empty, their lifetimes forgotten (see [`recycle`]).
#[derive(Default)]
struct Spare {
    probes: Vec<FilterProbe<'static>>,
    asked: Vec<Asked<'static>>,
    queries: Vec<(&'static [u8], &'static FilterProbe<'static>)>,
    located: Vec<LocatedKey<'static>>,
}

/// A key asked of an in-memory filter at one stage of [`DbInner::sift`]: the distinct key, its
/// table's reader and the policy of its filter.
type Asked<'a> = (usize, &'a Arc<TableReader>, &'a dyn FilterPolicy);

/// A key [`DbInner::sift`] located in a table, waiting for its block to be searched.
type LocatedKey<'a> = (usize, &'a Arc<TableReader>, InternalKey, Located);

/// An empty vector with `v`'s allocation, for another element type of the same size and
/// alignment (the same type under other lifetimes): std collects a vector's own iterator into
/// such a vector in place, so the batch's vectors are allocated once per thread, not per batch.
#[inline]
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

/// Batches larger than this many keys do not leave their buffers to the thread's next batch.
const KEPT_BUFFER_KEYS: usize = 4096;

thread_local! {
    /// This thread's [`Buffers`], taken by a batch and put back when it is done; boxed, so that
    /// taking them moves a pointer, not the vectors.
    static BUFFERS: Cell<Option<Box<Buffers>>> = const { Cell::new(None) };
}

impl Db {
    /// The values of `keys`, as [`get`](Db::get) would return them one by one, from one view
    /// of the store: every answer sees the same writes. `result[i]` answers `keys[i]`;
    /// duplicate keys are looked up once.
    ///
    /// The keys walk the tables together, table by table along a Get's way: every key's filter
    /// line is prefetched before any is tested (the cache-local bloom's probes eight to an AVX2
    /// step where the CPU has it), and each key a filter lets through has its index lines
    /// prefetched, then its data block found, fetched and prefetched, before any is searched, so
    /// that the keys' cache misses overlap. A key every filter in its way rules out is absent
    /// without further work. Per key this is faster than Gets one at a time, most for absent keys
    /// (`examples/multi_get_cost.rs` and docs/benchmarks.md give the figures). The filter
    /// statistics count each distinct key as a Get would.
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
    /// key's lookup must read is damaged, `Error::Io` if one cannot be read; every answer is
    /// `Error::Closed` once the store is closed.
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
        self.multi_get_at_sequence(keys, Some(snapshot))
    }

    fn multi_get_at_sequence<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        snapshot: Option<&Snapshot>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let inner = &self.inner;
        let tree = &*self.tree;
        if inner.is_closed() {
            return keys.iter().map(|_| Err(inner.closed_error())).collect();
        }
        if let Err(e) = tree.check_live() {
            return keys.iter().map(|_| Err(e.duplicate())).collect();
        }
        tree.stats.add(Ticker::NumberKeysRead, keys.len() as u64);
        // As a Get: the super-version first, then the sequence, one view for the whole batch.
        // A follower's snapshot pins super-versions of its own.
        let pinned = snapshot.and_then(|s| s.view_of(tree.id));
        let current = pinned.is_none().then(|| tree.current.read());
        let Some(sv): Option<&Arc<SuperVersion>> = pinned.as_ref().or(current.as_deref()) else {
            // Never: one of the two is there.
            return keys.iter().map(|_| Err(inner.closed_error())).collect();
        };
        let seq = snapshot.map_or_else(
            || inner.last_sequence.load(Ordering::Acquire),
            |s| s.sequence(),
        );
        if sv.version.range_tombstones {
            // A table's range tombstones apply whatever its filter says, which the batched walk
            // below does not ask: each key walks as a Get does, in the same view.
            return keys
                .iter()
                .map(|k| {
                    let found = tree.get_in::<CopyValue>(sv, k.as_ref(), seq, |v| v)?;
                    let found = match tree.expire_found(&inner.dir, found)? {
                        Some(NewestEntry::Value(v)) => Some(v),
                        Some(NewestEntry::Merge(_)) => self.read_merged(sv, k.as_ref(), seq)?,
                        _ => None,
                    };
                    if found.is_some() {
                        tree.stats.inc(Ticker::NumberKeysFound);
                    }
                    Ok(found)
                })
                .collect();
        }

        // Taken out of the cell for the batch: a nested use would find it empty and allocate
        // its own rather than clobber this one.
        let mut buffers = BUFFERS.take().unwrap_or_default();
        let mut probes = recycle(std::mem::take(&mut buffers.spare.probes));
        distinct_keys(
            keys,
            &mut buffers.slots,
            &mut buffers.distinct_of,
            &mut probes,
        );
        let mut values = Vec::with_capacity(keys.len());
        values.resize_with(probes.len(), || Ok(None));
        let mut done = std::mem::take(&mut buffers.done);
        done.clear();
        done.resize(probes.len(), false);
        let mut answers = Answers {
            values,
            done,
            found: 0,
            tree,
            dir: &inner.dir,
            operands: Vec::new(),
        };
        // Empty memtables (as after a flush) are passed over without building a lookup key.
        if !(sv.mem.is_empty() && sv.imm.iter().all(|m| m.is_empty())) {
            for (d, probe) in probes.iter().enumerate() {
                let hit = with_lookup_key(probe.key(), seq, |lookup| {
                    sv.mem
                        .get(lookup)
                        .or_else(|| sv.imm.iter().find_map(|m| m.get(lookup)))
                });
                if let Some(hit) = hit {
                    tree.stats.inc(Ticker::MemtableHit);
                    if matches!(hit, NewestEntry::RangeDeleted) {
                        tree.stats.inc(Ticker::RangeDeleteCovered);
                    }
                    answers.record(d, Ok(Some(hit)));
                }
            }
        }
        if tree.sift(&sv.version, seq, &probes, &mut buffers, &mut answers) {
            tree.search_rest(&sv.version, seq, &probes, &buffers.resume, &mut answers);
        }
        for &d in &answers.operands {
            let merged = self.read_merged(sv, probes[d].key(), seq);
            answers.found += u64::from(matches!(merged, Ok(Some(_))));
            answers.values[d] = merged;
        }
        drop(current);

        let Answers {
            mut values,
            done,
            mut found,
            ..
        } = answers;
        if probes.len() != keys.len() {
            values = values_per_key(values, &buffers.distinct_of);
            found = values.iter().filter(|v| matches!(v, Ok(Some(_)))).count() as u64;
        }
        tree.stats.add(Ticker::NumberKeysFound, found);
        if keys.len() <= KEPT_BUFFER_KEYS {
            buffers.done = done;
            buffers.spare.probes = recycle(probes);
            BUFFERS.set(Some(buffers));
        }
        values
    }
}

/// The answer of each key of a batch that repeats keys, from its distinct keys' `values`
/// (`distinct_of[k]` the distinct key of key `k`): the last key to ask a distinct key takes its
/// value, earlier ones get copies.
fn values_per_key(
    values: Vec<Result<Option<Vec<u8>>>>,
    distinct_of: &[usize],
) -> Vec<Result<Option<Vec<u8>>>> {
    let mut last_use = vec![0; values.len()];
    for (k, &d) in distinct_of.iter().enumerate() {
        last_use[d] = k;
    }
    let mut values: Vec<Option<_>> = values.into_iter().map(Some).collect();
    (distinct_of.iter().enumerate())
        .map(|(k, &d)| {
            if last_use[d] == k {
                return values[d].take().unwrap_or(Ok(None));
            }
            match &values[d] {
                Some(Ok(v)) => Ok(v.clone()),
                Some(Err(e)) => Err(e.duplicate()),
                None => Ok(None),
            }
        })
        .collect()
}

/// What [`DbInner::sift`] returns for a key whose walk it finished: no table is left to search.
const WALKED: usize = usize::MAX;

/// The open reader of `file`'s table and its filter, if that filter answers from memory (see
/// `TableReader::filter_in_memory`); `None` if only a search can tell, or the table is not open.
fn in_memory_filter(file: &FileMeta) -> Option<(&Arc<TableReader>, InMemoryFilter<'_>)> {
    let reader = file.pinned_reader()?.reader();
    Some((reader, reader.filter_in_memory()?))
}

/// The cache lines a probe of `reader`'s filter reads, as a Get counts them
/// (`filter.lines.touched`): 0 unless it is a full filter kept in memory.
#[inline]
fn filter_lines(reader: &TableReader) -> u32 {
    reader.filter().map_or(0, |f| f.lines_per_probe())
}

/// Fills `probes` with the distinct keys of `keys` in the order they first appear; `distinct_of`
/// becomes for each key the distinct key it is. Found through a table of the keys' hashes (which
/// the filters use too), without sorting; `table` is its buffer.
fn distinct_keys<'k, K: AsRef<[u8]>>(
    keys: &'k [K],
    table: &mut Vec<usize>,
    distinct_of: &mut Vec<usize>,
    probes: &mut Vec<FilterProbe<'k>>,
) {
    const EMPTY: usize = usize::MAX;
    probes.clear();
    probes.reserve(keys.len());
    distinct_of.clear();
    // At most a quarter full, so that most keys find an empty slot at once.
    let slots = (4 * keys.len()).next_power_of_two().max(2);
    let mask = slots - 1;
    table.clear();
    table.resize(slots, EMPTY);
    for key in keys {
        let probe = FilterProbe::new(key.as_ref());
        let mut slot = probe.xxh3_64() as usize & mask;
        let d = loop {
            match table[slot] {
                EMPTY => {
                    table[slot] = probes.len();
                    probes.push(probe);
                    break probes.len() - 1;
                }
                i if probes[i].key() == probe.key() => break i,
                _ => slot = (slot + 1) & mask,
            }
        };
        distinct_of.push(d);
    }
}

impl Tree {
    /// The batch's walk through the tables whose filters are kept in memory, before any key is
    /// sorted: stage by stage along a Get's walk (each L0 table newest first, then each deeper
    /// level), every key still walking has its table at that stage found and its filter line
    /// prefetched, then tested; the keys a filter lets through are then searched in that table,
    /// in passes that overlap their cache misses (index lines prefetched, indexes searched, data
    /// blocks fetched and their restart arrays prefetched, restart entries prefetched, the
    /// entries each seek will decode prefetched, then the seeks). A key found (or whose search
    /// failed) is answered; one not found walks on. The filters' answers are counted as Gets
    /// count them.
    ///
    /// Leaves in `buffers.resume`, for each key, the position along the walk (0 for the newest
    /// L0 table) of the table it stopped at, because that table's filter cannot answer from
    /// memory (another layout, a filter charged to the block cache, a table not yet open): the
    /// rest of its walk is [`search_rest`](Self::search_rest)'s. [`WALKED`] for every other key.
    /// Returns whether it stopped any key.
    fn sift<'v>(
        &self,
        version: &'v Version,
        seq: u64,
        probes: &[FilterProbe<'_>],
        buffers: &mut Buffers,
        answers: &mut Answers<'_>,
    ) -> bool {
        let Buffers {
            resume,
            walking,
            leads,
            maybe,
            spare,
            ..
        } = buffers;
        resume.clear();
        resume.resize(probes.len(), WALKED);
        walking.clear();
        walking.extend((0..probes.len()).filter(|&d| answers.open(d)));
        leads.clear();
        leads.extend(probes.iter().map(|p| leading_bytes(p.key())));
        let mut asked: Vec<Asked<'_>> = recycle(std::mem::take(&mut spare.asked));
        // Each asked key's filter bytes and probe, as its policy takes them.
        let mut queries: Vec<(&[u8], &FilterProbe<'_>)> =
            recycle(std::mem::take(&mut spare.queries));
        let mut located: Vec<LocatedKey<'_>> = recycle(std::mem::take(&mut spare.located));
        let mut consulted = 0;
        // An L0 table, or (None) the one table of a deeper level that may hold each key.
        let stages = (version.levels[0].iter().rev())
            .map(|file| (0, Some(file)))
            .chain((1..version.depth()).map(|level| (level, None)));
        // Whether a key left the walk at the last stage that asked any, so that `walking` is
        // pruned before the next stage (never after the last one).
        let mut left = false;
        let mut stopped = false;
        for (position, (level, l0_table)) in stages.enumerate() {
            if left {
                walking.retain(|&d| resume[d] == WALKED && answers.open(d));
                left = false;
            }
            if walking.is_empty() {
                break;
            }
            if l0_table.is_none() && version.levels[level].is_empty() {
                continue;
            }
            asked.clear();
            queries.clear();
            let mut ask =
                |d: usize, table: Option<(&'v Arc<TableReader>, InMemoryFilter<'v>)>| match table {
                    Some((reader, filter)) => {
                        asked.push((d, reader, filter.policy()));
                        queries.push((filter.bytes(), &probes[d]));
                    }
                    None => {
                        resume[d] = position;
                        left = true;
                        stopped = true;
                    }
                };
            match l0_table {
                Some(file) => {
                    let table = in_memory_filter(file);
                    for &d in walking.iter() {
                        let (key, lead) = (probes[d].key(), leads[d]);
                        if !(file.ends_before(key, lead) || file.starts_after(key, lead)) {
                            ask(d, table);
                        }
                    }
                }
                None => {
                    for &d in walking.iter() {
                        let (key, lead) = (probes[d].key(), leads[d]);
                        // None: between this level's tables.
                        if let Some(file) = version.table_for_key(level, key, lead) {
                            ask(d, in_memory_filter(file));
                        }
                    }
                }
            }
            // Each run of filters of one policy (a level's tables share one, as a rule) asked in
            // one call, which overlaps the keys' cache misses.
            maybe.clear();
            maybe.resize(asked.len(), true);
            let mut start = 0;
            while let Some(&(_, _, policy)) = asked.get(start) {
                let end = start
                    + asked[start..]
                        .iter()
                        .take_while(|(_, _, p)| std::ptr::addr_eq(*p, policy))
                        .count();
                policy.may_match_each(&queries[start..end], &mut maybe[start..end]);
                start = end;
            }
            consulted += asked.len() as u64;
            // The keys let through: their index lines prefetched, then each located in its table.
            let mut let_through = 0;
            for (&(d, reader, _), _) in asked.iter().zip(maybe.iter()).filter(|&(_, &m)| m) {
                reader.prefetch_index(probes[d].key());
                let_through += 1;
            }
            let useful = (asked.len() - let_through) as u64;
            if useful > 0 {
                self.stats
                    .record_filters(level, FilterLayout::Full, FilterVerdict::Useful, useful);
                // The lines of the keys let through are counted with their searches.
                let lines = asked
                    .iter()
                    .zip(maybe.iter())
                    .filter(|&(_, &m)| !m)
                    .map(|(&(_, reader, _), _)| u64::from(filter_lines(reader)))
                    .sum();
                self.stats.record_filter_lines(level, lines);
            }
            if let_through == 0 {
                continue;
            }
            left = true;
            // Every key's index searched before any block is fetched: each fetch takes a lock
            // of the block cache, which would hold up the next key's index misses.
            for (&(d, reader, _), _) in asked.iter().zip(maybe.iter()).filter(|&(_, &m)| m) {
                let lookup = InternalKey::new(probes[d].key(), seq, SEEK_KIND);
                match reader.locate_past_filter::<CopyValue>(lookup.as_bytes()) {
                    Ok(l) => located.push((d, reader, lookup, l)),
                    // As a Get's failed search, it counts no filter answer.
                    Err(e) => answers.record(d, Err(e)),
                }
            }
            located.retain_mut(|(d, reader, _, l)| match reader.fetch_located_block(l) {
                Ok(()) => {
                    if let Some(block) = l.block() {
                        block.prefetch_restart_array();
                    }
                    true
                }
                Err(e) => {
                    answers.record(*d, Err(e));
                    false
                }
            });
            self.finish_located(level, &mut located, answers);
        }
        self.stats.add(Ticker::TablesConsulted, consulted);
        spare.asked = recycle(asked);
        spare.queries = recycle(queries);
        spare.located = recycle(located);
        stopped
    }

    /// The rest of the table walk for the keys [`sift`](Self::sift) stopped, sorted so that each
    /// table is asked once for all of its keys, each key from the table its `resume` names.
    fn search_rest(
        &self,
        version: &Version,
        seq: u64,
        probes: &[FilterProbe<'_>],
        resume: &[usize],
        answers: &mut Answers<'_>,
    ) {
        let unanswered = |d: &usize| resume[*d] != WALKED && answers.open(*d);
        // Sorted by the keys' first 16 bytes as one integer, the bytes compared only on a tie:
        // the same order as comparing the bytes, at a fraction of the cost for short keys.
        let mut rest: Vec<(u128, usize)> = (0..probes.len())
            .filter(unanswered)
            .map(|d| (leading_bytes(probes[d].key()), d))
            .collect();
        rest.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| compare_bytes(probes[a.1].key(), probes[b.1].key()))
        });
        let lookups: Vec<InternalKey> = rest
            .iter()
            .map(|&(_, d)| InternalKey::new(probes[d].key(), seq, SEEK_KIND))
            .collect();
        let lookup_bytes: Vec<&[u8]> = lookups.iter().map(InternalKey::as_bytes).collect();
        let mut batch = Batch {
            keys: rest.iter().map(|&(_, d)| probes[d].key()).collect(),
            probes: rest.iter().map(|&(_, d)| probes[d].clone()).collect(),
            answers: rest.iter().map(|_| None).collect(),
            resume: rest.iter().map(|&(_, d)| resume[d]).collect(),
        };
        self.search_tables_batch(version, &lookup_bytes, &mut batch);
        for (&(_, d), answer) in rest.iter().zip(batch.answers) {
            if let Some(answer) = answer {
                answers.record(d, answer);
            }
        }
    }

    /// The table walk of a Get, for every unanswered key of `batch` at once (`lookups[d]` the
    /// lookup key of key `d`): the L0 tables newest first, then each level, every table asked
    /// once for the unanswered keys in its range (which, the keys being sorted, form one run).
    fn search_tables_batch(&self, version: &Version, lookups: &[&[u8]], batch: &mut Batch<'_>) {
        let n = batch.keys.len();
        let mut scratch = Scratch {
            lookups: Vec::new(),
            probes: Vec::new(),
            maybe: Vec::with_capacity(n),
            outcomes: Vec::with_capacity(n),
        };
        let mut members: Vec<usize> = Vec::with_capacity(n);
        // A deeper level's tables and the range of `members` each is asked for.
        let mut groups: Vec<(&Arc<FileMeta>, Range<usize>)> = Vec::new();
        let mut consulted = 0;
        let l0_tables = version.levels[0].len();
        for (level, files) in version.levels.iter().enumerate().take(NUM_LEVELS) {
            if level == 0 {
                // Newest first; a key a newer table answers is not asked again.
                for (position, file) in files.iter().rev().enumerate() {
                    let keys = &batch.keys;
                    let from =
                        keys.partition_point(|k| compare_bytes(k, file.smallest_user()).is_lt());
                    let to = from
                        + keys[from..]
                            .partition_point(|k| compare_bytes(k, file.largest_user()).is_le());
                    members.clear();
                    members
                        .extend((from..to).filter(|&d| {
                            batch.answers[d].is_none() && batch.resume[d] <= position
                        }));
                    consulted +=
                        self.ask_table(level, file, lookups, &members, batch, &mut scratch);
                }
                continue;
            }
            // The keys are sorted and the level's tables disjoint and sorted: one walk of both.
            let position = l0_tables + level - 1;
            groups.clear();
            members.clear();
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
                    if batch.answers[d].is_none() && batch.resume[d] <= position {
                        members.push(d);
                    }
                    d += 1;
                }
                groups.push((&files[f], from..members.len()));
                f += 1;
            }
            consulted += self.ask_level(level, &groups, &members, lookups, batch, &mut scratch);
        }
        self.stats.add(Ticker::TablesConsulted, consulted);
    }

    /// Asks each of a deeper level's tables (`groups`: a table and the range of `members` it
    /// holds) for its keys; returns how many (key, table) questions were asked.
    ///
    /// A table asked for several keys overlaps their cache misses itself (`search_batch`). In a
    /// level of many tables most are asked for one key: those keys take the same passes across
    /// the level's tables, so that their misses overlap too: their filter bits prefetched, then
    /// each located in its table (filter, index, data block) and its restart array prefetched, then
    /// their restart entries prefetched, then the entries each seek will decode, then the seeks.
    fn ask_level<'a, 'k>(
        &self,
        level: usize,
        groups: &[(&Arc<FileMeta>, Range<usize>)],
        members: &[usize],
        lookups: &'a [&'a [u8]],
        batch: &mut Batch<'k>,
        scratch: &mut Scratch<'a, 'k>,
    ) -> u64 {
        for (file, range) in groups {
            if let ([d], Some(pinned)) = (&members[range.clone()], file.pinned_reader()) {
                pinned.reader().prefetch_filter(&batch.probes[*d]);
            }
        }
        let mut consulted = 0;
        // The keys asked of a table alone whose filter let them through to a data block.
        let mut located: Vec<(usize, TableRef<'_>, &[u8], Located)> = Vec::new();
        for (file, range) in groups {
            let keys = &members[range.clone()];
            let &[d] = keys else {
                consulted += self.ask_table(level, file, lookups, keys, batch, scratch);
                continue;
            };
            let table = match self.tables.get(file) {
                Ok(table) => table,
                Err(e) => {
                    batch.answers[d] = Some(Err(e));
                    continue;
                }
            };
            consulted += 1;
            let outcome = match table.locate::<CopyValue>(lookups[d], &batch.probes[d]) {
                Ok(l) => match l.block() {
                    Some(block) => {
                        block.prefetch_restart_array();
                        located.push((d, table, lookups[d], l));
                        continue;
                    }
                    // Nothing left to read: the filter's "no", most often.
                    None => table.finish_search::<CopyValue>(l, lookups[d]),
                },
                Err(e) => Err(e),
            };
            self.record_found(level, d, filter_lines(&table), outcome, &mut batch.answers);
        }
        self.finish_located(level, &mut located, &mut batch.answers);
        consulted
    }

    /// The last passes over keys located in their tables at `level` (data blocks fetched, their
    /// restart arrays prefetched): every block's restart entries prefetched, then the entries each
    /// seek will decode (`Block::prefetch_seek_span`), then each seek finished and recorded into
    /// `answers`. Empties `located`.
    fn finish_located<R, K, A>(
        &self,
        level: usize,
        located: &mut Vec<(usize, R, K, Located)>,
        answers: &mut A,
    ) where
        R: Deref<Target = Arc<TableReader>>,
        K: AsRef<[u8]>,
        A: RecordAnswer,
    {
        for block in located.iter().filter_map(|(_, _, _, l)| l.block()) {
            block.prefetch_restart_points();
        }
        for (_, _, lookup, l) in located.iter() {
            if let Some(block) = l.block() {
                block.prefetch_seek_span(lookup.as_ref(), KeyOrder::Internal);
            }
        }
        for (d, table, lookup, l) in located.drain(..) {
            let outcome = table.finish_search::<CopyValue>(l, lookup.as_ref());
            self.record_found(level, d, filter_lines(&table), outcome, answers);
        }
    }

    /// Asks the table of `file` (at `level`) for the keys `members` of `batch` (unanswered,
    /// ascending) and records what it found and what its filter said; returns how many keys it
    /// was asked for.
    /// A failed batch is asked again key by key, so that only the keys whose blocks are damaged
    /// get the error.
    fn ask_table<'a, 'k>(
        &self,
        level: usize,
        file: &FileMeta,
        lookups: &'a [&'a [u8]],
        members: &[usize],
        batch: &mut Batch<'k>,
        scratch: &mut Scratch<'a, 'k>,
    ) -> u64 {
        let (Some(&first), Some(&last)) = (members.first(), members.last()) else {
            return 0;
        };
        let table = match self.tables.get(file) {
            Ok(t) => t,
            Err(e) => {
                for &d in members {
                    batch.answers[d] = Some(Err(e.duplicate()));
                }
                return 0;
            }
        };
        let lines = filter_lines(&table);
        if first == last {
            // One key: the single Get's search, without building a batch.
            let outcome = table.search::<CopyValue>(lookups[first], &batch.probes[first]);
            self.record_found(level, first, lines, outcome, &mut batch.answers);
            return 1;
        }
        let searched = if last - first + 1 == members.len() {
            // A run of consecutive keys (no key among them answered yet), as usual for keys a
            // filter keeps turning away: the batch's own vectors, without copies.
            table.search_batch::<CopyValue>(
                &lookups[first..=last],
                &batch.probes[first..=last],
                &mut scratch.maybe,
                &mut scratch.outcomes,
            )
        } else {
            scratch.lookups.clear();
            scratch.lookups.extend(members.iter().map(|&d| lookups[d]));
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
            searched
        };
        match searched {
            Ok(layout) => {
                if let Some(layout) = layout {
                    // The filter's "no"s, counted at once; then the keys it let through.
                    let useful = scratch.maybe.iter().filter(|&&maybe| !maybe).count();
                    self.stats
                        .record_filters(level, layout, FilterVerdict::Useful, useful as u64);
                    self.stats
                        .record_filter_lines(level, useful as u64 * u64::from(lines));
                }
                for (i, search) in scratch.outcomes.drain(..) {
                    self.record_found(level, members[i], lines, Ok(search), &mut batch.answers);
                }
            }
            Err(_) => {
                // Again key by key: only the keys whose blocks are damaged get the error.
                for &d in members {
                    let outcome = table.search::<CopyValue>(lookups[d], &batch.probes[d]);
                    self.record_found(level, d, lines, outcome, &mut batch.answers);
                }
            }
        }
        members.len() as u64
    }

    /// Records what a table's search for key `d` found and what its filter said (at `level`),
    /// into `answers` (found or failed) and the statistics; `lines` is what a probe of the
    /// table's filter reads ([`filter_lines`]).
    fn record_found<A: RecordAnswer>(
        &self,
        level: usize,
        d: usize,
        lines: u32,
        outcome: Result<TableSearch>,
        answers: &mut A,
    ) {
        match outcome {
            Ok(search) => {
                if let Some((layout, maybe)) = search.filter {
                    let verdict = FilterVerdict::of(maybe, search.found.is_some());
                    self.stats.record_filter(level, layout, verdict);
                    self.stats.record_filter_lines(level, u64::from(lines));
                }
                if let Some(entry) = search.found {
                    answers.record(d, Ok(Some(entry)));
                }
            }
            Err(e) => answers.record(d, Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recycled vector keeps its allocation under its new element type, so that the batch's
    /// borrowing vectors are allocated once per thread.
    #[test]
    fn a_recycled_vector_keeps_its_allocation() {
        let key = b"k".to_vec();
        let mut probes: Vec<FilterProbe<'_>> = Vec::with_capacity(40);
        probes.push(FilterProbe::new(&key));
        let at = probes.as_ptr() as usize;
        let spare: Vec<FilterProbe<'static>> = recycle(probes);
        assert!(spare.is_empty());
        assert_eq!((spare.as_ptr() as usize, spare.capacity()), (at, 40));
        let again: Vec<FilterProbe<'_>> = recycle(spare);
        assert_eq!((again.as_ptr() as usize, again.capacity()), (at, 40));
    }
}

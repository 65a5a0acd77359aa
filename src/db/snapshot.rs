//! Snapshots: a sequence number a reader keeps, and the list of live ones that flushes and
//! compactions consult so that every snapshot keeps seeing the newest version of each key at or
//! below its sequence.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::tree::SuperVersion;
use super::Db;
use crate::memtable::MemTable;

/// The sequences of the live snapshots, with how many snapshots hold each.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<u64, usize>>,
    /// The newest live snapshot's sequence plus one (0: none), set under the lock, so that a
    /// compaction can look at it for each key it filters without taking the lock.
    newest: AtomicU64,
}

impl SnapshotList {
    fn acquire(&self, sequence: u64) {
        let mut live = self.live.lock();
        *live.entry(sequence).or_default() += 1;
        self.publish_newest(&live);
    }

    fn publish_newest(&self, live: &BTreeMap<u64, usize>) {
        let newest = live.keys().next_back().map_or(0, |&s| s + 1);
        self.newest.store(newest, Ordering::Release);
    }

    /// Registers a snapshot at the latest sequence, read under the list's lock: a flush or
    /// compaction reads the list after choosing its inputs, so either it sees this snapshot or
    /// every entry it rewrites is at or below its sequence. (Read before the lock, a compaction
    /// could zero or drop a version written in between, which the snapshot must not see.)
    fn acquire_latest(&self, last_sequence: &AtomicU64) -> u64 {
        let mut live = self.live.lock();
        let sequence = last_sequence.load(Ordering::Acquire);
        *live.entry(sequence).or_default() += 1;
        self.publish_newest(&live);
        sequence
    }

    fn release(&self, sequence: u64) {
        let mut live = self.live.lock();
        if let Some(n) = live.get_mut(&sequence) {
            *n -= 1;
            if *n == 0 {
                live.remove(&sequence);
                self.publish_newest(&live);
            }
        }
    }

    /// The live snapshots' sequences, ascending, each once.
    pub(crate) fn sequences(&self) -> Vec<u64> {
        self.live.lock().keys().copied().collect()
    }

    /// Whether a live snapshot is newer than `sequence` (any snapshot, for `None`), as of a moment
    /// ago: without the lock.
    pub(crate) fn any_newer_than(&self, sequence: Option<u64>) -> bool {
        let newest = self.newest.load(Ordering::Acquire);
        newest > sequence.map_or(0, |s| s + 1)
    }

    /// Runs `f` unless a live snapshot is newer than `sequence` (any snapshot, for `None`), holding
    /// the list's lock throughout, so that no snapshot is taken or released while it runs; `None`
    /// if one is.
    pub(crate) fn unless_any_newer_than<R>(
        &self,
        sequence: Option<u64>,
        f: impl FnOnce() -> R,
    ) -> Option<R> {
        let live = self.live.lock();
        let newer = match sequence {
            Some(s) => live.range(s + 1..).next().is_some(),
            None => !live.is_empty(),
        };
        (!newer).then(f)
    }

    /// How many snapshots are live, and the oldest one's sequence.
    pub(crate) fn summary(&self) -> (usize, Option<u64>) {
        let live = self.live.lock();
        (live.values().sum(), live.keys().next().copied())
    }
}

/// A consistent view of the store at one moment: reads at a snapshot ([`Db::get_at`],
/// [`Db::get_pinned_at`], [`Db::iter_at`], [`Db::scan_at`], [`Db::scan_prefix_at`]) see every
/// write acknowledged before it was taken and none after, however much is written, flushed or
/// compacted meanwhile. Released when dropped; it does not outlive a reopen.
///
/// ```
/// # fn main() -> siftdb::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
/// db.put(b"k", b"before")?;
/// let snapshot = db.snapshot();
/// db.put(b"k", b"after")?;
/// db.compact()?;
/// assert_eq!(db.get_at(&snapshot, b"k")?, Some(b"before".to_vec()));
/// assert_eq!(db.get(b"k")?, Some(b"after".to_vec()));
/// # Ok(())
/// # }
/// ```
pub struct Snapshot {
    sequence: u64,
    list: Arc<SnapshotList>,
    /// A follower's snapshot: every keyspace's super-version as it was taken, which its reads
    /// use. The writer a follower follows does not know the follower's snapshots, and may
    /// compact away the versions they see; the tables held here keep them.
    views: Option<Arc<BTreeMap<u32, Arc<SuperVersion>>>>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("sequence", &self.sequence)
            .field("follower", &self.views.is_some())
            .finish()
    }
}

impl Snapshot {
    /// A snapshot at `sequence`, registered in `list` until dropped.
    pub(crate) fn new(sequence: u64, list: Arc<SnapshotList>) -> Snapshot {
        list.acquire(sequence);
        Snapshot {
            sequence,
            list,
            views: None,
        }
    }

    /// The super-version reads of keyspace `id` at this snapshot use, if it pins one (a
    /// follower's): a keyspace created since reads as empty. `None`: the keyspace's current one.
    pub(crate) fn view_of(&self, id: u32) -> Option<Arc<SuperVersion>> {
        let views = self.views.as_ref()?;
        Some(views.get(&id).cloned().unwrap_or_else(|| {
            Arc::new(SuperVersion::first(
                Arc::new(MemTable::new(0)),
                Default::default(),
            ))
        }))
    }

    /// The sequence number of the last write the snapshot sees.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
}

impl Db {
    /// A snapshot of the store as it is now: every write acknowledged so far, and none after.
    /// While it is live, flushes and compactions keep the versions it sees (one per key at most),
    /// so hold snapshots only as long as needed. See [`Snapshot`].
    ///
    /// On a follower ([`Db::open_follower`]), a snapshot also holds every keyspace's tables and
    /// memtables as they are, and reads at it use those: the store it follows may compact away
    /// versions it sees.
    pub fn snapshot(&self) -> Snapshot {
        let list = Arc::clone(&self.inner.snapshots);
        if self.inner.follower.is_some() {
            // Under the state lock, which a catch-up holds while it installs: the super-versions
            // and the sequence of one catch-up.
            let st = self.inner.state.lock();
            let views = st.trees.iter().map(|(&id, t)| (id, Arc::clone(&t.sv)));
            let views = Some(Arc::new(views.collect()));
            let sequence = self.inner.last_sequence.load(Ordering::Acquire);
            drop(st);
            let mut snapshot = Snapshot::new(sequence, list);
            snapshot.views = views;
            return snapshot;
        }
        let sequence = list.acquire_latest(&self.inner.last_sequence);
        Snapshot {
            sequence,
            list,
            views: None,
        }
    }
}

impl Db {
    /// Panics unless `snapshot` was taken from this store: another store's sequence numbers mean
    /// nothing here.
    pub(crate) fn check_snapshot(&self, snapshot: &Snapshot) {
        assert!(
            Arc::ptr_eq(&snapshot.list, &self.inner.snapshots),
            "a snapshot of another siftdb::Db was passed to the store in {}",
            self.inner.dir.display()
        );
    }
}

impl Clone for Snapshot {
    fn clone(&self) -> Snapshot {
        let mut clone = Snapshot::new(self.sequence, Arc::clone(&self.list));
        clone.views = self.views.clone();
        clone
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.list.release(self.sequence);
    }
}

/// Which versions of one user key must survive a flush or compaction: the newest, and for every
/// live snapshot the newest at or below its sequence. Versions arrive newest first; each belongs
/// to the *stripe* of the smallest snapshot at or above its sequence (or to the latest stripe,
/// above every snapshot), and the first of each stripe is kept.
pub(crate) struct VersionRetention<'a> {
    snapshots: &'a [u64],
    /// The stripe of the last version kept for the current key (`usize::MAX`: none yet).
    last_stripe: usize,
}

impl<'a> VersionRetention<'a> {
    /// Retention against `snapshots`, ascending.
    pub(crate) fn new(snapshots: &'a [u64]) -> Self {
        VersionRetention {
            snapshots,
            last_stripe: usize::MAX,
        }
    }

    /// A new user key begins.
    pub(crate) fn next_key(&mut self) {
        self.last_stripe = usize::MAX;
    }

    /// Whether the version at `sequence` (of the current key, newer ones already seen) is kept.
    pub(crate) fn keep(&mut self, sequence: u64) -> bool {
        let stripe = self.snapshots.partition_point(|&s| s < sequence);
        if stripe == self.last_stripe {
            return false;
        }
        self.last_stripe = stripe;
        true
    }

    /// Keeps the next version whatever its stripe: the merge operands kept before it, unresolved,
    /// build on it (`operand_chains.rs`).
    pub(crate) fn keep_next(&mut self) {
        self.last_stripe = usize::MAX;
    }

    /// Whether no live snapshot lies between sequences `a` and `b` (in either order): every
    /// reader sees both or neither.
    pub(crate) fn same_stripe(&self, a: u64, b: u64) -> bool {
        let stripe = |seq: u64| self.snapshots.partition_point(|&s| s < seq);
        stripe(a) == stripe(b)
    }

    /// Whether a live snapshot is older than `sequence`. If none is, every older version of the
    /// key shares the stripe of a version at `sequence` and is dropped, so a tombstone there
    /// hides nothing once nothing of its key is left in deeper levels.
    pub(crate) fn snapshot_below(&self, sequence: u64) -> bool {
        self.snapshots.first().is_some_and(|&s| s < sequence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_version_and_the_newest_below_each_snapshot() {
        // Versions 10, 8, 6, 4, 2 of one key; snapshots at 3 and 7.
        let snapshots = [3, 7];
        let mut r = VersionRetention::new(&snapshots);
        r.next_key();
        let kept: Vec<u64> = [10, 8, 6, 4, 2]
            .into_iter()
            .filter(|&s| r.keep(s))
            .collect();
        // 10 (latest), 6 (newest ≤ 7), 2 (newest ≤ 3).
        assert_eq!(kept, vec![10, 6, 2]);
        // A version at a snapshot's own sequence belongs to it.
        r.next_key();
        let kept: Vec<u64> = [9, 7, 5, 3, 1].into_iter().filter(|&s| r.keep(s)).collect();
        assert_eq!(kept, vec![9, 7, 3]);
        // No snapshots: the newest only.
        let mut r = VersionRetention::new(&[]);
        r.next_key();
        let kept: Vec<u64> = [5, 4, 3].into_iter().filter(|&s| r.keep(s)).collect();
        assert_eq!(kept, vec![5]);
    }

    #[test]
    fn the_list_counts_snapshots_at_one_sequence() {
        let list = Arc::new(SnapshotList::default());
        let a = Snapshot::new(5, Arc::clone(&list));
        let b = a.clone();
        let c = Snapshot::new(9, Arc::clone(&list));
        assert_eq!(list.summary(), (3, Some(5)));
        assert_eq!(list.sequences(), vec![5, 9]);
        drop(a);
        assert_eq!(list.sequences(), vec![5, 9]);
        drop(b);
        assert_eq!(list.summary(), (1, Some(9)));
        drop(c);
        assert_eq!(list.summary(), (0, None));
    }

    #[test]
    fn a_snapshot_newer_than_a_sequence_is_seen_with_and_without_the_lock() {
        let list = Arc::new(SnapshotList::default());
        let newer_than = |s: Option<u64>| {
            let locked = list.unless_any_newer_than(s, || ()).is_none();
            assert_eq!(list.any_newer_than(s), locked, "at {s:?}");
            locked
        };
        assert!(!newer_than(None));
        let zero = Snapshot::new(0, Arc::clone(&list));
        assert!(newer_than(None), "a snapshot at sequence 0 is one");
        assert!(!newer_than(Some(0)));
        let seven = Snapshot::new(7, Arc::clone(&list));
        let seven_again = seven.clone();
        assert!(newer_than(Some(6)));
        assert!(!newer_than(Some(7)));
        drop(seven);
        assert!(newer_than(Some(6)), "a clone holds it");
        drop(seven_again);
        assert!(!newer_than(Some(6)));
        assert!(newer_than(None));
        drop(zero);
        assert!(!newer_than(None));
        // No snapshot can be taken or released while `f` runs.
        let held = list.unless_any_newer_than(None, || list.live.try_lock().is_none());
        assert_eq!(held, Some(true));
    }
}

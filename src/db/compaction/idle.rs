//! Compaction when writes pause: L0 merged into L1 below its trigger once a keyspace's writes
//! have stopped for a while (`Options::compact_l0_when_idle`).
//!
//! Below its trigger L0 keeps up to `level0_compaction_trigger - 1` tables until more writes come,
//! and a point lookup asks the filter of every one whose range holds its key: after a load, how
//! many filters a missing key costs depends on where the load happened to stop. Once writes
//! pause, a merge of L0 into L1 leaves one table per level to ask, whatever the load's end. The
//! price is one L0 → L1 job per pause that leaves L0 tables behind, against one per
//! `level0_compaction_trigger` flushes while writes flow; writes that keep coming, however slowly,
//! never count as a pause.

use std::time::{Duration, Instant};

use crate::db::tree::SuperVersion;
use crate::options::Options;

/// What the compaction thread last saw of a keyspace's writes: its live memtable's size, its
/// frozen memtables and its newest L0 table, and when that last changed.
#[derive(Debug, Default)]
pub(crate) struct IdleWatch {
    seen: Option<WriteState>,
    since: Option<Instant>,
}

/// A keyspace's writes as [`IdleWatch`] follows them: its live memtable's bytes, how many frozen
/// memtables wait, and its newest L0 table's number.
type WriteState = (usize, usize, u64);

impl IdleWatch {
    /// `Ok(())` if L0 holds tables and nothing was written to the keyspace for [`IDLE_AFTER`](crate::options::IDLE_AFTER),
    /// so L0 should be merged into L1 now; otherwise how long to wait before looking again
    /// (`None`: nothing to wait for, as with L0 empty or the option off).
    pub(crate) fn due(
        &mut self,
        sv: &SuperVersion,
        options: &Options,
        now: Instant,
    ) -> Result<(), Option<Duration>> {
        let newest_l0 = sv.version.levels[0].last().map(|f| f.number);
        let state = newest_l0
            .filter(|_| options.compact_l0_when_idle)
            .map(|l0| (sv.mem.approximate_bytes(), sv.imm.len(), l0));
        self.look(state, options.idle_compaction_after, now)
    }

    /// [`due`](Self::due) on what it sees of the keyspace (`None` if there is nothing to merge),
    /// with writes paused once they have been for `idle_after`.
    fn look(
        &mut self,
        state: Option<WriteState>,
        idle_after: Duration,
        now: Instant,
    ) -> Result<(), Option<Duration>> {
        let Some(state) = state else {
            self.seen = None;
            return Err(None);
        };
        if self.seen != Some(state) {
            self.seen = Some(state);
            self.since = Some(now);
        }
        let quiet = self.since.map_or(Duration::ZERO, |t| now.duration_since(t));
        if quiet >= idle_after {
            Ok(())
        } else {
            Err(Some(idle_after - quiet))
        }
    }
}

/// Whether an idle merge of L0 is still to come for a keyspace in `sv`, as
/// `siftdb.compaction-pending` counts it: L0 holds tables and no memtable holds writes (after
/// [`Db::flush`](crate::Db::flush), say). A memtable holding writes is not counted: its writes may
/// still be flowing.
pub(crate) fn pending(sv: &SuperVersion, options: &Options) -> bool {
    options.compact_l0_when_idle
        && !sv.version.levels[0].is_empty()
        && sv.mem.is_empty()
        && sv.imm.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::IDLE_AFTER;

    #[test]
    fn l0_is_due_once_the_keyspace_stayed_unchanged_for_the_idle_time() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut watch = IdleWatch::default();
        // Nothing in L0 (or the option off): nothing to wait for.
        assert_eq!(watch.look(None, IDLE_AFTER, at(0)), Err(None));
        assert_eq!(
            watch.look(Some((0, 0, 7)), IDLE_AFTER, at(0)),
            Err(Some(IDLE_AFTER))
        );
        assert_eq!(
            watch.look(Some((0, 0, 7)), IDLE_AFTER, at(400)),
            Err(Some(IDLE_AFTER - Duration::from_millis(400)))
        );
        // A write starts the wait again, as does a new L0 table or a frozen memtable.
        assert_eq!(
            watch.look(Some((100, 0, 7)), IDLE_AFTER, at(900)),
            Err(Some(IDLE_AFTER))
        );
        assert!(watch.look(Some((100, 0, 7)), IDLE_AFTER, at(1899)).is_err());
        assert_eq!(watch.look(Some((100, 0, 7)), IDLE_AFTER, at(1900)), Ok(()));
        assert_eq!(
            watch.look(Some((0, 1, 7)), IDLE_AFTER, at(2000)),
            Err(Some(IDLE_AFTER))
        );
        assert_eq!(
            watch.look(Some((0, 0, 8)), IDLE_AFTER, at(2500)),
            Err(Some(IDLE_AFTER))
        );
        assert_eq!(watch.look(Some((0, 0, 8)), IDLE_AFTER, at(3500)), Ok(()));
        // L0 emptied (by the merge): the next table starts a new wait.
        assert_eq!(watch.look(None, IDLE_AFTER, at(3600)), Err(None));
        assert_eq!(
            watch.look(Some((0, 0, 8)), IDLE_AFTER, at(3700)),
            Err(Some(IDLE_AFTER))
        );
    }
}

//! Work gathered while writes flow.
//!
//! Every L0 → L1 compaction rewrites the L1 tables its inputs overlap, and on random keys that is
//! all of L1; the more L0 tables one job takes, the less L1 is rewritten per byte flushed. Every
//! point lookup pays a filter check per L0 table, though, so L0 gathers up to
//! `level0_compaction_trigger_during_writes` tables only while writes flow, and compacts at
//! `level0_compaction_trigger` once they pause. Deeper levels likewise hold up to
//! `level_budget_during_writes` times their byte budget while writes flow: a level compacted the
//! moment it passes its budget keeps one compaction thread busy with jobs the writers wait
//! behind, while a level allowed to gather is brought back within budget in fewer, denser jobs
//! once the writes pause. Point lookups check one filter per level either way.

use std::time::{Duration, Instant};

use crate::db::tree::SuperVersion;
use crate::db::version::Triggers;
use crate::options::Options;

/// How long after the newest L0 table came writes still count as flowing, if a memtable holds
/// writes. Flushes during a bulk load come tens of milliseconds apart; a second without one means
/// the writes have slowed to where compacting at the quiet triggers costs them little.
pub(crate) const QUIET_AFTER: Duration = Duration::from_secs(1);

/// The compaction thread's view of the newest L0 table and when it first saw it.
#[derive(Debug, Default)]
pub(crate) struct WriteBurst {
    newest_l0: Option<u64>,
    seen_at: Option<Instant>,
}

impl WriteBurst {
    /// The triggers that start a compaction now and, if the quiet triggers would start one that
    /// waits for the writes, how long until it no longer waits (unless another table comes).
    pub(crate) fn triggers(
        &mut self,
        sv: &SuperVersion,
        options: &Options,
        now: Instant,
    ) -> (Triggers, Option<Duration>) {
        let quiet = Triggers::quiet(options);
        let newest = sv.version.levels[0].last().map(|f| f.number);
        if newest != self.newest_l0 {
            self.newest_l0 = newest;
            self.seen_at = Some(now);
        }
        if !self.flowing(sv, now) {
            return (quiet, None);
        }
        let since_newest = self.since_newest(now);
        let during = Triggers::during_writes(options);
        let held_back = sv.version.compaction_score(options, quiet).is_some()
            && sv.version.compaction_score(options, during).is_none();
        (
            during,
            held_back.then(|| QUIET_AFTER.saturating_sub(since_newest)),
        )
    }

    /// Whether `sv`'s writes count as flowing now, its newest L0 table as last seen by
    /// [`triggers`](Self::triggers).
    pub(crate) fn flowing(&self, sv: &SuperVersion, now: Instant) -> bool {
        writes_flow(
            !sv.mem.is_empty() || !sv.imm.is_empty(),
            self.since_newest(now),
        )
    }

    /// How long since the newest L0 table was first seen (forever if L0 was never seen).
    fn since_newest(&self, now: Instant) -> Duration {
        self.seen_at
            .map_or(Duration::MAX, |t| now.duration_since(t))
    }
}

/// Whether writes count as flowing: a memtable holds writes not yet flushed, and the newest L0
/// table came less than [`QUIET_AFTER`] ago. After [`Db::flush`](crate::Db::flush) no memtable
/// holds writes, so compactions start at the quiet triggers at once.
fn writes_flow(memtables_hold_writes: bool, since_newest_l0: Duration) -> bool {
    memtables_hold_writes && since_newest_l0 < QUIET_AFTER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_flow_only_while_a_memtable_holds_writes_and_tables_keep_coming() {
        assert!(writes_flow(true, Duration::ZERO));
        assert!(writes_flow(true, QUIET_AFTER - Duration::from_millis(1)));
        assert!(!writes_flow(true, QUIET_AFTER));
        assert!(!writes_flow(false, Duration::ZERO));
    }

    #[test]
    fn the_trigger_during_writes_stays_between_the_quiet_and_slowdown_triggers() {
        let o = Options::default();
        assert_eq!(o.l0_trigger_during_writes(), 19);
        let o = Options::default().level0_compaction_trigger(6);
        assert_eq!(o.l0_trigger_during_writes(), 6);
        let o = o.level0_compaction_trigger_during_writes(3);
        assert_eq!(o.l0_trigger_during_writes(), 6);
        let o = o.level0_compaction_trigger_during_writes(100);
        assert_eq!(o.l0_trigger_during_writes(), 27);
    }
}

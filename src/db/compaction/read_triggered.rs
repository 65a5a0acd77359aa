//! Compaction for reads: L0 compacted into L1 below its trigger once the Gets that checked L0's
//! filters in vain have cost about what the compaction costs.
//!
//! L0 keeps up to `level0_compaction_trigger - 1` tables for as long as no more writes come, and
//! every point lookup checks each of their filters. Compacting them into L1 early is the ski
//! rental problem: pay per read (the checks) until what was paid equals the price of buying (the
//! compaction), then buy. With the price known, that never costs more than twice the better of
//! the two choices made knowing the future reads (here the price is an estimate, within a factor
//! of two: `options::BYTES_PER_CHECK`), and it costs nothing when no reads come. LevelDB's seek
//! compaction makes the same trade for data block reads; with filters, the rent is the checks.

use std::time::{Duration, Instant};

use crate::db::version::{key_range, Version};
use crate::options::{Options, ReadCompactionTuning, CHECK_INTERVAL};
use crate::stats::Stats;

/// The longest it waits between looks: each look that finds neither a new check nor a new L0
/// table doubles the wait up to this, so that an idle store's thread wakes only now and then.
const IDLE_CHECK_INTERVAL: Duration = Duration::from_secs(6);

/// The compaction thread's account of what reads have paid for the tables now in L0.
#[derive(Debug)]
pub(crate) struct ReadRent {
    /// The oldest L0 table when the count began; a flush adds newer ones, and only an L0
    /// compaction, which takes them all, removes it.
    oldest_l0: Option<u64>,
    /// The store's count of L0 checks in vain when it began.
    checks_then: u64,
    /// When it last looked, the count and newest L0 table it saw, and how long it waits before
    /// the next look.
    last_look: Option<Instant>,
    checks_at_last_look: u64,
    newest_l0: Option<u64>,
    interval: Duration,
}

impl Default for ReadRent {
    fn default() -> Self {
        ReadRent {
            oldest_l0: None,
            checks_then: 0,
            last_look: None,
            checks_at_last_look: 0,
            newest_l0: None,
            interval: CHECK_INTERVAL,
        }
    }
}

impl ReadRent {
    /// Whether the checks made in vain since L0's oldest table came have paid for compacting L0
    /// into L1. Looks at most once per interval: [`CHECK_INTERVAL`] after a look that found new
    /// checks or a new L0 table, doubling up to [`IDLE_CHECK_INTERVAL`] while neither comes.
    pub(crate) fn paid(&mut self, version: &Version, stats: &Stats, options: &Options) -> bool {
        if !options.compact_l0_for_reads {
            return false;
        }
        let now = Instant::now();
        if self
            .last_look
            .is_some_and(|t| now.duration_since(t) < self.interval)
        {
            return false;
        }
        self.last_look = Some(now);
        // What reads have paid for L0's tables being there: its checks that found nothing.
        let l0_checks = stats.snapshot().level_filter_counts(0);
        let checks =
            (l0_checks.useful + l0_checks.positive).saturating_sub(l0_checks.true_positive);
        let l0 = &version.levels[0];
        let newest = l0.last().map(|f| f.number);
        // A new L0 table (a flush: reads may follow) or new checks: look again soon.
        let tuning = &options.read_compaction_tuning;
        self.interval = if checks == self.checks_at_last_look && newest == self.newest_l0 {
            (self.interval * 2).min(IDLE_CHECK_INTERVAL)
        } else {
            tuning.look_every
        };
        self.checks_at_last_look = checks;
        self.newest_l0 = newest;
        let oldest = l0.first().map(|f| f.number);
        if oldest != self.oldest_l0 {
            self.oldest_l0 = oldest;
            self.checks_then = checks;
            return false;
        }
        oldest.is_some()
            && checks.saturating_sub(self.checks_then) >= price_in_checks(version, tuning)
    }

    /// How long the compaction thread may wait before it looks again: `None` while L0 is empty
    /// (a flush wakes it) or the option is off.
    pub(crate) fn next_look(&self, version: &Version, options: &Options) -> Option<Duration> {
        (options.compact_l0_for_reads && !version.levels[0].is_empty()).then_some(self.interval)
    }
}

/// The price of compacting L0 into L1 in L0 checks: its input bytes (L0 and the L1 tables its key
/// range overlaps) at one check per `bytes_per_check`, and no less than `min_checks`.
fn price_in_checks(version: &Version, tuning: &ReadCompactionTuning) -> u64 {
    let l0 = &version.levels[0];
    let l1_bytes: u64 = key_range(l0).map_or(0, |(lo, hi)| {
        version
            .overlapping(1, &lo, &hi)
            .iter()
            .map(|f| f.size)
            .sum()
    });
    let bytes = version.level_bytes(0) + l1_bytes;
    (bytes / tuning.bytes_per_check.max(1)).max(tuning.min_checks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::FilterLayout;
    use crate::options::{BYTES_PER_CHECK, MIN_CHECKS, READ_COMPACTION_TUNING as TUNING};
    use crate::stats::{FilterVerdict, Stats};

    #[test]
    fn the_price_is_the_input_bytes_at_four_per_check_with_a_floor() {
        let small = Version::for_tests(&[(0, 1, "a", "z", 4096), (1, 2, "a", "m", 4096)]);
        assert_eq!(price_in_checks(&small, &TUNING), MIN_CHECKS);
        let cheap = |min_checks| ReadCompactionTuning {
            min_checks,
            bytes_per_check: 1024,
            ..TUNING
        };
        assert_eq!(price_in_checks(&small, &cheap(16)), 16);
        assert_eq!(price_in_checks(&small, &cheap(1)), 8);
        let mb = 1 << 20;
        let big = Version::for_tests(&[
            (0, 5, "c", "k", 4 * mb),
            (0, 6, "d", "p", 4 * mb),
            (1, 1, "a", "b", 2 * mb), // before L0's range: not an input
            (1, 2, "b", "e", 2 * mb),
            (1, 3, "f", "q", 2 * mb),
            (1, 4, "r", "z", 2 * mb), // after it
        ]);
        assert_eq!(price_in_checks(&big, &TUNING), 12 * mb / BYTES_PER_CHECK);
    }

    #[test]
    fn rent_counts_from_the_oldest_l0_table_and_only_checks_in_vain() {
        let options = Options::default();
        let stats = Stats::new();
        let version = Version::for_tests(&[(0, 7, "a", "z", 4096)]);
        let mut rent = ReadRent::default();
        let look = |rent: &mut ReadRent, v: &Version| {
            rent.last_look = None; // no waiting between looks in a test
            rent.paid(v, &stats, &options)
        };
        // Checks made before the count began are not rent.
        stats.record_filters(0, FilterLayout::Full, FilterVerdict::Useful, MIN_CHECKS);
        assert!(!look(&mut rent, &version));
        // Checks that found their key, and checks of deeper levels, are not rent either.
        stats.record_filters(
            0,
            FilterLayout::Full,
            FilterVerdict::TruePositive,
            MIN_CHECKS,
        );
        stats.record_filters(1, FilterLayout::Full, FilterVerdict::Useful, MIN_CHECKS);
        assert!(!look(&mut rent, &version));
        stats.record_filters(0, FilterLayout::Full, FilterVerdict::FalsePositive, 1);
        stats.record_filters(
            0,
            FilterLayout::BlockBased,
            FilterVerdict::Useful,
            MIN_CHECKS - 2,
        );
        assert!(!look(&mut rent, &version));
        stats.record_filters(0, FilterLayout::Partitioned, FilterVerdict::Useful, 1);
        assert!(look(&mut rent, &version));
        // A new oldest table (the old ones were compacted) starts a new count.
        let after = Version::for_tests(&[(0, 9, "a", "z", 4096)]);
        assert!(!look(&mut rent, &after));
        // Off, nothing is ever paid for.
        stats.record_filters(0, FilterLayout::Full, FilterVerdict::Useful, 2 * MIN_CHECKS);
        assert!(look(&mut rent, &after));
        let off = Options::default().compact_l0_for_reads(false);
        rent.last_look = None;
        assert!(!rent.paid(&after, &stats, &off));
    }

    #[test]
    fn looks_back_off_while_neither_checks_nor_l0_tables_come() {
        let options = Options::default();
        let stats = Stats::new();
        let version = Version::for_tests(&[(0, 3, "a", "m", 4096)]);
        let mut rent = ReadRent::default();
        let look = |rent: &mut ReadRent| {
            rent.last_look = None;
            rent.paid(&version, &stats, &options);
            rent.next_look(&version, &options)
        };
        // The first look finds L0's table new; the next ones find nothing new.
        assert_eq!(look(&mut rent), Some(CHECK_INTERVAL));
        assert_eq!(look(&mut rent), Some(CHECK_INTERVAL * 2));
        assert_eq!(look(&mut rent), Some(CHECK_INTERVAL * 4));
        for _ in 0..10 {
            look(&mut rent);
        }
        assert_eq!(look(&mut rent), Some(IDLE_CHECK_INTERVAL));
        stats.record_filter(0, FilterLayout::Full, FilterVerdict::Useful);
        assert_eq!(look(&mut rent), Some(CHECK_INTERVAL));
        assert_eq!(look(&mut rent), Some(CHECK_INTERVAL * 2));
        // A flush's new table.
        let flushed = Version::for_tests(&[(0, 3, "a", "m", 4096), (0, 4, "b", "n", 4096)]);
        rent.last_look = None;
        rent.paid(&flushed, &stats, &options);
        assert_eq!(rent.next_look(&flushed, &options), Some(CHECK_INTERVAL));
        // Between looks, `paid` does not look.
        stats.record_filter(0, FilterLayout::Full, FilterVerdict::Useful);
        assert!(!rent.paid(&version, &stats, &options));
        assert_eq!(rent.checks_at_last_look, 1);
    }

    #[test]
    fn the_thread_looks_again_only_while_l0_holds_tables() {
        let options = Options::default();
        let rent = ReadRent::default();
        let empty = Version::for_tests(&[(1, 2, "a", "m", 4096)]);
        assert_eq!(rent.next_look(&empty, &options), None);
        let l0 = Version::for_tests(&[(0, 3, "a", "m", 4096)]);
        assert_eq!(rent.next_look(&l0, &options), Some(CHECK_INTERVAL));
        let off = Options::default().compact_l0_for_reads(false);
        assert_eq!(rent.next_look(&l0, &off), None);
    }
}

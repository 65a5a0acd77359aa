//! What flushes and compactions did, per level they wrote to, for `siftdb.stats`: RocksDB's
//! compaction stats in short. Each job adds its figures once it is installed; the totals behind
//! them (bytes written, read, stall time) are also [`Ticker`](crate::Ticker)s.

use std::fmt::Write as _;
use std::time::Duration;

use parking_lot::Mutex;

use crate::options::NUM_LEVELS;
use crate::stats::{Statistics, Ticker};

/// The work done into one level: flushes for L0, compactions from the level above otherwise.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LevelWork {
    /// Flushes or compactions.
    pub(crate) jobs: u64,
    /// Bytes of tables read from the level above (none for a flush).
    pub(crate) read_upper: u64,
    /// Bytes of tables read from this level (the overlapping tables a compaction rewrites).
    pub(crate) read_this: u64,
    /// Bytes of tables written.
    pub(crate) written: u64,
    /// Time the jobs took, from choosing their inputs to installing their outputs.
    pub(crate) micros: u64,
}

/// [`LevelWork`] per level, summed over the store's life since open.
#[derive(Debug, Default)]
pub(crate) struct CompactionStats {
    levels: Mutex<[LevelWork; NUM_LEVELS]>,
}

impl CompactionStats {
    /// Adds one job that wrote into `level`.
    pub(crate) fn record(
        &self,
        level: usize,
        read_upper: u64,
        read_this: u64,
        written: u64,
        took: Duration,
    ) {
        let mut levels = self.levels.lock();
        if let Some(l) = levels.get_mut(level) {
            l.jobs += 1;
            l.read_upper += read_upper;
            l.read_this += read_this;
            l.written += written;
            l.micros += u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        }
    }

    /// The figures so far.
    pub(crate) fn levels(&self) -> [LevelWork; NUM_LEVELS] {
        *self.levels.lock()
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn seconds(micros: u64) -> f64 {
    micros as f64 / 1e6
}

/// Appends the table of `levels` (jobs, MiB read from above and from the level, MiB written, the
/// level's write amplification `written ÷ read from above`, seconds) and the keyspace's write
/// amplification (table bytes written ÷ the keys and values written), from its counters `stats`.
pub(crate) fn write_report(out: &mut String, levels: &[LevelWork; NUM_LEVELS], stats: &Statistics) {
    let _ = writeln!(
        out,
        "\n{:<9} {:>7} {:>12} {:>12} {:>11} {:>6} {:>9}",
        "into", "jobs", "read-n-MiB", "read-n+1-MiB", "write-MiB", "w-amp", "seconds"
    );
    let mut sum = LevelWork::default();
    for (level, l) in levels.iter().enumerate() {
        if l.jobs == 0 {
            continue;
        }
        sum.jobs += l.jobs;
        sum.read_upper += l.read_upper;
        sum.read_this += l.read_this;
        sum.written += l.written;
        sum.micros += l.micros;
        let name = if level == 0 {
            "L0 flush".to_string()
        } else {
            format!("L{level}")
        };
        let amp = if l.read_upper > 0 {
            format!("{:.1}", l.written as f64 / l.read_upper as f64)
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "{name:<9} {:>7} {:>12.1} {:>12.1} {:>11.1} {amp:>6} {:>9.1}",
            l.jobs,
            mib(l.read_upper),
            mib(l.read_this),
            mib(l.written),
            seconds(l.micros)
        );
    }
    let _ = writeln!(
        out,
        "{:<9} {:>7} {:>12.1} {:>12.1} {:>11.1} {:>6} {:>9.1}",
        "sum",
        sum.jobs,
        mib(sum.read_upper),
        mib(sum.read_this),
        mib(sum.written),
        "",
        seconds(sum.micros)
    );
    let user = stats.ticker(Ticker::UserBytesWritten);
    let tables = stats.ticker(Ticker::TableBytesWritten);
    if user > 0 {
        let _ = writeln!(
            out,
            "write amplification: {:.2} ({:.1} MiB of tables written for {:.1} MiB of keys and \
             values)",
            tables as f64 / user as f64,
            mib(tables),
            mib(user),
        );
    }
}

/// Appends what the store's writes cost it as a whole, from its counters `store` (the WAL and
/// the stalls are the store's, not a keyspace's): the WAL bytes and syncs, the write stalls by
/// cause.
pub(crate) fn write_store_report(out: &mut String, store: &Statistics) {
    let _ = writeln!(
        out,
        "WAL: {:.1} MiB written, {} syncs",
        mib(store.ticker(Ticker::WalBytes)),
        store.ticker(Ticker::WalSyncs)
    );
    let _ = writeln!(
        out,
        "write stalls: {:.1} s in all; {:.1} s slowed by L0 tables, {:.1} s stopped by L0 tables, \
         {:.1} s stopped by frozen memtables",
        seconds(store.ticker(Ticker::WriteStallMicros)),
        seconds(store.ticker(Ticker::WriteStallL0SlowdownMicros)),
        seconds(store.ticker(Ticker::WriteStallL0StopMicros)),
        seconds(store.ticker(Ticker::WriteStallMemtablesMicros)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_add_up_per_level_and_report_their_amplification() {
        let s = CompactionStats::default();
        s.record(0, 0, 0, 4 << 20, Duration::from_millis(20));
        s.record(1, 8 << 20, 20 << 20, 28 << 20, Duration::from_millis(300));
        s.record(1, 8 << 20, 0, 8 << 20, Duration::from_millis(100));
        s.record(NUM_LEVELS, 1, 1, 1, Duration::ZERO); // out of range: ignored
        let levels = s.levels();
        assert_eq!(levels[0].jobs, 1);
        assert_eq!(
            levels[1],
            LevelWork {
                jobs: 2,
                read_upper: 16 << 20,
                read_this: 20 << 20,
                written: 36 << 20,
                micros: 400_000,
            }
        );
        let mut out = String::new();
        write_report(&mut out, &levels, &crate::stats::Stats::new().snapshot());
        assert!(out.contains("L0 flush"), "{out}");
        // L1: 36 MiB written for 16 MiB from above.
        let l1 = out
            .lines()
            .find(|l| l.starts_with("L1 "))
            .unwrap_or_default();
        assert!(l1.contains(" 2.2 "), "{out}");
        let stats = crate::stats::Stats::new();
        stats.add(Ticker::WalBytes, 3 << 20);
        stats.add(Ticker::WriteStallMicros, 750_000);
        let mut out = String::new();
        write_store_report(&mut out, &stats.snapshot());
        assert!(out.contains("WAL: 3.0 MiB written"), "{out}");
        assert!(out.contains("write stalls: 0.8 s in all"), "{out}");
    }
}

//! siftdb as a store under test.

use super::{poll_until, Bloom, Concurrent, ScanCounters, Store, WriteStats};

pub(crate) struct Sift(pub(crate) siftdb::Db);

impl Concurrent for Sift {
    fn put(&self, k: &[u8], v: &[u8]) {
        self.0.put(k, v).unwrap();
    }
    fn get(&self, k: &[u8]) -> bool {
        self.0.get(k).unwrap().is_some()
    }
    fn l0_tables(&self) -> Option<usize> {
        self.0.property("siftdb.num-files-at-level0")?.parse().ok()
    }
}

impl Store for Sift {
    fn concurrent(&self) -> &dyn Concurrent {
        self
    }
    fn put(&mut self, k: &[u8], v: &[u8]) {
        Concurrent::put(self, k, v);
    }
    fn get(&mut self, k: &[u8]) -> bool {
        Concurrent::get(self, k)
    }
    fn multi_get(&mut self, keys: &[[u8; 16]]) -> Vec<bool> {
        self.0
            .multi_get(keys)
            .into_iter()
            .map(|r| r.unwrap().is_some())
            .collect()
    }
    fn scan(&mut self, from: &[u8], to: &[u8]) -> usize {
        let mut n = 0;
        for row in self.0.scan(from..to) {
            row.unwrap();
            n += 1;
        }
        n
    }
    fn scan_counters(&self) -> Option<ScanCounters> {
        use siftdb::Ticker;
        let s = self.0.statistics();
        let range = s.range_filter_totals();
        Some(ScanCounters {
            checked: range.checks(),
            ruled_out: range.useful,
            blocks: s.ticker(Ticker::BlockCacheHit) + s.ticker(Ticker::BlockCacheMiss),
        })
    }
    fn flush(&mut self) {
        self.0.flush().unwrap();
    }
    fn compact(&mut self) {
        self.0.compact().unwrap();
    }
    fn settle(&mut self) -> bool {
        poll_until(|| self.0.property("siftdb.compaction-pending").as_deref() == Some("0"))
    }
    fn stats_report(&self) -> Option<String> {
        self.0.property("siftdb.stats")
    }
    fn bloom(&self) -> Option<Bloom> {
        use siftdb::Ticker;
        let s = self.0.statistics();
        Some((
            s.ticker(Ticker::BloomFilterUseful),
            s.ticker(Ticker::BloomFilterFullPositive),
            s.ticker(Ticker::BloomFilterFullTruePositive),
        ))
    }
    fn levels(&self) -> Option<Vec<usize>> {
        (0..siftdb::NUM_LEVELS)
            .map(|l| {
                self.0
                    .property(&format!("siftdb.num-files-at-level{l}"))?
                    .parse()
                    .ok()
            })
            .collect()
    }
    fn filter_bytes(&self) -> Option<u64> {
        // Every table has been opened by the reads, so every filter is pinned and counted.
        Some(self.0.statistics().filter_bytes_in_memory())
    }
    fn write_stats(&self) -> Option<WriteStats> {
        use siftdb::Ticker;
        let s = self.0.statistics();
        Some(WriteStats {
            table_bytes: s.ticker(Ticker::TableBytesWritten),
            user_bytes: s.ticker(Ticker::UserBytesWritten),
            stall_micros: s.ticker(Ticker::WriteStallMicros),
        })
    }
    fn table_bytes(&self) -> Option<u64> {
        self.0.property("siftdb.total-sst-bytes")?.parse().ok()
    }
}

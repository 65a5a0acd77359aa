//! RocksDB as a store under test, with prefix blooms for `rocksdb-prefix` and universal compaction
//! for `rocksdb-universal`.

use std::time::{Duration, Instant};

use super::{poll_until, Bloom, Concurrent, PeerShape, ScanCounters, Store, WriteStats};

/// RocksDB's default number of levels, set explicitly (siftdb has as many).
pub(crate) const ROCKS_LEVELS: usize = 7;

/// How long universal compaction's files per level must stay the same, with no compaction
/// running, for the store to count as settled.
const UNIVERSAL_QUIET: Duration = Duration::from_secs(1);

pub(crate) struct Rocks {
    // Dropped before `opts`, which holds the statistics the tickers are read from.
    pub(crate) db: rocksdb::DB,
    pub(crate) opts: rocksdb::Options,
    /// Bytes of keys and values put. RocksDB's own `rocksdb.bytes.written` counts the encoded
    /// write batches, headers included, so the harness counts what siftdb's ticker counts.
    pub(crate) user_bytes: u64,
    /// The prefixes its prefix blooms hold, if it has them.
    pub(crate) prefix: Option<Prefix>,
    pub(crate) compaction: RocksCompaction,
}

/// The prefixes of `rocksdb-prefix`'s prefix blooms.
#[derive(Clone, Copy)]
pub(crate) enum Prefix {
    /// The first this many bytes.
    Fixed(usize),
    /// Up to and including the last `:` (`user:<id>:` of a `strings` key).
    UpToLastColon,
}

pub(crate) fn up_to_last_colon(key: &[u8]) -> &[u8] {
    key.iter()
        .rposition(|&b| b == b':')
        .map_or(key, |i| &key[..=i])
}

pub(crate) fn has_colon(key: &[u8]) -> bool {
    key.contains(&b':')
}

impl Prefix {
    pub(crate) fn describe(self) -> String {
        match self {
            Prefix::Fixed(len) => format!("{len}-byte prefix"),
            Prefix::UpToLastColon => "prefix up to the last ':'".to_string(),
        }
    }

    /// The length in the JSON line: the fixed length, or 0 for strings' prefixes.
    pub(crate) fn json(self) -> usize {
        match self {
            Prefix::Fixed(len) => len,
            Prefix::UpToLastColon => 0,
        }
    }

    /// The prefix of `key`, if it has one.
    pub(crate) fn of(self, key: &[u8]) -> Option<&[u8]> {
        match self {
            Prefix::Fixed(len) => key.get(..len),
            Prefix::UpToLastColon => has_colon(key).then(|| up_to_last_colon(key)),
        }
    }
}

/// The least string above every string starting with `prefix`, if there is one.
pub(crate) fn past_prefix(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut next = prefix[..=last].to_vec();
    next[last] += 1;
    Some(next)
}

/// How RocksDB compacts: leveled for `rocksdb` and `rocksdb-prefix`, universal for
/// `rocksdb-universal`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum RocksCompaction {
    Leveled,
    Universal,
}

impl Rocks {
    pub(crate) fn open(
        dir: &std::path::Path,
        shape: PeerShape,
        cache_bytes: usize,
        prefix: Option<Prefix>,
        compaction: RocksCompaction,
    ) -> Self {
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        table.set_block_size(4096);
        table.set_block_cache(&rocksdb::Cache::new_lru_cache(cache_bytes));
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        opts.set_compression_type(rocksdb::DBCompressionType::Snappy);
        // Prefix blooms beside the whole-key ones (whole_key_filtering stays on).
        match prefix {
            Some(Prefix::Fixed(len)) => {
                opts.set_prefix_extractor(rocksdb::SliceTransform::create_fixed_prefix(len));
            }
            Some(Prefix::UpToLastColon) => {
                opts.set_prefix_extractor(rocksdb::SliceTransform::create(
                    "up-to-last-colon",
                    up_to_last_colon,
                    Some(has_colon),
                ));
            }
            None => {}
        }
        if shape == PeerShape::Siftdb {
            // siftdb's defaults, so that both build trees of the same shape.
            opts.set_write_buffer_size(4 << 20);
            opts.set_target_file_size_base(2 << 20);
            opts.set_max_bytes_for_level_base(10 << 20);
            opts.set_level_compaction_dynamic_level_bytes(false);
        }
        if compaction == RocksCompaction::Universal {
            // Its own universal options, at RocksDB's defaults (the module documentation says
            // which); the sizes above that concern levels are unused.
            opts.set_compaction_style(rocksdb::DBCompactionStyle::Universal);
            opts.set_universal_compaction_options(&rocksdb::UniversalCompactOptions::default());
        }
        // Under universal compaction, the levels below L0 hold a sorted run each.
        opts.set_num_levels(ROCKS_LEVELS as i32);
        // siftdb splits a compaction between 2 threads; RocksDB's default is 1.
        opts.set_max_subcompactions(2);
        opts.enable_statistics();
        // The default column family is named, with the same options, because only a named
        // family gets a handle, and `batched_multi_get_cf` needs one.
        let db = rocksdb::DB::open_cf_with_opts(
            &opts,
            dir,
            [(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, opts.clone())],
        )
        .unwrap();
        Rocks {
            db,
            opts,
            user_bytes: 0,
            prefix,
            compaction,
        }
    }

    /// Counts the entries from `from` to `to` (excluded) with one iterator bounded above at
    /// `to`; `in_prefix`: the range lies in one prefix, sought in prefix mode (the seek asks the
    /// prefix blooms).
    pub(crate) fn scan_piece(&self, from: &[u8], to: &[u8], in_prefix: bool) -> usize {
        let mut read = rocksdb::ReadOptions::default();
        read.set_iterate_upper_bound(to.to_vec());
        if in_prefix {
            read.set_prefix_same_as_start(true);
        }
        let mut it = self.db.raw_iterator_opt(read);
        it.seek(from);
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        it.status().unwrap();
        n
    }

    pub(crate) fn int_property(&self, name: impl rocksdb::CStrLike) -> u64 {
        self.db.property_int_value(name).unwrap().unwrap()
    }
}

impl Concurrent for Rocks {
    /// Not counted in `user_bytes`: the read-while-writing phase reports no write amplification.
    fn put(&self, k: &[u8], v: &[u8]) {
        self.db.put(k, v).unwrap();
    }
    fn get(&self, k: &[u8]) -> bool {
        self.db.get_pinned(k).unwrap().is_some()
    }
    fn l0_tables(&self) -> Option<usize> {
        let files = self
            .db
            .property_int_value(rocksdb::properties::num_files_at_level(0));
        Some(files.ok()?? as usize)
    }
}

impl Store for Rocks {
    fn concurrent(&self) -> &dyn Concurrent {
        self
    }
    fn put(&mut self, k: &[u8], v: &[u8]) {
        Concurrent::put(self, k, v);
        self.user_bytes += (k.len() + v.len()) as u64;
    }
    fn get(&mut self, k: &[u8]) -> bool {
        Concurrent::get(self, k)
    }
    fn scan(&mut self, from: &[u8], to: &[u8]) -> usize {
        let Some(prefix) = self.prefix else {
            return self.scan_piece(from, to, false);
        };
        // One piece per prefix the range meets; a start without a prefix is scanned in total
        // order to the end.
        let mut n = 0;
        let mut at = from.to_vec();
        while at.as_slice() < to {
            let Some(p) = prefix.of(&at) else {
                return n + self.scan_piece(&at, to, false);
            };
            match past_prefix(p) {
                Some(end) if end.as_slice() < to => {
                    n += self.scan_piece(&at, &end, true);
                    at = end;
                }
                _ => return n + self.scan_piece(&at, to, true),
            }
        }
        n
    }
    fn scan_counters(&self) -> Option<ScanCounters> {
        use rocksdb::statistics::Ticker;
        let ticker = |t| self.opts.get_ticker_count(t);
        // A seek's prefix bloom checks are counted apart from a Get's, by level kind.
        let filtered =
            ticker(Ticker::LastLevelSeekFiltered) + ticker(Ticker::NonLastLevelSeekFiltered);
        let matched =
            ticker(Ticker::LastLevelSeekFilterMatch) + ticker(Ticker::NonLastLevelSeekFilterMatch);
        Some(ScanCounters {
            checked: filtered + matched,
            ruled_out: filtered,
            blocks: ticker(Ticker::BlockCacheDataHit) + ticker(Ticker::BlockCacheDataMiss),
        })
    }
    fn stats_report(&self) -> Option<String> {
        self.db
            .property_value(rocksdb::properties::STATS)
            .ok()
            .flatten()
    }
    fn multi_get(&mut self, keys: &[[u8; 16]]) -> Vec<bool> {
        let cf = self
            .db
            .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
            .unwrap();
        self.db
            .batched_multi_get_cf(cf, keys, false)
            .into_iter()
            .map(|r| r.unwrap().is_some())
            .collect()
    }
    fn flush(&mut self) {
        self.db.flush().unwrap();
    }
    fn compact(&mut self) {
        self.db.compact_range::<&[u8], &[u8]>(None, None);
    }
    fn settle(&mut self) -> bool {
        use rocksdb::properties::{COMPACTION_PENDING, NUM_RUNNING_COMPACTIONS};
        if self.compaction == RocksCompaction::Leveled {
            return poll_until(|| {
                self.int_property(COMPACTION_PENDING) == 0
                    && self.int_property(NUM_RUNNING_COMPACTIONS) == 0
            });
        }
        // Universal compaction counts a compaction pending whenever its sorted runs reach
        // `level0_file_num_compaction_trigger`, also when its picker finds no merge its size
        // ratios allow (it forces one only above the trigger), which leaves the store idle with
        // a compaction "pending" for good. Settled is then: none running, and the files per
        // level unchanged for a second.
        let mut seen = (self.levels(), Instant::now());
        poll_until(|| {
            if self.int_property(NUM_RUNNING_COMPACTIONS) != 0 {
                seen.1 = Instant::now();
                return false;
            }
            if self.int_property(COMPACTION_PENDING) == 0 {
                return true;
            }
            let levels = self.levels();
            if levels != seen.0 {
                seen = (levels, Instant::now());
            }
            seen.1.elapsed() >= UNIVERSAL_QUIET
        })
    }
    fn bloom(&self) -> Option<Bloom> {
        use rocksdb::statistics::Ticker;
        Some((
            self.opts.get_ticker_count(Ticker::BloomFilterUseful),
            self.opts.get_ticker_count(Ticker::BloomFilterFullPositive),
            self.opts
                .get_ticker_count(Ticker::BloomFilterFullTruePositive),
        ))
    }
    fn levels(&self) -> Option<Vec<usize>> {
        (0..ROCKS_LEVELS)
            .map(|l| {
                self.db
                    .property_int_value(rocksdb::properties::num_files_at_level(l))
                    .ok()?
                    .map(|v| v as usize)
            })
            .collect()
    }
    fn filter_bytes(&self) -> Option<u64> {
        // "...; filter block size=N; ..." summed over the live tables.
        let props = self
            .db
            .property_value(rocksdb::properties::AGGREGATED_TABLE_PROPERTIES)
            .ok()??;
        let rest = &props[props.find("filter block size")?..];
        let digits: String = rest[rest.find('=')? + 1..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }
    fn write_stats(&self) -> Option<WriteStats> {
        use rocksdb::statistics::Ticker;
        let ticker = |t| self.opts.get_ticker_count(t);
        Some(WriteStats {
            table_bytes: ticker(Ticker::FlushWriteBytes) + ticker(Ticker::CompactWriteBytes),
            user_bytes: self.user_bytes,
            stall_micros: ticker(Ticker::StallMicros),
        })
    }
    fn table_bytes(&self) -> Option<u64> {
        Some(self.int_property(rocksdb::properties::LIVE_SST_FILES_SIZE))
    }
}

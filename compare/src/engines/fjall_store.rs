//! fjall as a store under test.

use std::sync::Arc;

use super::{poll_until, Bloom, Concurrent, PeerShape, Store};

pub(crate) struct Fjall {
    // Dropped before the database, as a keyspace handle is in fjall's own examples.
    pub(crate) ks: fjall::Keyspace,
    pub(crate) db: fjall::Database,
}

impl Fjall {
    pub(crate) fn open(dir: &std::path::Path, shape: PeerShape, cache_bytes: usize) -> Self {
        use fjall::config::{
            BlockSizePolicy, BloomConstructionPolicy, FilterPolicy, FilterPolicyEntry,
        };
        let db = fjall::Database::builder(dir)
            .cache_size(cache_bytes as u64)
            .open()
            .unwrap();
        let mut opts = fjall::KeyspaceCreateOptions::default()
            .data_block_size_policy(BlockSizePolicy::all(4096))
            .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                BloomConstructionPolicy::BitsPerKey(10.0),
            )));
        if shape == PeerShape::Siftdb {
            // siftdb's memtable, table size, L0 trigger and level ratio; fjall derives L1's
            // budget from the table size and the L0 trigger.
            let leveled = fjall::compaction::Leveled::default()
                .with_table_target_size(2 << 20)
                .with_l0_threshold(4)
                .with_level_ratio_policy(vec![10.0]);
            opts = opts
                .max_memtable_size(4 << 20)
                .compaction_strategy(Arc::new(leveled));
        }
        let ks = db.keyspace("default", || opts).unwrap();
        Fjall { ks, db }
    }

    /// No flush queued or waiting and no compaction running. A compaction a flush has asked
    /// for but no worker has picked up yet is not visible; `settle` covers it by also waiting
    /// for the files per level to stay the same.
    pub(crate) fn idle(&self) -> bool {
        self.db.outstanding_flushes() == 0
            && self.ks.sealed_memtable_count() == 0
            && self.db.active_compactions() == 0
    }
}

impl Concurrent for Fjall {
    fn put(&self, k: &[u8], v: &[u8]) {
        self.ks.insert(k, v).unwrap();
    }
    fn get(&self, k: &[u8]) -> bool {
        self.ks.get(k).unwrap().is_some()
    }
    fn l0_tables(&self) -> Option<usize> {
        use fjall::AbstractTree;
        self.ks.tree.level_table_count(0)
    }
}

impl Store for Fjall {
    fn concurrent(&self) -> &dyn Concurrent {
        self
    }
    fn put(&mut self, k: &[u8], v: &[u8]) {
        Concurrent::put(self, k, v);
    }
    fn get(&mut self, k: &[u8]) -> bool {
        Concurrent::get(self, k)
    }
    fn scan(&mut self, from: &[u8], to: &[u8]) -> usize {
        let mut n = 0;
        for entry in self.ks.range(from..to) {
            entry.key().unwrap();
            n += 1;
        }
        n
    }
    fn multi_get(&mut self, keys: &[[u8; 16]]) -> Vec<bool> {
        // fjall 3.1 has no batched lookup.
        keys.iter().map(|k| Concurrent::get(self, k)).collect()
    }
    fn flush(&mut self) {
        self.db.persist(fjall::PersistMode::Buffer).unwrap();
        self.ks.rotate_memtable_and_wait().unwrap();
    }
    fn compact(&mut self) {
        self.ks.major_compact().unwrap();
    }
    fn settle(&mut self) -> bool {
        let mut last = None;
        let mut stable = 0;
        poll_until(|| {
            let files = self.levels();
            if !self.idle() || last != files {
                stable = 0;
            } else {
                stable += 1;
            }
            last = files;
            stable >= 4
        })
    }
    fn bloom(&self) -> Option<Bloom> {
        // `filter_queries` counts the checks that ruled the table out and those after which
        // the table did not hold the key; a check followed by a hit is not counted at all.
        let m = self.ks.metrics();
        let checks = m.filter_queries() as u64;
        let useful = m.io_skipped_by_filter() as u64;
        Some((useful, checks - useful, 0))
    }
    fn levels(&self) -> Option<Vec<usize>> {
        use fjall::AbstractTree;
        Some(
            (0..)
                .map_while(|l| self.ks.tree.level_table_count(l))
                .collect(),
        )
    }
    fn filter_bytes(&self) -> Option<u64> {
        use fjall::AbstractTree;
        Some(self.ks.tree.filter_size())
    }
    fn table_bytes(&self) -> Option<u64> {
        use fjall::AbstractTree;
        Some(self.ks.tree.disk_space())
    }
}

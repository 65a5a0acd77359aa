//! The sorted runs a Get meets in a tree of levels, counted from its files per level: each L0
//! table is a run of its own, and each non-empty level below is one run (under leveled
//! compaction, lazy leveling and RocksDB's universal compaction alike).

/// The sorted runs of a tree: its L0 tables and its non-empty levels below L0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SortedRuns {
    /// Tables in L0, each a run.
    pub l0_tables: usize,
    /// Levels below L0 that hold at least one table.
    pub levels: usize,
}

impl SortedRuns {
    /// The runs of a tree with `files_per_level` (L0 first).
    pub fn of(files_per_level: &[usize]) -> SortedRuns {
        let (l0, below) = files_per_level.split_first().unwrap_or((&0, &[]));
        SortedRuns {
            l0_tables: *l0,
            levels: below.iter().filter(|&&n| n > 0).count(),
        }
    }

    /// Every run: the most a Get of a missing key asks (a filter each, or a block read each
    /// without one).
    pub fn total(&self) -> usize {
        self.l0_tables + self.levels
    }
}

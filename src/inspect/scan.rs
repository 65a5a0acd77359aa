//! Which tables a bounded scan reads and which its range filters leave out: [`ScanExplanation`],
//! made by [`Db::explain_scan`](crate::Db::explain_scan).

use std::fmt;
use std::ops::Bound;

use super::escape;

/// What a bounded scan does with one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanDecision {
    /// The table's key range misses the scan's range: not read.
    OutsideRange,
    /// The table holds range tombstones: always read (its range filter knows point keys only).
    RangeTombstones,
    /// The table has no range filter: read.
    NoRangeFilter,
    /// The range, within the table's keys, is this many integers: wider than the table's range
    /// filter answers, so the table is read.
    TooWide(u64),
    /// The range filter was asked about a range of `width` integers and said "no": the table is
    /// left out, neither its index nor a data block read.
    RangeFilterNo {
        /// Integers in the range asked.
        width: u64,
    },
    /// The range filter was asked about a range of `width` integers and said "maybe": read.
    RangeFilterMaybe {
        /// Integers in the range asked.
        width: u64,
    },
}

impl ScanDecision {
    /// Whether the scan reads the table.
    pub fn reads_table(&self) -> bool {
        !matches!(
            self,
            ScanDecision::OutsideRange | ScanDecision::RangeFilterNo { .. }
        )
    }
}

/// One table of a store, as a bounded scan would treat it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanTableStep {
    /// The table's level.
    pub level: usize,
    /// The table's file number (`NNNNNN.sst`).
    pub file_number: u64,
    /// Smallest user key of the table.
    pub smallest: Vec<u8>,
    /// Largest user key of the table.
    pub largest: Vec<u8>,
    /// What the scan does with it.
    pub decision: ScanDecision,
}

/// The tables a scan of a range would read, and what their range filters say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanExplanation {
    /// The keyspace explained.
    pub keyspace: String,
    /// The range's start.
    pub lower: Bound<Vec<u8>>,
    /// The range's end.
    pub upper: Bound<Vec<u8>>,
    /// Whether the store's scans of this range ask range filters: the range is bounded at both
    /// ends and the store was opened with [`Options::range_filter`](crate::Options::range_filter).
    /// When not, the filters' answers are shown, but the scan reads every table its range meets.
    pub range_filters_asked: bool,
    /// Every table of the store, L0 newest first, then each level in key order.
    pub tables: Vec<ScanTableStep>,
}

impl ScanExplanation {
    /// The tables the scan would read.
    pub fn tables_read(&self) -> usize {
        self.tables
            .iter()
            .filter(|t| match t.decision {
                ScanDecision::RangeFilterNo { .. } => !self.range_filters_asked,
                d => d.reads_table(),
            })
            .count()
    }
}

/// A range's start as `[k`, `(k` or `(∞`.
fn start(b: &Bound<Vec<u8>>) -> String {
    match b {
        Bound::Included(k) => format!("[\"{}\"", escape(k, 64)),
        Bound::Excluded(k) => format!("(\"{}\"", escape(k, 64)),
        Bound::Unbounded => "(∞".to_string(),
    }
}

/// A range's end as `k]`, `k)` or `∞)`.
fn end(b: &Bound<Vec<u8>>) -> String {
    match b {
        Bound::Included(k) => format!("\"{}\"]", escape(k, 64)),
        Bound::Excluded(k) => format!("\"{}\")", escape(k, 64)),
        Bound::Unbounded => "∞)".to_string(),
    }
}

impl fmt::Display for ScanExplanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "scan {} .. {} in keyspace {}: {} of {} tables read{}",
            start(&self.lower),
            end(&self.upper),
            self.keyspace,
            self.tables_read(),
            self.tables.len(),
            if self.range_filters_asked {
                ""
            } else {
                " (range filters not asked: the range is open or the store has no range_filter option)"
            }
        )?;
        for t in &self.tables {
            write!(
                f,
                "  L{} #{:06} [{} .. {}]: ",
                t.level,
                t.file_number,
                escape(&t.smallest, 24),
                escape(&t.largest, 24)
            )?;
            match t.decision {
                ScanDecision::OutsideRange => writeln!(f, "outside the range, not read")?,
                ScanDecision::RangeTombstones => writeln!(f, "holds range tombstones, read")?,
                ScanDecision::NoRangeFilter => writeln!(f, "no range filter, read")?,
                ScanDecision::TooWide(w) => writeln!(
                    f,
                    "range of {w} integers, wider than its filter answers, read"
                )?,
                ScanDecision::RangeFilterNo { width } => writeln!(
                    f,
                    "range filter says no for {width} integers{}",
                    if self.range_filters_asked {
                        ", not read"
                    } else {
                        ""
                    }
                )?,
                ScanDecision::RangeFilterMaybe { width } => {
                    writeln!(f, "range filter says maybe for {width} integers, read")?
                }
            }
        }
        Ok(())
    }
}

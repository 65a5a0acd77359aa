//! What a point lookup consulted and read: [`GetExplanation`], made by
//! [`Db::explain_get`](crate::Db::explain_get).

use std::fmt;

use super::escape;
use super::table::BlockInfo;
use crate::filter::FilterLayout;

/// What a filter answered one lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterCheck {
    /// The layout of the filter that was asked.
    pub layout: FilterLayout,
    /// `false`: "certainly not here", the table's data blocks were not read.
    pub may_match: bool,
}

/// What a table held for the key, as far as the lookup looked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableHeld {
    /// The table was not searched: the key is outside its range or its filter said "no".
    NotSearched,
    /// The table was searched and holds no entry for the key.
    NoEntry,
    /// A value of this many bytes.
    Value(usize),
    /// A tombstone: the key was deleted (by a point tombstone, or by a range tombstone of the
    /// table's that covers it).
    Tombstone,
}

/// One table a point lookup considered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableStep {
    /// The table's level.
    pub level: usize,
    /// The table's file number (`NNNNNN.sst`).
    pub file_number: u64,
    /// Smallest user key of the table.
    pub smallest: Vec<u8>,
    /// Largest user key of the table.
    pub largest: Vec<u8>,
    /// Whether the key lies in `[smallest, largest]`; a table outside is skipped before its filter.
    pub key_in_range: bool,
    /// The filter's answer, if the table has a filter the store can read and it was asked.
    pub filter: Option<FilterCheck>,
    /// The data block read, if any.
    pub data_block: Option<BlockInfo>,
    /// What the table held for the key.
    pub held: TableHeld,
}

/// The answer of a point lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetAnswer {
    /// The newest entry is this value.
    Value(Vec<u8>),
    /// The newest entry is a tombstone, or a range tombstone covers the key.
    Deleted,
    /// No memtable or table holds the key.
    NotFound,
}

/// Which part of the store answered a point lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetSource {
    /// The active memtable.
    Memtable,
    /// A frozen memtable waiting for flush (0 = newest).
    ImmutableMemtable(usize),
    /// A table.
    Table {
        /// Its level.
        level: usize,
        /// Its file number.
        file_number: u64,
    },
    /// Nothing held the key.
    Nowhere,
}

/// What [`Db::explain_get`](crate::Db::explain_get) found: the memtables, then each table the
/// lookup considered in order, then the answer. `Display` prints it as a short report.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GetExplanation {
    /// The keyspace looked in.
    pub keyspace: String,
    /// The key looked up.
    pub key: Vec<u8>,
    /// The sequence number the lookup read at.
    pub sequence: u64,
    /// Memtables checked: the active one plus the frozen ones.
    pub memtables: usize,
    /// The tables considered, in the order a Get considers them, up to the one that answered.
    pub tables: Vec<TableStep>,
    /// Where the answer came from.
    pub source: GetSource,
    /// The answer, as [`Db::get`](crate::Db::get) would give it (`Deleted` reads as `None`).
    pub answer: GetAnswer,
}

impl GetExplanation {
    /// Data blocks the lookup read.
    pub fn data_blocks_read(&self) -> usize {
        self.tables
            .iter()
            .filter(|t| t.data_block.is_some())
            .count()
    }
}

impl fmt::Display for GetExplanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "get \"{}\" in keyspace {} at sequence {}",
            escape(&self.key, 64),
            self.keyspace,
            self.sequence
        )?;
        let mem = match self.source {
            GetSource::Memtable => "answered by the active memtable".to_string(),
            GetSource::ImmutableMemtable(i) => format!("answered by frozen memtable {i}"),
            _ => "no entry".to_string(),
        };
        writeln!(f, "  memtables ({}): {mem}", self.memtables)?;
        for t in &self.tables {
            write!(
                f,
                "  L{} #{:06} [{} .. {}]: ",
                t.level,
                t.file_number,
                escape(&t.smallest, 24),
                escape(&t.largest, 24)
            )?;
            if !t.key_in_range {
                writeln!(f, "key out of range, skipped")?;
                continue;
            }
            match t.filter {
                Some(c) if !c.may_match => {
                    writeln!(f, "{} filter says no, no data block read", c.layout)?;
                    continue;
                }
                Some(c) => write!(f, "{} filter says maybe, ", c.layout)?,
                None => write!(f, "no filter, ")?,
            }
            match t.data_block {
                Some(b) => write!(f, "data block @{} ({} bytes): ", b.offset, b.size)?,
                None => write!(f, "index: past the last block: ")?,
            }
            let false_positive = t.filter.is_some_and(|c| c.may_match);
            match &t.held {
                TableHeld::NoEntry | TableHeld::NotSearched if false_positive => {
                    writeln!(f, "no entry (a false positive)")?
                }
                TableHeld::NoEntry | TableHeld::NotSearched => writeln!(f, "no entry")?,
                TableHeld::Value(n) => writeln!(f, "value ({n} bytes)")?,
                TableHeld::Tombstone => writeln!(f, "tombstone")?,
            }
        }
        let from = match self.source {
            GetSource::Memtable => " from the active memtable".to_string(),
            GetSource::ImmutableMemtable(i) => format!(" from frozen memtable {i}"),
            GetSource::Table { level, file_number } => format!(" from L{level} #{file_number:06}"),
            GetSource::Nowhere => String::new(),
        };
        match &self.answer {
            GetAnswer::Value(v) => write!(
                f,
                "answer: value \"{}\" ({} bytes){from}",
                escape(v, 32),
                v.len()
            )?,
            GetAnswer::Deleted => write!(f, "answer: deleted (tombstone){from}")?,
            GetAnswer::NotFound => write!(f, "answer: not found")?,
        }
        writeln!(
            f,
            " ({} data block{} read)",
            self.data_blocks_read(),
            if self.data_blocks_read() == 1 {
                ""
            } else {
                "s"
            }
        )
    }
}

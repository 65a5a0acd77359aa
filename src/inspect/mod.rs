//! Inspection of tables and lookups, for tools such as `examples/sst_dump.rs`.
//!
//! [`TableInfo::open`] reads one `.sst` file without opening a store: its footer, properties,
//! data blocks and filter (`table.rs`). [`Db::explain_get`](crate::Db::explain_get) says what a
//! point lookup consults and reads; its answer is a [`GetExplanation`] (`get.rs`).
//! [`Db::explain_scan`](crate::Db::explain_scan) says which tables a bounded scan reads and what
//! their range filters answer: a [`ScanExplanation`] (`scan.rs`).
//!
//! ```no_run
//! use siftdb::inspect::TableInfo;
//!
//! # fn main() -> siftdb::Result<()> {
//! let info = TableInfo::open("db/000012.sst")?;
//! println!("{} entries in {} data blocks", info.num_entries, info.data_blocks.len());
//! if let Some(f) = &info.filter {
//!     println!("{} filter, {}, {:.2} bits/key", f.layout, f.policy, f.bits_per_key());
//! }
//! # Ok(())
//! # }
//! ```

mod get;
mod scan;
mod table;

pub use get::{FilterCheck, GetAnswer, GetExplanation, GetSource, TableHeld, TableStep};
pub use scan::{ScanDecision, ScanExplanation, ScanTableStep};
pub use table::{BlockInfo, DataBlockInfo, FilterInfo, MetaBlockInfo, TableInfo};

/// Bytes as text: printable ASCII as is, other bytes as `\xNN`, cut after `max` bytes.
pub(crate) fn escape(bytes: &[u8], max: usize) -> String {
    let mut out = String::new();
    for &b in bytes.iter().take(max) {
        if b.is_ascii_graphic() || b == b' ' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if bytes.len() > max {
        out.push('…');
    }
    out
}

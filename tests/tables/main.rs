//! What the store does with its tables: compaction, compaction filters, compression, the block
//! cache, filters and their bits per level (Monkey), range filters' false positive rates.
//!
//! One test binary of a module per subject, so the crate is linked once for them all; `cargo test --test tables <module>::` runs one module.

#[path = "../common/mod.rs"]
mod common;

mod block_cache;
mod compaction;
mod compaction_filter;
mod compression;
mod filters;
mod ingest;
mod monkey;
mod range_filter_rates;

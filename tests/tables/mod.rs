//! What the store does with its tables: compaction, compaction filters, compression, the block
//! cache, filters and their bits per level (Monkey), range filters' false positive rates.
//!
//! `cargo test --test whole_store tables::` runs them; `tables::<module>::` one subject.

mod block_cache;
mod compaction;
mod compaction_filter;
mod compression;
mod filters;
mod ingest;
mod lazy_leveling;
mod monkey;
mod monkey_coverage;
mod range_filter_rates;

//! Filters: the policy axis (which bits) and the layout axis (where the bits live in a table).
//!
//! Policies: [`LevelDbBloom`], [`CacheLocalBloom`], [`BinaryFuse`], or your own [`FilterPolicy`].
//! Layouts: block-based (`block_based.rs`), full (`full.rs`), partitioned (`partitioned.rs`).

mod allocation;
mod binary_fuse;
pub(crate) mod block_based;
mod cache_local_bloom;
mod config;
pub(crate) mod full;
pub(crate) mod layout;
mod leveldb_bloom;
pub(crate) mod partitioned;
mod policy;
#[cfg(test)]
mod test_support;
pub(crate) mod theory;

pub(crate) use allocation::monkey_bits_per_key;
pub use allocation::FilterAllocation;
pub use binary_fuse::BinaryFuse;
pub use cache_local_bloom::CacheLocalBloom;
pub(crate) use config::PolicyRegistry;
pub use config::{Filter, FilterLayout, DEFAULT_PARTITION_BYTES};
pub use leveldb_bloom::LevelDbBloom;
pub use policy::{FilterBitsBuilder, FilterPolicy, FilterProbe};

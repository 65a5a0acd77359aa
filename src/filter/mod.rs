//! Filters: the policy axis (which bits a set of keys becomes) and the user's choice of layout.
//!
//! Policies: [`LevelDbBloom`], [`CacheLocalBloom`], [`BinaryFuse`], [`Ribbon`], or your own
//! [`FilterPolicy`]. The layouts themselves (where a table keeps the bits) are part of the table
//! format, in `sst/filter_block/`; nothing here knows of tables. Range filters ([`RangeFilter`],
//! Grafite) are in `range/`.

mod allocation;
mod binary_fuse;
mod cache_local_bloom;
mod config;
mod leveldb_bloom;
mod policy;
pub(crate) mod range;
mod ribbon;
mod sort;
#[cfg(test)]
mod test_support;
pub(crate) mod theory;

pub use allocation::FilterAllocation;
pub(crate) use allocation::{lazy_leveled_runs, nats_per_bit, MonkeyRule, TreeShape, LN2_SQUARED};
pub use binary_fuse::BinaryFuse;
pub use cache_local_bloom::CacheLocalBloom;
#[cfg(feature = "__bench-internals")]
pub(crate) use cache_local_bloom::{may_match_batch_with, may_match_hash_with, LineProbe};
pub(crate) use config::PolicyRegistry;
pub use config::{Filter, FilterLayout, DEFAULT_PARTITION_BYTES};
pub use leveldb_bloom::LevelDbBloom;
pub use policy::{FilterBitsBuilder, FilterPolicy, FilterProbe};
pub use range::{
    GrafiteBuilder, GrafiteFilter, RangeFilter, SegmentedGrafite, SegmentedGrafiteBuilder,
};
pub use ribbon::Ribbon;

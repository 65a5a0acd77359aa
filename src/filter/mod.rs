//! Filters: the policy axis (which bits) and the layout axis (where the bits live in a table).

mod cache_local_bloom;
mod leveldb_bloom;
mod policy;
pub(crate) mod theory;

pub use cache_local_bloom::CacheLocalBloom;
pub use leveldb_bloom::LevelDbBloom;
pub use policy::{FilterBitsBuilder, FilterPolicy};

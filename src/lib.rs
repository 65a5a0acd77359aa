//! siftdb: an embedded LSM key-value store whose showcase is the SSTable filter.
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![warn(missing_docs)]

mod cache;
mod coding;
mod error;
pub mod filter;
mod key;
mod sst;
mod wal;

pub use error::{Error, Result};
pub use filter::{FilterBitsBuilder, FilterPolicy};

//! What is built on the store's own operations: checkpoints and backups, both copying a pinned
//! view of the store (`copy_view.rs`), destroying a store, ingesting tables built outside it
//! (`ingest/`), and the conveniences over Gets and scans.

pub(crate) mod backup;
mod checkpoint;
mod conveniences;
mod copy_view;
mod destroy;
pub(crate) mod ingest;
#[cfg(feature = "metrics")]
pub(crate) mod metrics;

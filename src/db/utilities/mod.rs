//! What is built on the store's own operations: checkpoints and backups, both copying a pinned
//! view of the store (`copy_view.rs`), destroying a store, and the conveniences over Gets and
//! scans.

pub(crate) mod backup;
mod checkpoint;
mod conveniences;
mod copy_view;
mod destroy;

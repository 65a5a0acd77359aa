//! What is built on the store's own operations: checkpoints, destroying a store, and the
//! conveniences over Gets and scans.

mod checkpoint;
mod conveniences;
mod destroy;

//! What is built on the store's own operations: checkpoints, destroying a store, and the
//! conveniences over Gets and scans.

pub(crate) mod checkpoint;
pub(crate) mod conveniences;
pub(crate) mod destroy;

// Until the paths are brought up to date: the names of the parent module.
#[allow(unused_imports)]
use super::*;

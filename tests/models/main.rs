//! The store against models of what it should hold, on random operations.
//!
//! One test binary of a module per subject, so the crate is linked once for them all; `cargo test --test models <module>::` runs one module.

#[path = "../common/mod.rs"]
mod common;

mod compaction_filter_snapshots_model;
mod follower_model;
mod keyspaces_model;
mod merge_operator_model;
mod missing_gets_model;
mod model_btreemap;
mod range_deletes_model;
mod range_filters_model;

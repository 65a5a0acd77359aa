//! The store against models of what it should hold, on random operations.
//!
//! `cargo test --test whole_store models::` runs them; `models::<module>::` one subject.

mod compaction_filter_snapshots_model;
mod follower_model;
mod keyspaces_model;
mod merge_operator_model;
mod missing_gets_model;
mod model_btreemap;
mod range_deletes_model;
mod range_filters_model;

//! Power cuts and process crashes through the fault-injection layer, inside writes, flushes,
//! compactions, keyspace changes, merges, backups and recovery itself.
//!
//! One test binary of a module per subject, so the crate is linked once for them all; `cargo test --test power_cuts <module>::` runs one module.

#[path = "../common/mod.rs"]
mod common;

mod backup_crash;
mod durability;
mod follower_crash;
mod ingest_crash;
mod keyspace_lifecycle_crash;
mod keyspaces_crash;
mod merges_crash;
mod power_cut;
mod range_deletes_crash;

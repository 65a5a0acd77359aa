//! Power cuts and process crashes through the fault-injection layer, inside writes, flushes,
//! compactions, keyspace changes, merges, backups and recovery itself.
//!
//! `cargo test --test whole_store power_cuts::` runs them; `power_cuts::<module>::` one subject.

mod backup_crash;
mod durability;
mod follower_crash;
mod ingest_crash;
mod keyspace_lifecycle_crash;
mod keyspaces_crash;
mod merges_crash;
mod power_cut;
mod range_deletes_crash;

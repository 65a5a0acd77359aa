//! Crash loops with real SIGKILLs: each test re-runs this binary as a child (`common/child.rs`)
//! that runs one test of it, kills it, and checks the store the child left.
//!
//! `cargo test --test whole_store sigkill::` runs them; `sigkill::<module>::` one subject.

mod backup_sigkill;
mod crash;
mod follower_sigkill;
mod ingest_sigkill;
mod keyspaces_sigkill;
mod range_deletes_sigkill;
mod transactions_crash;

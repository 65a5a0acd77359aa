//! Crash loops with real SIGKILLs: each test re-runs this binary as a child (`common/child.rs`)
//! that runs one test of it, kills it, and checks the store the child left.
//!
//! One test binary of a module per subject, so the crate is linked once for them all; `cargo test --test sigkill <module>::` runs one module.

#[path = "../common/mod.rs"]
mod common;

mod backup_sigkill;
mod crash;
mod follower_sigkill;
mod ingest_sigkill;
mod keyspaces_sigkill;
mod range_deletes_sigkill;
mod transactions_crash;

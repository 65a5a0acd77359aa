//! Whole-store behaviour through the public API: operations, handles, iteration, snapshots,
//! prefixes, batched Gets, times to live, range deletes, transactions, merge operators,
//! concurrency, backups, keyspaces, a block cache shared by stores and the rate limit of table
//! writes.
//!
//! `cargo test --test whole_store store::` runs them; `store::<module>::` one subject.

mod backup;
mod basics;
mod concurrency;
mod conveniences;
mod first_hour;
mod followers;
mod handle;
mod iterator;
mod keyspace_copies;
mod keyspace_wals;
mod keyspaces;
mod keyspaces_compat;
mod merge_operator;
mod multi_get;
mod operations;
mod prefix;
mod range_deletes;
mod range_deletes_txn;
mod range_filters_compat;
mod rate_limit;
mod shared_cache;
mod snapshots;
mod transactions;
mod ttl;
mod ttl_compat;

//! The whole-store tests, one binary so that the crate is linked once for them all and libtest
//! spreads them over the cores together: a module per group, a file per subject. `cargo test
//! --test whole_store <group>::` runs a group, e.g. `sigkill::` or `models::merge_operator_model::`.

mod common;

mod damage;
mod models;
mod power_cuts;
mod sigkill;
mod store;
mod tables;

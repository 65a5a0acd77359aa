//! Damaged and unexpected input: tables, WALs and MANIFESTs cut, flipped and forged, garbage
//! given to the decoders, and what open checks before it trusts a directory.
//!
//! One test binary of a module per subject, so the crate is linked once for them all; `cargo test --test damage <module>::` runs one module.

#[path = "../common/mod.rs"]
mod common;

mod corruption;
mod garbage_inputs;
mod manifest_damage;
mod open_checks;
mod range_deletes_damage;

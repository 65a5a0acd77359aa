//! Damaged and unexpected input: tables, WALs and MANIFESTs cut, flipped and forged, garbage
//! given to the decoders, and what open checks before it trusts a directory.
//!
//! `cargo test --test whole_store damage::` runs them; `damage::<module>::` one subject.

mod corruption;
mod garbage_inputs;
mod manifest_damage;
mod open_checks;
mod range_deletes_damage;

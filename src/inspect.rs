//! Inspection of tables and lookups, for tools such as `examples/sst_dump.rs`.

//! The record log shared by the write-ahead log and the MANIFEST.

pub(crate) mod format;
pub(crate) mod reader;
pub(crate) mod writer;

//! Sorted string tables: blocks, filter layouts, the table writer and the table reader.

pub(crate) mod block;
pub(crate) mod block_buffers;
pub(crate) mod block_builder;
pub(crate) mod compression;
pub(crate) mod filter_block;
pub(crate) mod format;
pub(crate) mod index_search;
pub(crate) mod properties;
pub(crate) mod table_builder;
pub(crate) mod table_reader;
pub(crate) mod word_tree;

//! The properties block: facts about a table, as a block of bytewise-sorted name → value entries.
//!
//! Format and every name: `docs/table_format.md`, *Properties block*.

use std::collections::BTreeMap;

use crate::coding::{fixed64_at, put_fixed64, put_varint64, Decoder};
use crate::sst::block::{Block, KeyOrder};
use crate::sst::block_builder::BlockBuilder;

/// What a table says about itself.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TableProperties {
    pub(crate) num_entries: u64,
    pub(crate) num_deletions: u64,
    /// Range tombstones in its range tombstone block (one per fragment and sequence).
    pub(crate) num_range_deletions: u64,
    /// Values with an expiry time of their own (0 in tables written before they existed).
    pub(crate) num_expiring: u64,
    pub(crate) num_data_blocks: u64,
    pub(crate) raw_key_bytes: u64,
    pub(crate) raw_value_bytes: u64,
    pub(crate) data_bytes: u64,
    pub(crate) index_bytes: u64,
    /// `block-based`, `full`, `partitioned`, or empty for no filter.
    pub(crate) filter_layout: String,
    pub(crate) filter_policy: String,
    pub(crate) filter_bits_per_key: f64,
    pub(crate) filter_bytes: u64,
    pub(crate) filter_keys: u64,
    /// Whether the filter holds whole keys (tables written before prefixes existed: yes).
    pub(crate) filter_whole_keys: bool,
    /// The name of the prefix extractor whose prefixes the filter holds, or empty.
    pub(crate) prefix_extractor: String,
    /// The codec the table's blocks were compressed with (`Compression`'s `Display` form), or empty
    /// if not recorded.
    pub(crate) compression: String,
    /// The keyspace the table belongs to (empty in tables written before keyspaces existed:
    /// the default keyspace).
    pub(crate) keyspace: String,
    /// The keyspace's id (`None` in tables written before the id was recorded).
    pub(crate) keyspace_id: Option<u32>,
    /// The identity of the store that wrote the table (16 bytes; empty if not recorded).
    pub(crate) store_id: Vec<u8>,
    /// The file number the table was written under (0 for a table built outside the store).
    pub(crate) table_number: u64,
    /// Built outside the store by a `TableWriter`, for ingestion: every key once, every entry at
    /// sequence 0 (the store assigns the table one sequence when it ingests it).
    pub(crate) external: bool,
    /// The table's smallest and largest internal keys.
    pub(crate) smallest_key: Vec<u8>,
    pub(crate) largest_key: Vec<u8>,
}

impl Default for TableProperties {
    fn default() -> Self {
        TableProperties {
            num_entries: 0,
            num_deletions: 0,
            num_range_deletions: 0,
            num_expiring: 0,
            num_data_blocks: 0,
            raw_key_bytes: 0,
            raw_value_bytes: 0,
            data_bytes: 0,
            index_bytes: 0,
            filter_layout: String::new(),
            filter_policy: String::new(),
            filter_bits_per_key: 0.0,
            filter_bytes: 0,
            filter_keys: 0,
            filter_whole_keys: true,
            prefix_extractor: String::new(),
            compression: String::new(),
            keyspace: String::new(),
            keyspace_id: None,
            store_id: Vec::new(),
            table_number: 0,
            external: false,
            smallest_key: Vec::new(),
            largest_key: Vec::new(),
        }
    }
}

impl TableProperties {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut entries: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
        let mut num = |name, v: u64| {
            let mut b = Vec::new();
            put_varint64(&mut b, v);
            entries.insert(name, b);
        };
        num("siftdb.num.entries", self.num_entries);
        num("siftdb.num.deletions", self.num_deletions);
        if self.num_range_deletions > 0 {
            num("siftdb.num.range.deletions", self.num_range_deletions);
        }
        if self.num_expiring > 0 {
            num("siftdb.num.expiring", self.num_expiring);
        }
        num("siftdb.num.data.blocks", self.num_data_blocks);
        num("siftdb.raw.key.size", self.raw_key_bytes);
        num("siftdb.raw.value.size", self.raw_value_bytes);
        num("siftdb.data.size", self.data_bytes);
        num("siftdb.index.size", self.index_bytes);
        num("siftdb.filter.size", self.filter_bytes);
        num("siftdb.filter.keys", self.filter_keys);
        num("siftdb.table.number", self.table_number);
        if self.external {
            num("siftdb.external", 1);
        }
        entries.insert("siftdb.store.id", self.store_id.clone());
        entries.insert("siftdb.smallest.key", self.smallest_key.clone());
        entries.insert("siftdb.largest.key", self.largest_key.clone());
        entries.insert(
            "siftdb.filter.layout",
            self.filter_layout.as_bytes().to_vec(),
        );
        entries.insert(
            "siftdb.filter.policy",
            self.filter_policy.as_bytes().to_vec(),
        );
        entries.insert(
            "siftdb.filter.whole_keys",
            vec![u8::from(self.filter_whole_keys)],
        );
        entries.insert(
            "siftdb.prefix.extractor",
            self.prefix_extractor.as_bytes().to_vec(),
        );
        entries.insert("siftdb.compression", self.compression.as_bytes().to_vec());
        entries.insert("siftdb.keyspace", self.keyspace.as_bytes().to_vec());
        if let Some(id) = self.keyspace_id {
            let mut b = Vec::new();
            put_varint64(&mut b, u64::from(id));
            entries.insert("siftdb.keyspace.id", b);
        }
        let mut bits = Vec::new();
        put_fixed64(&mut bits, self.filter_bits_per_key.to_bits());
        entries.insert("siftdb.filter.bits_per_key", bits);
        let mut block = BlockBuilder::new(1);
        for (k, v) in &entries {
            block.add(k.as_bytes(), v);
        }
        block.finish().to_vec()
    }

    /// Parses a properties block; `None` if it is malformed. Unknown names are ignored.
    pub(crate) fn decode(block: Vec<u8>) -> Option<TableProperties> {
        let block = std::sync::Arc::new(Block::new(block)?);
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_first();
        let mut p = TableProperties::default();
        while it.valid() {
            let v = it.value();
            let num = || Decoder::new(v).varint64();
            let text = || String::from_utf8(v.to_vec()).ok();
            match it.key() {
                b"siftdb.num.entries" => p.num_entries = num()?,
                b"siftdb.num.deletions" => p.num_deletions = num()?,
                b"siftdb.num.range.deletions" => p.num_range_deletions = num()?,
                b"siftdb.num.expiring" => p.num_expiring = num()?,
                b"siftdb.num.data.blocks" => p.num_data_blocks = num()?,
                b"siftdb.raw.key.size" => p.raw_key_bytes = num()?,
                b"siftdb.raw.value.size" => p.raw_value_bytes = num()?,
                b"siftdb.data.size" => p.data_bytes = num()?,
                b"siftdb.index.size" => p.index_bytes = num()?,
                b"siftdb.filter.size" => p.filter_bytes = num()?,
                b"siftdb.filter.keys" => p.filter_keys = num()?,
                b"siftdb.filter.layout" => p.filter_layout = text()?,
                b"siftdb.filter.policy" => p.filter_policy = text()?,
                b"siftdb.filter.whole_keys" => p.filter_whole_keys = v != [0],
                b"siftdb.prefix.extractor" => p.prefix_extractor = text()?,
                b"siftdb.compression" => p.compression = text()?,
                b"siftdb.keyspace" => p.keyspace = text()?,
                b"siftdb.keyspace.id" => p.keyspace_id = Some(u32::try_from(num()?).ok()?),
                b"siftdb.table.number" => p.table_number = num()?,
                b"siftdb.external" => p.external = num()? == 1,
                b"siftdb.store.id" => p.store_id = v.to_vec(),
                b"siftdb.smallest.key" => p.smallest_key = v.to_vec(),
                b"siftdb.largest.key" => p.largest_key = v.to_vec(),
                b"siftdb.filter.bits_per_key" => {
                    p.filter_bits_per_key = f64::from_bits(fixed64_at(v, 0)?)
                }
                _ => {}
            }
            it.next();
        }
        (!it.is_corrupt()).then_some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_round_trip() {
        let p = TableProperties {
            num_entries: 1000,
            num_deletions: 3,
            num_range_deletions: 2,
            num_expiring: 5,
            num_data_blocks: 30,
            raw_key_bytes: 24_000,
            raw_value_bytes: 100_000,
            data_bytes: 90_000,
            index_bytes: 700,
            filter_layout: "partitioned".into(),
            filter_policy: "siftdb.CacheLocalBloom".into(),
            filter_bits_per_key: 10.25,
            filter_bytes: 1300,
            filter_keys: 997,
            filter_whole_keys: false,
            prefix_extractor: "siftdb.FixedPrefix.4".into(),
            compression: "zstd:-5".into(),
            keyspace: "users".into(),
            keyspace_id: Some(3),
            store_id: vec![7; 16],
            table_number: 42,
            external: true,
            smallest_key: b"a\x01\0\0\0\0\0\0\0".to_vec(),
            largest_key: b"z\x01\0\0\0\0\0\0\0".to_vec(),
        };
        assert_eq!(TableProperties::decode(p.encode()), Some(p.clone()));
        assert!(TableProperties::decode(vec![1, 2, 3]).is_none());
    }
}

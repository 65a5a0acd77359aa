//! A version edit: one MANIFEST record, the change from one version of the table set to the next.
//!
//! Format (every tag) and the counters' meaning: `docs/log_format.md`, *MANIFEST records: version
//! edits*.

use std::path::Path;

use crate::coding::{put_length_prefixed, put_varint64, Decoder};
use crate::error::{Error, Result};
use crate::options::NUM_LEVELS;
use crate::store_id::{StoreId, DEFAULT_KEYSPACE_ID};

const TAG_LOG_NUMBER: u64 = 1;
const TAG_NEXT_FILE: u64 = 2;
const TAG_LAST_SEQUENCE: u64 = 3;
const TAG_DELETED_FILE: u64 = 5;
const TAG_NEW_FILE: u64 = 6;
const TAG_STORE_ID: u64 = 7;
const TAG_KEYSPACE: u64 = 8;
const TAG_KEYSPACE_LOG_NUMBER: u64 = 9;
const TAG_CREATE_KEYSPACE: u64 = 10;
const TAG_DROP_KEYSPACE: u64 = 11;
const TAG_LOG_START_SEQUENCE: u64 = 12;
const TAG_NEXT_KEYSPACE_ID: u64 = 13;
const TAG_RANGE_TOMBSTONES: u64 = 14;
const TAG_KEYSPACE_OPTIONS: u64 = 15;
const TAG_OLDEST_TABLE_IN_FLIGHT: u64 = 16;
const TAG_INGESTED: u64 = 17;

/// A keyspace as the MANIFEST records its creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyspaceRecord {
    pub(crate) id: u32,
    pub(crate) name: String,
    /// Its options, as `keyspace_options::describe` writes them.
    pub(crate) options: String,
}

/// A table as the MANIFEST records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewFile {
    pub(crate) level: usize,
    pub(crate) number: u64,
    pub(crate) size: u64,
    pub(crate) smallest: Vec<u8>,
    pub(crate) largest: Vec<u8>,
    /// Whether it holds range tombstones (which a scan must see without opening every table).
    pub(crate) range_tombstones: bool,
    /// For a table built outside the store and ingested (`Db::ingest`): the sequence its
    /// entries, all written at 0, are read at.
    pub(crate) global_sequence: Option<u64>,
}

/// The change one MANIFEST record makes. Tables added and deleted, and `keyspace_log_number`,
/// belong to keyspace `keyspace`; the counters are the store's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct VersionEdit {
    pub(crate) keyspace: u32,
    /// The oldest WAL that may hold a write of `keyspace` in no table.
    pub(crate) keyspace_log_number: Option<u64>,
    /// The oldest WAL any keyspace still needs.
    pub(crate) log_number: Option<u64>,
    /// The sequence just before the first record of WAL `log_number`.
    pub(crate) log_start_sequence: Option<u64>,
    pub(crate) next_keyspace_id: Option<u32>,
    pub(crate) created: Option<KeyspaceRecord>,
    pub(crate) dropped: Option<u32>,
    /// The new options record of `keyspace` (`Keyspace::set_options`).
    pub(crate) options: Option<String>,
    pub(crate) next_file_number: Option<u64>,
    /// The smallest number of a table a flush or compaction was still writing (its edit not yet
    /// logged), when below `next_file_number`: recovery may remove such a table if no edit names
    /// it, but no unnamed table below it.
    pub(crate) oldest_table_in_flight: Option<u64>,
    pub(crate) last_sequence: Option<u64>,
    pub(crate) deleted: Vec<(usize, u64)>,
    pub(crate) added: Vec<NewFile>,
    /// Only in the first record of a MANIFEST.
    pub(crate) store_id: Option<StoreId>,
}

impl VersionEdit {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for (tag, v) in [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE, self.next_file_number),
            (TAG_OLDEST_TABLE_IN_FLIGHT, self.oldest_table_in_flight),
            (TAG_LAST_SEQUENCE, self.last_sequence),
            (TAG_LOG_START_SEQUENCE, self.log_start_sequence),
            (TAG_NEXT_KEYSPACE_ID, self.next_keyspace_id.map(u64::from)),
            (TAG_DROP_KEYSPACE, self.dropped.map(u64::from)),
        ] {
            if let Some(v) = v {
                put_varint64(&mut b, tag);
                put_varint64(&mut b, v);
            }
        }
        if let Some(id) = &self.store_id {
            put_varint64(&mut b, TAG_STORE_ID);
            put_length_prefixed(&mut b, id);
        }
        if let Some(k) = &self.created {
            put_varint64(&mut b, TAG_CREATE_KEYSPACE);
            put_varint64(&mut b, u64::from(k.id));
            put_length_prefixed(&mut b, k.name.as_bytes());
            put_length_prefixed(&mut b, k.options.as_bytes());
        }
        // Old MANIFESTs hold the default keyspace's edits alone, without these tags.
        if self.keyspace != DEFAULT_KEYSPACE_ID {
            put_varint64(&mut b, TAG_KEYSPACE);
            put_varint64(&mut b, u64::from(self.keyspace));
        }
        if let Some(n) = self.keyspace_log_number {
            put_varint64(&mut b, TAG_KEYSPACE_LOG_NUMBER);
            put_varint64(&mut b, n);
        }
        if let Some(options) = &self.options {
            put_varint64(&mut b, TAG_KEYSPACE_OPTIONS);
            put_length_prefixed(&mut b, options.as_bytes());
        }
        for &(level, number) in &self.deleted {
            put_varint64(&mut b, TAG_DELETED_FILE);
            put_varint64(&mut b, level as u64);
            put_varint64(&mut b, number);
        }
        for f in &self.added {
            put_varint64(&mut b, TAG_NEW_FILE);
            put_varint64(&mut b, f.level as u64);
            put_varint64(&mut b, f.number);
            put_varint64(&mut b, f.size);
            put_length_prefixed(&mut b, &f.smallest);
            put_length_prefixed(&mut b, &f.largest);
            if f.range_tombstones {
                put_varint64(&mut b, TAG_RANGE_TOMBSTONES);
                put_varint64(&mut b, f.number);
            }
            if let Some(seq) = f.global_sequence {
                put_varint64(&mut b, TAG_INGESTED);
                put_varint64(&mut b, f.number);
                put_varint64(&mut b, seq);
            }
        }
        b
    }

    /// Decodes a record of the MANIFEST at `file`.
    ///
    /// # Errors
    /// `Error::Corruption` naming `file` for an unknown tag, a bad level or a short field.
    pub(crate) fn decode(record: &[u8], file: &Path) -> Result<VersionEdit> {
        let bad = |what: &str| Error::corruption(file, format!("version edit: {what}"));
        let mut d = Decoder::new(record);
        let mut e = VersionEdit::default();
        let keyspace_id =
            |d: &mut Decoder<'_>| -> Option<u32> { u32::try_from(d.varint64()?).ok() };
        let text = |d: &mut Decoder<'_>| -> Option<String> {
            String::from_utf8(d.length_prefixed()?.to_vec()).ok()
        };
        let level = |d: &mut Decoder<'_>| -> Option<usize> {
            let l = usize::try_from(d.varint64()?).ok()?;
            (l < NUM_LEVELS).then_some(l)
        };
        while !d.is_empty() {
            let tag = d.varint64().ok_or_else(|| bad("bad tag"))?;
            match tag {
                TAG_LOG_NUMBER => {
                    e.log_number = Some(d.varint64().ok_or_else(|| bad("bad log number"))?)
                }
                TAG_NEXT_FILE => {
                    e.next_file_number =
                        Some(d.varint64().ok_or_else(|| bad("bad next file number"))?)
                }
                TAG_OLDEST_TABLE_IN_FLIGHT => {
                    e.oldest_table_in_flight = Some(
                        d.varint64()
                            .ok_or_else(|| bad("bad oldest table in flight"))?,
                    )
                }
                TAG_LAST_SEQUENCE => {
                    e.last_sequence = Some(d.varint64().ok_or_else(|| bad("bad last sequence"))?)
                }
                TAG_DELETED_FILE => {
                    let l = level(&mut d).ok_or_else(|| bad("bad level"))?;
                    let n = d.varint64().ok_or_else(|| bad("bad file number"))?;
                    e.deleted.push((l, n));
                }
                TAG_NEW_FILE => {
                    let f = (|| {
                        Some(NewFile {
                            level: level(&mut d)?,
                            number: d.varint64()?,
                            size: d.varint64()?,
                            smallest: d.length_prefixed()?.to_vec(),
                            largest: d.length_prefixed()?.to_vec(),
                            range_tombstones: false,
                            global_sequence: None,
                        })
                    })()
                    .ok_or_else(|| bad("bad new-file entry"))?;
                    e.added.push(f);
                }
                TAG_RANGE_TOMBSTONES => {
                    // Follows the new-file entry it marks.
                    let n = d
                        .varint64()
                        .ok_or_else(|| bad("bad range tombstone mark"))?;
                    match e.added.last_mut() {
                        Some(f) if f.number == n => f.range_tombstones = true,
                        _ => return Err(bad("a range tombstone mark names no table just added")),
                    }
                }
                TAG_INGESTED => {
                    // Follows the new-file entry it marks, as a range tombstone mark does.
                    let (n, seq) = (|| Some((d.varint64()?, d.varint64()?)))()
                        .ok_or_else(|| bad("bad ingested-table mark"))?;
                    match e.added.last_mut() {
                        Some(f) if f.number == n => f.global_sequence = Some(seq),
                        _ => return Err(bad("an ingested-table mark names no table just added")),
                    }
                }
                TAG_STORE_ID => {
                    let id = d
                        .length_prefixed()
                        .and_then(|b| StoreId::try_from(b).ok())
                        .ok_or_else(|| bad("bad store identity"))?;
                    e.store_id = Some(id);
                }
                TAG_KEYSPACE => {
                    e.keyspace = keyspace_id(&mut d).ok_or_else(|| bad("bad keyspace"))?
                }
                TAG_KEYSPACE_LOG_NUMBER => {
                    e.keyspace_log_number =
                        Some(d.varint64().ok_or_else(|| bad("bad keyspace log number"))?)
                }
                TAG_LOG_START_SEQUENCE => {
                    e.log_start_sequence =
                        Some(d.varint64().ok_or_else(|| bad("bad log start sequence"))?)
                }
                TAG_NEXT_KEYSPACE_ID => {
                    e.next_keyspace_id =
                        Some(keyspace_id(&mut d).ok_or_else(|| bad("bad next keyspace id"))?)
                }
                TAG_DROP_KEYSPACE => {
                    e.dropped =
                        Some(keyspace_id(&mut d).ok_or_else(|| bad("bad dropped keyspace"))?)
                }
                TAG_CREATE_KEYSPACE => {
                    let k = (|| {
                        Some(KeyspaceRecord {
                            id: keyspace_id(&mut d)?,
                            name: text(&mut d)?,
                            options: text(&mut d)?,
                        })
                    })()
                    .ok_or_else(|| bad("bad keyspace creation"))?;
                    e.created = Some(k);
                }
                TAG_KEYSPACE_OPTIONS => {
                    e.options = Some(text(&mut d).ok_or_else(|| bad("bad keyspace options"))?)
                }
                other => return Err(bad(&format!("unknown tag {other}"))),
            }
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_round_trip_and_truncations_fail() {
        let e = VersionEdit {
            keyspace: 3,
            keyspace_log_number: Some(8),
            log_start_sequence: Some(77),
            next_keyspace_id: Some(4),
            created: Some(KeyspaceRecord {
                id: 3,
                name: "users".into(),
                options: "block_size=4096\n".into(),
            }),
            dropped: Some(2),
            options: Some("block_size=8192\n".into()),
            log_number: Some(9),
            next_file_number: Some(12),
            oldest_table_in_flight: Some(10),
            last_sequence: Some(1 << 40),
            deleted: vec![(0, 3), (1, 4)],
            added: vec![NewFile {
                level: 1,
                number: 11,
                size: 4096,
                smallest: b"a\0\0\0\0\0\0\0\x01".to_vec(),
                largest: b"z\0\0\0\0\0\0\0\x01".to_vec(),
                range_tombstones: true,
                global_sequence: Some(1 << 33),
            }],
            store_id: Some([3; 16]),
        };
        let bytes = e.encode();
        let p = Path::new("MANIFEST-000001");
        assert_eq!(VersionEdit::decode(&bytes, p).unwrap(), e);
        for cut in 1..bytes.len() {
            // A cut inside a field fails; a cut between fields is a shorter, valid edit.
            if let Ok(short) = VersionEdit::decode(&bytes[..cut], p) {
                assert_ne!(short, e);
            }
        }
        assert!(VersionEdit::decode(&[99, 1], p).is_err());
        assert!(VersionEdit::decode(&[TAG_DELETED_FILE as u8, 9, 1], p).is_err());
    }

    /// A range tombstone mark (tag 14) must follow the new-file entry of the table it names: one
    /// naming another table, or coming before any, is refused as corruption naming the MANIFEST.
    #[test]
    fn a_range_tombstone_mark_naming_no_table_just_added_is_corruption() {
        let table = |number: u64, range_tombstones: bool| NewFile {
            level: 0,
            number,
            size: 1000,
            smallest: b"a\0\0\0\0\0\0\0\x01".to_vec(),
            largest: b"m\0\0\0\0\0\0\0\x01".to_vec(),
            range_tombstones,
            global_sequence: None,
        };
        let p = Path::new("MANIFEST-000007");
        let mark = |number: u64| {
            let mut b = Vec::new();
            put_varint64(&mut b, TAG_RANGE_TOMBSTONES);
            put_varint64(&mut b, number);
            b
        };
        let edit = |added: Vec<NewFile>| VersionEdit {
            added,
            ..Default::default()
        };
        // Marked tables, and unmarked ones beside them, round-trip.
        let e = edit(vec![table(5, false), table(6, true), table(7, false)]);
        assert_eq!(VersionEdit::decode(&e.encode(), p).unwrap(), e);
        let refused = |bytes: &[u8], what: &str| match VersionEdit::decode(bytes, p) {
            Err(Error::Corruption {
                file,
                what: message,
            }) => {
                assert_eq!(file, p, "{what}");
                assert!(
                    message.contains("range tombstone mark"),
                    "{what}: {message}"
                );
            }
            other => panic!("{what}: {other:?}"),
        };
        // A mark alone, before any table.
        refused(&mark(6), "a mark before any table");
        // A mark naming a table added earlier in the edit, not the one just added.
        let mut bytes = edit(vec![table(5, false), table(6, false)]).encode();
        bytes.extend(mark(5));
        refused(&bytes, "a mark naming an earlier table");
        // A mark naming a table the edit never adds.
        let mut bytes = edit(vec![table(5, false)]).encode();
        bytes.extend(mark(9));
        refused(&bytes, "a mark naming an unknown table");
        // A mark cut short.
        let mut bytes = edit(vec![table(5, false)]).encode();
        bytes.extend(&mark(5)[..1]);
        refused(&bytes, "a mark without its number");
        // The mark right after its table's entry is what an encoder writes.
        let mut bytes = edit(vec![table(5, false)]).encode();
        bytes.extend(mark(5));
        assert_eq!(
            VersionEdit::decode(&bytes, p).unwrap(),
            edit(vec![table(5, true)])
        );
    }
}

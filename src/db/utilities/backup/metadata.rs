//! A backup's metadata file: what the backup holds, written last when it is made (format:
//! `docs/log_format.md`, *Backup directories*). A text file, versioned and checksummed.

use std::fmt::Write as _;
use std::path::Path;

use super::names::StoreFile;
use crate::db::version::filename::FileKind;
use crate::error::{Error, Result};
use crate::store_id::StoreId;

/// The first line of every metadata file this build writes, and the only one it reads.
const FORMAT_LINE: &str = "siftdb backup 1";

/// The metadata files are small; a larger one is not a metadata file.
const MAX_META_BYTES: usize = 64 << 20;

/// One backup, as its metadata file describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BackupMeta {
    pub(crate) id: u32,
    /// When the backup was made, in milliseconds since the Unix epoch.
    pub(crate) created_ms: u64,
    /// The identity of the store it copies.
    pub(crate) store_id: StoreId,
    /// The newest sequence it holds: every write committed when it was taken.
    pub(crate) sequence: u64,
    /// Its files: tables, WAL prefixes and one MANIFEST.
    pub(crate) files: Vec<StoreFile>,
}

impl BackupMeta {
    /// The number in the name of its MANIFEST (present: [`decode`](Self::decode) checks it).
    pub(crate) fn manifest_number(&self) -> Option<u64> {
        self.files.iter().find_map(|f| match f.kind() {
            Some(FileKind::Manifest(n)) => Some(n),
            _ => None,
        })
    }

    /// The bytes of its metadata file.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut s = String::new();
        // Writing to a `String` cannot fail.
        let _ = writeln!(s, "{FORMAT_LINE}");
        let _ = writeln!(s, "id {}", self.id);
        let _ = writeln!(s, "created {}", self.created_ms);
        let _ = writeln!(s, "store {}", hex(&self.store_id));
        let _ = writeln!(s, "sequence {}", self.sequence);
        for f in &self.files {
            let _ = writeln!(s, "file {} {} {:08x}", f.name, f.size, f.crc);
        }
        let crc = crc32fast::hash(s.as_bytes());
        let _ = writeln!(s, "checksum {crc:08x}");
        s.into_bytes()
    }

    /// Reads backup `id`'s metadata file at `path`.
    ///
    /// # Errors
    /// `Error::Corruption` naming `path` if it is not a whole metadata file of this format
    /// describing backup `id`; `Error::Io` if it cannot be read.
    pub(crate) fn read(path: &Path, id: u32) -> Result<BackupMeta> {
        let bytes = std::fs::read(path).map_err(crate::fs::io_at(path))?;
        let meta = BackupMeta::decode(&bytes).map_err(|what| Error::corruption(path, what))?;
        if meta.id != id {
            return Err(Error::corruption(
                path,
                format!("describes backup {}, not {id}", meta.id),
            ));
        }
        Ok(meta)
    }

    /// Decodes a metadata file's bytes; what is wrong with them otherwise.
    pub(crate) fn decode(bytes: &[u8]) -> std::result::Result<BackupMeta, String> {
        if bytes.len() > MAX_META_BYTES {
            return Err(format!(
                "{} bytes: too large for a backup's metadata",
                bytes.len()
            ));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or("no checksum line")?;
        let (body, last) = text.split_at(body_end);
        let stored = last
            .strip_prefix("checksum ")
            .and_then(|c| c.strip_suffix('\n'))
            .and_then(crc_from_hex)
            .ok_or("the last line is not `checksum <8 hex digits>`")?;
        let actual = crc32fast::hash(body.as_bytes());
        if stored != actual {
            return Err(format!(
                "checksum mismatch (recorded {stored:08x}, computed {actual:08x})"
            ));
        }
        let mut lines = body.lines();
        match lines.next() {
            Some(FORMAT_LINE) => {}
            Some(other) if other.starts_with("siftdb backup ") => {
                return Err(format!("unsupported format `{other}`"))
            }
            _ => return Err(format!("does not start with `{FORMAT_LINE}`")),
        }
        let mut field = |name: &str| -> std::result::Result<String, String> {
            let line = lines.next().ok_or(format!("no `{name}` line"))?;
            line.strip_prefix(name)
                .and_then(|v| v.strip_prefix(' '))
                .map(str::to_string)
                .ok_or(format!("expected `{name} …`, found `{line}`"))
        };
        let number = |v: String, name: &str| -> std::result::Result<u64, String> {
            v.parse().map_err(|_| format!("bad {name} `{v}`"))
        };
        let id = number(field("id")?, "id")?;
        let id = u32::try_from(id).map_err(|_| format!("id {id} too large"))?;
        let created_ms = number(field("created")?, "time")?;
        let store = field("store")?;
        let store_id = unhex(&store).ok_or(format!("bad store identity `{store}`"))?;
        let sequence = number(field("sequence")?, "sequence")?;
        let mut files: Vec<StoreFile> = Vec::new();
        for line in lines {
            let parts: Vec<&str> = line.split(' ').collect();
            let ["file", name, size, crc] = parts[..] else {
                return Err(format!(
                    "expected `file <name> <size> <crc>`, found `{line}`"
                ));
            };
            let size = size.parse().map_err(|_| format!("bad size in `{line}`"))?;
            let crc = crc_from_hex(crc).ok_or(format!("bad checksum in `{line}`"))?;
            let file = StoreFile {
                name: name.to_string(),
                size,
                crc,
            };
            if file.kind().is_none() {
                return Err(format!("`{name}` is not a table, WAL or MANIFEST name"));
            }
            if files.iter().any(|f| f.name == file.name) {
                return Err(format!("names {name} twice"));
            }
            files.push(file);
        }
        let meta = BackupMeta {
            id,
            created_ms,
            store_id,
            sequence,
            files,
        };
        let manifests = meta
            .files
            .iter()
            .filter(|f| matches!(f.kind(), Some(FileKind::Manifest(_))))
            .count();
        if manifests != 1 {
            return Err(format!("names {manifests} MANIFESTs, not one"));
        }
        Ok(meta)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `s` is lowercase hex digits alone, as [`hex`] and `{:08x}` write them: one spelling
/// per value, so a changed digit never reads as the same value.
fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A checksum written as `{:08x}`.
fn crc_from_hex(s: &str) -> Option<u32> {
    (s.len() == 8 && is_lower_hex(s))
        .then(|| u32::from_str_radix(s, 16).ok())
        .flatten()
}

fn unhex(s: &str) -> Option<StoreId> {
    let mut id = StoreId::default();
    if s.len() != 2 * id.len() || !is_lower_hex(s) {
        return None;
    }
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BackupMeta {
        BackupMeta {
            id: 7,
            created_ms: 1_764_412_345_678,
            store_id: [0xab; 16],
            sequence: 12_345,
            files: vec![
                StoreFile {
                    name: "000012.sst".into(),
                    size: 48_211,
                    crc: 0x3f8a_12bc,
                },
                StoreFile {
                    name: "000055.log".into(),
                    size: 0,
                    crc: 0,
                },
                StoreFile {
                    name: "MANIFEST-000057".into(),
                    size: 345,
                    crc: 0x0bad_f00d,
                },
            ],
        }
    }

    #[test]
    fn round_trips() {
        let m = sample();
        let bytes = m.encode();
        assert_eq!(BackupMeta::decode(&bytes), Ok(m.clone()));
        assert_eq!(m.manifest_number(), Some(57));
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("siftdb backup 1\nid 7\n"), "{text}");
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            for bit in [0x01, 0x20, 0x80] {
                let mut b = bytes.clone();
                b[i] ^= bit;
                assert!(
                    BackupMeta::decode(&b).is_err(),
                    "byte {i} ^ {bit:#x} accepted"
                );
            }
            assert!(
                BackupMeta::decode(&bytes[..i]).is_err(),
                "cut at {i} accepted"
            );
        }
    }

    #[test]
    fn well_checksummed_nonsense_is_refused() {
        let frame = |body: &str| {
            let mut s = body.to_string();
            s.push_str(&format!(
                "checksum {:08x}\n",
                crc32fast::hash(body.as_bytes())
            ));
            s.into_bytes()
        };
        let head = format!(
            "siftdb backup 1\nid 1\ncreated 5\nstore {}\nsequence 9\n",
            "00".repeat(16)
        );
        for (body, why) in [
            (head.clone(), "0 MANIFESTs"),
            (
                format!(
                    "{head}file ../../etc/passwd 1 00000000\nfile MANIFEST-000001 1 00000000\n"
                ),
                "not a table",
            ),
            (
                format!("{head}file MANIFEST-000001 1 00000000\nfile MANIFEST-000001 1 00000000\n"),
                "twice",
            ),
            (
                format!("{head}file MANIFEST-000001 1 00000000\nfile MANIFEST-000002 1 00000000\n"),
                "2 MANIFESTs",
            ),
            ("siftdb backup 2\n".to_string(), "unsupported"),
            (
                format!("{head}file MANIFEST-000001 -1 00000000\n"),
                "bad size",
            ),
        ] {
            let err = BackupMeta::decode(&frame(&body)).unwrap_err();
            assert!(err.contains(why), "{err} (expected {why})");
        }
    }
}

//! Block handles, block trailers and the table footer, and the checked read of one block.
//!
//! Format: `docs/table_format.md`, *Block handle*, *Block trailer* and *Footer*.

use std::cell::RefCell;
use std::fs::File;
use std::path::Path;

use crate::coding::{fixed32_at, fixed64_at, put_varint64, Decoder};
use crate::error::{Error, Result};
use crate::sst::compression::{decompress, COMPRESSION_NONE};

/// Bytes of the trailer after every block.
pub(crate) const BLOCK_TRAILER_LEN: usize = 5;
/// Bytes of the footer at the end of every table.
pub(crate) const FOOTER_LEN: usize = 56;
/// The last 8 bytes of every table ("siftdb" and a format generation).
pub(crate) const TABLE_MAGIC: u64 = 0x7369_6674_6462_0001;
/// The table format version written in the footer.
pub(crate) const FORMAT_VERSION: u32 = 1;
const HANDLES_LEN: usize = 40;

/// Where a block sits in its table: offset and size of its stored contents (trailer excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub(crate) struct BlockHandle {
    pub(crate) offset: u64,
    pub(crate) size: u64,
}

impl BlockHandle {
    pub(crate) fn encode_to(&self, buf: &mut Vec<u8>) {
        put_varint64(buf, self.offset);
        put_varint64(buf, self.size);
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(20);
        self.encode_to(&mut buf);
        buf
    }

    pub(crate) fn decode_from(d: &mut Decoder<'_>) -> Option<BlockHandle> {
        Some(BlockHandle {
            offset: d.varint64()?,
            size: d.varint64()?,
        })
    }

    /// Decodes a handle that must fill `bytes` exactly.
    pub(crate) fn decode_exact(bytes: &[u8]) -> Option<BlockHandle> {
        let mut d = Decoder::new(bytes);
        let h = BlockHandle::decode_from(&mut d)?;
        d.is_empty().then_some(h)
    }
}

/// The fixed-size tail of a table: where its metaindex and index blocks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    pub(crate) metaindex: BlockHandle,
    pub(crate) index: BlockHandle,
}

impl Footer {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(FOOTER_LEN);
        self.metaindex.encode_to(&mut buf);
        self.index.encode_to(&mut buf);
        buf.resize(HANDLES_LEN, 0);
        buf.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        let crc = crc32fast::hash(&buf);
        buf.extend_from_slice(&crc.to_le_bytes());
        buf.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
        buf
    }

    /// Decodes the last `FOOTER_LEN` bytes of `file`.
    pub(crate) fn decode(bytes: &[u8], file: &Path) -> Result<Footer> {
        let bad = |what: &str| Error::corruption(file, format!("footer: {what}"));
        if bytes.len() != FOOTER_LEN {
            return Err(bad("file too short to be a table"));
        }
        if fixed64_at(bytes, 48) != Some(TABLE_MAGIC) {
            return Err(bad("bad magic number (not a siftdb table)"));
        }
        if fixed32_at(bytes, 44) != Some(crc32fast::hash(&bytes[..44])) {
            return Err(bad("checksum mismatch"));
        }
        let version = fixed32_at(bytes, 40).unwrap_or(0);
        if version != FORMAT_VERSION {
            return Err(bad(&format!("unsupported format version {version}")));
        }
        let mut d = Decoder::new(&bytes[..HANDLES_LEN]);
        let metaindex =
            BlockHandle::decode_from(&mut d).ok_or_else(|| bad("bad metaindex handle"))?;
        let index = BlockHandle::decode_from(&mut d).ok_or_else(|| bad("bad index handle"))?;
        Ok(Footer { metaindex, index })
    }
}

/// Builds the trailer for stored block `contents` with compression byte `kind`.
pub(crate) fn block_trailer(contents: &[u8], kind: u8) -> [u8; BLOCK_TRAILER_LEN] {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(contents);
    hasher.update(&[kind]);
    let crc = hasher.finalize().to_le_bytes();
    [kind, crc[0], crc[1], crc[2], crc[3]]
}

/// Stored blocks up to this many bytes (trailer included) are read into a buffer each thread
/// keeps, so that a data block's read allocates nothing but the decoded block, and that from the
/// thread's spares ([`block_buffers`](crate::sst::block_buffers)).
const REUSED_READ_BUFFER_BYTES: usize = 256 << 10;

thread_local! {
    /// The stored bytes of this thread's last block read of at most `REUSED_READ_BUFFER_BYTES`.
    static READ_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Reads the block at `handle` from `file`, verifies its checksum and decompresses it.
///
/// # Errors
/// `Error::Corruption` naming `path` for a short read, a checksum mismatch, an unknown compression
/// byte or compressed data that does not decode to its recorded length; `Error::Io` for an
/// operating-system failure.
pub(crate) fn read_block(
    file: &File,
    path: &Path,
    handle: BlockHandle,
    file_len: u64,
) -> Result<Vec<u8>> {
    let bad = |what: String| Error::corruption(path, what);
    let end = handle
        .offset
        .checked_add(handle.size)
        .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64))
        .filter(|&e| e <= file_len)
        .ok_or_else(|| {
            bad(format!(
                "block handle {handle:?} points past the end of the file ({file_len} bytes)"
            ))
        })?;
    let len = usize::try_from(end - handle.offset).map_err(|_| bad("block too large".into()))?;
    let decode = |kind: u8, stored: &[u8]| {
        decompress(kind, stored)
            .map_err(|what| bad(format!("{what} (block at offset {})", handle.offset)))
    };
    if len > REUSED_READ_BUFFER_BYTES {
        let mut buf = vec![0u8; len];
        let (kind, n) = read_stored(file, path, handle, &mut buf)?;
        if kind == COMPRESSION_NONE {
            buf.truncate(n);
            return Ok(buf);
        }
        return decode(kind, &buf[..n]);
    }
    READ_BUFFER.with_borrow_mut(|buf| {
        if buf.len() < len {
            buf.resize(len, 0);
        }
        let stored = &mut buf[..len];
        let (kind, n) = read_stored(file, path, handle, stored)?;
        decode(kind, &stored[..n])
    })
}

/// Fills `buf` with the block at `handle` and its trailer and verifies the checksum: the
/// trailer's compression byte and the length of the stored contents.
fn read_stored(
    file: &File,
    path: &Path,
    handle: BlockHandle,
    buf: &mut [u8],
) -> Result<(u8, usize)> {
    crate::fs::read_exact_at(file, buf, handle.offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::corruption(
                path,
                format!("short read of block at offset {}", handle.offset),
            )
        } else {
            Error::Io(crate::fs::io_error_at(path, e))
        }
    })?;
    let n = buf.len() - BLOCK_TRAILER_LEN;
    let kind = buf[n];
    if block_trailer(&buf[..n], kind) != buf[n..] {
        return Err(Error::corruption(
            path,
            format!("block checksum mismatch at offset {}", handle.offset),
        ));
    }
    Ok((kind, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::compression::BlockCompressor;
    use crate::sst::compression::Compression;

    #[test]
    fn footer_round_trips_and_detects_damage() {
        let f = Footer {
            metaindex: BlockHandle {
                offset: 1 << 40,
                size: 77,
            },
            index: BlockHandle {
                offset: 12,
                size: 1 << 20,
            },
        };
        let bytes = f.encode();
        assert_eq!(bytes.len(), FOOTER_LEN);
        let p = Path::new("t.sst");
        assert_eq!(Footer::decode(&bytes, p).unwrap(), f);
        for i in 0..FOOTER_LEN {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(
                matches!(Footer::decode(&bad, p), Err(Error::Corruption { .. })),
                "byte {i}"
            );
        }
        assert!(Footer::decode(&bytes[1..], p).is_err());
    }

    #[test]
    fn read_block_verifies_checksum_and_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let contents = b"some block contents".to_vec();
        let mut file_bytes = contents.clone();
        file_bytes.extend_from_slice(&block_trailer(&contents, COMPRESSION_NONE));
        std::fs::write(&path, &file_bytes).unwrap();
        let f = File::open(&path).unwrap();
        let len = file_bytes.len() as u64;
        let h = BlockHandle {
            offset: 0,
            size: contents.len() as u64,
        };
        assert_eq!(read_block(&f, &path, h, len).unwrap(), contents);
        let past = BlockHandle {
            offset: 1,
            size: contents.len() as u64,
        };
        assert!(matches!(
            read_block(&f, &path, past, len),
            Err(Error::Corruption { .. })
        ));
        file_bytes[3] ^= 1;
        std::fs::write(&path, &file_bytes).unwrap();
        let f = File::open(&path).unwrap();
        assert!(matches!(
            read_block(&f, &path, h, len),
            Err(Error::Corruption { .. })
        ));
    }

    #[test]
    fn blocks_of_every_size_read_back_through_the_kept_buffer_and_beside_it() {
        // Raw and snappy blocks below and above the kept buffer's size, read in an order where
        // each follows a larger one, so stale bytes of the buffer would show.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let mut compressor = BlockCompressor::new(Compression::Snappy).unwrap();
        let mut file_bytes = Vec::new();
        let mut blocks = Vec::new();
        for (i, n) in [5000usize, 300_000, 100, 400_000, 7]
            .into_iter()
            .enumerate()
        {
            // Half the bytes repeat, so snappy keeps the compressed form.
            let raw: Vec<u8> = (0..n).map(|j| ((j / 2) * 31 + i) as u8).collect();
            for compress in [false, true] {
                let (stored, kind) = if compress {
                    compressor.compress(&raw)
                } else {
                    (&raw[..], COMPRESSION_NONE)
                };
                if n >= 5000 {
                    assert_eq!(kind != COMPRESSION_NONE, compress, "{n}");
                }
                let handle = BlockHandle {
                    offset: file_bytes.len() as u64,
                    size: stored.len() as u64,
                };
                let trailer = block_trailer(stored, kind);
                file_bytes.extend_from_slice(stored);
                file_bytes.extend_from_slice(&trailer);
                blocks.push((handle, raw.clone()));
            }
        }
        std::fs::write(&path, &file_bytes).unwrap();
        let f = File::open(&path).unwrap();
        let len = file_bytes.len() as u64;
        for (handle, raw) in blocks.iter().chain(blocks.iter().rev()) {
            assert_eq!(&read_block(&f, &path, *handle, len).unwrap(), raw);
        }
        // A damaged small block after good ones is still refused.
        let (handle, _) = &blocks[4];
        file_bytes[handle.offset as usize + 10] ^= 1;
        std::fs::write(&path, &file_bytes).unwrap();
        let f = File::open(&path).unwrap();
        assert!(matches!(
            read_block(&f, &path, *handle, len),
            Err(Error::Corruption { .. })
        ));
        assert_eq!(
            read_block(&f, &path, blocks[0].0, len).unwrap(),
            blocks[0].1
        );
    }
}

//! Block codecs: the compressor a table builder keeps for its blocks, and the checked
//! decompression of a stored block whatever codec its trailer names.
//!
//! Format: `docs/table_format.md`, *Block trailer*.

use std::cell::RefCell;

use crate::coding::Decoder;
use crate::error::Result;
use crate::sst::block_buffers;

/// How a table's data blocks and index block are compressed on disk.
///
/// Whatever the codec, a block is stored compressed only where that saves at least an eighth of
/// its size, and raw otherwise. Each block records its codec, so tables written with different
/// codecs live side by side and every store reads them all, whatever its options. Choose the codec
/// per level with [`Options::compression_per_level`](crate::Options::compression_per_level) and
/// [`Options::bottommost_compression`](crate::Options::bottommost_compression).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// Blocks are stored as they are.
    None,
    /// Snappy: fast, and a moderate ratio (the default).
    Snappy,
    /// LZ4 (block format): about snappy's ratio, faster to decompress.
    Lz4,
    /// Zstandard at the given level: the best ratio of the four, slower to compress and to
    /// decompress. Levels run from zstd's fast negative levels up to 22; 1 to 3 suit an LSM
    /// store (RocksDB's usual choice is 3), and 0 means zstd's default, 3.
    /// [`Db::open`](crate::Db::open) refuses a level zstd does not know.
    Zstd(i32),
}

/// The codec's name, as `sst_dump`, the workload runner and a table's properties write it:
/// `none`, `snappy`, `lz4` or `zstd:<level>`.
///
/// ```
/// assert_eq!(siftdb::Compression::Zstd(3).to_string(), "zstd:3");
/// ```
impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::None => f.write_str("none"),
            Compression::Snappy => f.write_str("snappy"),
            Compression::Lz4 => f.write_str("lz4"),
            Compression::Zstd(level) => write!(f, "zstd:{level}"),
        }
    }
}

/// Trailer byte of a block stored as it is.
pub(crate) const COMPRESSION_NONE: u8 = 0;
/// Trailer byte of a snappy-compressed block.
pub(crate) const COMPRESSION_SNAPPY: u8 = 1;
/// Trailer byte of an LZ4-compressed block (RocksDB's number for LZ4).
pub(crate) const COMPRESSION_LZ4: u8 = 4;
/// Trailer byte of a zstd-compressed block (RocksDB's number for zstd).
pub(crate) const COMPRESSION_ZSTD: u8 = 7;

/// The most bytes one byte of a snappy block decodes to: a 3-byte copy of 64 bytes.
const SNAPPY_MAX_EXPANSION: usize = 22;
/// The most bytes one byte of an LZ4 block decodes to: a match length extension byte of 255.
const LZ4_MAX_EXPANSION: usize = 255;
/// The most bytes one byte of a zstd frame decodes to: a 4-byte RLE block (3-byte header and the
/// byte) is at most 128 KiB.
const ZSTD_MAX_EXPANSION: usize = 128 * 1024 / 4;

thread_local! {
    /// The zstd decompression context of this thread, kept between blocks: a new one allocates
    /// and frees about 100 KiB for every block read.
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

impl Compression {
    /// The codec a table's properties name (its [`Display`](std::fmt::Display) form); `None` for a
    /// name this crate does not know.
    pub(crate) fn from_property_name(name: &str) -> Option<Compression> {
        match name {
            "none" => Some(Compression::None),
            "snappy" => Some(Compression::Snappy),
            "lz4" => Some(Compression::Lz4),
            _ => Some(Compression::Zstd(name.strip_prefix("zstd:")?.parse().ok()?)),
        }
    }
}

/// Blocks in a row that must fail to compress before the compressor stops trying every block.
const REFUSALS_BEFORE_PROBING: u32 = 8;
/// Once blocks stopped compressing, the compressor tries one block in this many; a block that
/// compresses makes it try every block again.
const PROBE_EVERY: u32 = 16;

/// The compressor of one table's blocks, with its state and output buffer kept for the whole
/// table: a fresh snappy encoder, LZ4 hash table or zstd context per block costs an allocation
/// and a clearing each, which for snappy was a quarter of a compaction's instructions.
///
/// Data that does not compress (values already compressed or encrypted) is stored raw anyway,
/// and trying each block cost a tenth of a compaction's time on such data; so after
/// [`REFUSALS_BEFORE_PROBING`] blocks in a row stored raw, only one block in [`PROBE_EVERY`] is
/// tried until one compresses again.
pub(crate) struct BlockCompressor {
    codec: Codec,
    out: Vec<u8>,
    /// Blocks in a row that were tried and stored raw.
    refused_in_a_row: u32,
    /// Blocks still to store raw without trying.
    untried_left: u32,
}

enum Codec {
    None,
    Snappy(Box<snap::raw::Encoder>),
    Lz4(Box<lz4_flex::block::CompressTable>),
    Zstd(zstd::bulk::Compressor<'static>),
}

impl BlockCompressor {
    /// A compressor for `compression`.
    ///
    /// # Errors
    /// `Error::Io` if zstd cannot set up its context (out of memory) or does not take the level.
    pub(crate) fn new(compression: Compression) -> Result<BlockCompressor> {
        let codec = match compression {
            Compression::None => Codec::None,
            Compression::Snappy => Codec::Snappy(Box::new(snap::raw::Encoder::new())),
            Compression::Lz4 => Codec::Lz4(Box::default()),
            Compression::Zstd(level) => Codec::Zstd(zstd::bulk::Compressor::new(level)?),
        };
        Ok(BlockCompressor {
            codec,
            out: Vec::new(),
            refused_in_a_row: 0,
            untried_left: 0,
        })
    }

    /// What to store for block `raw`, and its trailer byte: `raw` compressed if that saves at
    /// least an eighth of it (compressed length `< len − len / 8`), else `raw` itself; also `raw`
    /// itself, untried, for blocks between probes once blocks stopped compressing.
    pub(crate) fn compress<'a>(&'a mut self, raw: &'a [u8]) -> (&'a [u8], u8) {
        if self.untried_left > 0 {
            self.untried_left -= 1;
            return (raw, COMPRESSION_NONE);
        }
        match self.encode(raw) {
            Some((kind, n)) if n < raw.len() - raw.len() / 8 => {
                self.refused_in_a_row = 0;
                (&self.out[..n], kind)
            }
            _ => {
                self.refused_in_a_row = self.refused_in_a_row.saturating_add(1);
                if self.refused_in_a_row >= REFUSALS_BEFORE_PROBING {
                    self.untried_left = PROBE_EVERY - 1;
                }
                (raw, COMPRESSION_NONE)
            }
        }
    }

    /// Puts `raw` compressed at the start of `self.out`, and says its trailer byte and length;
    /// `None` if the codec stores blocks raw or failed. The buffer only grows, so it is zeroed
    /// once per table, not once per block.
    fn encode(&mut self, raw: &[u8]) -> Option<(u8, usize)> {
        let out = &mut self.out;
        match &mut self.codec {
            Codec::None => None,
            Codec::Snappy(encoder) => {
                grow(out, snap::raw::max_compress_len(raw.len()));
                let n = encoder.compress(raw, out).ok()?;
                Some((COMPRESSION_SNAPPY, n))
            }
            Codec::Lz4(table) => {
                let max = lz4_flex::block::get_maximum_output_size(raw.len());
                let at = put_raw_len(out, raw, max)?;
                let n =
                    lz4_flex::block::compress_into_with_table(raw, &mut out[at..], table).ok()?;
                Some((COMPRESSION_LZ4, at + n))
            }
            Codec::Zstd(compressor) => {
                let max = zstd::zstd_safe::compress_bound(raw.len());
                let at = put_raw_len(out, raw, max)?;
                let n = compressor.compress_to_buffer(raw, &mut out[at..]).ok()?;
                Some((COMPRESSION_ZSTD, at + n))
            }
        }
    }
}

/// Makes `out` at least `len` bytes long.
fn grow(out: &mut Vec<u8>, len: usize) {
    if out.len() < len {
        out.resize(len, 0);
    }
}

/// Writes the varint32 length of `raw` that starts an LZ4 or zstd block at the start of `out`,
/// with room for `max` more bytes after it; returns the bytes written, or `None` for a block too
/// large to record (it is stored raw).
fn put_raw_len(out: &mut Vec<u8>, raw: &[u8], max: usize) -> Option<usize> {
    let mut len = u32::try_from(raw.len()).ok()?;
    let mut prefix = [0u8; 5];
    let mut n = 0;
    while len >= 0x80 {
        prefix[n] = (len & 0x7f) as u8 | 0x80;
        len >>= 7;
        n += 1;
    }
    prefix[n] = len as u8;
    n += 1;
    grow(out, n + max);
    out[..n].copy_from_slice(&prefix[..n]);
    Some(n)
}

/// The block stored as `stored` with trailer byte `kind`, decompressed (copied if stored raw).
///
/// # Errors
/// What is wrong with it, for the caller to report as corruption of its file: an unknown
/// trailer byte, a recorded length the stored bytes cannot decode to, data the codec rejects,
/// or a decoded length other than the recorded one.
pub(crate) fn decompress(kind: u8, stored: &[u8]) -> std::result::Result<Vec<u8>, String> {
    match kind {
        COMPRESSION_NONE => {
            let mut raw = block_buffers::take(stored.len());
            raw.copy_from_slice(stored);
            Ok(raw)
        }
        COMPRESSION_SNAPPY => {
            // Snappy's own header is the same varint of the decoded length.
            let (len, _) = raw_len(stored, SNAPPY_MAX_EXPANSION, "snappy")?;
            let mut raw = block_buffers::take(len);
            let n = snap::raw::Decoder::new()
                .decompress(stored, &mut raw)
                .map_err(|e| format!("snappy block does not decode: {e}"))?;
            check_len("snappy", n, len)?;
            Ok(raw)
        }
        COMPRESSION_LZ4 => {
            let (len, payload) = raw_len(stored, LZ4_MAX_EXPANSION, "lz4")?;
            let mut raw = block_buffers::take(len);
            let n = lz4_flex::block::decompress_into(payload, &mut raw)
                .map_err(|e| format!("lz4 block does not decode: {e}"))?;
            check_len("lz4", n, len)?;
            Ok(raw)
        }
        COMPRESSION_ZSTD => {
            let (len, payload) = raw_len(stored, ZSTD_MAX_EXPANSION, "zstd")?;
            let mut raw = Vec::with_capacity(len);
            let n = ZSTD_DECOMPRESSOR.with_borrow_mut(|d| {
                let d = match d {
                    Some(d) => d,
                    None => d.insert(
                        zstd::bulk::Decompressor::new()
                            .map_err(|e| format!("no zstd decompression context: {e}"))?,
                    ),
                };
                d.decompress_to_buffer(payload, &mut raw)
                    .map_err(|e| format!("zstd block does not decode: {e}"))
            })?;
            check_len("zstd", n, len)?;
            Ok(raw)
        }
        other => Err(format!("unknown compression type {other}")),
    }
}

/// The recorded decompressed length at the start of a snappy, LZ4 or zstd block, and the codec's
/// bytes after it. A length the bytes could not decode to (more than `max_expansion` times them)
/// is refused before anything is allocated for it.
fn raw_len<'a>(
    stored: &'a [u8],
    max_expansion: usize,
    codec: &str,
) -> std::result::Result<(usize, &'a [u8]), String> {
    let mut d = Decoder::new(stored);
    let len = d
        .varint32()
        .ok_or_else(|| format!("{codec} block has no valid length"))?;
    let payload = d.remaining();
    let len = usize::try_from(len).map_err(|_| format!("{codec} block too large"))?;
    if len > payload.len().saturating_mul(max_expansion) {
        return Err(format!(
            "{codec} block records {len} bytes, more than its {} stored bytes can hold",
            payload.len()
        ));
    }
    Ok((len, payload))
}

fn check_len(codec: &str, decoded: usize, recorded: usize) -> std::result::Result<(), String> {
    if decoded == recorded {
        Ok(())
    } else {
        Err(format!(
            "{codec} block decodes to {decoded} bytes, not the {recorded} it records"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coding::put_varint64;
    use rand::{Rng, RngCore, SeedableRng};

    const CODECS: [Compression; 5] = [
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd(3),
        Compression::Zstd(-5),
        Compression::Zstd(19),
    ];

    /// A block of `n` bytes that compresses about in half: 50-byte runs of random bytes, each
    /// followed by a copy of itself.
    fn half_compressible(n: usize, seed: u64) -> Vec<u8> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut v = Vec::with_capacity(n + 100);
        while v.len() < n {
            let mut piece = [0u8; 50];
            rng.fill_bytes(&mut piece);
            v.extend_from_slice(&piece);
            v.extend_from_slice(&piece);
        }
        v.truncate(n);
        v
    }

    fn compressed(codec: Compression, raw: &[u8]) -> (Vec<u8>, u8) {
        let mut c = BlockCompressor::new(codec).unwrap();
        let (stored, kind) = c.compress(raw);
        (stored.to_vec(), kind)
    }

    #[test]
    fn blocks_that_stop_compressing_are_probed_and_trying_resumes_when_one_compresses() {
        for codec in CODECS {
            let mut c = BlockCompressor::new(codec).unwrap();
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let mut kinds = Vec::new();
            for _ in 0..REFUSALS_BEFORE_PROBING {
                let mut random = vec![0u8; 4096];
                rng.fill_bytes(&mut random);
                kinds.push(c.compress(&random).1);
            }
            assert!(kinds.iter().all(|&k| k == COMPRESSION_NONE), "{codec}");
            // Between probes, even a block that would compress is stored raw, untried ...
            let half = half_compressible(4096, 1);
            let kinds: Vec<u8> = (0..PROBE_EVERY).map(|_| c.compress(&half).1).collect();
            let (untried, probe) = kinds.split_at(PROBE_EVERY as usize - 1);
            assert!(untried.iter().all(|&k| k == COMPRESSION_NONE), "{codec}");
            // ... the probe compresses, and from then on every block is tried again.
            assert_ne!(probe[0], COMPRESSION_NONE, "{codec}");
            for _ in 0..2 * PROBE_EVERY {
                let (stored, kind) = c.compress(&half);
                assert_ne!(kind, COMPRESSION_NONE, "{codec}");
                assert_eq!(decompress(kind, stored).unwrap(), half);
            }
        }
    }

    #[test]
    fn blocks_that_compress_as_far_as_a_codec_can_round_trip() {
        // Runs of one byte: each codec's densest encoding, against the expansion bounds.
        for codec in CODECS {
            for n in [4096usize, 65_536, 1 << 20] {
                let raw = vec![7u8; n];
                let (stored, kind) = compressed(codec, &raw);
                assert_ne!(kind, COMPRESSION_NONE, "{codec:?}");
                assert_eq!(decompress(kind, &stored).unwrap(), raw, "{codec:?}, {n}");
            }
        }
    }

    #[test]
    fn every_codec_round_trips_and_records_its_byte() {
        let expected = [COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD];
        for codec in CODECS {
            let mut c = BlockCompressor::new(codec).unwrap();
            // One compressor, many blocks of several sizes: its kept state must not leak between them.
            for (i, n) in [4096usize, 1000, 70_000, 4096, 1].into_iter().enumerate() {
                let raw = half_compressible(n, i as u64);
                let (stored, kind) = c.compress(&raw);
                let stored = stored.to_vec();
                if n == 1 {
                    assert_eq!((stored.as_slice(), kind), (&raw[..], COMPRESSION_NONE));
                    continue;
                }
                assert!(expected.contains(&kind), "{codec:?}: byte {kind}");
                assert!(
                    stored.len() < raw.len() * 7 / 10,
                    "{codec:?}: {} of {n}",
                    stored.len()
                );
                assert_eq!(
                    decompress(kind, &stored).unwrap(),
                    raw,
                    "{codec:?}, {n} bytes"
                );
            }
        }
        assert_eq!(
            compressed(Compression::Lz4, &half_compressible(4096, 9)).1,
            COMPRESSION_LZ4
        );
        assert_eq!(
            compressed(Compression::Zstd(1), &half_compressible(4096, 9)).1,
            COMPRESSION_ZSTD
        );
    }

    #[test]
    fn a_block_compressed_by_less_than_an_eighth_is_stored_raw() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut random = vec![0u8; 4096];
        rng.fill_bytes(&mut random);
        for codec in CODECS.into_iter().chain([Compression::None]) {
            let (stored, kind) = compressed(codec, &random);
            assert_eq!(
                (stored.as_slice(), kind),
                (&random[..], COMPRESSION_NONE),
                "{codec:?}"
            );
            // Compressible data: stored compressed only when under 7/8 of the raw size.
            for share in 1..=9 {
                // `share` tenths of each 100-byte piece are random, the rest repeats them.
                let mut raw = Vec::new();
                while raw.len() < 4096 {
                    let mut piece = vec![0u8; share * 10];
                    rng.fill_bytes(&mut piece);
                    raw.extend(piece.iter().cycle().take(100));
                }
                let (stored, kind) = compressed(codec, &raw);
                if kind == COMPRESSION_NONE {
                    assert_eq!(stored, raw);
                } else {
                    assert!(stored.len() < raw.len() - raw.len() / 8, "{codec:?}");
                    assert_eq!(decompress(kind, &stored).unwrap(), raw);
                }
            }
        }
    }

    #[test]
    fn a_recorded_length_that_disagrees_is_an_error() {
        let raw = half_compressible(4096, 1);
        for codec in [Compression::Lz4, Compression::Zstd(3)] {
            let (stored, kind) = compressed(codec, &raw);
            let mut d = Decoder::new(&stored);
            assert_eq!(d.varint32(), Some(4096));
            let payload = d.remaining().to_vec();
            for recorded in [0u64, 1, 4095, 4097, 8192, u64::from(u32::MAX)] {
                let mut bad = Vec::new();
                put_varint64(&mut bad, recorded);
                bad.extend_from_slice(&payload);
                assert!(decompress(kind, &bad).is_err(), "{codec:?}, {recorded}");
            }
            // A length past what the bytes can decode to is refused before decoding.
            let mut bad = Vec::new();
            put_varint64(&mut bad, u64::from(u32::MAX));
            bad.extend_from_slice(&payload[..4]);
            assert!(decompress(kind, &bad).unwrap_err().contains("can hold"));
            // No length at all, or a malformed one.
            assert!(decompress(kind, &[]).is_err());
            assert!(decompress(kind, &[0x80; 6]).is_err());
            // A truncated payload.
            assert!(decompress(kind, &stored[..stored.len() - 1]).is_err());
        }
        assert!(decompress(2, &[1, 2, 3]).unwrap_err().contains("unknown"));
    }

    #[test]
    fn damaged_compressed_blocks_give_errors_never_panics() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for codec in CODECS {
            let raw = half_compressible(2048, 5);
            let (stored, kind) = compressed(codec, &raw);
            for _ in 0..2000 {
                let mut bad = stored.clone();
                for _ in 0..rng.gen_range(1..4) {
                    let i = rng.gen_range(0..bad.len());
                    bad[i] ^= 1 << rng.gen_range(0..8);
                }
                if rng.gen_bool(0.2) {
                    bad.truncate(rng.gen_range(0..bad.len()));
                }
                // An error or some bytes (the table's checksum catches what a codec cannot),
                // never a panic.
                let _ = decompress(kind, &bad);
            }
            for _ in 0..200 {
                let mut garbage = vec![0u8; rng.gen_range(0..300)];
                rng.fill_bytes(&mut garbage);
                let _ = decompress(kind, &garbage);
            }
        }
    }

    #[test]
    fn property_names_round_trip() {
        for codec in CODECS
            .into_iter()
            .chain([Compression::None, Compression::Zstd(0)])
        {
            let name = codec.to_string();
            assert_eq!(
                Compression::from_property_name(&name),
                Some(codec),
                "{name}"
            );
        }
        for unknown in ["", "zlib", "zstd", "zstd:", "zstd:x", "LZ4"] {
            assert_eq!(Compression::from_property_name(unknown), None, "{unknown}");
        }
    }
}

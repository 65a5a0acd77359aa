//! Reads a whole record log (the write-ahead log or the MANIFEST) back into records.
//!
//! The reader must tell two kinds of damage apart:
//!
//! * a torn tail — the process or machine died while appending, so the file ends in a partial
//!   fragment, zero-filled space or garbage. Every record before it was written completely, and
//!   nothing after it was ever acknowledged, so the store must open: the intact prefix is
//!   returned with [`LogTail::Torn`].
//! * a hole — damage followed by at least one intact fragment. Skipping it would silently drop
//!   records that were written (and perhaps synced) before the ones that follow, so it is an
//!   [`Error::Corruption`].
//!
//! The two are distinguished by scanning forward from the damage for a fragment whose checksum
//! matches; that scan only runs once per file, at the first damage. One refinement: when the
//! damage is a plausible header whose payload runs past the end of the file (the usual shape of
//! an interrupted append), whatever follows is inside that payload, so it counts as a hole only
//! if the header's checksum matches a shorter payload, i.e. its length field was what broke.

use std::path::Path;

use super::format::{fragment_crc, BLOCK_SIZE, FIRST, FULL, HEADER_SIZE, LAST, MIDDLE};
use crate::coding::fixed32_at;
use crate::error::{Error, Result};

/// Everything a log file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogContents {
    /// Every complete record before any damage, in the order written.
    pub records: Vec<Vec<u8>>,
    /// Where each of `records` ends in the file: a reader that comes back for more (a follower
    /// tailing a live writer's log) resumes at one of these offsets.
    pub ends: Vec<u64>,
    /// Whether the file ended cleanly or in a torn tail.
    pub tail: LogTail,
}

/// How a log file ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LogTail {
    /// The file ends after a complete record (possibly followed by the zero padding of a block
    /// whose remaining space is too small for a header).
    Clean,
    /// The file ends in damage with no intact fragment after it: the remains of an interrupted
    /// append. The records before it are complete.
    Torn {
        /// Length of the intact prefix: the end of the last complete record. Truncating the file
        /// here leaves a clean log.
        valid_len: u64,
        /// What the damage looked like and where, for logging.
        what: String,
        /// Whether the damage has the shape only an interrupted append leaves: the file ends
        /// inside a header, a payload or a multi-fragment record, or in zero-filled space. A
        /// complete fragment with a bad checksum or type is not that shape: it may be a bit flip
        /// in a record that was synced, which a reader that must not lose synced data (the
        /// MANIFEST) reports as corruption.
        interrupted: bool,
    },
}

/// Reads the log at `path` in full.
///
/// Returns the complete records and how the file ends (see [`LogTail`]). Damage followed by an
/// intact fragment is an [`Error::Corruption`] naming the file and the damage's offset.
pub(crate) fn read_log(path: &Path) -> Result<LogContents> {
    let bytes = std::fs::read(path).map_err(crate::fs::io_at(path))?;
    parse_log(path, &bytes)
}

/// Reads the log at `path` from `offset`, the end of a record read before (see
/// [`LogContents::ends`]): the records after it and how the file ends now. Offsets in what it
/// returns are offsets in the file. A reader tailing a log another process appends to calls it
/// again from its last record's end; a torn tail there is the append in progress.
pub(crate) fn read_log_from(path: &Path, offset: u64) -> Result<LogContents> {
    let file = std::fs::File::open(path).map_err(crate::fs::io_at(path))?;
    read_open_log_from(path, file, offset)
}

/// [`read_log_from`] of the log at `path` opened as `file` (which may have been removed since:
/// an open file stays readable).
pub(crate) fn read_open_log_from(
    path: &Path,
    mut file: std::fs::File,
    offset: u64,
) -> Result<LogContents> {
    use std::io::{Read, Seek, SeekFrom};
    let io = crate::fs::io_at;
    // From the start of the block holding `offset`, so that block boundaries fall where they do
    // in the file.
    let block_start = offset - offset % BLOCK_SIZE as u64;
    file.seek(SeekFrom::Start(block_start)).map_err(io(path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io(path))?;
    let start = (offset - block_start) as usize;
    if start > bytes.len() {
        return Err(Error::corruption(
            path,
            format!("shorter than the offset {offset} read before"),
        ));
    }
    let mut contents = parse_log_from(path, &bytes, start)?;
    for end in &mut contents.ends {
        *end += block_start;
    }
    if let LogTail::Torn { valid_len, .. } = &mut contents.tail {
        *valid_len = (*valid_len).max(start as u64) + block_start;
    }
    Ok(contents)
}

/// A fragment whose header and checksum are valid.
struct Fragment<'a> {
    /// One of [`FULL`], [`FIRST`], [`MIDDLE`], [`LAST`].
    kind: u8,
    /// The fragment's payload.
    payload: &'a [u8],
    /// Offset just past the payload.
    end: usize,
}

/// Why the bytes at an offset are not an intact fragment. Plain data, so that the forward scan,
/// which rejects almost every offset it tries, never allocates; [`Defect::describe`] formats a
/// message only for the one defect that is reported.
#[derive(Debug, Clone, Copy)]
enum Defect {
    /// A nonzero byte in a block trailer, which the writer always zero-fills.
    DirtyTrailer,
    /// The file ends inside a header.
    PartialHeader,
    /// A header of seven zero bytes: preallocated or zero-filled space.
    Zeros,
    /// A type byte other than FULL, FIRST, MIDDLE or LAST.
    BadType(u8),
    /// A length that would cross the block boundary (`room` bytes were left).
    TooLong { len: usize, room: usize },
    /// A plausible header (valid type, length within the block) whose payload runs past the end
    /// of the file: the signature of an interrupted append.
    CutShort { kind: u8, len: usize },
    /// The checksum does not match the type byte and payload.
    BadChecksum { kind: u8 },
}

impl Defect {
    /// A message for the defect found at `pos` in a file of `file_len` bytes.
    fn describe(self, pos: usize, file_len: usize) -> String {
        match self {
            Defect::DirtyTrailer => format!("nonzero bytes in the block trailer at offset {pos}"),
            Defect::PartialHeader => {
                format!("the file ends inside a fragment header at offset {pos}")
            }
            Defect::Zeros => format!("zero-filled space at offset {pos}"),
            Defect::BadType(kind) => format!("invalid fragment type {kind} at offset {pos}"),
            Defect::TooLong { len, room } => format!(
                "fragment length {len} at offset {pos} crosses the block boundary \
                 ({room} bytes left)"
            ),
            Defect::CutShort { kind, len } => format!(
                "{} fragment at offset {pos} of length {len} is cut short by the end of the file \
                 at {file_len}",
                kind_name(kind)
            ),
            Defect::BadChecksum { kind } => {
                format!(
                    "checksum mismatch in {} fragment at offset {pos}",
                    kind_name(kind)
                )
            }
        }
    }
}

/// The name of a fragment type, for messages.
fn kind_name(kind: u8) -> &'static str {
    match kind {
        FULL => "FULL",
        FIRST => "FIRST",
        MIDDLE => "MIDDLE",
        LAST => "LAST",
        _ => "invalid",
    }
}

/// Decodes the fragment whose header starts at `pos`. The caller guarantees that a whole header
/// fits in the block at `pos` (not in the file: a file may end inside a header).
fn fragment_at(bytes: &[u8], pos: usize) -> std::result::Result<Fragment<'_>, Defect> {
    let Some(header) = bytes.get(pos..pos.saturating_add(HEADER_SIZE)) else {
        return Err(Defect::PartialHeader);
    };
    let kind = header[6];
    if !(FULL..=LAST).contains(&kind) {
        // Zero-filled space is the common case of a bad type; name it for the log message.
        return Err(if header.iter().all(|&b| b == 0) {
            Defect::Zeros
        } else {
            Defect::BadType(kind)
        });
    }
    let len = usize::from(u16::from_le_bytes([header[4], header[5]]));
    let room = BLOCK_SIZE - pos % BLOCK_SIZE - HEADER_SIZE;
    if len > room {
        return Err(Defect::TooLong { len, room });
    }
    let start = pos + HEADER_SIZE;
    let end = start + len;
    let Some(payload) = bytes.get(start..end) else {
        return Err(Defect::CutShort { kind, len });
    };
    if fixed32_at(header, 0) != Some(fragment_crc(kind, payload)) {
        return Err(Defect::BadChecksum { kind });
    }
    Ok(Fragment { kind, payload, end })
}

/// The first offset at or after `from` that holds an intact fragment, if any.
///
/// An intact fragment has a valid type (never 0, so zero-filled space never counts), a length
/// within its block and a matching checksum. Byte-by-byte scanning is slow but runs only once,
/// after damage; cheap header checks reject almost every offset before any checksum is computed.
fn next_intact_fragment(bytes: &[u8], from: usize) -> Option<usize> {
    let mut q = from;
    while q.checked_add(HEADER_SIZE)? <= bytes.len() {
        let left = BLOCK_SIZE - q % BLOCK_SIZE;
        if left < HEADER_SIZE {
            // No header can start in a block's trailer.
            q += left;
            continue;
        }
        // Test the type byte inline first: it rejects ~98% of offsets in random bytes, and all
        // of them in zero-filled space, without a call.
        let plausible = matches!(bytes.get(q + HEADER_SIZE - 1), Some(&(FULL..=LAST)));
        if plausible && fragment_at(bytes, q).is_ok() {
            return Some(q);
        }
        q += 1;
    }
    None
}

/// Whether the header at `pos`, whose claimed payload runs past the end of the file, has a
/// checksum that matches a shorter payload that is present: that means its length field was
/// damaged rather than the append interrupted.
fn crc_matches_shorter_payload(bytes: &[u8], pos: usize) -> bool {
    let Some(stored) = fixed32_at(bytes, pos) else {
        return false;
    };
    let Some(&kind) = bytes.get(pos + HEADER_SIZE - 1) else {
        return false;
    };
    let available = bytes.get(pos + HEADER_SIZE..).unwrap_or(&[]);
    // Every prefix (the empty one included) is tested, so the checksum is extended one byte at
    // a time with a table rather than by `crc32fast`, whose per-call cost would dominate.
    let mut state = crc_step(!0, kind);
    if !state == stored {
        return true;
    }
    for &b in available {
        state = crc_step(state, b);
        if !state == stored {
            return true;
        }
    }
    false
}

/// Lookup table for byte-at-a-time CRC-32 (the IEEE polynomial, reflected, as `crc32fast` uses).
static CRC_TABLE: [u32; 256] = crc_table();

/// Builds [`CRC_TABLE`] at compile time.
const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// Feeds one byte into a running CRC-32 state (start from `!0`; the checksum is `!state`).
fn crc_step(state: u32, byte: u8) -> u32 {
    CRC_TABLE[usize::from((state as u8) ^ byte)] ^ (state >> 8)
}

/// Decides what damage at `pos` means: a torn tail if no intact fragment follows, otherwise a
/// corruption error. `records` and `valid_len` describe the intact prefix.
fn damaged(
    path: &Path,
    bytes: &[u8],
    (records, ends): (Vec<Vec<u8>>, Vec<u64>),
    valid_len: usize,
    pos: usize,
    defect: Defect,
) -> Result<LogContents> {
    let what = defect.describe(pos, bytes.len());
    let cut_short = matches!(defect, Defect::CutShort { .. });
    // A cut-short header whose checksum matches a shorter payload had its length field damaged:
    // the record was complete, so that is not an interrupted append.
    let interrupted = match defect {
        Defect::PartialHeader | Defect::Zeros => true,
        Defect::CutShort { .. } => !crc_matches_shorter_payload(bytes, pos),
        _ => false,
    };
    // If a cut-short header is genuine, everything from `pos` to the end of the file is its
    // payload, and payload bytes may by chance (or because a user stored a log inside a value)
    // look like an intact fragment. Counting those would turn an ordinary crash into an
    // unopenable store, so an interrupted append is believed unless the checksum shows that only
    // the length field was damaged. (The scan goes first: it is the cheaper of the two tests
    // and, in a real torn tail, nearly always settles the matter alone.)
    let intact_after = next_intact_fragment(bytes, pos + 1)
        .filter(|_| !cut_short || crc_matches_shorter_payload(bytes, pos));
    match intact_after {
        Some(next) => Err(Error::corruption(
            path,
            format!(
                "record log damaged: {what}, yet an intact fragment follows at offset {next}; \
                 the records in between are lost"
            ),
        )),
        None => Ok(LogContents {
            records,
            ends,
            tail: LogTail::Torn {
                valid_len: valid_len as u64,
                what,
                interrupted,
            },
        }),
    }
}

/// A sequence error (a fragment that cannot follow the previous one). The fragment at `pos` is
/// itself intact, so this is always a hole, never a torn tail.
fn out_of_sequence(path: &Path, pos: usize, what: &str) -> Error {
    Error::corruption(
        path,
        format!("record log damaged: fragment at offset {pos} {what}"),
    )
}

/// Parses a whole log held in memory; `path` is only used in error messages.
pub(crate) fn parse_log(path: &Path, bytes: &[u8]) -> Result<LogContents> {
    parse_log_from(path, bytes, 0)
}

/// Parses the records of `bytes` (a log from the start of a block) that begin at `start`, a
/// record boundary.
fn parse_log_from(path: &Path, bytes: &[u8], start: usize) -> Result<LogContents> {
    let mut records = Vec::new();
    let mut ends = Vec::new();
    // The record being assembled from FIRST/MIDDLE fragments, with its start offset.
    let mut partial: Option<(usize, Vec<u8>)> = None;
    // End of the last complete record.
    let mut valid_len = start;
    let mut pos = start;
    while pos < bytes.len() {
        let left = BLOCK_SIZE - pos % BLOCK_SIZE;
        if left < HEADER_SIZE {
            // Block trailer: the writer zero-fills it. The file may end inside it (a crash while
            // padding), which loses nothing.
            let end = bytes.len().min(pos + left);
            if bytes[pos..end].iter().any(|&b| b != 0) {
                let defect = Defect::DirtyTrailer;
                return damaged(path, bytes, (records, ends), valid_len, pos, defect);
            }
            pos = end;
            continue;
        }
        let fragment = match fragment_at(bytes, pos) {
            Ok(f) => f,
            Err(defect) => return damaged(path, bytes, (records, ends), valid_len, pos, defect),
        };
        match (fragment.kind, partial.take()) {
            (FULL, None) => {
                records.push(fragment.payload.to_vec());
                valid_len = fragment.end;
                ends.push(valid_len as u64);
            }
            (FIRST, None) => partial = Some((pos, fragment.payload.to_vec())),
            (MIDDLE, Some((start, mut record))) => {
                record.extend_from_slice(fragment.payload);
                partial = Some((start, record));
            }
            (LAST, Some((_, mut record))) => {
                record.extend_from_slice(fragment.payload);
                records.push(record);
                valid_len = fragment.end;
                ends.push(valid_len as u64);
            }
            (kind @ (FULL | FIRST), Some((start, _))) => {
                let what = format!(
                    "is a {} fragment inside the record begun at offset {start}",
                    kind_name(kind)
                );
                return Err(out_of_sequence(path, pos, &what));
            }
            (kind, _) => {
                let what = format!("is a {} fragment with no FIRST before it", kind_name(kind));
                return Err(out_of_sequence(path, pos, &what));
            }
        }
        pos = fragment.end;
    }
    let tail = match partial {
        None => LogTail::Clean,
        Some((start, _)) => LogTail::Torn {
            valid_len: valid_len as u64,
            what: format!("the record begun at offset {start} has no LAST fragment"),
            interrupted: true,
        },
    };
    Ok(LogContents {
        records,
        ends,
        tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::writer::{encode_record, put_fragment, LogWriter};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::fs::OpenOptions;
    use std::path::PathBuf;

    /// Writes `records` to a new log at `path` and returns each record's end offset.
    fn write_log(path: &Path, records: &[Vec<u8>]) -> Vec<u64> {
        let _ = std::fs::remove_file(path);
        let mut w = LogWriter::create(&crate::fs::FileSystem::default(), path).unwrap();
        let mut ends = Vec::new();
        for r in records {
            w.add_record(r).unwrap();
            ends.push(w.len());
        }
        w.sync().unwrap();
        ends
    }

    fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        rng.fill(&mut v[..]);
        v
    }

    /// A temp dir and a log path inside it.
    fn temp_log() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        (dir, path)
    }

    fn flip(path: &Path, offset: u64, mask: u8) {
        let mut bytes = std::fs::read(path).unwrap();
        bytes[offset as usize] ^= mask;
        std::fs::write(path, bytes).unwrap();
    }

    fn assert_corruption_in(result: Result<LogContents>, path: &Path, context: &str) {
        match result {
            Err(Error::Corruption { file, what }) => {
                assert_eq!(file, path, "{context}");
                assert!(what.contains("offset"), "{context}: {what}");
            }
            other => panic!("{context}: expected corruption, got {other:?}"),
        }
    }

    /// A reader coming back from a record's end reads the records after it, across block
    /// boundaries and a record spanning blocks, with offsets in the file; a torn tail after them
    /// leaves the offset to come back to.
    #[test]
    fn reading_on_from_a_record_end_gives_the_records_after_it() {
        let (_dir, path) = temp_log();
        let mut rng = StdRng::seed_from_u64(5);
        let records: Vec<Vec<u8>> = (0..40)
            .map(|i| random_bytes(&mut rng, if i % 7 == 3 { 50_000 } else { 900 + i * 31 }))
            .collect();
        let ends = write_log(&path, &records);
        let whole = read_log(&path).unwrap();
        assert_eq!(whole.ends, ends);
        for (i, &end) in ends.iter().enumerate() {
            let rest = read_log_from(&path, end).unwrap();
            assert_eq!(rest.records, records[i + 1..], "from the end of record {i}");
            assert_eq!(rest.ends, ends[i + 1..]);
            assert_eq!(rest.tail, LogTail::Clean);
        }
        // An append in progress: half a record more.
        let mut bytes = std::fs::read(&path).unwrap();
        let mut more = Vec::new();
        encode_record(&mut more, bytes.len() as u64, &[7u8; 3000]);
        bytes.extend_from_slice(&more[..more.len() / 2]);
        std::fs::write(&path, &bytes).unwrap();
        let tail = read_log_from(&path, ends[30]).unwrap();
        assert_eq!(tail.records, records[31..]);
        let LogTail::Torn { valid_len, .. } = tail.tail else {
            panic!("{:?}", tail.tail)
        };
        assert_eq!(valid_len, *ends.last().unwrap());
        let at_tear = read_log_from(&path, valid_len).unwrap();
        assert!(at_tear.records.is_empty());
        assert!(matches!(at_tear.tail, LogTail::Torn { valid_len: v, .. } if v == valid_len));
    }

    #[test]
    fn table_crc_matches_crc32fast() {
        let mut rng = StdRng::seed_from_u64(0);
        for len in [0usize, 1, 7, 100, 5000] {
            let data = random_bytes(&mut rng, len);
            let state = data.iter().fold(crc_step(!0, FULL), |s, &b| crc_step(s, b));
            assert_eq!(!state, fragment_crc(FULL, &data));
        }
    }

    #[test]
    fn empty_file_is_a_clean_empty_log() {
        let (_dir, path) = temp_log();
        write_log(&path, &[]);
        let got = read_log(&path).unwrap();
        assert!(got.records.is_empty());
        assert_eq!(got.tail, LogTail::Clean);
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let (_dir, path) = temp_log();
        assert!(matches!(read_log(&path), Err(Error::Io(_))));
    }

    #[test]
    fn round_trips_empty_small_block_sized_and_multi_block_records() {
        let mut rng = StdRng::seed_from_u64(1);
        let sizes = [
            0,
            1,
            100,
            0,
            BLOCK_SIZE - HEADER_SIZE, // exactly fills what is left of a block... or a whole one
            BLOCK_SIZE,
            100 * 1024,
            3 * BLOCK_SIZE - 3 * HEADER_SIZE,
            0,
            5,
        ];
        let records: Vec<Vec<u8>> = sizes.iter().map(|&n| random_bytes(&mut rng, n)).collect();
        let (_dir, path) = temp_log();
        write_log(&path, &records);
        let got = read_log(&path).unwrap();
        assert_eq!(got.tail, LogTail::Clean);
        assert_eq!(got.records, records);

        // A record of exactly one block's payload, starting at a block boundary, is one FULL
        // fragment that fills the block to the byte.
        let one_block = vec![
            random_bytes(&mut rng, BLOCK_SIZE - HEADER_SIZE),
            b"x".to_vec(),
        ];
        let ends = write_log(&path, &one_block);
        assert_eq!(ends[0], BLOCK_SIZE as u64);
        assert_eq!(read_log(&path).unwrap().records, one_block);
    }

    #[test]
    fn records_whose_header_lands_in_the_last_bytes_of_a_block_round_trip() {
        let (_dir, path) = temp_log();
        for remaining in 0..=HEADER_SIZE + 1 {
            let records = vec![
                vec![0x11; BLOCK_SIZE - HEADER_SIZE - remaining],
                b"second".to_vec(),
                Vec::new(),
                vec![0x22; 2 * BLOCK_SIZE],
            ];
            let ends = write_log(&path, &records);
            assert_eq!(ends[0], (BLOCK_SIZE - remaining) as u64);
            let got = read_log(&path).unwrap();
            assert_eq!(got.tail, LogTail::Clean, "remaining {remaining}");
            assert_eq!(got.records, records, "remaining {remaining}");
        }
    }

    #[test]
    fn truncation_at_every_offset_keeps_exactly_the_finished_records() {
        let mut rng = StdRng::seed_from_u64(2);
        let mut records = Vec::new();
        let mut len = 0u64;
        for i in 0..50 {
            let size = match i {
                10 => 34_000, // longer than a block, so always FIRST + LAST (or more)
                20 => 0,
                // Leaves 3 bytes in the block, so the next record starts with padding.
                30 => (BLOCK_SIZE - (len as usize % BLOCK_SIZE)).saturating_sub(HEADER_SIZE + 3),
                _ => rng.gen_range(0..1200),
            };
            let r = random_bytes(&mut rng, size);
            let mut scratch = Vec::new();
            encode_record(&mut scratch, len, &r);
            len += scratch.len() as u64;
            records.push(r);
        }
        let (_dir, path) = temp_log();
        let ends = write_log(&path, &records);
        let total = *ends.last().unwrap();
        assert_eq!(total, len);
        assert!(total > 2 * BLOCK_SIZE as u64);
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        // Cutting from the end downwards lets one file serve every offset.
        for cut in (0..=total).rev() {
            file.set_len(cut).unwrap();
            let got = read_log(&path).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            let kept = ends.iter().take_while(|&&end| end <= cut).count();
            assert_eq!(got.records.len(), kept, "cut {cut}");
            assert!(got.records[..] == records[..kept], "cut {cut}");
            let last_end = if kept == 0 { 0 } else { ends[kept - 1] };
            let left_in_block = BLOCK_SIZE as u64 - last_end % BLOCK_SIZE as u64;
            let only_padding_after = left_in_block < HEADER_SIZE as u64;
            if cut == last_end || (only_padding_after && cut - last_end <= left_in_block) {
                assert_eq!(got.tail, LogTail::Clean, "cut {cut}");
            } else {
                match got.tail {
                    LogTail::Torn { valid_len, .. } => assert_eq!(valid_len, last_end, "cut {cut}"),
                    LogTail::Clean => panic!("cut {cut}: expected a torn tail"),
                }
            }
        }
    }

    #[test]
    fn zero_filled_tail_is_a_torn_tail() {
        let mut rng = StdRng::seed_from_u64(3);
        let records: Vec<Vec<u8>> = (0..20).map(|_| random_bytes(&mut rng, 900)).collect();
        let (_dir, path) = temp_log();
        for zeros in [1usize, 6, 7, 8, 100, BLOCK_SIZE, 3 * BLOCK_SIZE + 5] {
            let ends = write_log(&path, &records);
            let valid = *ends.last().unwrap();
            let mut bytes = std::fs::read(&path).unwrap();
            bytes.resize(bytes.len() + zeros, 0);
            std::fs::write(&path, &bytes).unwrap();
            let got = read_log(&path).unwrap();
            assert_eq!(got.records, records, "zeros {zeros}");
            assert!(
                matches!(got.tail, LogTail::Torn { valid_len, .. } if valid_len == valid),
                "zeros {zeros}: {:?}",
                got.tail
            );
        }
    }

    #[test]
    fn garbage_tail_without_an_intact_fragment_is_a_torn_tail() {
        let mut rng = StdRng::seed_from_u64(4);
        let records: Vec<Vec<u8>> = (0..10).map(|_| random_bytes(&mut rng, 3000)).collect();
        let (_dir, path) = temp_log();
        for garbage in [1usize, 7, 500, 2 * BLOCK_SIZE] {
            let ends = write_log(&path, &records);
            let mut bytes = std::fs::read(&path).unwrap();
            bytes.extend(random_bytes(&mut rng, garbage));
            std::fs::write(&path, &bytes).unwrap();
            let got = read_log(&path).unwrap();
            assert_eq!(got.records, records);
            assert_eq!(
                got.tail,
                LogTail::Torn {
                    valid_len: *ends.last().unwrap(),
                    what: match &got.tail {
                        LogTail::Torn { what, .. } => what.clone(),
                        LogTail::Clean => String::new(),
                    },
                    interrupted: match &got.tail {
                        LogTail::Torn { interrupted, .. } => *interrupted,
                        LogTail::Clean => false,
                    },
                }
            );
        }
    }

    #[test]
    fn any_flipped_byte_in_an_early_record_is_corruption_naming_the_file() {
        let mut rng = StdRng::seed_from_u64(5);
        let (_dir, path) = temp_log();
        // A small single-block log (where an enlarged length runs past the end of the file) and
        // a multi-block one whose second record spans three blocks.
        let small: Vec<Vec<u8>> = (0..6).map(|_| random_bytes(&mut rng, 20)).collect();
        let mut big: Vec<Vec<u8>> = (0..6).map(|_| random_bytes(&mut rng, 1000)).collect();
        big[1] = random_bytes(&mut rng, 2 * BLOCK_SIZE + 100);
        for records in [small, big] {
            let ends = write_log(&path, &records);
            let pristine = std::fs::read(&path).unwrap();
            let (start, end) = (ends[0], ends[1]);
            // Every header byte, and a sample of payload bytes (all of them for small records).
            let step = if end - start > 200 { 97 } else { 1 };
            let offsets = (start..start + HEADER_SIZE as u64).chain((start..end).step_by(step));
            for offset in offsets {
                for mask in [0x01u8, 0x80, 0xFF] {
                    std::fs::write(&path, &pristine).unwrap();
                    flip(&path, offset, mask);
                    let context = format!("offset {offset} mask {mask:#x}");
                    assert_corruption_in(read_log(&path), &path, &context);
                }
            }
        }
    }

    #[test]
    fn damage_inside_a_middle_fragment_of_a_spanning_record_is_corruption() {
        let mut rng = StdRng::seed_from_u64(6);
        let records = vec![
            random_bytes(&mut rng, 10),
            random_bytes(&mut rng, 100 * 1024),
            random_bytes(&mut rng, 10),
        ];
        let (_dir, path) = temp_log();
        write_log(&path, &records);
        // The MIDDLE fragment that fills the second block: its header and a payload byte.
        for offset in [
            BLOCK_SIZE as u64,
            BLOCK_SIZE as u64 + 5,
            BLOCK_SIZE as u64 + 999,
        ] {
            write_log(&path, &records);
            flip(&path, offset, 0x10);
            assert_corruption_in(read_log(&path), &path, &format!("offset {offset}"));
        }
    }

    #[test]
    fn any_flipped_byte_in_the_last_record_is_a_torn_tail() {
        let mut rng = StdRng::seed_from_u64(7);
        let records: Vec<Vec<u8>> = (0..8).map(|_| random_bytes(&mut rng, 300)).collect();
        let (_dir, path) = temp_log();
        let ends = write_log(&path, &records);
        let pristine = std::fs::read(&path).unwrap();
        let (start, end) = (ends[6], ends[7]);
        for offset in start..end {
            for mask in [0x01u8, 0x80, 0xFF] {
                std::fs::write(&path, &pristine).unwrap();
                flip(&path, offset, mask);
                let got = read_log(&path).unwrap_or_else(|e| panic!("offset {offset}: {e}"));
                assert_eq!(got.records, records[..7], "offset {offset}");
                assert!(
                    matches!(got.tail, LogTail::Torn { valid_len, .. } if valid_len == start),
                    "offset {offset}: {:?}",
                    got.tail
                );
            }
        }
    }

    #[test]
    fn fragment_sequence_errors_followed_by_intact_fragments_are_corruption() {
        let (_dir, path) = temp_log();
        let cases: [&[(u8, &[u8])]; 4] = [
            &[(FULL, b"a"), (MIDDLE, b"orphan"), (FULL, b"b")],
            &[(FULL, b"a"), (LAST, b"orphan")],
            &[(FIRST, b"start"), (FULL, b"b")],
            &[(FIRST, b"start"), (FIRST, b"again"), (LAST, b"end")],
        ];
        for (i, fragments) in cases.iter().enumerate() {
            let mut bytes = Vec::new();
            for (kind, payload) in fragments.iter() {
                put_fragment(&mut bytes, *kind, payload);
            }
            std::fs::write(&path, &bytes).unwrap();
            assert_corruption_in(read_log(&path), &path, &format!("case {i}"));
        }
    }

    #[test]
    fn a_trailing_record_without_its_last_fragment_is_a_torn_tail() {
        let (_dir, path) = temp_log();
        let mut bytes = Vec::new();
        put_fragment(&mut bytes, FULL, b"kept");
        let valid = bytes.len() as u64;
        put_fragment(&mut bytes, FIRST, b"begun");
        put_fragment(&mut bytes, MIDDLE, b"continued");
        std::fs::write(&path, &bytes).unwrap();
        let got = read_log(&path).unwrap();
        assert_eq!(got.records, vec![b"kept".to_vec()]);
        assert!(matches!(got.tail, LogTail::Torn { valid_len, .. } if valid_len == valid));
    }

    #[test]
    fn nonzero_block_trailer_before_intact_records_is_corruption() {
        let (_dir, path) = temp_log();
        let records = vec![vec![1u8; BLOCK_SIZE - HEADER_SIZE - 3], b"next".to_vec()];
        write_log(&path, &records);
        flip(&path, BLOCK_SIZE as u64 - 2, 0x40);
        assert_corruption_in(read_log(&path), &path, "trailer");
    }

    #[test]
    fn a_torn_record_whose_payload_contains_a_log_is_still_a_torn_tail() {
        // A value holding log-format bytes (say, a backup of another log) must not turn an
        // interrupted append into an unopenable store just because its bytes look intact.
        let mut embedded = Vec::new();
        for r in [&b"inner one"[..], b"inner two", b""] {
            let at = embedded.len() as u64;
            encode_record(&mut embedded, at, r);
        }
        let mut payload = b"prefix".to_vec();
        payload.extend_from_slice(&embedded);
        payload.extend_from_slice(b"suffix");
        let records = vec![b"before".to_vec(), payload];
        let (_dir, path) = temp_log();
        let ends = write_log(&path, &records);
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        for cut in (ends[0] + 1..ends[1]).rev() {
            file.set_len(cut).unwrap();
            let got = read_log(&path).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            assert_eq!(got.records, records[..1], "cut {cut}");
            assert!(matches!(got.tail, LogTail::Torn { valid_len, .. } if valid_len == ends[0]));
        }
    }

    #[test]
    fn random_garbage_and_mutated_logs_never_panic() {
        let mut rng = StdRng::seed_from_u64(8);
        let (_dir, path) = temp_log();
        for i in 0..3000 {
            let (bytes, originals) = match i % 4 {
                // Pure noise.
                0 => {
                    let n = rng.gen_range(0..3 * BLOCK_SIZE);
                    (random_bytes(&mut rng, n), None)
                }
                // Noise dense in plausible headers: valid types and small lengths.
                1 => {
                    let n = rng.gen_range(0..2 * BLOCK_SIZE);
                    let mut b = random_bytes(&mut rng, n);
                    for _ in 0..b.len() / 16 {
                        let at = rng.gen_range(0..b.len());
                        if at + HEADER_SIZE <= b.len() {
                            b[at + 4] = rng.gen_range(0..64);
                            b[at + 5] = 0;
                            b[at + 6] = rng.gen_range(0..6);
                        }
                    }
                    (b, None)
                }
                // A real log with bytes overwritten at random: whatever survives is a prefix.
                _ => {
                    let records: Vec<Vec<u8>> = (0..rng.gen_range(0..12))
                        .map(|_| {
                            let n = if rng.gen_bool(0.1) {
                                40_000
                            } else {
                                rng.gen_range(0..900)
                            };
                            random_bytes(&mut rng, n)
                        })
                        .collect();
                    let mut b = Vec::new();
                    for r in &records {
                        let at = b.len() as u64;
                        encode_record(&mut b, at, r);
                    }
                    if !b.is_empty() {
                        for _ in 0..rng.gen_range(1..4) {
                            let at = rng.gen_range(0..b.len());
                            b[at] = rng.r#gen();
                        }
                        let keep = rng.gen_range(0..=b.len());
                        b.truncate(keep);
                    }
                    (b, Some(records))
                }
            };
            std::fs::write(&path, &bytes).unwrap();
            if let (Ok(got), Some(originals)) = (read_log(&path), originals) {
                assert!(got.records.len() <= originals.len(), "iteration {i}");
                assert!(
                    got.records[..] == originals[..got.records.len()],
                    "iteration {i}"
                );
            }
        }
    }
}

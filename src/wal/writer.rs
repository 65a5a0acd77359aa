//! Appends records to a record log (the write-ahead log or the MANIFEST), in the format of
//! `docs/log_format.md` (constants in `format.rs`).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::format::{
    fragment_crc, BLOCK_SIZE, FIRST, FULL, HEADER_SIZE, LAST, MAX_FRAGMENT_PAYLOAD, MIDDLE,
};
use crate::coding::put_fixed32;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};

/// Bytes of user-space buffering in front of the file. Two blocks, so that a stream of small
/// records costs one `write` syscall per 64 KiB rather than one per record or fragment.
const BUFFER_CAPACITY: usize = 2 * BLOCK_SIZE;

/// A scratch buffer grown past this by a huge record is dropped afterwards rather than kept, so
/// one large record does not pin its memory for the writer's lifetime.
const SCRATCH_KEEP_LIMIT: usize = 1 << 20;

/// Appends one fragment (header + payload) to `buf`. `payload` must be at most
/// [`MAX_FRAGMENT_PAYLOAD`] bytes; [`encode_record`] guarantees that.
pub(crate) fn put_fragment(buf: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_FRAGMENT_PAYLOAD);
    put_fixed32(buf, fragment_crc(kind, payload));
    // Cannot truncate: callers keep payloads within one block, which fits a u16 (asserted above).
    buf.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    buf.push(kind);
    buf.extend_from_slice(payload);
}

/// Appends to `buf` the bytes that encode `data` as one record in a log that is currently
/// `log_len` bytes long: zero padding if fewer than [`HEADER_SIZE`] bytes remain in the current
/// block, then the record's fragments. Kept separate from [`LogWriter`] so the layout is pure and
/// testable without a file.
pub(crate) fn encode_record(buf: &mut Vec<u8>, log_len: u64, data: &[u8]) {
    // `BLOCK_SIZE` is a power of two well below u64::MAX, so this remainder fits a usize.
    let mut block_offset = (log_len % BLOCK_SIZE as u64) as usize;
    let mut rest = data;
    let mut first = true;
    loop {
        let left = BLOCK_SIZE - block_offset;
        if left < HEADER_SIZE {
            // A header cannot fit: zero-fill the block's tail (the reader skips it) and start the
            // next fragment at the next block.
            buf.resize(buf.len() + left, 0);
            block_offset = 0;
        }
        // When exactly HEADER_SIZE bytes remain this is 0, and a zero-length FIRST fragment is
        // emitted; that keeps the rule "pad only when a header cannot fit" simple for both sides.
        let room = BLOCK_SIZE - block_offset - HEADER_SIZE;
        let take = room.min(rest.len());
        let last = take == rest.len();
        let kind = match (first, last) {
            (true, true) => FULL,
            (true, false) => FIRST,
            (false, false) => MIDDLE,
            (false, true) => LAST,
        };
        let (piece, tail) = rest.split_at(take);
        put_fragment(buf, kind, piece);
        block_offset += HEADER_SIZE + take;
        rest = tail;
        first = false;
        if last {
            return;
        }
    }
}

/// Appends records to a new log file.
///
/// Records are buffered in memory; [`LogWriter::flush`] hands them to the OS and
/// [`LogWriter::sync`] makes them durable. Once any write, flush or sync fails, the file's tail is
/// in an unknown state (part of a record may be on disk), so the writer refuses all further work
/// rather than append after a possible hole. Dropping the writer flushes what is buffered but
/// cannot report errors; call `flush` or `sync` to learn of them.
pub(crate) struct LogWriter {
    /// The file's path, for error messages and for callers that rename or delete it.
    path: PathBuf,
    /// The buffered file; `None` once an I/O error has poisoned the writer.
    out: Option<BufWriter<WritableFile>>,
    /// Logical length: bytes accepted so far, including those still in the buffer.
    len: u64,
    /// Whether records were added since the last successful sync.
    unsynced: bool,
    /// Reused buffer in which one record's bytes are assembled before a single buffered write.
    scratch: Vec<u8>,
}

impl LogWriter {
    /// Logical length: bytes accepted so far, including those still buffered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written yet.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Creates the log file at `path`; a file already there is an error (`AlreadyExists`), never
    /// truncated. The caller is responsible for syncing the parent directory if the file's
    /// existence must survive a crash.
    pub(crate) fn create(fs: &FileSystem, path: &Path) -> Result<LogWriter> {
        let file = fs.create(path)?;
        Ok(LogWriter {
            path: path.to_path_buf(),
            out: Some(BufWriter::with_capacity(BUFFER_CAPACITY, file)),
            len: 0,
            unsynced: false,
            scratch: Vec::new(),
        })
    }

    /// Whether records were added since the last successful [`sync`](Self::sync).
    pub(crate) fn has_unsynced(&self) -> bool {
        self.unsynced
    }

    /// Appends `data` as one record (which may be empty). The bytes are buffered: they reach the
    /// OS on [`flush`](Self::flush), [`sync`](Self::sync) or when the buffer fills.
    pub(crate) fn add_record(&mut self, data: &[u8]) -> Result<()> {
        if self.out.is_none() {
            return Err(self.poisoned_error());
        }
        self.scratch.clear();
        encode_record(&mut self.scratch, self.len, data);
        let written = match self.out.as_mut() {
            Some(out) => out.write_all(&self.scratch),
            None => return Err(self.poisoned_error()),
        };
        let encoded_len = self.scratch.len() as u64;
        if self.scratch.capacity() > SCRATCH_KEEP_LIMIT {
            self.scratch = Vec::new();
        }
        match written {
            Ok(()) => {
                self.len += encoded_len;
                self.unsynced = true;
                Ok(())
            }
            Err(e) => {
                self.poison();
                Err(e.into())
            }
        }
    }

    /// Hands every buffered byte to the OS (no durability guarantee).
    pub(crate) fn flush(&mut self) -> Result<()> {
        let flushed = match self.out.as_mut() {
            Some(out) => out.flush(),
            None => return Err(self.poisoned_error()),
        };
        flushed.map_err(|e| {
            self.poison();
            e.into()
        })
    }

    /// Flushes, then `fdatasync`s the file so every record added so far survives a crash.
    pub(crate) fn sync(&mut self) -> Result<()> {
        let synced = match self.out.as_mut() {
            Some(out) => match out.flush() {
                Ok(()) => out.get_mut().sync(),
                Err(e) => Err(e.into()),
            },
            None => return Err(self.poisoned_error()),
        };
        // A failed fsync may have dropped dirty pages, so retrying could report success for data
        // that never reached the disk: poison rather than let the caller try again.
        match synced {
            Ok(()) => {
                self.unsynced = false;
                Ok(())
            }
            Err(e) => {
                self.poison();
                Err(e)
            }
        }
    }

    /// Marks the writer failed. The buffered bytes are discarded instead of flushed (as a plain
    /// drop of the `BufWriter` would do), so nothing more is appended after the failure point.
    fn poison(&mut self) {
        if let Some(out) = self.out.take() {
            let (_file, _unwritten) = out.into_parts();
        }
    }

    /// The error every call returns once the writer is poisoned.
    fn poisoned_error(&self) -> Error {
        Error::Io(io::Error::other(format!(
            "record log {} had an earlier write or sync failure; its tail is unknown, so it \
             accepts no more records",
            self.path.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks the fragments of an encoded log, checking each stays within its block and carries
    /// a matching checksum; returns (offset, type, payload length) for each.
    fn fragments(log: &[u8]) -> Vec<(usize, u8, usize)> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < log.len() {
            let left = BLOCK_SIZE - pos % BLOCK_SIZE;
            if left < HEADER_SIZE {
                assert!(
                    log[pos..pos + left].iter().all(|&b| b == 0),
                    "trailer at {pos}"
                );
                pos += left;
                continue;
            }
            let crc = u32::from_le_bytes(log[pos..pos + 4].try_into().unwrap());
            let len = usize::from(u16::from_le_bytes([log[pos + 4], log[pos + 5]]));
            let kind = log[pos + 6];
            assert!(
                HEADER_SIZE + len <= left,
                "fragment at {pos} crosses a block"
            );
            let payload = &log[pos + HEADER_SIZE..pos + HEADER_SIZE + len];
            assert_eq!(crc, fragment_crc(kind, payload));
            out.push((pos, kind, len));
            pos += HEADER_SIZE + len;
        }
        out
    }

    #[test]
    fn empty_record_is_one_zero_length_full_fragment() {
        let mut log = Vec::new();
        encode_record(&mut log, 0, b"");
        assert_eq!(log.len(), HEADER_SIZE);
        assert_eq!(fragments(&log), vec![(0, FULL, 0)]);
        // The checksum covers the type byte, so even an empty fragment is not all zeros.
        assert_ne!(&log[..4], &[0, 0, 0, 0]);
    }

    #[test]
    fn large_record_splits_into_first_middle_last_within_blocks() {
        let data: Vec<u8> = (0..100 * 1024).map(|i| (i * 7 + i / 251) as u8).collect();
        for start in [
            0usize,
            7,
            1000,
            BLOCK_SIZE - 8,
            BLOCK_SIZE - 7,
            BLOCK_SIZE - 3,
        ] {
            // A filler record first, so the big one begins `start` bytes into the block.
            let mut log = Vec::new();
            if start > 0 {
                encode_record(&mut log, 0, &vec![9u8; start - HEADER_SIZE]);
            }
            assert_eq!(log.len(), start);
            encode_record(&mut log, start as u64, &data);
            let frags = fragments(&log);
            let ours: Vec<_> = frags.iter().filter(|f| f.0 >= start).collect();
            assert_eq!(ours.first().unwrap().1, FIRST, "start {start}");
            assert_eq!(ours.last().unwrap().1, LAST, "start {start}");
            assert!(ours[1..ours.len() - 1].iter().all(|f| f.1 == MIDDLE));
            let total: usize = ours.iter().map(|f| f.2).sum();
            assert_eq!(total, data.len());
        }
    }

    #[test]
    fn header_that_cannot_fit_pads_the_block_with_zeros() {
        for remaining in 0..=8usize {
            let mut log = Vec::new();
            encode_record(
                &mut log,
                0,
                &vec![1u8; BLOCK_SIZE - HEADER_SIZE - remaining],
            );
            assert_eq!(log.len(), BLOCK_SIZE - remaining);
            let before = log.len();
            encode_record(&mut log, before as u64, b"next");
            let frags = fragments(&log);
            match remaining {
                0..=6 => {
                    assert!(log[before..BLOCK_SIZE].iter().all(|&b| b == 0));
                    assert_eq!(frags[1], (BLOCK_SIZE, FULL, 4));
                }
                7 => {
                    // Exactly a header's worth of room: a zero-length FIRST, then the rest.
                    assert_eq!(frags[1], (before, FIRST, 0));
                    assert_eq!(frags[2], (BLOCK_SIZE, LAST, 4));
                }
                _ => {
                    assert_eq!(frags[1], (before, FIRST, 1));
                    assert_eq!(frags[2], (BLOCK_SIZE, LAST, 3));
                }
            }
        }
    }

    #[test]
    fn len_counts_buffered_bytes_and_matches_the_file_after_flush_and_sync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = LogWriter::create(&FileSystem::default(), &path).unwrap();
        assert!(w.is_empty());
        assert_eq!(w.path, path);
        let mut expected = Vec::new();
        for (i, size) in [0usize, 10, BLOCK_SIZE, 3, 70_000, 1]
            .into_iter()
            .enumerate()
        {
            let data = vec![i as u8; size];
            w.add_record(&data).unwrap();
            let at = expected.len() as u64;
            encode_record(&mut expected, at, &data);
            assert_eq!(w.len(), expected.len() as u64);
        }
        w.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
        w.add_record(b"after flush").unwrap();
        w.sync().unwrap();
        let at = expected.len() as u64;
        encode_record(&mut expected, at, b"after flush");
        assert_eq!(std::fs::read(&path).unwrap(), expected);
        assert_eq!(w.len(), expected.len() as u64);
    }

    #[test]
    fn create_refuses_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, vec![0xAB; 5000]).unwrap();
        let err = LogWriter::create(&FileSystem::default(), &path)
            .err()
            .unwrap();
        assert!(matches!(&err, Error::Io(e) if e.kind() == io::ErrorKind::AlreadyExists));
        assert_eq!(std::fs::read(&path).unwrap(), vec![0xAB; 5000]);
    }

    #[test]
    fn a_write_error_is_returned_and_poisons_the_writer() {
        use crate::fs::fault_injection::{FaultInjector, OpKind};
        let dir = tempfile::tempdir().unwrap();
        let faults = FaultInjector::new(dir.path()).unwrap();
        let fs = FileSystem::with_faults(Some(faults.clone()));
        let writes =
            || -> crate::fs::fault_injection::OpFilter { Box::new(|s| s.kind == OpKind::Write) };
        faults.fail_after(0, writes());
        let path = dir.path().join("000001.log");
        let mut w = LogWriter::create(&fs, &path).unwrap();
        // Small records sit in the buffer, so the error surfaces at flush.
        w.add_record(b"small").unwrap();
        assert!(matches!(w.flush(), Err(Error::Io(_))));
        assert!(w.add_record(b"more").is_err());
        assert!(w.flush().is_err());
        assert!(w.sync().is_err());

        // A record larger than the buffer is written through, so add_record itself fails.
        faults.fail_after(0, writes());
        let path = dir.path().join("000002.log");
        let mut w = LogWriter::create(&fs, &path).unwrap();
        assert!(w.add_record(&vec![0u8; 3 * BUFFER_CAPACITY]).is_err());
        assert!(w.add_record(b"").is_err());
        assert_eq!(w.len(), 0);
        let err = w.sync().unwrap_err().to_string();
        assert!(err.contains("000002.log"), "{err}");
    }

    #[test]
    fn a_failed_sync_poisons_the_writer_and_names_the_file() {
        use crate::fs::fault_injection::{FaultInjector, OpKind};
        let dir = tempfile::tempdir().unwrap();
        let faults = FaultInjector::new(dir.path()).unwrap();
        let fs = FileSystem::with_faults(Some(faults.clone()));
        faults.fail_after(0, Box::new(|s| s.kind == OpKind::Sync));
        let mut w = LogWriter::create(&fs, &dir.path().join("000003.log")).unwrap();
        w.add_record(b"x").unwrap();
        assert!(w.has_unsynced());
        let err = w.sync().unwrap_err().to_string();
        assert!(err.contains("000003.log"), "{err}");
        assert!(w.has_unsynced());
        assert!(w.add_record(b"y").is_err());
    }
}

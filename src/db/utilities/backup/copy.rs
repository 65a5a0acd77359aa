//! Copying a store file into a backup directory or out of one: read in chunks, its CRC-32
//! computed on the way, written through `FileSystem` and fsynced.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::fs::{io_error_at, read_exact_at, FileSystem};

/// Bytes read and written at a time.
const CHUNK_BYTES: usize = 1 << 20;

/// The bytes a copy reads.
pub(crate) enum Source<'a> {
    /// The first `len` bytes of `file`, which `path` names in errors.
    File {
        file: &'a File,
        path: &'a Path,
        len: u64,
    },
    /// Bytes built in memory (a backup's MANIFEST).
    Bytes(&'a [u8]),
}

impl Source<'_> {
    /// How many bytes it holds.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Source::File { len, .. } => *len,
            Source::Bytes(b) => b.len() as u64,
        }
    }

    /// Hands its bytes to `each`, a chunk at a time, in order, through `buf`.
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if it is shorter than `len`; `Error::Io` naming it for
    /// a read failure; whatever `each` returns.
    fn for_each_chunk(
        &self,
        buf: &mut Vec<u8>,
        mut each: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let (file, path, len) = match self {
            Source::Bytes(b) => return each(b),
            Source::File { file, path, len } => (*file, *path, *len),
        };
        buf.resize(CHUNK_BYTES, 0);
        let mut at = 0;
        while at < len {
            let n = (len - at).min(CHUNK_BYTES as u64) as usize;
            read_exact_at(file, &mut buf[..n], at).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    Error::corruption(path, format!("shorter than the {len} bytes expected"))
                } else {
                    Error::Io(io_error_at(path, e))
                }
            })?;
            each(&buf[..n])?;
            at += n as u64;
        }
        Ok(())
    }

    /// The CRC-32 of its bytes.
    ///
    /// # Errors
    /// As reading it (see `for_each_chunk`).
    pub(crate) fn checksum(&self, buf: &mut Vec<u8>) -> Result<u32> {
        let mut crc = crc32fast::Hasher::new();
        self.for_each_chunk(buf, |chunk| {
            crc.update(chunk);
            Ok(())
        })?;
        Ok(crc.finalize())
    }

    /// Writes its bytes into a new file at `to` (which must not exist) and fsyncs it; returns
    /// their CRC-32. The file's name is durable only once the caller syncs its directory.
    ///
    /// # Errors
    /// As reading it; `Error::Io` naming `to` if it cannot be created, written or synced.
    pub(crate) fn write_to(&self, fs: &FileSystem, to: &Path, buf: &mut Vec<u8>) -> Result<u32> {
        let mut out = fs.create(to)?;
        let mut crc = crc32fast::Hasher::new();
        self.for_each_chunk(buf, |chunk| {
            crc.update(chunk);
            out.write_all(chunk).map_err(Error::Io)
        })?;
        out.sync()?;
        Ok(crc.finalize())
    }
}

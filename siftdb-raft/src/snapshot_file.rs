//! Snapshot files: a state machine written as sorted key-value chunks, and the directory that
//! keeps the current one.
//!
//! # Format
//!
//! ```text
//! file   := magic record* ; magic = "SIFTRSN1"
//! record := length: u32 LE | crc32 of payload: u32 LE | payload (length bytes)
//! payload:= 1 | postcard(SnapshotMeta)                      the header, first
//!         | 2 | postcard((keyspace name, [(key, value)]))   a chunk, keys ascending
//!         | 3 | postcard(entries in all chunks: u64)        the end, last
//! ```
//!
//! The chunks of one keyspace follow each other in key order, keyspaces in name order. A file
//! without its end record, or whose count differs, is refused: a snapshot is whole or nothing.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use openraft::BasicNode;
use openraft::SnapshotMeta;

use crate::codec::{decode, encode};
use crate::NodeId;

const MAGIC: &[u8; 8] = b"SIFTRSN1";
const HEADER: u8 = 1;
const CHUNK: u8 = 2;
const END: u8 = 3;
/// The largest record a reader accepts: a chunk holds at least one entry, and an entry may be
/// as large as siftdb's largest key and value.
const MAX_RECORD: usize = siftdb::MAX_VALUE_BYTES + siftdb::MAX_KEY_BYTES + (1 << 20);

/// The metadata openraft keeps with a snapshot.
pub(crate) type Meta = SnapshotMeta<NodeId, BasicNode>;

/// Writes a snapshot file.
pub(crate) struct SnapshotWriter {
    out: BufWriter<File>,
    entries: u64,
}

impl SnapshotWriter {
    /// Creates `path` and writes the magic and the header.
    pub(crate) fn create(path: &Path, meta: &Meta) -> Result<SnapshotWriter, siftdb::Error> {
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
        out.write_all(MAGIC)?;
        let mut writer = SnapshotWriter { out, entries: 0 };
        writer.record(HEADER, &encode(meta)?)?;
        Ok(writer)
    }

    /// Appends the entries of one chunk of `keyspace`, in key order.
    pub(crate) fn chunk(
        &mut self,
        keyspace: &str,
        entries: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<(), siftdb::Error> {
        self.entries += entries.len() as u64;
        self.record(CHUNK, &encode(&(keyspace, entries))?)
    }

    /// Writes the end record, then fsyncs the file.
    pub(crate) fn finish(mut self) -> Result<(), siftdb::Error> {
        let entries = self.entries;
        self.record(END, &encode(&entries)?)?;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(())
    }

    fn record(&mut self, tag: u8, body: &[u8]) -> Result<(), siftdb::Error> {
        let mut crc = crc32fast::Hasher::new();
        crc.update(&[tag]);
        crc.update(body);
        let len = u32::try_from(body.len() + 1)
            .map_err(|_| siftdb::Error::InvalidArgument("a snapshot record over 4 GiB".into()))?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(&crc.finalize().to_le_bytes())?;
        self.out.write_all(&[tag])?;
        self.out.write_all(body)?;
        Ok(())
    }
}

/// One chunk of a snapshot: a keyspace's name and some of its entries, in key order.
pub(crate) type Chunk = (String, Vec<(Vec<u8>, Vec<u8>)>);

/// Reads a snapshot file, checking each record.
pub(crate) struct SnapshotReader<R> {
    input: R,
    path: PathBuf,
    entries: u64,
    ended: bool,
}

impl<R: Read> SnapshotReader<R> {
    /// Reads the magic and the header of the snapshot in `input` (read from `path`, named in
    /// errors).
    pub(crate) fn open(
        mut input: R,
        path: &Path,
    ) -> Result<(SnapshotReader<R>, Meta), siftdb::Error> {
        let mut magic = [0u8; 8];
        read_exact(&mut input, &mut magic, path)?;
        if &magic != MAGIC {
            return Err(corruption(path, "not a siftdb-raft snapshot (bad magic)"));
        }
        let mut reader = SnapshotReader {
            input,
            path: path.to_path_buf(),
            entries: 0,
            ended: false,
        };
        let (tag, body) = reader
            .record()?
            .ok_or_else(|| corruption(path, "a snapshot without its header"))?;
        if tag != HEADER {
            return Err(corruption(
                path,
                "a snapshot that does not start with its header",
            ));
        }
        let meta = decode(&body, path, "the snapshot header")?;
        Ok((reader, meta))
    }

    /// The next chunk, or `None` after the end record (once the count of entries is checked).
    pub(crate) fn next_chunk(&mut self) -> Result<Option<Chunk>, siftdb::Error> {
        if self.ended {
            return Ok(None);
        }
        let (tag, body) = self
            .record()?
            .ok_or_else(|| corruption(&self.path, "the snapshot ends before its end record"))?;
        match tag {
            CHUNK => {
                let chunk: Chunk = decode(&body, &self.path, "a snapshot chunk")?;
                self.entries += chunk.1.len() as u64;
                Ok(Some(chunk))
            }
            END => {
                let count: u64 = decode(&body, &self.path, "the snapshot's end record")?;
                if count != self.entries {
                    return Err(corruption(
                        &self.path,
                        &format!(
                            "the snapshot holds {} entries, its end record says {count}",
                            self.entries
                        ),
                    ));
                }
                self.ended = true;
                Ok(None)
            }
            other => Err(corruption(
                &self.path,
                &format!("a snapshot record of kind {other}"),
            )),
        }
    }

    /// The input, to take back what a [`Tee`] copied.
    pub(crate) fn into_input(self) -> R {
        self.input
    }

    /// The next record's tag and body, or `None` at the end of the input.
    fn record(&mut self) -> Result<Option<(u8, Vec<u8>)>, siftdb::Error> {
        let mut head = [0u8; 8];
        let mut got = 0;
        while got < head.len() {
            match self.input.read(&mut head[got..])? {
                0 if got == 0 => return Ok(None),
                0 => {
                    return Err(corruption(
                        &self.path,
                        "the snapshot ends inside a record header",
                    ))
                }
                n => got += n,
            }
        }
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if len == 0 || len > MAX_RECORD {
            return Err(corruption(
                &self.path,
                &format!("a snapshot record of {len} bytes"),
            ));
        }
        let mut payload = vec![0u8; len];
        read_exact(&mut self.input, &mut payload, &self.path)?;
        if crc32fast::hash(&payload) != crc {
            return Err(corruption(
                &self.path,
                "a snapshot record fails its checksum",
            ));
        }
        let tag = payload.remove(0);
        Ok(Some((tag, payload)))
    }
}

fn read_exact(input: &mut impl Read, buf: &mut [u8], path: &Path) -> Result<(), siftdb::Error> {
    input.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            corruption(path, "the snapshot ends inside a record")
        } else {
            siftdb::Error::Io(e)
        }
    })
}

fn corruption(path: &Path, what: &str) -> siftdb::Error {
    siftdb::Error::Corruption {
        file: path.to_path_buf(),
        what: what.to_string(),
    }
}

/// A reader that copies what it reads to a writer: an installed snapshot is kept byte for byte
/// as it is loaded.
pub(crate) struct Tee<R, W> {
    pub(crate) input: R,
    pub(crate) copy: W,
}

impl<R: Read, W: Write> Read for Tee<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.input.read(buf)?;
        self.copy.write_all(&buf[..n])?;
        Ok(n)
    }
}

/// The directory of a node's snapshot files: `snapshot-<seq>.snap`, the current one the highest
/// `seq`; `.tmp` files being written, `.part` files being received.
pub(crate) struct SnapshotDir {
    dir: PathBuf,
    state: Mutex<DirState>,
}

struct DirState {
    next_seq: u64,
    current: Option<(Meta, PathBuf, u64)>,
}

impl SnapshotDir {
    /// Opens `dir` (creating it), keeps the newest whole snapshot and removes every other file.
    pub(crate) fn open(dir: PathBuf) -> Result<SnapshotDir, siftdb::Error> {
        std::fs::create_dir_all(&dir)?;
        let mut found: Vec<(u64, PathBuf)> = Vec::new();
        let mut max_seq = 0;
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let seq = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.split_once('-'))
                .and_then(|(_, rest)| rest.split('.').next())
                .and_then(|s| u64::from_str_radix(s, 16).ok());
            max_seq = max_seq.max(seq.unwrap_or(0));
            match (path.extension().and_then(|e| e.to_str()), seq) {
                (Some("snap"), Some(seq)) => found.push((seq, path)),
                _ => std::fs::remove_file(&path)?,
            }
        }
        found.sort();
        let mut current = None;
        while let Some((seq, path)) = found.pop() {
            if current.is_none() {
                if let Ok(meta) = read_whole(&path) {
                    current = Some((meta, path, seq));
                    continue;
                }
                log_skip(&path);
            }
            std::fs::remove_file(&path)?;
        }
        Ok(SnapshotDir {
            dir,
            state: Mutex::new(DirState {
                next_seq: max_seq + 1,
                current,
            }),
        })
    }

    /// A fresh path in the directory with extension `ext`, and its sequence number.
    pub(crate) fn fresh(&self, prefix: &str, ext: &str) -> (PathBuf, u64) {
        let mut state = self.lock();
        let seq = state.next_seq;
        state.next_seq += 1;
        (self.dir.join(format!("{prefix}-{seq:016x}.{ext}")), seq)
    }

    /// Makes the whole, fsynced snapshot file `tmp` (of sequence `seq`) the current one, unless
    /// a newer one already is; the other is removed.
    pub(crate) fn publish(&self, tmp: &Path, seq: u64, meta: &Meta) -> Result<(), siftdb::Error> {
        let path = self.dir.join(format!("snapshot-{seq:016x}.snap"));
        let mut state = self.lock();
        if state.current.as_ref().is_some_and(|(_, _, s)| *s > seq) {
            std::fs::remove_file(tmp)?;
            return Ok(());
        }
        std::fs::rename(tmp, &path)?;
        File::open(&self.dir)?.sync_all()?;
        if let Some((_, old, _)) = state.current.replace((meta.clone(), path, seq)) {
            std::fs::remove_file(old)?;
        }
        Ok(())
    }

    /// Removes the files of snapshots received, once one is installed (or a transfer was
    /// abandoned).
    pub(crate) fn remove_incoming(&self) -> Result<(), siftdb::Error> {
        let _state = self.lock();
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) == Some("part") {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    }

    /// The current snapshot's metadata and an open handle to its file, read from the start.
    pub(crate) fn current(&self) -> Result<Option<(Meta, File)>, siftdb::Error> {
        let state = self.lock();
        match &state.current {
            Some((meta, path, _)) => Ok(Some((meta.clone(), File::open(path)?))),
            None => Ok(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DirState> {
        // A panic while holding the lock leaves the state as valid as before it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The metadata of the snapshot file at `path`, after reading it whole.
fn read_whole(path: &Path) -> Result<Meta, siftdb::Error> {
    let file = std::io::BufReader::new(File::open(path)?);
    let (mut reader, meta) = SnapshotReader::open(file, path)?;
    while reader.next_chunk()?.is_some() {}
    Ok(meta)
}

fn log_skip(path: &Path) {
    tracing::warn!(path = %path.display(), "snapshot damaged or incomplete; removed");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_sample(path: &Path) -> Meta {
        let meta = Meta {
            snapshot_id: "sample".into(),
            ..Default::default()
        };
        let mut writer = SnapshotWriter::create(path, &meta).expect("create");
        writer
            .chunk(
                "kv",
                &[
                    (b"a".to_vec(), b"1".to_vec()),
                    (b"b".to_vec(), b"2".to_vec()),
                ],
            )
            .expect("a chunk");
        writer
            .chunk("users", &[(b"ada".to_vec(), b"Ada".to_vec())])
            .expect("a chunk");
        writer.finish().expect("finish");
        meta
    }

    fn read_all(path: &Path) -> Result<(Meta, Vec<Chunk>), siftdb::Error> {
        let (mut reader, meta) = SnapshotReader::open(File::open(path)?, path)?;
        let mut chunks = Vec::new();
        while let Some(chunk) = reader.next_chunk()? {
            chunks.push(chunk);
        }
        Ok((meta, chunks))
    }

    #[test]
    fn a_snapshot_reads_back_as_written() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("s.snap");
        let meta = write_sample(&path);
        let (read, chunks) = read_all(&path).expect("a whole snapshot");
        assert_eq!(read, meta);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].0, "kv");
        assert_eq!(chunks[1].1, [(b"ada".to_vec(), b"Ada".to_vec())]);
    }

    #[test]
    fn a_damaged_or_cut_snapshot_is_corruption_naming_the_file() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("s.snap");
        write_sample(&path);
        let bytes = std::fs::read(&path).expect("the file");
        for damage in 0..3 {
            let mut bad = bytes.clone();
            match damage {
                0 => bad[bytes.len() / 2] ^= 0x40,   // a flipped bit
                1 => bad.truncate(bytes.len() - 3),  // cut inside the end record
                _ => bad.truncate(bytes.len() - 13), // the end record missing
            }
            std::fs::write(&path, &bad).expect("write");
            match read_all(&path) {
                Err(siftdb::Error::Corruption { file, .. }) => assert_eq!(file, path),
                other => panic!("damage {damage}: {:?}", other.map(|(m, c)| (m, c.len()))),
            }
        }
    }

    #[test]
    fn opening_the_directory_keeps_the_newest_whole_snapshot() {
        let dir = tempfile::tempdir().expect("a directory");
        let snapshots = SnapshotDir::open(dir.path().to_path_buf()).expect("open");
        let (tmp, seq) = snapshots.fresh("snapshot", "tmp");
        let meta = write_sample(&tmp);
        snapshots.publish(&tmp, seq, &meta).expect("publish");
        // A newer one cut short, a half-received one and a half-written one.
        let (newer, _) = snapshots.fresh("snapshot", "snap");
        std::fs::write(&newer, b"SIFTRSN1").expect("write");
        let (part, _) = snapshots.fresh("incoming", "part");
        std::fs::write(&part, b"partial").expect("write");
        let (half, _) = snapshots.fresh("snapshot", "tmp");
        std::fs::write(&half, b"half").expect("write");
        drop(snapshots);

        let snapshots = SnapshotDir::open(dir.path().to_path_buf()).expect("reopen");
        let (current, _) = snapshots.current().expect("current").expect("a snapshot");
        assert_eq!(current, meta);
        let left = std::fs::read_dir(dir.path()).expect("list").count();
        assert_eq!(left, 1, "only the current snapshot is left");
    }
}

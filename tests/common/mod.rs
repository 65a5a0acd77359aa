//! Helpers shared by the whole-store tests: long-mode switches, scratch directories, copying and
//! listing a store's files, the keys and incompressible values several tests write, and (for the
//! tests that take a table file apart by hand) parsers that read the format of docs/table_format.md
//! directly, not through the crate, so a test can aim at one region; and, for those that forge
//! damage behind valid checksums, a block's trailer and WAL records (docs/log_format.md) framed
//! again. `child.rs`: running the test binary as a child to kill. `gate.rs`: a filter policy whose
//! builder holds a flush at a gate. `keyspaces.rs`: a keyspace's contents and tables, the error a
//! dropped one gives, the bytes of the WALs. `backups.rs`: a store's contents by keyspace, and a
//! backup restored and opened. `power_cuts.rs`: the pieces of the power-cut loops. `ManualClock`: a
//! clock moved by hand.

// Every test binary uses only some of these helpers; in each, the others would warn as dead
// code.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use siftdb::{Clock, Db, Options};

pub mod backups;
pub mod child;
pub mod gate;
pub mod keyspaces;
pub mod power_cuts;

/// A clock moved by hand, in seconds since the Unix epoch (for times to live).
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn at(seconds: u64) -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicU64::new(seconds)))
    }

    pub fn set(&self, seconds: u64) {
        self.0.store(seconds, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::Relaxed))
    }
}

/// The number environment variable `name` holds, or `default` when it is unset.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| {
        v.parse().unwrap_or_else(|_| panic!("{name} is a number"))
    })
}

/// Whether `SIFTDB_LONG=1` asks for the long runs.
pub fn long() -> bool {
    std::env::var("SIFTDB_LONG").is_ok_and(|v| v == "1")
}

/// Where whole-store tests keep their stores: on tmpfs when there is a roomy one, so that tests
/// that are not about what reaches the disk do not wait for its fsyncs (what survives a power cut
/// is the fault-injection layer's to test, what survives a kill the SIGKILL loops', on the disk);
/// in the temporary directory otherwise.
pub fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && roomy_tmpfs(shm)
        && let Ok(d) = tempfile::tempdir_in(shm)
    {
        return d;
    }
    tempfile::tempdir().unwrap()
}

/// Whether the tmpfs at `mount` may hold a gigabyte: its `size=` in `/proc/mounts` (a container's
/// is often 64 MiB), or half the memory when it states none.
fn roomy_tmpfs(mount: &Path) -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/mounts") else {
        return false;
    };
    let Some(line) = mounts
        .lines()
        .find(|l| l.split(' ').nth(1) == mount.to_str())
    else {
        return false;
    };
    let size = line
        .split(' ')
        .nth(3)
        .and_then(|opts| opts.split(',').find_map(|o| o.strip_prefix("size=")));
    match size {
        None => true,
        Some(s) => {
            let (digits, unit) = s.split_at(s.trim_end_matches(char::is_alphabetic).len());
            let scale: u64 = match unit {
                "k" => 1 << 10,
                "m" => 1 << 20,
                "g" => 1 << 30,
                _ => 1,
            };
            digits
                .parse::<u64>()
                .is_ok_and(|n| n.saturating_mul(scale) >= 1 << 30)
        }
    }
}

/// Replaces `to` with a copy of the store in `from`, all but its `LOCK`.
pub fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), to.join(e.file_name()))
                .unwrap_or_else(|err| panic!("{:?}: {err}", e.path()));
        }
    }
}

/// The names of the files in `dir`, sorted; none if `dir` does not exist (yet).
pub fn file_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<String> = entries
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// The names of the files in `dir` with the extension `ext` (`"sst"`, `"log"`), sorted.
pub fn names_with_ext(dir: &Path, ext: &str) -> Vec<String> {
    file_names(dir)
        .into_iter()
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == ext))
        .collect()
}

/// The paths of the files in `dir` with the extension `ext` (`"sst"`, `"log"`), sorted.
pub fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    names_with_ext(dir, ext)
        .into_iter()
        .map(|n| dir.join(n))
        .collect()
}

/// The path of the store's MANIFEST in `dir` (the last by name, were there several).
pub fn manifest(dir: &Path) -> PathBuf {
    let name = file_names(dir)
        .into_iter()
        .rfind(|n| n.starts_with("MANIFEST-"))
        .unwrap();
    dir.join(name)
}

/// Key `i` of the tests that write `key00000`, `key00001`, ….
pub fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// `len` bytes that do not compress, the same for the same `seed`.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Flushes `db` and then compacts it, calling `check` after each, then reopens the store in `dir`
/// with `options` and calls `check` again; returns the reopened store.
pub fn check_across_flush_compaction_and_reopen(
    db: Db,
    dir: &Path,
    options: Options,
    check: impl Fn(&Db, &str),
) -> Db {
    db.flush().unwrap();
    check(&db, "flush");
    db.compact().unwrap();
    check(&db, "compaction");
    drop(db);
    let db = Db::open(dir, options).unwrap();
    check(&db, "reopen");
    db
}

/// Tables per level, L0 first (`siftdb.num-files-at-level<N>`).
pub fn tables_per_level(db: &Db) -> Vec<usize> {
    (0..siftdb::NUM_LEVELS)
        .map(|l| {
            db.property(&format!("siftdb.num-files-at-level{l}"))
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

/// Waits until no level is over its budget, so no compaction is running or due: the tree then
/// goes through the same shapes in every run however loaded the machine is.
pub fn settle(db: &Db) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while db.property("siftdb.compaction-pending").unwrap() != "0" {
        assert!(
            std::time::Instant::now() < deadline,
            "compactions never settled"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A varint at `*pos` of a pristine file, advancing `*pos`.
pub fn varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
    }
    panic!("bad varint in a pristine table");
}

/// A block handle: (offset, size of the contents, trailer excluded).
pub fn handle(b: &[u8]) -> (usize, usize) {
    let mut p = 0;
    let offset = varint(b, &mut p);
    let size = varint(b, &mut p);
    (offset as usize, size as usize)
}

/// The (key, value) entries of an uncompressed block.
pub fn block_entries(block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let n = block.len();
    let restarts = u32::from_le_bytes(block[n - 4..].try_into().unwrap()) as usize;
    let end = n - 4 - 4 * restarts;
    let (mut p, mut key, mut out) = (0, Vec::new(), Vec::new());
    while p < end {
        let shared = varint(block, &mut p) as usize;
        let unshared = varint(block, &mut p) as usize;
        let vlen = varint(block, &mut p) as usize;
        key.truncate(shared);
        key.extend_from_slice(&block[p..p + unshared]);
        p += unshared;
        out.push((key.clone(), block[p..p + vlen].to_vec()));
        p += vlen;
    }
    out
}

/// Gives the block at `offset` (contents of `size` bytes) a correct trailer again.
pub fn fix_block_crc(bytes: &mut [u8], offset: usize, size: usize) {
    let kind = bytes[offset + size];
    let mut h = crc32fast::Hasher::new();
    h.update(&bytes[offset..offset + size]);
    h.update(&[kind]);
    bytes[offset + size + 1..offset + size + 5].copy_from_slice(&h.finalize().to_le_bytes());
}

/// Splits a log of small records (all FULL fragments in one 32 KiB block) into payloads.
pub fn log_records(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut p = 0;
    while p + 7 <= bytes.len() {
        let len = u16::from_le_bytes([bytes[p + 4], bytes[p + 5]]) as usize;
        assert_eq!(bytes[p + 6], 1, "test logs hold only FULL fragments");
        out.push(bytes[p + 7..p + 7 + len].to_vec());
        p += 7 + len;
    }
    assert!(p <= 32768);
    out
}

/// Frames `records` as FULL fragments with correct checksums.
pub fn frame_log(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let mut h = crc32fast::Hasher::new();
        h.update(&[1]);
        h.update(r);
        out.extend_from_slice(&h.finalize().to_le_bytes());
        out.extend_from_slice(&(r.len() as u16).to_le_bytes());
        out.push(1);
        out.extend_from_slice(r);
    }
    assert!(out.len() <= 32768 - 7, "keep test logs to one block");
    out
}

//! Damaged range deletes, on real files in a real directory.
//!
//! - A table's range tombstone block (found through `siftdb::inspect::TableInfo`'s meta blocks)
//!   has each of its bytes flipped, or the file is cut inside it: open, get, scan and compaction
//!   give `Error::Corruption` naming the table, never a panic, and never a value the tombstone
//!   deleted.
//! - The block is cut short (or its bytes mutated) and given a valid checksum again, so the
//!   decoder itself meets the damage: it is `Error::Corruption` naming the table, never a panic.
//!   A cut block must not pass for a block with fewer tombstones: that would bring deleted keys
//!   back.
//! - A WAL record holding a range deletion is cut inside its entry and framed again with a valid
//!   checksum: recovery refuses it as it refuses a cut put, with `Error::Corruption` naming the
//!   log. Cut as the torn tail of the log, the range deletion is lost as a whole, the records
//!   before it recovered. A range deletion whose end is not after its start (which no writer
//!   makes) deletes nothing.

use crate::common;
use common::{copy_dir, files_with_ext, fix_block_crc, frame_log, key, log_records, scratch};
use std::path::{Path, PathBuf};

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::inspect::TableInfo;
use siftdb::{Compression, Db, Error, Filter, Options, WriteBatch};

fn is_corruption_of(e: &Error, file: &Path) -> bool {
    matches!(e, Error::Corruption { file: f, .. } if f.file_name() == file.file_name())
}

const KEYS: usize = 300;

fn value(i: usize) -> Vec<u8> {
    format!("value-{i}-{}", "v".repeat(i % 30)).into_bytes()
}

/// The ranges the newer table deletes: keys 100..200 and 250..260.
fn deleted(i: usize) -> bool {
    (100..200).contains(&i) || (250..260).contains(&i)
}

fn options() -> Options {
    Options::default()
        .compression(Compression::None)
        .block_size(512)
        .filter(Filter::full(10.0))
}

/// A store with two L0 tables: the older holds keys 0..300, the newer two range tombstones over
/// some of them and keys 300..350. Returns the newer table's path.
fn build(dir: &Path) -> PathBuf {
    let db = Db::open(dir, options()).unwrap();
    for i in 0..KEYS {
        db.put(key(i), value(i)).unwrap();
    }
    db.flush().unwrap();
    let mut b = WriteBatch::new();
    b.delete_range(key(100)..key(200))
        .delete_range(key(250)..key(260));
    db.write(b).unwrap();
    for i in KEYS..KEYS + 50 {
        db.put(key(i), value(i)).unwrap();
    }
    db.flush().unwrap();
    drop(db);
    let tables = files_with_ext(dir, "sst");
    assert_eq!(tables.len(), 2);
    let newer = tables[1].clone();
    let info = TableInfo::open(&newer).unwrap();
    assert_eq!(info.num_range_deletions, 2);
    newer
}

/// Where the range tombstone block's contents are: (offset, size), trailer excluded.
fn tombstone_block(table: &Path) -> (usize, usize) {
    let info = TableInfo::open(table).unwrap();
    let b = info
        .meta_blocks
        .iter()
        .find(|m| m.name == "range_tombstones")
        .expect("a range tombstone block")
        .block;
    (b.offset as usize, b.size as usize)
}

/// Opens the store in `work`, whose table `bad` is damaged, and reads every key by get and by
/// scan, then compacts. Every value returned must be the true one (none for a deleted key);
/// every error `Error::Corruption` naming `bad`. Returns whether the damage was reported.
fn exercise(work: &Path, bad: &Path, what: &str) -> bool {
    let db = match Db::open(work, options()) {
        Ok(db) => db,
        Err(e) => {
            assert!(is_corruption_of(&e, bad), "{what}: open failed with {e}");
            return true;
        }
    };
    let mut detected = false;
    let mut on_err = |e: Error, op: &str| {
        assert!(
            is_corruption_of(&e, bad),
            "{what}: {op} failed with the wrong error: {e}"
        );
        detected = true;
    };
    let want = |i: usize| (!deleted(i)).then(|| value(i));
    for i in 0..KEYS + 50 {
        match db.get(key(i)) {
            Ok(v) => assert_eq!(v, want(i), "{what}: get of key {i}"),
            Err(e) => on_err(e, "get"),
        }
    }
    for (k, got) in (0..KEYS + 50).zip(db.multi_get(&(0..KEYS + 50).map(key).collect::<Vec<_>>())) {
        match got {
            Ok(v) => assert_eq!(v, want(k), "{what}: multi_get of key {k}"),
            Err(e) => on_err(e, "multi_get"),
        }
    }
    // A scan returns the live keys in order, all of them unless it stops at an error.
    let expected: Vec<usize> = (50..320).filter(|&i| !deleted(i)).collect();
    let mut seen = 0;
    for item in db.scan(key(50)..key(320)) {
        match item {
            Ok((k, v)) => {
                let i = *expected
                    .get(seen)
                    .expect("the scan returned an extra entry");
                assert_eq!((k, v), (key(i), value(i)), "{what}: scan");
                seen += 1;
            }
            Err(e) => {
                on_err(e, "scan");
                seen = expected.len();
                break;
            }
        }
    }
    assert_eq!(seen, expected.len(), "{what}: the scan ended early");
    if let Err(e) = db.compact() {
        on_err(e, "compact");
    }
    detected
}

#[test]
fn a_damaged_range_tombstone_block_is_corruption_naming_the_table() {
    let root = scratch();
    let pristine = root.path().join("pristine");
    let table = build(&pristine);
    let bytes = std::fs::read(&table).unwrap();
    let (offset, size) = tombstone_block(&table);
    let work = root.path().join("work");
    let bad = work.join(table.file_name().unwrap());
    let mut rng = StdRng::seed_from_u64(0x7b);
    // Every byte of the block and of its trailer (kind and checksum).
    for pos in offset..offset + size + 5 {
        copy_dir(&pristine, &work);
        let mut damaged = bytes.clone();
        damaged[pos] ^= rng.gen_range(1..=255u8);
        std::fs::write(&bad, &damaged).unwrap();
        let what = format!("range tombstone block byte {pos}");
        assert!(
            exercise(&work, &bad, &what),
            "{what}: damage went unnoticed"
        );
    }
    // The file cut inside the block, and at its edges.
    for cut in [
        offset,
        offset + 1,
        offset + size / 2,
        offset + size,
        offset + size + 4,
    ] {
        copy_dir(&pristine, &work);
        std::fs::write(&bad, &bytes[..cut]).unwrap();
        let what = format!("table cut at {cut}, inside its range tombstone block");
        assert!(
            exercise(&work, &bad, &what),
            "{what}: damage went unnoticed"
        );
    }
    eprintln!(
        "range tombstone block of {size} bytes at {offset}: every byte flipped, 5 cuts, all \
         reported"
    );
}

/// The table with its range tombstone block replaced by `contents` (no longer than the original,
/// and of a size whose varint is as long), given valid checksums: the block's handle in the
/// metaindex is rewritten in place and the metaindex re-checksummed.
fn with_tombstone_block(table: &Path, bytes: &[u8], contents: &[u8]) -> Vec<u8> {
    let info = TableInfo::open(table).unwrap();
    let (offset, size) = tombstone_block(table);
    assert!(contents.len() <= size && (contents.len() < 128) == (size < 128));
    let mut out = bytes.to_vec();
    out[offset..offset + contents.len()].copy_from_slice(contents);
    out[offset + contents.len()] = 0; // uncompressed
    fix_block_crc(&mut out, offset, contents.len());
    // The handle follows the block's name in the metaindex entry.
    let (mo, ms) = (info.metaindex.offset as usize, info.metaindex.size as usize);
    let mut old = b"tombstones".to_vec();
    let mut new = old.clone();
    put_varint(&mut old, offset as u64);
    put_varint(&mut old, size as u64);
    put_varint(&mut new, offset as u64);
    put_varint(&mut new, contents.len() as u64);
    let meta = &mut out[mo..mo + ms];
    let at = meta
        .windows(old.len())
        .position(|w| w == old.as_slice())
        .expect("the handle in the metaindex");
    meta[at..at + new.len()].copy_from_slice(&new);
    fix_block_crc(&mut out, mo, ms);
    out
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[test]
fn a_range_tombstone_block_cut_or_mutated_under_a_valid_checksum_is_corruption() {
    let root = scratch();
    let pristine = root.path().join("pristine");
    let table = build(&pristine);
    let bytes = std::fs::read(&table).unwrap();
    let (offset, size) = tombstone_block(&table);
    let block = bytes[offset..offset + size].to_vec();
    let work = root.path().join("work");
    let bad = work.join(table.file_name().unwrap());
    // Every shorter block whose size keeps the length of its varint.
    let shortest = if size < 128 { 0 } else { 128 };
    for len in shortest..size {
        copy_dir(&pristine, &work);
        std::fs::write(&bad, with_tombstone_block(&table, &bytes, &block[..len])).unwrap();
        let what = format!("range tombstone block cut to {len} of {size} bytes");
        assert!(
            exercise(&work, &bad, &what),
            "{what}: damage went unnoticed"
        );
    }
    // Mutated bytes: the decoder cannot tell every change from a real tombstone (another end
    // key, another sequence), so only no panic and no other error than Corruption naming the
    // table are required.
    let mut rng = StdRng::seed_from_u64(0x7c);
    let mut reported = 0;
    let rounds = if common::long() { 2000 } else { 150 };
    for _ in 0..rounds {
        let mut mutated = block.clone();
        for _ in 0..rng.gen_range(1..=3) {
            let i = rng.gen_range(0..mutated.len());
            mutated[i] = match rng.gen_range(0..4) {
                0 => mutated[i] ^ (1 << rng.gen_range(0..8)),
                1 => 0,
                2 => 0xff,
                _ => rng.r#gen(),
            };
        }
        copy_dir(&pristine, &work);
        std::fs::write(&bad, with_tombstone_block(&table, &bytes, &mutated)).unwrap();
        if let Err(e) = Db::open(&work, options()).and_then(|db| {
            for i in 0..KEYS + 50 {
                db.get(key(i))?;
            }
            db.scan(..).try_for_each(|r| r.map(drop))?;
            db.compact()
        }) {
            assert!(is_corruption_of(&e, &bad), "a mutated block gave {e}");
            reported += 1;
        }
    }
    eprintln!(
        "range tombstone block of {size} bytes: every cut ({}) reported; {reported} of {rounds} \
         re-checksummed mutations reported, none panicked",
        size - shortest
    );
}

// ---------------------------------------------------------------------------------------------
// WAL

/// A store whose one WAL holds 20 puts, one batch with a range deletion (record 20, deleting
/// keys 5..15 and putting key 100) and `after` more puts. Returns the log's path and records.
fn build_wal(dir: &Path, after: usize) -> (PathBuf, Vec<Vec<u8>>) {
    let db = Db::open(dir, Options::default()).unwrap();
    for i in 0..20 {
        db.put(key(i), value(i)).unwrap();
    }
    let mut b = WriteBatch::new();
    b.delete_range(key(5)..key(15)).put(key(100), value(100));
    db.write(b).unwrap();
    for i in 0..after {
        db.put(key(200 + i), value(200 + i)).unwrap();
    }
    drop(db);
    let log = files_with_ext(dir, "log").pop().unwrap();
    let records = log_records(&std::fs::read(&log).unwrap());
    assert_eq!(records.len(), 21 + after);
    (log, records)
}

/// Where the range deletion's entry starts in record 20: after the 12-byte header.
const ENTRY_AT: usize = 12;

/// Replaces the log in `work` (a copy of `pristine`) with `records` and opens the store.
fn open_with_records(
    pristine: &Path,
    work: &Path,
    log: &Path,
    records: &[Vec<u8>],
) -> (PathBuf, siftdb::Result<Db>) {
    copy_dir(pristine, work);
    let path = work.join(log.file_name().unwrap());
    std::fs::write(&path, frame_log(records)).unwrap();
    (path.clone(), Db::open(work, Options::default()))
}

#[test]
fn a_wal_record_with_a_cut_range_deletion_is_refused_as_a_cut_put_is() {
    let root = scratch();
    let pristine = root.path().join("pristine");
    let (log, records) = build_wal(&pristine, 10);
    let work = root.path().join("work");
    let range_record = &records[20];
    // Kind 2, then the start and end keys (length-prefixed), then the put.
    assert_eq!(range_record[ENTRY_AT], 2, "a range deletion entry");
    let entry_end = ENTRY_AT + 1 + 1 + key(5).len() + 1 + key(15).len();
    assert_eq!(&range_record[entry_end - key(15).len()..entry_end], key(15));
    // Cut anywhere inside the range deletion's entry (the record keeps its count of two
    // entries), or inside the put after it.
    for cut in ENTRY_AT + 1..range_record.len() {
        let mut recs = records.clone();
        recs[20].truncate(cut);
        let (path, opened) = open_with_records(&pristine, &work, &log, &recs);
        match opened {
            Err(e) => assert!(
                is_corruption_of(&e, &path),
                "record cut at {cut}: expected Corruption naming the log, got {e}"
            ),
            Ok(_) => panic!("a record cut at {cut} was accepted"),
        }
    }
    // A put record cut the same way is refused the same way.
    let mut recs = records.clone();
    let put_len = recs[10].len();
    recs[10].truncate(put_len - 3);
    let (path, opened) = open_with_records(&pristine, &work, &log, &recs);
    assert!(
        matches!(&opened, Err(e) if is_corruption_of(e, &path)),
        "a cut put record: {:?}",
        opened.err()
    );
    // The range deletion's record whole: the keys it deleted stay deleted, the keys written
    // after it are there.
    let (_, opened) = open_with_records(&pristine, &work, &log, &records);
    let db = opened.unwrap();
    for i in 0..20 {
        let want = (!(5..15).contains(&i)).then(|| value(i));
        assert_eq!(db.get(key(i)).unwrap(), want, "key {i}");
    }
    assert_eq!(db.get(key(209)).unwrap(), Some(value(209)));
}

#[test]
fn a_wal_torn_inside_a_range_deletion_recovers_the_records_before_it() {
    let root = scratch();
    let pristine = root.path().join("pristine");
    // The range deletion's record is the last: a torn tail.
    let (log, records) = build_wal(&pristine, 0);
    let bytes = std::fs::read(&log).unwrap();
    let start = bytes.len() - 7 - records[20].len();
    let work = root.path().join("work");
    for cut in start..=bytes.len() {
        copy_dir(&pristine, &work);
        let path = work.join(log.file_name().unwrap());
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let db = Db::open(&work, Options::default())
            .unwrap_or_else(|e| panic!("the log cut at {cut} did not open: {e}"));
        let whole = cut == bytes.len();
        for i in 0..20 {
            let want = (!(whole && (5..15).contains(&i))).then(|| value(i));
            assert_eq!(db.get(key(i)).unwrap(), want, "cut at {cut}: key {i}");
        }
        let put = db.get(key(100)).unwrap();
        assert_eq!(
            put,
            whole.then(|| value(100)),
            "cut at {cut}: the batch is whole or gone"
        );
        let count = db.iter().count();
        assert_eq!(count, if whole { 11 } else { 20 }, "cut at {cut}");
    }
}

#[test]
fn a_wal_range_deletion_whose_end_is_not_after_its_start_deletes_nothing() {
    let root = scratch();
    let pristine = root.path().join("pristine");
    let (log, records) = build_wal(&pristine, 3);
    let work = root.path().join("work");
    // Swap the start and end keys (same length), then make them equal.
    let s = ENTRY_AT + 2;
    let e = s + key(5).len() + 1;
    let n = key(5).len();
    for (start, end) in [(key(15), key(5)), (key(5), key(5))] {
        let mut recs = records.clone();
        recs[20][s..s + n].copy_from_slice(&start);
        recs[20][e..e + n].copy_from_slice(&end);
        let (path, opened) = open_with_records(&pristine, &work, &log, &recs);
        let what = format!(
            "a range deletion from {} to {}",
            String::from_utf8_lossy(&start),
            String::from_utf8_lossy(&end)
        );
        let db = match opened {
            Err(err) => {
                assert!(is_corruption_of(&err, &path), "{what}: {err}");
                continue;
            }
            Ok(db) => db,
        };
        for i in 0..20 {
            assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "{what}: key {i}");
        }
        assert_eq!(db.get(key(100)).unwrap(), Some(value(100)), "{what}");
        db.flush().unwrap();
        db.compact().unwrap();
        assert_eq!(
            db.iter().count(),
            24,
            "{what}: after a flush and a compaction"
        );
        drop(db);
        let db = Db::open(&work, Options::default()).unwrap();
        assert_eq!(db.iter().count(), 24, "{what}: after a reopen");
    }
}

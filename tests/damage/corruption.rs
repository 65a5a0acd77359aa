//! Torn and damaged files, on real files in a real directory.
//!
//! - The newest WAL is cut at every byte offset of its last records: open must succeed and
//!   recover exactly the records that end at or before the cut.
//! - A byte early in the WAL is damaged while intact records follow: that is a hole, and open must
//!   refuse with `Error::Corruption` naming the log.
//! - Bytes are flipped in each region of a table (data blocks, filter, properties, metaindex,
//!   index, footer), for each filter layout. The regions are found by parsing the footer,
//!   metaindex and index here, from the format in `src/sst/format.rs` and
//!   `docs/table_format.md`. Every flip must surface as `Error::Corruption` naming that table
//!   on open, get, scan or compaction; no call may panic or return a wrong value; the other tables
//!   stay readable, also after a failed compaction and a reopen.
//! - Bytes are flipped in the MANIFEST and in CURRENT: open either fails with `Error::Corruption`
//!   naming that file, or succeeds with every key intact.
//!
//! Short mode samples the offsets; `SIFTDB_LONG=1` tries every one.

use crate::common;
use common::{block_entries, copy_dir, files_with_ext, handle, long, manifest, scratch, varint};
use std::path::{Path, PathBuf};

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::{Compression, Db, Error, Filter, Options};

fn is_corruption_of(e: &Error, file: &Path) -> bool {
    matches!(e, Error::Corruption { file: f, .. } if f.file_name() == file.file_name())
}

// ---------------------------------------------------------------------------------------------
// WAL: torn tails and holes

fn wal_key(i: usize) -> Vec<u8> {
    format!("w{i:05}").into_bytes()
}

fn wal_value(i: usize) -> Vec<u8> {
    // Mostly small records, with a few that span 32 KiB log blocks (FIRST/MIDDLE/LAST fragments).
    let len = match i % 9 {
        4 => 40_000,
        7 => 9_000,
        _ => 20 + i % 50,
    };
    let mut v = format!("{i}:").into_bytes();
    v.resize(len, b'0' + (i % 10) as u8);
    v
}

/// Writes `n` records into one WAL (nothing is flushed) and returns the directory and the end
/// offset of each record in the log.
fn build_wal(root: &Path, n: usize) -> (PathBuf, PathBuf, Vec<u64>) {
    let dir = root.join("pristine");
    let db = Db::open(&dir, Options::default().write_buffer_size(64 << 20)).unwrap();
    let log = files_with_ext(&dir, "log").pop().unwrap();
    let mut ends = Vec::new();
    for i in 0..n {
        db.put(wal_key(i), wal_value(i)).unwrap();
        // Each write is handed to the OS before put returns, so the size is the record's end.
        ends.push(std::fs::metadata(&log).unwrap().len());
    }
    drop(db);
    (dir, log, ends)
}

/// Opens a copy of `pristine` whose log is cut to `cut` bytes and checks it holds exactly the
/// records that end at or before the cut.
fn open_cut(pristine: &Path, work: &Path, log_name: &std::ffi::OsStr, ends: &[u64], cut: u64) {
    copy_dir(pristine, work);
    let log = work.join(log_name);
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(cut).unwrap();
    drop(f);
    let db = Db::open(work, Options::default())
        .unwrap_or_else(|e| panic!("open after cutting the WAL at {cut} failed: {e}"));
    let complete = ends.iter().take_while(|&&e| e <= cut).count();
    let keys: Vec<Vec<u8>> = db.iter().map(|r| r.unwrap().0).collect();
    assert_eq!(
        keys.len(),
        complete,
        "cut at {cut}: expected the {complete} complete records"
    );
    for i in 0..complete {
        assert_eq!(db.get(wal_key(i)).unwrap(), Some(wal_value(i)), "cut {cut}");
    }
}

#[test]
fn wal_cut_at_every_offset_of_its_last_records_opens_with_a_prefix() {
    let root = scratch();
    let n = 30;
    let (pristine, log, ends) = build_wal(root.path(), n);
    let log_name = log.file_name().unwrap().to_owned();
    // The last 8 records (several of which cross 32 KiB block boundaries).
    let from = ends[n - 9];
    let to = ends[n - 1];
    let mut cuts: Vec<u64> = if long() {
        (from..=to).collect()
    } else {
        // Every offset near a record end or a log block boundary (where the reader's cases
        // change), and a stride through the rest.
        let mut v: Vec<u64> = (from..=to).step_by(61).collect();
        for &e in &ends[n - 9..] {
            v.extend(e.saturating_sub(24)..=(e + 24).min(to));
        }
        let mut b = from.next_multiple_of(32768);
        while b <= to {
            v.extend(b.saturating_sub(12)..=(b + 12).min(to));
            b += 32768;
        }
        v
    };
    cuts.sort_unstable();
    cuts.dedup();
    let work = root.path().join("work");
    for &cut in &cuts {
        open_cut(&pristine, &work, &log_name, &ends, cut);
    }
    eprintln!(
        "WAL cut at {} offsets in [{from}, {to}] ({} records)",
        cuts.len(),
        n
    );
}

#[test]
fn wal_zero_filled_tail_opens_with_everything() {
    let root = scratch();
    let n = 12;
    let (pristine, log, ends) = build_wal(root.path(), n);
    let work = root.path().join("work");
    for zeros in [1usize, 6, 7, 100, 40_000] {
        copy_dir(&pristine, &work);
        let p = work.join(log.file_name().unwrap());
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.resize(bytes.len() + zeros, 0);
        std::fs::write(&p, &bytes).unwrap();
        let db = Db::open(&work, Options::default()).unwrap();
        let count = db.iter().count();
        assert_eq!(count, n, "{zeros} zero bytes appended");
        let _ = &ends;
    }
}

#[test]
fn wal_damage_followed_by_intact_records_is_corruption() {
    let root = scratch();
    let n = 30;
    let (pristine, log, ends) = build_wal(root.path(), n);
    let work = root.path().join("work");
    let log_name = log.file_name().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut tried = 0;
    // Damage in any record but the last few: intact records follow, so this is a hole.
    for _ in 0..if long() { 400 } else { 40 } {
        let pos = rng.gen_range(0..ends[n - 4]) as usize;
        copy_dir(&pristine, &work);
        let p = work.join(log_name);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[pos] ^= rng.gen_range(1..=255u8);
        std::fs::write(&p, &bytes).unwrap();
        match Db::open(&work, Options::default()) {
            Err(e) => assert!(
                is_corruption_of(&e, &p),
                "byte {pos}: expected Corruption naming the log, got {e}"
            ),
            Ok(db) => {
                // Only acceptable if the damage hit bytes no record uses (a block trailer's
                // zero padding would be an error too, so in practice this is never reached);
                // then everything must be there.
                for i in 0..n {
                    assert_eq!(
                        db.get(wal_key(i)).unwrap(),
                        Some(wal_value(i)),
                        "byte {pos}"
                    );
                }
            }
        }
        tried += 1;
    }
    eprintln!("WAL: {tried} damaged bytes followed by intact records");
}

// ---------------------------------------------------------------------------------------------
// Tables

/// Byte ranges of a table's regions, parsed from its footer, metaindex and index.
fn table_regions(bytes: &[u8]) -> Vec<(&'static str, std::ops::Range<usize>)> {
    let len = bytes.len();
    let footer = &bytes[len - 56..];
    let mut p = 0;
    let mut next = || varint(footer, &mut p) as usize;
    let meta = (next(), next());
    let index = (next(), next());
    let block = |(o, s): (usize, usize)| {
        assert_eq!(bytes[o + s], 0, "test tables are built uncompressed");
        &bytes[o..o + s]
    };
    let with_trailer = |(o, s): (usize, usize)| o..o + s + 5;
    let mut props = None;
    let mut filter = None;
    for (name, h) in block_entries(block(meta)) {
        if name == b"properties" {
            props = Some(handle(&h));
        } else {
            filter = Some(handle(&h));
        }
    }
    let data_end = block_entries(block(index))
        .iter()
        .map(|(_, h)| {
            let (o, s) = handle(h);
            o + s + 5
        })
        .max()
        .unwrap();
    let props = props.unwrap();
    let mut regions = vec![("data", 0..data_end)];
    if let Some(f) = filter {
        // Partitions (if any) sit between the data and the filter's own block.
        assert!(f.0 >= data_end);
        regions.push(("filter", data_end..with_trailer(f).end));
        assert_eq!(with_trailer(f).end, props.0);
    }
    regions.push(("properties", with_trailer(props)));
    regions.push(("metaindex", with_trailer(meta)));
    regions.push(("index", with_trailer(index)));
    regions.push(("footer", len - 56..len));
    // The regions tile the file: every byte is in exactly one.
    let mut at = 0;
    for (_, r) in &regions {
        assert_eq!(r.start, at);
        at = r.end;
    }
    assert_eq!(at, len);
    regions
}

fn table_key(t: usize, i: usize) -> Vec<u8> {
    format!("{}{i:05}", (b'a' + t as u8) as char).into_bytes()
}

fn table_value(t: usize, i: usize) -> Vec<u8> {
    format!("value-{t}-{i}-{}", "v".repeat(i % 40)).into_bytes()
}

const TABLES: usize = 3;
const PER_TABLE: usize = 300;

fn table_options(filter: Filter) -> Options {
    Options::default()
        .compression(Compression::None)
        .block_size(512)
        .filter(filter)
        // The three tables stay in L0, where the damage is put.
        .compact_l0_when_idle(false)
}

/// Three L0 tables with disjoint key ranges ("a…", "b…", "c…").
fn build_tables(dir: &Path, filter: Filter) {
    let db = Db::open(dir, table_options(filter)).unwrap();
    for t in 0..TABLES {
        for i in 0..PER_TABLE {
            db.put(table_key(t, i), table_value(t, i)).unwrap();
        }
        db.flush().unwrap();
    }
    drop(db);
    assert_eq!(files_with_ext(dir, "sst").len(), TABLES);
}

fn check_table_readable(db: &Db, t: usize, what: &str) {
    for i in 0..PER_TABLE {
        assert_eq!(
            db.get(table_key(t, i))
                .unwrap_or_else(|e| panic!("{what}: table {t} unreadable: {e}")),
            Some(table_value(t, i)),
            "{what}: table {t} key {i}"
        );
    }
}

/// Opens a store in which table `victim` (path `bad`) is damaged and exercises get, scan and
/// compaction. Returns whether the damage was reported; panics on a wrong value or a wrong error.
fn exercise_damaged(work: &Path, filter: &Filter, victim: usize, bad: &Path, what: &str) -> bool {
    let db = match Db::open(work, table_options(filter.clone())) {
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
    for t in 0..TABLES {
        if t != victim {
            check_table_readable(&db, t, what);
            continue;
        }
        for i in 0..PER_TABLE {
            match db.get(table_key(t, i)) {
                Ok(v) => assert_eq!(
                    v,
                    Some(table_value(t, i)),
                    "{what}: get returned a wrong value"
                ),
                Err(e) => on_err(e, "get"),
            }
        }
    }
    // A scan returns the right entries in order until, perhaps, an error.
    let mut expected = (0..TABLES).flat_map(|t| (0..PER_TABLE).map(move |i| (t, i)));
    for item in db.iter() {
        match item {
            Ok((k, v)) => {
                let (t, i) = expected.next().expect("scan returned an extra entry");
                assert_eq!((k, v), (table_key(t, i), table_value(t, i)), "{what}: scan");
            }
            Err(e) => {
                on_err(e, "scan");
                break;
            }
        }
    }
    match db.compact() {
        Ok(()) => {
            for t in 0..TABLES {
                check_table_readable(&db, t, what);
            }
        }
        Err(e) => {
            on_err(e, "compact");
            // The inputs stay: the other tables are still readable, now and after a reopen.
            for t in (0..TABLES).filter(|&t| t != victim) {
                check_table_readable(&db, t, what);
            }
            drop(db);
            let db = Db::open(work, table_options(filter.clone())).unwrap();
            for t in (0..TABLES).filter(|&t| t != victim) {
                check_table_readable(&db, t, what);
            }
        }
    }
    detected
}

/// Offsets to damage in `r`: all of them in long mode, else both ends and a sample between.
fn sample(r: &std::ops::Range<usize>, rng: &mut StdRng) -> Vec<usize> {
    if long() || r.len() <= 12 {
        return r.clone().collect();
    }
    let mut v = vec![r.start, r.start + 1, r.end - 2, r.end - 1];
    v.extend((0..8).map(|_| rng.gen_range(r.clone())));
    v
}

fn flip_table_bytes(filter: Filter, seed: u64) {
    let root = scratch();
    let pristine = root.path().join("pristine");
    build_tables(&pristine, filter.clone());
    let work = root.path().join("work");
    let victim = 1;
    let table = files_with_ext(&pristine, "sst")[victim].clone();
    let bytes = std::fs::read(&table).unwrap();
    let regions = table_regions(&bytes);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut flips = 0;
    for (region, range) in &regions {
        for pos in sample(range, &mut rng) {
            copy_dir(&pristine, &work);
            let bad = work.join(table.file_name().unwrap());
            let mut damaged = bytes.clone();
            damaged[pos] ^= rng.gen_range(1..=255u8);
            std::fs::write(&bad, &damaged).unwrap();
            let what = format!("{filter:?}: {region} byte {pos}");
            // Every byte of a table is covered by a block checksum or the footer's, and every
            // block is read by open, get, scan or compaction: the damage must be reported.
            assert!(
                exercise_damaged(&work, &filter, victim, &bad, &what),
                "{what}: damage went unnoticed"
            );
            flips += 1;
        }
    }
    let sizes: Vec<String> = regions
        .iter()
        .map(|(n, r)| format!("{n} {}", r.len()))
        .collect();
    eprintln!(
        "{filter:?}: {flips} bytes flipped in a table of {} bytes ({})",
        bytes.len(),
        sizes.join(", ")
    );
}

#[test]
fn table_damage_full_filter_is_reported_never_wrong() {
    flip_table_bytes(Filter::full(10.0), 11);
}

#[test]
fn table_damage_partitioned_filter_is_reported_never_wrong() {
    flip_table_bytes(Filter::partitioned(10.0), 12);
}

#[test]
fn table_damage_block_based_filter_is_reported_never_wrong() {
    flip_table_bytes(Filter::block_based(10.0), 13);
}

#[test]
fn truncated_table_is_reported() {
    let root = scratch();
    let pristine = root.path().join("pristine");
    let filter = Filter::full(10.0);
    build_tables(&pristine, filter.clone());
    let table = files_with_ext(&pristine, "sst")[1].clone();
    let len = std::fs::metadata(&table).unwrap().len();
    let work = root.path().join("work");
    for cut in [0, 1, 55, 56, 57, len / 2, len - 57, len - 56, len - 1] {
        copy_dir(&pristine, &work);
        let bad = work.join(table.file_name().unwrap());
        let f = std::fs::OpenOptions::new().write(true).open(&bad).unwrap();
        f.set_len(cut).unwrap();
        drop(f);
        assert!(
            exercise_damaged(&work, &filter, 1, &bad, &format!("table cut at {cut}")),
            "table cut at {cut} went unnoticed"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// MANIFEST and CURRENT

fn check_all_or_corruption(work: &Path, bad: &Path, what: &str) -> bool {
    match Db::open(work, table_options(Filter::full(10.0))) {
        Err(e) => {
            assert!(is_corruption_of(&e, bad), "{what}: open failed with {e}");
            true
        }
        Ok(db) => {
            for t in 0..TABLES {
                check_table_readable(&db, t, what);
            }
            false
        }
    }
}

#[test]
fn manifest_damage_is_corruption_or_harmless() {
    let root = scratch();
    let pristine = root.path().join("pristine");
    build_tables(&pristine, Filter::full(10.0));
    let manifest = manifest(&pristine);
    let bytes = std::fs::read(&manifest).unwrap();
    let work = root.path().join("work");
    let mut rng = StdRng::seed_from_u64(21);
    let (mut flips, mut reported) = (0, 0);
    let positions: Vec<usize> = if long() || bytes.len() <= 400 {
        (0..bytes.len()).collect()
    } else {
        (0..bytes.len()).step_by(bytes.len() / 400 + 1).collect()
    };
    for pos in positions {
        copy_dir(&pristine, &work);
        let bad = work.join(manifest.file_name().unwrap());
        let mut damaged = bytes.clone();
        damaged[pos] ^= rng.gen_range(1..=255u8);
        std::fs::write(&bad, &damaged).unwrap();
        if check_all_or_corruption(&work, &bad, &format!("MANIFEST byte {pos}")) {
            reported += 1;
        }
        flips += 1;
    }
    eprintln!("MANIFEST: {flips} bytes flipped, {reported} reported as corruption");
}

#[test]
fn current_damage_is_corruption() {
    let root = scratch();
    let pristine = root.path().join("pristine");
    build_tables(&pristine, Filter::full(10.0));
    let current = pristine.join("CURRENT");
    let bytes = std::fs::read(&current).unwrap();
    let work = root.path().join("work");
    for pos in 0..bytes.len() {
        for mask in [0x01u8, 0x20, 0x80] {
            copy_dir(&pristine, &work);
            let bad = work.join("CURRENT");
            let mut damaged = bytes.clone();
            damaged[pos] ^= mask;
            std::fs::write(&bad, &damaged).unwrap();
            check_all_or_corruption(&work, &bad, &format!("CURRENT byte {pos} ^ {mask:#x}"));
        }
    }
    for cut in 0..bytes.len() {
        copy_dir(&pristine, &work);
        let bad = work.join("CURRENT");
        std::fs::write(&bad, &bytes[..cut]).unwrap();
        assert!(
            check_all_or_corruption(&work, &bad, &format!("CURRENT cut at {cut}")),
            "CURRENT cut at {cut} went unnoticed"
        );
    }
}

#[test]
fn missing_table_is_corruption_naming_it() {
    let root = scratch();
    let dir = root.path().join("db");
    build_tables(&dir, Filter::full(10.0));
    let table = files_with_ext(&dir, "sst")[1].clone();
    std::fs::remove_file(&table).unwrap();
    match Db::open(&dir, table_options(Filter::full(10.0))) {
        Err(e) => assert!(is_corruption_of(&e, &table), "{e}"),
        Ok(_) => panic!("a store missing a table opened"),
    }
    // Refusing to open also kept the other tables: nothing was cleaned up on a bad version.
    assert_eq!(files_with_ext(&dir, "sst").len(), TABLES - 1);
}

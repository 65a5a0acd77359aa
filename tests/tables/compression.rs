//! Block codecs across a store's life: tables of snappy, LZ4, zstd and no compression side by
//! side, written by flushes and compactions with each output level's codec
//! (`compression_per_level`, `bottommost_compression`), read back after every step and after
//! reopening with other options; and LZ4 and zstd blocks damaged behind an intact checksum, which
//! must be `Error::Corruption` naming their table, never a panic or a wrong value.

use crate::common;
use common::scratch;
use common::{copy_dir, files_with_ext, key, settle, tables_per_level};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::{Rng, RngCore, SeedableRng};
use siftdb::inspect::TableInfo;
use siftdb::{Compression, Db, Error, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Value `version` of key `i`: 100 bytes that compress about in half (50 random bytes, twice),
/// as db_bench's values at compression ratio 0.5.
fn value(i: usize, version: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(i as u64 * 1_000 + version);
    let mut half = [0u8; 50];
    rng.fill_bytes(&mut half);
    [half, half].concat()
}

/// Small memtables, tables and level budgets, so that some thousands of keys fill L0 to L3.
fn small(options: Options) -> Options {
    options
        .write_buffer_size(64 << 10)
        .target_file_size(32 << 10)
        .max_bytes_for_level_base(64 << 10)
        .level_size_multiplier(4)
        .block_size(1024)
}

/// Every key and value of the store is the model's, through Get, multi_get and a scan.
fn check(db: &Db, model: &Model, step: &str) {
    for (k, v) in model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{step}: get {k:?}");
    }
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    for (got, want) in db.multi_get(&keys).into_iter().zip(model.values()) {
        assert_eq!(got.unwrap().as_ref(), Some(want), "{step}: multi_get");
    }
    let scanned: Model = db.scan(..).map(|kv| kv.unwrap()).collect();
    assert!(scanned == *model, "{step}: the scan differs from the model");
}

/// Each live table's number and level, from explaining a Get of a missing key just after every
/// key the store ever held: such a Get considers every L0 table and, on each deeper level, the
/// table whose range holds it, and every table holds a key other than its largest.
fn table_levels(db: &Db, keys: usize) -> BTreeMap<u64, usize> {
    let mut levels = BTreeMap::new();
    for i in 0..keys {
        let mut probe = key(i);
        probe.push(0);
        for t in db.explain_get(&probe).unwrap().tables {
            levels.insert(t.file_number, t.level);
        }
    }
    levels
}

/// The table file numbered `n` in `dir`.
fn table_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.sst"))
}

/// The codec table `n` was written with, after checking that every data block it compressed
/// records that codec.
fn table_codec(dir: &Path, n: u64) -> Compression {
    let info = TableInfo::open(table_path(dir, n)).unwrap();
    let codec = info.compression.expect("new tables record their codec");
    for b in &info.data_blocks {
        assert!(
            b.compression == codec || b.compression == Compression::None,
            "table {n} of {codec:?} has a {:?} block",
            b.compression
        );
    }
    if codec != Compression::None {
        // Every block of values that compress in half saves more than an eighth.
        assert!(
            info.data_blocks.iter().all(|b| b.compression == codec),
            "table {n} of {codec:?} stored a block raw"
        );
    }
    codec
}

/// The codecs of the live tables, by level.
fn codecs_by_level(db: &Db, dir: &Path, keys: usize) -> BTreeMap<u64, (usize, Compression)> {
    let levels = table_levels(db, keys);
    assert_eq!(
        levels.len(),
        files_with_ext(dir, "sst").len(),
        "every table of the directory is live and found"
    );
    levels
        .into_iter()
        .map(|(n, level)| (n, (level, table_codec(dir, n))))
        .collect()
}

#[test]
fn mixed_codecs_through_flush_compaction_and_reopen() {
    let dir = scratch();
    let dir = dir.path();
    let mut model = Model::new();
    let (first_keys, all_keys) = (6_000, 8_000);

    // A store written with the default codec, snappy, on L0 to L2.
    let db = Db::open(dir, small(Options::default())).unwrap();
    for i in 0..first_keys {
        db.put(key(i), value(i, 0)).unwrap();
        model.insert(key(i), value(i, 0));
    }
    db.flush().unwrap();
    settle(&db);
    check(&db, &model, "snappy");
    let snappy_tables = codecs_by_level(&db, dir, all_keys);
    assert!(snappy_tables
        .values()
        .all(|&(_, c)| c == Compression::Snappy));
    let levels = tables_per_level(&db);
    assert!(levels[2] > 0, "{levels:?}");
    let last_snappy = *snappy_tables.keys().last().unwrap();
    drop(db);

    // Reopened with LZ4 on L0 and L1, snappy below, zstd on the bottommost level.
    let options = small(Options::default())
        .compression_per_level([Compression::Lz4, Compression::Lz4, Compression::Snappy])
        .bottommost_compression(Compression::Zstd(6));
    let db = Db::open(dir, options.clone()).unwrap();
    check(&db, &model, "snappy tables read with other codecs set");
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for i in 0..all_keys {
        // New keys, a new version of every third old one, and a few deletions.
        if i >= first_keys || i % 3 == 0 {
            db.put(key(i), value(i, 1)).unwrap();
            model.insert(key(i), value(i, 1));
        } else if rng.gen_ratio(1, 50) {
            db.delete(key(i)).unwrap();
            model.remove(&key(i));
        }
    }
    db.flush().unwrap();
    settle(&db);
    check(&db, &model, "mixed");
    let tables = codecs_by_level(&db, dir, all_keys);
    let new_l1 = tables
        .iter()
        .filter(|&(&n, &(level, _))| level == 1 && n > last_snappy)
        .count();
    assert!(new_l1 > 0, "a compaction wrote L1: {tables:?}");
    for (&n, &(level, codec)) in &tables {
        if n <= last_snappy {
            assert_eq!(codec, Compression::Snappy, "table {n} was written before");
        } else if level <= 1 {
            // Flushed into L0 or compacted into L1 (or moved there from L0): LZ4.
            assert_eq!(codec, Compression::Lz4, "table {n} at L{level}");
        } else {
            // Compacted into L2 or deeper (snappy, or zstd into the bottommost level), or
            // moved down from L1 without a rewrite.
            let allowed = [Compression::Snappy, Compression::Zstd(6), Compression::Lz4];
            assert!(allowed.contains(&codec), "table {n} at L{level}: {codec:?}");
        }
    }

    // A full compaction ends in the bottommost level: every table it writes is zstd. A table
    // of that level no input overlapped stays as it was (moved there earlier, it kept its codec).
    let last_mixed = *tables.keys().last().unwrap();
    db.compact().unwrap();
    check(&db, &model, "compacted");
    let tables = codecs_by_level(&db, dir, all_keys);
    assert!(tables.keys().any(|&n| n > last_mixed), "{tables:?}");
    assert_eq!(
        tables.values().map(|&(l, _)| l).min(),
        tables.values().map(|&(l, _)| l).max()
    );
    for (&n, &(level, codec)) in &tables {
        if n > last_mixed {
            assert_eq!(codec, Compression::Zstd(6), "table {n} at L{level}");
        }
    }
    drop(db);

    // Reopened with no compression: the zstd tables read back, and a compaction rewrites them
    // raw.
    let none = small(Options::default()).compression(Compression::None);
    let db = Db::open(dir, none.clone()).unwrap();
    check(&db, &model, "zstd tables read with compression off");
    for i in (0..all_keys).step_by(5) {
        db.put(key(i), value(i, 2)).unwrap();
        model.insert(key(i), value(i, 2));
    }
    let last_zstd = *tables.keys().last().unwrap();
    db.compact().unwrap();
    check(&db, &model, "rewritten raw");
    let tables = codecs_by_level(&db, dir, all_keys);
    assert!(tables.keys().any(|&n| n > last_zstd), "{tables:?}");
    for (&n, &(level, codec)) in &tables {
        if n > last_zstd {
            assert_eq!(codec, Compression::None, "table {n} at L{level}");
        }
    }
    drop(db);

    let db = Db::open(dir, Options::default()).unwrap();
    check(&db, &model, "raw tables reopened with the defaults");
}

#[test]
fn lz4_and_zstd_tables_are_smaller_than_raw_ones() {
    // The same data under each codec: every codec saves, on values that compress in half.
    let mut sizes = Vec::new();
    for codec in [
        Compression::None,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd(3),
    ] {
        let dir = scratch();
        let db = Db::open(dir.path(), Options::default().compression(codec)).unwrap();
        for i in 0..5_000 {
            db.put(key(i), value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        let bytes: u64 = db
            .property("siftdb.total-sst-bytes")
            .unwrap()
            .parse()
            .unwrap();
        sizes.push((codec, bytes));
    }
    let raw = sizes[0].1;
    for &(codec, bytes) in &sizes[1..] {
        assert!(bytes < raw * 3 / 4, "{codec:?}: {bytes} B of {raw} B raw");
    }
}

#[test]
fn an_unknown_zstd_level_is_refused_at_open() {
    let dir = scratch();
    let options = Options::default().bottommost_compression(Compression::Zstd(1_000));
    match Db::open(dir.path(), options) {
        Err(Error::InvalidArgument(what)) => assert!(what.contains("zstd level 1000"), "{what}"),
        other => panic!("expected InvalidArgument, got {:?}", other.map(|_| ())),
    }
}

/// How a compressed block is damaged.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// The recorded decompressed length, off by one; the checksum recomputed to match.
    RecordedLength,
    /// The codec's bytes overwritten with 0xff; the checksum recomputed to match.
    Payload,
    /// One bit of the codec's bytes flipped, the checksum left as it was.
    Checksum,
}

fn is_corruption_of(e: &Error, table: &Path) -> bool {
    matches!(e, Error::Corruption { file, .. } if file.file_name() == table.file_name())
}

#[test]
fn a_damaged_lz4_or_zstd_block_is_corruption_naming_its_table() {
    for codec in [Compression::Lz4, Compression::Zstd(3)] {
        let root = scratch();
        let pristine = root.path().join("pristine");
        let options = Options::default().compression(codec).block_size(1024);
        let db = Db::open(&pristine, options.clone()).unwrap();
        let mut model = Model::new();
        for i in 0..2_000 {
            db.put(key(i), value(i, 0)).unwrap();
            model.insert(key(i), value(i, 0));
        }
        db.flush().unwrap();
        drop(db);
        let table = files_with_ext(&pristine, "sst").pop().unwrap();
        let info = TableInfo::open(&table).unwrap();
        let block = info.data_blocks[info.data_blocks.len() / 2];
        assert_eq!(block.compression, codec);
        let (at, size) = (block.block.offset as usize, block.block.size as usize);

        for damage in [Damage::RecordedLength, Damage::Payload, Damage::Checksum] {
            let work = root.path().join("work");
            copy_dir(&pristine, &work);
            let damaged = work.join(table.file_name().unwrap());
            let mut bytes = std::fs::read(&damaged).unwrap();
            // The block starts with its varint32 length, then the codec's bytes.
            let payload_at = at + (0..5).find(|&i| bytes[at + i] & 0x80 == 0).unwrap() + 1;
            match damage {
                Damage::RecordedLength => bytes[at] ^= 1,
                Damage::Payload => bytes[payload_at..at + size].fill(0xff),
                Damage::Checksum => bytes[payload_at + 3] ^= 0x10,
            }
            if !matches!(damage, Damage::Checksum) {
                let mut crc = crc32fast::Hasher::new();
                crc.update(&bytes[at..at + size + 1]);
                bytes[at + size + 1..at + size + 5].copy_from_slice(&crc.finalize().to_le_bytes());
            }
            std::fs::write(&damaged, &bytes).unwrap();
            let what = format!("{codec:?}, {damage:?}");

            let db = Db::open(&work, options.clone()).unwrap();
            let mut failed = 0;
            for (k, v) in &model {
                match db.get(k) {
                    Ok(got) => assert_eq!(got.as_ref(), Some(v), "{what}: a wrong value"),
                    Err(e) => {
                        assert!(is_corruption_of(&e, &damaged), "{what}: {e}");
                        failed += 1;
                    }
                }
            }
            assert!(failed > 0, "{what}: no Get met the damaged block");
            let scan_error = db
                .scan(..)
                .find_map(Result::err)
                .expect("the scan meets the damaged block");
            assert!(
                is_corruption_of(&scan_error, &damaged),
                "{what}: {scan_error}"
            );
            let e = db.compact().unwrap_err();
            assert!(is_corruption_of(&e, &damaged), "{what}: {e}");
            drop(db);
            // The damage stays where it is: the table is still there, still refused.
            let db = Db::open(&work, options.clone()).unwrap();
            let e = db.scan(..).find_map(Result::err).unwrap();
            assert!(is_corruption_of(&e, &damaged), "{what}: {e}");
        }
    }
}

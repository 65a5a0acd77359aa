//! The bounded, stable counterpart of the fuzz targets in `fuzz/` (which need nightly): seeded
//! loops that put damaged files into a real database directory and open, get and scan through the
//! public API, so a decoder panic fails CI.
//!
//! Random damage is almost always caught by a checksum before any decoder sees it, so most inputs
//! here are *re-checksummed*: a block's contents (data, filter, filter partition, properties,
//! metaindex, index), the footer, a WAL record or a MANIFEST edit is mutated and then given a
//! correct checksum again, which hands the garbage to the block, filter, properties, write-batch
//! and version-edit decoders. For those the store cannot know the bytes are wrong, so the only
//! requirements are: no panic, and every error is `Error::Corruption` (or `InvalidArgument` for a
//! MANIFEST naming impossible things). Inputs whose checksums are left wrong must never yield a
//! wrong value.
//!
//! `SIFTDB_LONG=1` runs 20 times as many inputs.

use crate::common;
use common::{
    block_entries, copy_dir, file_names, files_with_ext, fix_block_crc, frame_log, handle, key,
    log_records, long, manifest, scratch, varint,
};
use std::path::Path;

use proptest::prelude::*;
use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::{
    CacheLocalBloom, Compression, Db, Error, Filter, FilterPolicy, LevelDbBloom, Options,
};

fn iterations(short: usize) -> usize {
    if long() {
        short * 20
    } else {
        short
    }
}

fn value(i: usize) -> Vec<u8> {
    format!("value{i}-{}", "z".repeat(i % 30)).into_bytes()
}

const KEYS: usize = 400;

/// Reads everything through the public API; panics on anything but success or corruption.
fn exercise(dir: &Path, options: Options, rng: &mut StdRng, what: &str) {
    let db = match Db::open(dir, options) {
        Ok(db) => db,
        Err(Error::Corruption { .. } | Error::InvalidArgument(_)) => return,
        Err(e) => panic!("{what}: open failed with {e}"),
    };
    let ok = |r: Option<&Error>, op: &str| {
        if let Some(e) = r {
            assert!(
                matches!(e, Error::Corruption { .. }),
                "{what}: {op} failed with {e}"
            );
        }
    };
    for _ in 0..40 {
        let i = rng.gen_range(0..KEYS + 20);
        ok(db.get(key(i)).as_ref().err(), "get");
    }
    for item in db.iter() {
        ok(item.as_ref().err(), "scan");
        if item.is_err() {
            break;
        }
    }
    ok(db.compact().as_ref().err(), "compact");
}

/// A block of a table: its name and where its contents (trailer excluded) are.
struct BlockAt {
    name: &'static str,
    offset: usize,
    size: usize,
}

/// Every block of an uncompressed table, parsed from its footer down.
fn table_blocks(bytes: &[u8]) -> Vec<BlockAt> {
    let footer = &bytes[bytes.len() - 56..];
    let mut p = 0;
    let meta = (
        varint(footer, &mut p) as usize,
        varint(footer, &mut p) as usize,
    );
    let index = (
        varint(footer, &mut p) as usize,
        varint(footer, &mut p) as usize,
    );
    let contents = |(o, s): (usize, usize)| &bytes[o..o + s];
    let at = |name, (offset, size): (usize, usize)| BlockAt { name, offset, size };
    let mut out = vec![at("metaindex", meta), at("index", index)];
    for (_, h) in block_entries(contents(index)) {
        out.push(at("data", handle(&h)));
    }
    for (name, h) in block_entries(contents(meta)) {
        let h = handle(&h);
        if name == b"properties" {
            out.push(at("properties", h));
        } else if name.starts_with(b"partitionedfilter.") {
            out.push(at("filter index", h));
            for (_, p) in block_entries(contents(h)) {
                out.push(at("filter partition", handle(&p)));
            }
        } else {
            out.push(at("filter", h));
        }
    }
    out
}

fn fix_footer_crc(bytes: &mut [u8]) {
    let f = bytes.len() - 56;
    let crc = crc32fast::hash(&bytes[f..f + 44]);
    bytes[f + 44..f + 48].copy_from_slice(&crc.to_le_bytes());
}

/// Overwrites a few bytes of `region` in one of several ways.
fn mutate(rng: &mut StdRng, region: &mut [u8]) {
    if region.is_empty() {
        return;
    }
    for _ in 0..rng.gen_range(1..=4) {
        let i = rng.gen_range(0..region.len());
        region[i] = match rng.gen_range(0..5) {
            0 => region[i] ^ (1 << rng.gen_range(0..8)),
            1 => 0,
            2 => 0xff,
            3 => 0x80, // a varint continuation byte
            _ => rng.r#gen(),
        };
    }
}

fn table_options(filter: Filter) -> Options {
    Options::default()
        .compression(Compression::None)
        .block_size(256)
        .filter(filter)
}

#[test]
fn rechecksummed_table_blocks_never_panic() {
    let filters = [
        Filter::full(10.0),
        Filter::partitioned(5.0),
        Filter::block_based(10.0),
        Filter::new(
            siftdb::FilterLayout::Full,
            std::sync::Arc::new(LevelDbBloom::new(8.0)),
        ),
        Filter::partitioned(10.0).partition_bytes(64),
    ];
    let mut rng = StdRng::seed_from_u64(31);
    let mut inputs = 0;
    for (n, filter) in filters.iter().enumerate() {
        let root = scratch();
        let pristine = root.path().join("pristine");
        let db = Db::open(&pristine, table_options(filter.clone())).unwrap();
        for i in 0..KEYS {
            db.put(key(i), value(i)).unwrap();
        }
        db.flush().unwrap();
        drop(db);
        let table = files_with_ext(&pristine, "sst").pop().unwrap();
        let bytes = std::fs::read(&table).unwrap();
        let blocks = table_blocks(&bytes);
        let work = root.path().join("work");
        for _ in 0..iterations(150) {
            let mut damaged = bytes.clone();
            let what = if rng.gen_bool(0.1) {
                let f = damaged.len() - 56;
                mutate(&mut rng, &mut damaged[f..f + 40]);
                fix_footer_crc(&mut damaged);
                format!("filter {n}: footer")
            } else {
                let b = &blocks[rng.gen_range(0..blocks.len())];
                mutate(&mut rng, &mut damaged[b.offset..b.offset + b.size]);
                fix_block_crc(&mut damaged, b.offset, b.size);
                format!("filter {n}: {} block at {}", b.name, b.offset)
            };
            copy_dir(&pristine, &work);
            std::fs::write(work.join(table.file_name().unwrap()), &damaged).unwrap();
            exercise(&work, table_options(filter.clone()), &mut rng, &what);
            inputs += 1;
        }
    }
    eprintln!("{inputs} re-checksummed table mutations");
}

#[test]
fn random_and_mutated_table_files_never_panic_or_lie() {
    let root = scratch();
    let pristine = root.path().join("pristine");
    let options = || Options::default().block_size(512);
    let db = Db::open(&pristine, options()).unwrap();
    for i in 0..KEYS {
        db.put(key(i), value(i)).unwrap();
    }
    db.flush().unwrap();
    drop(db);
    let table = files_with_ext(&pristine, "sst").pop().unwrap();
    let bytes = std::fs::read(&table).unwrap();
    let work = root.path().join("work");
    let mut rng = StdRng::seed_from_u64(32);
    for round in 0..iterations(150) {
        let damaged: Vec<u8> = match round % 4 {
            // Pure garbage of assorted lengths.
            0 => (0..rng.gen_range(0..3000)).map(|_| rng.r#gen()).collect(),
            // A real footer on garbage: the reader follows handles into random bytes.
            1 => {
                let mut d: Vec<u8> = (0..bytes.len() - 56).map(|_| rng.r#gen()).collect();
                d.extend_from_slice(&bytes[bytes.len() - 56..]);
                d
            }
            // A cut or a spliced copy.
            2 => {
                let cut = rng.gen_range(0..bytes.len());
                let mut d = bytes[..cut].to_vec();
                if rng.gen_bool(0.5) {
                    d.extend_from_slice(&bytes[rng.gen_range(0..bytes.len())..]);
                }
                d
            }
            _ => {
                let mut d = bytes.clone();
                mutate(&mut rng, &mut d);
                d
            }
        };
        copy_dir(&pristine, &work);
        std::fs::write(work.join(table.file_name().unwrap()), &damaged).unwrap();
        // Checksums are left as they are, so any value returned must be the true one. A file whose
        // size is not the one the MANIFEST records is refused at open.
        let db = match Db::open(&work, options()) {
            Ok(db) => db,
            Err(Error::Corruption { file, .. }) if file.file_name() == table.file_name() => {
                assert_ne!(damaged.len(), bytes.len(), "round {round}");
                continue;
            }
            Err(e) => panic!("round {round}: open failed with {e}"),
        };
        for _ in 0..20 {
            let i = rng.gen_range(0..KEYS);
            match db.get(key(i)) {
                Ok(v) => assert_eq!(v, Some(value(i)), "round {round}: wrong value"),
                Err(e) => assert!(matches!(e, Error::Corruption { .. }), "{e}"),
            }
        }
        for item in db.iter() {
            match item {
                Ok((k, v)) => {
                    let i: usize = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
                    assert_eq!(v, value(i), "round {round}: scan returned a wrong value");
                }
                Err(e) => {
                    assert!(matches!(e, Error::Corruption { .. }), "{e}");
                    break;
                }
            }
        }
    }
}

/// Mutates one record (or truncates or extends it), keeping the framing valid.
fn mutate_records(rng: &mut StdRng, records: &mut [Vec<u8>]) {
    let r = &mut records[rng.gen_range(0..records.len())];
    match rng.gen_range(0..4) {
        0 => r.truncate(rng.gen_range(0..=r.len())),
        1 => r.extend((0..rng.gen_range(1..20)).map(|_| rng.r#gen::<u8>())),
        _ => mutate(rng, r),
    }
}

#[test]
fn rechecksummed_wal_records_never_panic() {
    let root = scratch();
    let pristine = root.path().join("pristine");
    let db = Db::open(&pristine, Options::default()).unwrap();
    for i in 0..60 {
        if i % 7 == 3 {
            db.delete(key(i - 1)).unwrap();
        } else {
            let mut b = siftdb::WriteBatch::new();
            b.put(key(i), value(i)).put(key(i + 1000), b"b");
            db.write(b).unwrap();
        }
    }
    drop(db);
    let log = files_with_ext(&pristine, "log").pop().unwrap();
    let records = log_records(&std::fs::read(&log).unwrap());
    assert_eq!(records.len(), 60);
    let work = root.path().join("work");
    let mut rng = StdRng::seed_from_u64(33);
    for round in 0..iterations(200) {
        let mut recs = records.clone();
        for _ in 0..rng.gen_range(1..3) {
            mutate_records(&mut rng, &mut recs);
        }
        copy_dir(&pristine, &work);
        std::fs::write(work.join(log.file_name().unwrap()), frame_log(&recs)).unwrap();
        exercise(
            &work,
            Options::default(),
            &mut rng,
            &format!("WAL round {round}"),
        );
    }
}

#[test]
fn rechecksummed_manifest_edits_never_panic() {
    let root = scratch();
    let pristine = root.path().join("pristine");
    let options = || Options::default().write_buffer_size(4096);
    let db = Db::open(&pristine, options()).unwrap();
    for i in 0..KEYS {
        db.put(key(i), value(i)).unwrap();
        if i % 100 == 99 {
            db.flush().unwrap();
        }
    }
    db.compact().unwrap();
    drop(db);
    let manifest = manifest(&pristine);
    let records = log_records(&std::fs::read(&manifest).unwrap());
    assert!(records.len() > 3);
    let work = root.path().join("work");
    let mut rng = StdRng::seed_from_u64(34);
    for round in 0..iterations(300) {
        let mut recs = records.clone();
        mutate_records(&mut rng, &mut recs);
        copy_dir(&pristine, &work);
        std::fs::write(work.join(manifest.file_name().unwrap()), frame_log(&recs)).unwrap();
        exercise(
            &work,
            options(),
            &mut rng,
            &format!("MANIFEST round {round}"),
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Both built-in policies answer on any bytes without panicking.
    #[test]
    fn bloom_readers_accept_any_bytes(filter in proptest::collection::vec(any::<u8>(), 0..300),
                                      key in proptest::collection::vec(any::<u8>(), 0..40)) {
        let _ = LevelDbBloom::new(10.0).may_match(&filter, &key);
        let _ = CacheLocalBloom::new(10.0).may_match(&filter, &key);
    }

    /// A built filter never says "no" to a key it was built from, whatever the bits per key.
    #[test]
    fn bloom_filters_have_no_false_negatives(keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 1..200),
                                             bits in 1.0f64..30.0) {
        let policies: [Box<dyn FilterPolicy>; 2] = [Box::new(LevelDbBloom::new(bits)), Box::new(CacheLocalBloom::new(bits))];
        for p in &policies {
            let mut b = p.builder();
            for k in &keys {
                b.add_key(k);
            }
            let f = b.finish();
            for k in &keys {
                prop_assert!(p.may_match(&f, k), "{} denied a key it holds", p.name());
            }
        }
    }
}

/// Not a check: with `SIFTDB_FUZZ_SEEDS=<dir>` it writes real tables, logs and MANIFESTs into
/// `<dir>/<target>/` as starting corpora for the fuzz targets (see docs/reliability.md, *Running them*).
#[test]
fn write_fuzz_seeds() {
    let Ok(out) = std::env::var("SIFTDB_FUZZ_SEEDS") else {
        return;
    };
    let out = Path::new(&out);
    for t in ["table", "log", "block", "filters"] {
        std::fs::create_dir_all(out.join(t)).unwrap();
    }
    let filters = [
        Filter::full(10.0),
        Filter::partitioned(5.0).partition_bytes(64),
        Filter::block_based(10.0),
        Filter::new(
            siftdb::FilterLayout::Full,
            std::sync::Arc::new(LevelDbBloom::new(8.0)),
        ),
    ];
    for (n, filter) in filters.iter().enumerate() {
        let root = scratch();
        let dir = root.path().join("db");
        let db = Db::open(&dir, table_options(filter.clone()).write_buffer_size(4096)).unwrap();
        for i in 0..60 {
            db.put(key(i), value(i)).unwrap();
            if i % 20 == 7 {
                db.delete(key(i - 3)).unwrap();
            }
        }
        db.flush().unwrap();
        db.compact().unwrap();
        for i in 60..70 {
            db.put(key(i), value(i)).unwrap();
        }
        drop(db);
        for name in file_names(&dir) {
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            if name.ends_with(".sst") {
                // The table target takes a key-length byte, then the key, then the file.
                let mut seed = vec![8u8];
                seed.extend_from_slice(&key(5));
                seed.extend_from_slice(&bytes);
                std::fs::write(out.join("table").join(format!("{n}-{name}")), seed).unwrap();
                for b in table_blocks(&bytes) {
                    let mut seed = vec![8u8];
                    seed.extend_from_slice(&key(5));
                    seed.extend_from_slice(&bytes[b.offset..b.offset + b.size]);
                    let dest = if b.name.contains("filter") && !b.name.contains("index") {
                        let mut f = 0u64.to_le_bytes().to_vec();
                        f.push(8);
                        f.extend_from_slice(&key(5));
                        f.extend_from_slice(&bytes[b.offset..b.offset + b.size]);
                        std::fs::write(
                            out.join("filters").join(format!("{n}-{name}-{}", b.offset)),
                            f,
                        )
                        .unwrap();
                        continue;
                    } else {
                        out.join("block").join(format!("{n}-{name}-{}", b.offset))
                    };
                    std::fs::write(dest, seed).unwrap();
                }
            } else if name.ends_with(".log") || name.starts_with("MANIFEST-") {
                std::fs::write(out.join("log").join(format!("{n}-{name}")), bytes).unwrap();
            }
        }
    }
    // The codecs target takes a byte picking the codec (1 snappy, 2 LZ4, 3 zstd), then the
    // block as stored.
    std::fs::create_dir_all(out.join("codecs")).unwrap();
    let codecs = [
        (1u8, Compression::Snappy),
        (2, Compression::Lz4),
        (3, Compression::Zstd(3)),
    ];
    for (pick, codec) in codecs {
        let root = scratch();
        let dir = root.path().join("db");
        let db = Db::open(&dir, Options::default().compression(codec).block_size(512)).unwrap();
        for i in 0..60 {
            db.put(key(i), value(i)).unwrap();
        }
        db.flush().unwrap();
        drop(db);
        for path in files_with_ext(&dir, "sst") {
            let bytes = std::fs::read(&path).unwrap();
            let info = siftdb::inspect::TableInfo::open(&path).unwrap();
            for b in info.data_blocks.iter().filter(|b| b.compression == codec) {
                let (at, size) = (b.block.offset as usize, b.block.size as usize);
                let mut seed = vec![pick];
                seed.extend_from_slice(&bytes[at..at + size]);
                let name = format!("{codec:?}-{at}");
                std::fs::write(out.join("codecs").join(name), seed).unwrap();
            }
        }
    }
}

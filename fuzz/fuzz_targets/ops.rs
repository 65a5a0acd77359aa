//! Operation sequences against a BTreeMap model, through the public API, with flushes,
//! compactions and reopens, on tiny buffers so every path is reached quickly.
#![no_main]
use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use siftdb::{Db, Filter, Options, WriteBatch};

#[derive(Arbitrary, Debug)]
enum Op {
    Put(u8, u8),
    Delete(u8),
    Batch(Vec<(u8, Option<u8>)>),
    Get(u8),
    Scan(u8, u8),
    Flush,
    Compact,
    Reopen,
}

fn key(k: u8) -> Vec<u8> {
    format!("key{:03}", k % 64).into_bytes()
}

fn value(k: u8, v: u8) -> Vec<u8> {
    let mut out = format!("v{k}-{v}-").into_bytes();
    out.resize(out.len() + v as usize * 4, b'x');
    out
}

fn options(layout: u8) -> Options {
    let filter = match layout % 4 {
        0 => Filter::full(10.0),
        1 => Filter::partitioned(4.0),
        2 => Filter::block_based(10.0),
        _ => Filter::none(),
    };
    Options::default()
        .write_buffer_size(4096)
        .target_file_size(4096)
        .block_size(128)
        .max_bytes_for_level_base(8192)
        .level0_compaction_trigger(2)
        .filter(filter)
}

fuzz_target!(|input: (u8, Vec<Op>)| {
    let (layout, ops) = input;
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let mut db = Db::open(dir.path(), options(layout)).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for op in ops.into_iter().take(200) {
        match op {
            Op::Put(k, v) => {
                db.put(key(k), value(k, v)).unwrap();
                model.insert(key(k), value(k, v));
            }
            Op::Delete(k) => {
                db.delete(key(k)).unwrap();
                model.remove(&key(k));
            }
            Op::Batch(items) => {
                let mut b = WriteBatch::new();
                for (k, v) in items.iter().take(16) {
                    match v {
                        Some(v) => {
                            b.put(key(*k), value(*k, *v));
                            model.insert(key(*k), value(*k, *v));
                        }
                        None => {
                            b.delete(key(*k));
                            model.remove(&key(*k));
                        }
                    }
                }
                db.write(b).unwrap();
            }
            Op::Get(k) => assert_eq!(db.get(key(k)).unwrap(), model.get(&key(k)).cloned()),
            Op::Scan(a, b) => {
                // Order the keys, not the bytes: `key` wraps at 64.
                let (a, b) = (a % 64, b % 64);
                let (lo, hi) = (key(a.min(b)), key(a.max(b)));
                let got: Vec<_> = db
                    .scan(lo.clone()..hi.clone())
                    .map(|r| r.unwrap())
                    .collect();
                let want: Vec<_> = model
                    .range(lo..hi)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want);
            }
            Op::Flush => db.flush().unwrap(),
            Op::Compact => db.compact().unwrap(),
            Op::Reopen => {
                drop(db);
                db = Db::open(dir.path(), options(layout)).unwrap();
            }
        }
    }
    let got: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
    let want: Vec<_> = model.into_iter().collect();
    assert_eq!(got, want);
});

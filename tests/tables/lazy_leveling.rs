//! Lazy leveling against leveled compaction on the same writes: bytes written, where its runs
//! sit, and Monkey's bits per run against uniform's at the same filter memory.

use crate::common;
use common::{scratch, settle, tables_per_level};

use rand::{rngs::StdRng, seq::SliceRandom, Rng, SeedableRng};
use siftdb::{CompactionStyle, Db, Filter, FilterAllocation, Options, Ticker};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:09}").into_bytes()
}

/// Options of a small tree: 64 KiB memtables and tables, L1 of 256 KiB.
fn small(style: CompactionStyle) -> Options {
    Options::default()
        .write_buffer_size(64 << 10)
        .target_file_size(64 << 10)
        .max_bytes_for_level_base(256 << 10)
        .compaction_style(style)
}

struct Filled {
    db: Db,
    _dir: tempfile::TempDir,
    put_bytes: u64,
}

/// `n` keys in random order with 40-byte random values, flushed and settled every 2,000.
fn fill(options: Options, n: u32) -> Filled {
    let dir = scratch();
    let db = Db::open(dir.path(), options).unwrap();
    let mut order: Vec<u32> = (0..n).collect();
    order.shuffle(&mut StdRng::seed_from_u64(7));
    let mut rng = StdRng::seed_from_u64(11);
    let mut put_bytes = 0;
    for chunk in order.chunks(2000) {
        for &i in chunk {
            let mut value = [0u8; 40];
            rng.fill(&mut value[..]);
            put_bytes += (key(i).len() + value.len()) as u64;
            db.put(key(i), value).unwrap();
        }
        db.flush().unwrap();
        settle(&db);
    }
    Filled {
        db,
        _dir: dir,
        put_bytes,
    }
}

#[test]
fn lazy_leveling_writes_less_and_keeps_its_runs_at_the_bottom() {
    let n = 200_000;
    let leveled = fill(small(CompactionStyle::Leveled), n);
    let lazy = fill(small(CompactionStyle::LazyLeveled { runs_per_level: 4 }), n);
    let amp = |f: &Filled| {
        f.db.statistics().ticker(Ticker::TableBytesWritten) as f64 / f.put_bytes as f64
    };
    let (leveled_amp, lazy_amp) = (amp(&leveled), amp(&lazy));
    let shape = tables_per_level(&lazy.db);
    eprintln!(
        "write amplification: leveled {leveled_amp:.2} {:?}, lazy leveling {lazy_amp:.2} {shape:?}",
        tables_per_level(&leveled.db),
    );
    assert!(
        lazy_amp < 0.6 * leveled_amp,
        "lazy leveling wrote {lazy_amp:.2} bytes of tables per byte put, leveled {leveled_amp:.2}"
    );
    // The runs sit at the bottom, one per level, with no gap between them.
    let first = shape[1..].iter().position(|&t| t > 0).unwrap() + 1;
    assert!(shape[first..].iter().all(|&t| t > 0), "{shape:?}");
    assert!(
        shape[1..].iter().filter(|&&t| t > 0).count() >= 4,
        "{shape:?}"
    );
    // Both hold every key; a missing one stays missing.
    for f in [&leveled, &lazy] {
        for i in (0..n).step_by(997) {
            assert!(f.db.get(key(i)).unwrap().is_some(), "key {i}");
        }
        assert_eq!(f.db.get(b"key").unwrap(), None);
        assert_eq!(f.db.iter().count(), n as usize);
    }
    // A full compaction leaves one run, in the last level.
    lazy.db.compact().unwrap();
    assert_eq!(&tables_per_level(&lazy.db)[..6], &[0; 6]);
    assert_eq!(lazy.db.iter().count(), n as usize);
}

/// The "all" line of `siftdb.stats`' filter allocation table: data-block reads wasted per missing
/// Get at the tables' bits (theory), at Monkey's optimum for the shape, and measured.
fn waste(report: &str) -> (f64, f64, f64) {
    let line = report
        .lines()
        .skip_while(|l| !l.starts_with("filter allocation"))
        .find(|l| l.starts_with("all "))
        .unwrap();
    let f: Vec<f64> = line
        .split_whitespace()
        .skip(6)
        .map(|x| x.parse().unwrap())
        .collect();
    (f[0], f[1], f[2])
}

/// Filter bytes in memory and the data-block reads wasted per missing Get, measured and at
/// Monkey's optimum for the tree's shape, after 20,000 missing Gets.
fn missing_gets(db: &Db) -> (u64, (f64, f64, f64)) {
    db.property("siftdb.stats").unwrap();
    for i in 0..20_000u32 {
        let mut k = key(i * 10);
        k.push(b'-');
        assert_eq!(db.get(&k).unwrap(), None);
    }
    let report = db.property("siftdb.stats").unwrap();
    (db.statistics().filter_bytes_in_memory(), waste(&report))
}

#[test]
fn monkey_gives_each_run_its_bits_and_wastes_near_the_optimum() {
    let lazy = |allocation| {
        small(CompactionStyle::LazyLeveled { runs_per_level: 4 })
            .filter(Filter::full(8.0))
            .filter_allocation(allocation)
    };
    let monkey = fill(lazy(FilterAllocation::Monkey), 200_000);
    let uniform = fill(lazy(FilterAllocation::Uniform), 200_000);
    let (monkey_bytes, (_, optimum, measured)) = missing_gets(&monkey.db);
    let (uniform_bytes, (_, _, uniform_measured)) = missing_gets(&uniform.db);
    eprintln!(
        "Monkey: {monkey_bytes} filter bytes, {measured:.4} reads wasted per missing Get \
         (optimum {optimum:.4}); uniform: {uniform_bytes} bytes, {uniform_measured:.4}"
    );
    assert!(
        tables_per_level(&monkey.db)[1..]
            .iter()
            .filter(|&&t| t > 0)
            .count()
            >= 4
    );
    assert!(monkey_bytes as f64 <= 1.05 * uniform_bytes as f64);
    assert!(measured <= 1.15 * optimum, "{measured} against {optimum}");
    assert!(measured < 0.75 * uniform_measured);
}

//! Monkey's plan weighs each level's run by the share of absent Gets that meet it
//! (`Statistics::absent_get_coverage`): a level whose tables hold only a corner of the keys the
//! Gets ask for gets fewer bits per key than where every absent key meets it, at the same filter
//! memory.

use crate::common;
use common::{scratch, settle};

use rand::{rngs::StdRng, seq::SliceRandom, Rng, SeedableRng};
use siftdb::{Db, Filter, FilterAllocation, Options};

const OLD: u32 = 60_000;
const NEW: u32 = 15_000;

fn options() -> Options {
    Options::default()
        .write_buffer_size(256 << 10)
        .target_file_size(64 << 10)
        .max_bytes_for_level_base(1 << 20)
        .filter(Filter::full(10.0))
        .filter_allocation(FilterAllocation::Monkey)
}

fn key(range: &str, i: u32) -> Vec<u8> {
    format!("{range}{i:08}").into_bytes()
}

fn put_shuffled(db: &Db, range: &str, keys: u32, seed: u64) {
    let mut order: Vec<u32> = (0..keys).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    let mut values = StdRng::seed_from_u64(seed + 1);
    for i in order {
        let mut value = [0u8; 40];
        values.fill(&mut value[..]);
        db.put(key(range, i), value).unwrap();
    }
    db.flush().unwrap();
    settle(db);
}

/// Bits per key of each level's filters (L0 first) and the filter bytes of every live table,
/// from `siftdb.stats`' filter table (which reads every live table's properties).
fn filters_per_level(db: &Db) -> (Vec<f64>, u64) {
    let stats = db.property("siftdb.stats").unwrap();
    let (mut bits, mut bytes) = (vec![0.0; siftdb::NUM_LEVELS], 0);
    for line in stats.lines().skip_while(|l| !l.starts_with("level filter")) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let level = fields.first().and_then(|f| f.strip_prefix('L'));
        match (
            level.and_then(|l| l.parse::<usize>().ok()),
            fields.get(4..6),
        ) {
            (Some(l), Some([b, k])) if l < bits.len() => {
                bytes += b.parse::<u64>().unwrap();
                bits[l] = k.parse().unwrap();
            }
            _ if line.trim().is_empty() => break,
            _ => {}
        }
    }
    (bits, bytes)
}

/// Two stores hold 60,000 old keys in L2 and 15,000 new ones, after them in key order, in L1; one
/// is asked 20,000 absent keys, four in five among the old keys. Its L1 is met by a fifth of
/// them: when the next writes rewrite L1, it takes about 2.3 bits per key less than the other
/// store's, whose absent Gets are too few to weigh (none), L2 a little more, and the filter
/// memory of the two stays within 2 %.
#[test]
fn a_level_absent_gets_seldom_meet_gets_fewer_bits() {
    let dirs = [scratch(), scratch()];
    let dbs = dirs
        .each_ref()
        .map(|d| Db::open(d.path(), options()).unwrap());
    for db in &dbs {
        put_shuffled(db, "old", OLD, 1);
        db.compact().unwrap();
        put_shuffled(db, "new", NEW, 3);
        let tables = common::tables_per_level(db);
        assert!(
            tables[1] > 0 && tables[2] > 0 && tables[3..].iter().all(|&n| n == 0),
            "{tables:?}"
        );
    }
    let [asked, control] = &dbs;
    let mut rng = StdRng::seed_from_u64(5);
    for j in 0..20_000u32 {
        let absent = match j % 5 {
            0 => format!("new{:08}-", rng.gen_range(0..NEW)),
            _ => format!("old{:08}-", rng.gen_range(0..OLD)),
        };
        assert_eq!(asked.get(absent).unwrap(), None);
    }
    let stats = asked.statistics();
    assert_eq!(stats.absent_gets_in_tables(), 20_000);
    let l1 = stats.absent_get_coverage(1).unwrap();
    let l2 = stats.absent_get_coverage(2).unwrap();
    assert!(
        (l1 - 0.2).abs() < 0.02 && (l2 - 0.8).abs() < 0.02,
        "L1 {l1}, L2 {l2}"
    );
    assert!(asked
        .property("siftdb.stats")
        .unwrap()
        .contains("absent Gets meeting each level's run (20000 absent Gets): L1 0.2"));

    // New keys overwritten across L1's range: L0's merge rewrites every L1 table.
    for db in &dbs {
        put_shuffled(db, "new", NEW / 50, 7);
    }
    let ((a, fa), (c, fc)) = (filters_per_level(asked), filters_per_level(control));
    eprintln!("bits per key, L1 and L2: asked {a:?}, control {c:?}");
    // Effective keys 15,000 / 0.2 against 60,000 / 0.8: ln 4 / (ln 2)² = 2.9 bits per key less
    // between L1 and L2 than in the control's plan, L1 holding a fifth of the keys.
    assert!(
        a[1] < c[1] - 1.5 && a[1] > c[1] - 2.9,
        "L1: {} against {}",
        a[1],
        c[1]
    );
    assert!(
        (fa as f64 - fc as f64).abs() <= 0.02 * fc as f64,
        "filter bytes {fa} against {fc}"
    );
    assert!(a[2] > c[2], "L2: {} against {}", a[2], c[2]);
}

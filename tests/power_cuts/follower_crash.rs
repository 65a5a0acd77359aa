//! A follower's power cut: the power fails inside a follower's catch-up (or its open), among the
//! links it makes to the writer's tables and removes once its versions let go of them. The
//! follower's directory comes back as the fault-injection layer says a machine could bring it
//! back (links made since its last directory fsync there or not), and a follower opened on it
//! again must read exactly the writer's state, holding links to the tables its version lists and
//! no others. The writer's own directory is not cut here: what a power cut does to a writer is
//! the other loops'.
//!
//! Short mode (plain `cargo test`): 40 cuts. `SIFTDB_LONG=1`: 1,000;
//! `SIFTDB_FOLLOWER_CUTS=n`: any number.

use crate::common;
use common::power_cuts::tiny_options as tiny;
use common::{env_number, long, tables_per_level};
use std::path::Path;

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::fault_injection::{FaultInjector, PowerCut};
use siftdb::Db;

fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter().map(|kv| kv.unwrap()).collect()
}

fn links(own: &Path) -> usize {
    std::fs::read_dir(own)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".sst")
        })
        .count()
}

#[test]
fn a_follower_cut_off_mid_catch_up_reopens_and_catches_up() {
    let cuts = env_number("SIFTDB_FOLLOWER_CUTS", if long() { 1_000 } else { 40 });
    let dir = tempfile::tempdir().unwrap();
    let (primary, own) = (dir.path().join("db"), dir.path().join("follower"));
    std::fs::create_dir(&own).unwrap();
    let db = Db::open(&primary, tiny()).unwrap();
    let mut rng = StdRng::seed_from_u64(21);
    let mut next = 0u64;
    let (mut cut_inside, mut caught) = (0, 0);
    for cut in 0..cuts {
        let faults = FaultInjector::new(&own).unwrap();
        let during_open = rng.gen_bool(0.2);
        if during_open {
            faults.cut_after(rng.gen_range(0..30), Box::new(|_| true));
        }
        let follower = Db::open_follower(&primary, &own, tiny().fault_injector(faults.clone()));
        if let Ok(follower) = follower {
            for _ in 0..rng.gen_range(50..400) {
                let k = rng.gen_range(0..600u64);
                db.put(format!("key{k:04}"), format!("{next}-{}", "v".repeat(50)))
                    .unwrap();
                if rng.gen_ratio(1, 10) {
                    db.delete(format!("key{:04}", rng.gen_range(0..600u64)))
                        .unwrap();
                }
                next += 1;
            }
            if rng.gen_ratio(1, 4) {
                db.compact().unwrap();
            }
            if !during_open {
                faults.cut_after(rng.gen_range(0..12), Box::new(|_| true));
            }
            match follower.catch_up() {
                Ok(_) => caught += 1,
                // The machine died inside it: the follower keeps its earlier view, readable.
                Err(_) => {
                    cut_inside += 1;
                    assert!(follower.iter().all(|kv| kv.is_ok()), "cut {cut}");
                }
            }
        }
        faults.power_cut(PowerCut::random(cut)).unwrap();
        let follower = Db::open_follower(&primary, &own, tiny()).unwrap();
        assert_eq!(contents(&follower), contents(&db), "after cut {cut}");
        assert_eq!(
            links(&own),
            tables_per_level(&follower).iter().sum::<usize>(),
            "after cut {cut}"
        );
    }
    println!("{cuts} power cuts: {cut_inside} inside a catch-up, {caught} after one finished");
    assert!(
        cut_inside > 0 && caught > 0,
        "{cut_inside} cut inside, {caught} caught up"
    );
}

//! Monkey's per-level filter allocation against uniform bits/key on a tree that grows, and the
//! "no filter on the last level" option.
//!
//! The growth test builds the same tree twice, once per allocation, in flush-and-settle steps at
//! the size of the issue that asked for it (200,000 keys, 256 KiB memtables, 1 MiB level base,
//! 8 bits/key, L0 kept when writes pause), and checks that Monkey spends the filter memory uniform
//! spends (within 2 %) at every step, and wastes fewer data-block reads on missing keys than
//! uniform: by theory over all steps, measured over the steps where Monkey's optimum gains most,
//! and measured at the end. The tree is built in a few seconds even in a debug
//! build, so plain `cargo test` runs it at full size and only asks fewer absent keys per step
//! (2,000, and 20,000 at the last); `SIFTDB_LONG=1` asks 20,000 at every step.
//!
//! The same tree filled in one go, with no settling between memtables, checks Monkey's memory
//! beside uniform's while the writes flow, and that once they pause the filters far from their
//! level's bits are rewritten so that the settled tree is near its optimum.

use crate::common;
use common::scratch;
use common::{settle, tables_per_level};

use std::fmt::Write as _;

use rand::{rngs::StdRng, seq::SliceRandom, Rng, SeedableRng};
use siftdb::{Db, Filter, FilterAllocation, Options, Ticker};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:09}").into_bytes()
}

fn absent(i: u32) -> Vec<u8> {
    format!("key{i:09}-").into_bytes()
}

struct Outcome {
    filter_bytes: u64,
    missing_data_blocks_per_get: f64,
    hit_data_blocks_per_get: f64,
}

fn run(options: Options) -> Outcome {
    // ~100k entries of ~60 incompressible bytes: about 6 MB, which fills L1..L4 (64 KiB × 4ⁿ)
    // to roughly their target sizes.
    let n = 100_000u32;
    let dir = scratch();
    let db = Db::open(dir.path(), options).unwrap();
    let mut order: Vec<u32> = (0..n).collect();
    order.shuffle(&mut StdRng::seed_from_u64(7));
    let mut rng = StdRng::seed_from_u64(11);
    for chunk in order.chunks(1000) {
        for &i in chunk {
            let mut value = [0u8; 40];
            rng.fill(&mut value[..]);
            db.put(key(i), value).unwrap();
        }
        db.flush().unwrap();
        settle(&db);
    }
    // Opens every table, so the gauge below counts every filter.
    db.property("siftdb.stats").unwrap();
    let before = db.statistics();
    let probes = 100_000u32;
    for j in 0..probes {
        assert_eq!(db.get(absent((j * 7) % n)).unwrap(), None);
    }
    let missing = db.statistics().since(&before);
    let before = db.statistics();
    for j in 0..20_000u32 {
        assert!(db.get(key((j * 13) % n)).unwrap().is_some());
    }
    let hits = db.statistics().since(&before);
    Outcome {
        filter_bytes: db.statistics().filter_bytes_in_memory(),
        missing_data_blocks_per_get: missing.ticker(Ticker::DataBlocksRead) as f64
            / f64::from(probes),
        hit_data_blocks_per_get: hits.ticker(Ticker::DataBlocksRead) as f64 / 20_000.0,
    }
}

fn options(bits_per_key: f64) -> Options {
    Options::default()
        .write_buffer_size(256 << 10)
        .target_file_size(64 << 10)
        .max_bytes_for_level_base(64 << 10)
        .level_size_multiplier(4)
        .level0_compaction_trigger(1)
        .filter(Filter::full(bits_per_key))
}

/// A tree grown in flush-and-settle steps.
struct Growth {
    keys: u32,
    keys_per_step: u32,
    write_buffer_size: usize,
    level_base: u64,
    bits_per_key: f64,
    /// Gets of absent keys per step and store, and at the last step.
    probes: u32,
    last_probes: u32,
}

/// The small-memtable tree: 200,000 keys of 16 bytes with 100-byte values, 256 KiB memtables, 1 MiB level
/// base (L1 1 MiB, L2 10 MiB, ten-fold), 2 MiB tables, L0 compaction at 4 tables, 8 bits/key, full
/// filters. A step writes 1,400 keys (about 190 KiB: one memtable, which holds about 1,450),
/// flushes and waits for compactions to settle: 143 steps, one L0 table each, and four levels at
/// the end.
const SMALL_MEMTABLES: Growth = Growth {
    keys: 200_000,
    keys_per_step: 1_400,
    write_buffer_size: 256 << 10,
    level_base: 1 << 20,
    bits_per_key: 8.0,
    probes: 2_000,
    last_probes: 20_000,
};

/// What one store looked like after one step.
#[derive(Clone, Default)]
struct Snapshot {
    files_per_level: Vec<usize>,
    /// Entries per level (L0 first), from `siftdb.stats`.
    entries_per_level: Vec<u64>,
    filter_bytes: u64,
    /// Data-block reads per Get of an absent key that a filter said "maybe" to.
    wasted_reads: f64,
    /// The same expected from the filters' theory (one per run a key meets), from `siftdb.stats`:
    /// at uniform's bits per key, at the tables', and at Monkey's optimum for this shape at
    /// uniform's memory.
    expected: Expected,
}

/// Wasted reads per missing Get expected from the filters' theory, from `siftdb.stats`.
#[derive(Clone, Copy, Default)]
struct Expected {
    uniform: f64,
    tables: f64,
    optimum: f64,
}

impl Snapshot {
    fn shape(&self) -> String {
        let deepest = self
            .files_per_level
            .iter()
            .rposition(|&n| n > 0)
            .unwrap_or(0);
        self.files_per_level[..=deepest]
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The fewest wasted reads any allocation of the same filter memory could give this tree, over
    /// uniform's: Monkey's optimum, from the runs' sizes alone. A missing key meets each L0 table
    /// and each deeper level once; with a bloom's rate `p = e^(−b·(ln 2)²)` for `b` bits/key,
    /// uniform wastes `k · p` for `k` runs, and rates proportional to the runs' entries `nᵢ`
    /// (`N` in all) at the same memory waste `N · p / Π nᵢ^(nᵢ/N)`: the ratio is the runs' mean
    /// size over their size-weighted geometric mean, 1 when the runs are equal. L0 tables count as
    /// equal runs (each is one flush).
    fn optimum_over_uniform(&self) -> f64 {
        let mut runs: Vec<f64> = Vec::new();
        for (level, (&tables, &entries)) in self
            .files_per_level
            .iter()
            .zip(&self.entries_per_level)
            .enumerate()
        {
            if tables == 0 || entries == 0 {
                continue;
            }
            if level == 0 {
                runs.extend(std::iter::repeat_n(entries as f64 / tables as f64, tables));
            } else {
                runs.push(entries as f64);
            }
        }
        let n: f64 = runs.iter().sum();
        if runs.is_empty() || n <= 0.0 {
            return 1.0;
        }
        let log_geometric: f64 = runs.iter().map(|&r| r / n * r.ln()).sum();
        n / runs.len() as f64 / log_geometric.exp()
    }

    /// Levels below L0 that hold tables.
    fn deeper_levels(&self) -> usize {
        self.files_per_level
            .iter()
            .skip(1)
            .filter(|&&n| n > 0)
            .count()
    }
}

struct Step {
    keys: u32,
    monkey: Snapshot,
    uniform: Snapshot,
}

fn growth_options(g: &Growth, allocation: FilterAllocation) -> Options {
    Options::default()
        .write_buffer_size(g.write_buffer_size)
        .max_bytes_for_level_base(g.level_base)
        // Levels four times apart, so that the keys reach L3: L2 moves into L3 whole once it
        // holds L3's budget.
        .level_size_multiplier(4)
        .filter(Filter::full(g.bits_per_key))
        .filter_allocation(allocation)
        // Each step measures the tree its writes built: the reads that measure it must not
        // compact its L0 while the other store's stays.
        .compact_l0_for_reads(false)
        .compact_l0_when_idle(false)
}

/// Grows a Monkey store and a uniform store in lockstep, the same keys and values in the same
/// steps, and takes both stores' measure after every step.
fn grow(g: &Growth) -> Vec<Step> {
    let dirs = [common::scratch(), common::scratch()];
    let dbs = [
        Db::open(dirs[0].path(), growth_options(g, FilterAllocation::Monkey)).unwrap(),
        Db::open(dirs[1].path(), growth_options(g, FilterAllocation::Uniform)).unwrap(),
    ];
    // Present keys are even, absent keys the odd numbers between them (16-byte decimals), so an
    // absent key lies inside some table's range and only a filter can spare its data-block read.
    let missing = |i: u32| format!("{:016}", 2 * u64::from(i) + 1).into_bytes();
    let mut order: Vec<u32> = (0..g.keys).collect();
    order.shuffle(&mut StdRng::seed_from_u64(7));
    let mut values = StdRng::seed_from_u64(11);
    let mut probes = StdRng::seed_from_u64(13);
    let chunks: Vec<&[u32]> = order.chunks(g.keys_per_step as usize).collect();
    let mut steps = Vec::new();
    for (n, chunk) in chunks.iter().enumerate() {
        for &i in *chunk {
            let mut value = [0u8; 100];
            values.fill(&mut value[..]);
            for db in &dbs {
                db.put(even_key(i), value).unwrap();
            }
        }
        for db in &dbs {
            db.flush().unwrap();
        }
        for db in &dbs {
            settle(db);
        }
        let written = u32::try_from((n + 1) * g.keys_per_step as usize)
            .unwrap_or(g.keys)
            .min(g.keys);
        let count = if n + 1 == chunks.len() {
            g.last_probes
        } else {
            g.probes
        };
        let absent: Vec<Vec<u8>> = (0..count)
            .map(|_| missing(probes.gen_range(0..written)))
            .collect();
        let [monkey, uniform] = [&dbs[0], &dbs[1]].map(|db| {
            let mut s = Snapshot {
                files_per_level: tables_per_level(db),
                entries_per_level: entries_per_level(db),
                filter_bytes: live_filter_bytes(db),
                wasted_reads: 0.0,
                expected: expected_waste(db),
            };
            let before = db.statistics();
            for k in &absent {
                assert_eq!(db.get(k).unwrap(), None);
            }
            let t = db.statistics().since(&before).filter_totals();
            s.wasted_reads = (t.positive - t.true_positive) as f64 / absent.len() as f64;
            s
        });
        steps.push(Step {
            keys: written,
            monkey,
            uniform,
        });
    }
    steps
}

/// Entries per level, L0 first, from the first table of `siftdb.stats` (levels it leaves out are
/// empty).
fn entries_per_level(db: &Db) -> Vec<u64> {
    let report = db.property("siftdb.stats").unwrap();
    let mut entries = vec![0; siftdb::NUM_LEVELS];
    for line in report.lines().skip(1).take_while(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let level: usize = fields[0].trim_start_matches('L').parse().unwrap();
        entries[level] = fields[3].parse().unwrap();
    }
    entries
}

/// The expected wasted reads per missing Get at uniform's bits, at the tables' and at Monkey's
/// optimum, from the `all` row of `siftdb.stats`' filter allocation table (columns
/// `uniform tables monkey measured` at its end).
fn expected_waste(db: &Db) -> Expected {
    let report = db.property("siftdb.stats").unwrap();
    let all = report
        .lines()
        .skip_while(|l| !l.starts_with("filter allocation"))
        .find(|l| l.starts_with("all "))
        .expect("siftdb.stats has a filter allocation table");
    let fields: Vec<f64> = all
        .split_whitespace()
        .rev()
        .take(4)
        .map(|f| f.parse().unwrap())
        .collect();
    Expected {
        uniform: fields[3],
        tables: fields[2],
        optimum: fields[1],
    }
}

/// The filter bytes of the tables of the current version, summed from `siftdb.stats` (which reads
/// every live table's properties). The `filter.bytes.in.memory` gauge would also count tables a
/// finished compaction still holds for a moment.
fn live_filter_bytes(db: &Db) -> u64 {
    let report = db.property("siftdb.stats").unwrap();
    let mut lines = report.lines().skip_while(|l| !l.contains("filter-bytes"));
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let column = header.iter().position(|c| *c == "filter-bytes").unwrap();
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            l.split_whitespace()
                .nth(column)
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum()
}

/// The steps as a Markdown table, printed with `--nocapture`.
fn table(steps: &[Step]) -> String {
    let mut out = String::from(
        "| step | keys | tables per level (L0/L1/…) | Monkey filter bytes | uniform | Monkey − uniform | wasted reads per missing Get, Monkey | uniform | Monkey / uniform | optimum / uniform | Monkey expected / optimum |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for (n, s) in steps.iter().enumerate() {
        let shape = if s.monkey.shape() == s.uniform.shape() {
            s.monkey.shape()
        } else {
            format!("{} (uniform {})", s.monkey.shape(), s.uniform.shape())
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:+.2} % | {:.4} | {:.4} | {:.2} | {:.2} | {:.2} |",
            n + 1,
            s.keys,
            shape,
            s.monkey.filter_bytes,
            s.uniform.filter_bytes,
            (s.monkey.filter_bytes as f64 / s.uniform.filter_bytes as f64 - 1.0) * 100.0,
            s.monkey.wasted_reads,
            s.uniform.wasted_reads,
            s.monkey.wasted_reads / s.uniform.wasted_reads.max(f64::MIN_POSITIVE),
            s.uniform.optimum_over_uniform(),
            s.monkey.expected.tables / s.monkey.expected.optimum
        );
    }
    out
}

/// Monkey's targets on the small-memtable tree. Plain `cargo test` asks 2,000 absent keys per step and store
/// (20,000 at the last step); `SIFTDB_LONG=1` asks 20,000 at every step. The tree, and so every
/// filter, is the same in both: the steps settle before the next one is written.
#[test]
fn monkey_keeps_uniforms_memory_and_wastes_fewer_reads_as_the_tree_grows() {
    let g = if common::long() {
        Growth {
            probes: 20_000,
            ..SMALL_MEMTABLES
        }
    } else {
        SMALL_MEMTABLES
    };
    let steps = grow(&g);
    eprintln!("{}", table(&steps));
    // At most 2 % more memory than uniform at every step (each step settles): the bound the rule
    // holds.
    for (n, s) in steps.iter().enumerate() {
        let ratio = s.monkey.filter_bytes as f64 / s.uniform.filter_bytes as f64;
        assert!(
            ratio - 1.0 <= 0.02,
            "step {}: Monkey spends {} filter bytes, uniform {} ({:+.2} %)",
            n + 1,
            s.monkey.filter_bytes,
            s.uniform.filter_bytes,
            (ratio - 1.0) * 100.0
        );
    }
    let last = steps.last().unwrap();
    assert!(
        last.monkey.deeper_levels() >= 3,
        "the tree should reach L3: {}",
        last.monkey.shape()
    );
    // By theory, free of the probes' noise: the tables' bits waste, summed over every step, at
    // most 0.85 × what uniform's bits would on the same shapes (about 0.75 ×; Monkey's optimum
    // about 0.55 ×). Tables keep older plans' bits, and the bound holds L0 back where they
    // overspend, so the rule does not reach the optimum on a tree that keeps growing.
    let sum = |f: &dyn Fn(&Step) -> f64| steps.iter().map(f).sum::<f64>();
    let (tables, uniform, optimum) = (
        sum(&|s| s.monkey.expected.tables),
        sum(&|s| s.monkey.expected.uniform),
        sum(&|s| s.monkey.expected.optimum),
    );
    eprintln!(
        "expected over all steps: the tables {:.2} × uniform's, {:.2} × the optimum's",
        tables / uniform,
        tables / optimum
    );
    assert!(
        tables <= 0.85 * uniform,
        "by theory the tables waste {:.2} × uniform's reads over the steps",
        tables / uniform
    );
    // Measured, summed over the steps where the optimum allocation of that memory wastes at most
    // 0.6 × uniform's (at the others Monkey's own optimum leaves little to gain): at most 0.8 ×
    // (about 0.72 ×).
    let reachable: Vec<&Step> = steps
        .iter()
        .filter(|s| s.uniform.optimum_over_uniform() <= 0.6)
        .collect();
    let monkey: f64 = reachable.iter().map(|s| s.monkey.wasted_reads).sum();
    let uniform: f64 = reachable.iter().map(|s| s.uniform.wasted_reads).sum();
    eprintln!(
        "measured over the {} steps whose optimum is at most 0.6 × uniform: {:.2} × uniform's",
        reachable.len(),
        monkey / uniform.max(f64::MIN_POSITIVE)
    );
    assert!(
        !reachable.is_empty() && monkey <= 0.8 * uniform,
        "over the {} steps whose optimum is at most 0.6 × uniform, Monkey wastes {:.4} reads per \
         missing Get on average, uniform {:.4}",
        reachable.len(),
        monkey / reachable.len().max(1) as f64,
        uniform / reachable.len().max(1) as f64
    );
    // One step's figure moves with the tree's exact shape (0.73–1.07 × uniform over the last
    // steps); at the end, with 20,000 absent keys asked, Monkey must waste fewer.
    assert!(
        last.monkey.wasted_reads < last.uniform.wasted_reads,
        "at the end Monkey wastes {:.4} data-block reads per missing Get, uniform {:.4}",
        last.monkey.wasted_reads,
        last.uniform.wasted_reads
    );
}

#[test]
fn no_filter_on_the_last_level_saves_memory_and_costs_hits_nothing() {
    let with = run(options(8.0));
    let without = run(options(8.0).no_filter_on_last_level(true));
    eprintln!(
        "filters everywhere: {} bytes, {:.3} blocks/missing Get, {:.3} blocks/hit\nnone on last level: {} bytes, {:.3} blocks/missing Get, {:.3} blocks/hit",
        with.filter_bytes,
        with.missing_data_blocks_per_get,
        with.hit_data_blocks_per_get,
        without.filter_bytes,
        without.missing_data_blocks_per_get,
        without.hit_data_blocks_per_get
    );
    assert!(
        without.filter_bytes * 2 < with.filter_bytes,
        "the last level holds most keys"
    );
    // Hits read one data block either way (plus rare false positives above them).
    assert!(without.hit_data_blocks_per_get <= with.hit_data_blocks_per_get + 0.01);
    // Misses now read the last level's block.
    assert!(without.missing_data_blocks_per_get > with.missing_data_blocks_per_get);
}

/// Every key is found, and no absent one, through flushes, compactions and reopens that change the
/// allocation and the bits per key: tables keep the filters they were built with.
#[test]
fn no_false_negatives_as_the_allocation_changes() {
    let dir = common::scratch();
    let opts = |allocation, bits| {
        Options::default()
            .write_buffer_size(64 << 10)
            .target_file_size(32 << 10)
            .max_bytes_for_level_base(256 << 10)
            .filter(Filter::full(bits))
            .filter_allocation(allocation)
    };
    let present = |i: u32| format!("{:012}", 2 * u64::from(i)).into_bytes();
    let absent = |i: u32| format!("{:012}", 2 * u64::from(i) + 1).into_bytes();
    let rounds = [
        (FilterAllocation::Monkey, 8.0),
        (FilterAllocation::Uniform, 10.0),
        (FilterAllocation::Monkey, 5.0),
        (FilterAllocation::Monkey, 14.0),
    ];
    let per_round = 8_000u32;
    for (round, &(allocation, bits)) in rounds.iter().enumerate() {
        let db = Db::open(dir.path(), opts(allocation, bits)).unwrap();
        let start = u32::try_from(round).unwrap() * per_round;
        // New keys, and overwrites of the previous round's, so compactions merge old tables.
        for i in start..start + per_round {
            db.put(present(i), i.to_le_bytes()).unwrap();
            if i >= per_round {
                let old = i - per_round;
                db.put(present(old), old.to_le_bytes()).unwrap();
            }
        }
        db.flush().unwrap();
        settle(&db);
        if round == 2 {
            db.compact().unwrap();
        }
        let written = start + per_round;
        for i in 0..written {
            let got = db.get(present(i)).unwrap();
            assert_eq!(
                got.as_deref(),
                Some(&i.to_le_bytes()[..]),
                "round {round}, key {i}"
            );
        }
        for i in (0..written).step_by(7) {
            assert_eq!(db.get(absent(i)).unwrap(), None);
        }
        if round != 2 {
            // Several tables, so the Gets above met filters built at several allocations.
            assert!(tables_per_level(&db).iter().sum::<usize>() > 1);
        }
    }
}

/// A store of the small-memtable tree's options under `allocation`, L0 merged when writes pause.
fn open_small_memtables(dir: &std::path::Path, allocation: FilterAllocation) -> Db {
    let g = &SMALL_MEMTABLES;
    let options = Options::default()
        .write_buffer_size(g.write_buffer_size)
        .max_bytes_for_level_base(g.level_base)
        // Levels four times apart, so that the keys reach L3: L2 moves into L3 whole once it
        // holds L3's budget.
        .level_size_multiplier(4)
        .filter(Filter::full(g.bits_per_key))
        .filter_allocation(allocation);
    Db::open(dir, options).unwrap()
}

/// A Monkey store and a uniform one of the small-memtable tree's options, in new directories.
fn small_memtable_pair() -> ([tempfile::TempDir; 2], [Db; 2]) {
    let dirs = [common::scratch(), common::scratch()];
    let dbs = [
        open_small_memtables(dirs[0].path(), FilterAllocation::Monkey),
        open_small_memtables(dirs[1].path(), FilterAllocation::Uniform),
    ];
    (dirs, dbs)
}

/// The order the keys are put in by [`fill_in_one_go`].
enum KeyOrder {
    Random,
    Ascending,
}

/// Puts the small-memtable tree's keys (even 16-byte decimals, in `order`) into both stores in
/// one go, with no flush or settling between; `each_step` sees both after every memtable's worth.
fn fill_in_one_go(dbs: &[Db; 2], order: KeyOrder, mut each_step: impl FnMut(&[Db; 2])) {
    let g = &SMALL_MEMTABLES;
    let mut keys: Vec<u32> = (0..g.keys).collect();
    if let KeyOrder::Random = order {
        keys.shuffle(&mut StdRng::seed_from_u64(7));
    }
    let mut values = StdRng::seed_from_u64(11);
    for chunk in keys.chunks(g.keys_per_step as usize) {
        for &i in chunk {
            let mut value = [0u8; 100];
            values.fill(&mut value[..]);
            for db in dbs {
                db.put(even_key(i), value).unwrap();
            }
        }
        each_step(dbs);
    }
}

fn even_key(i: u32) -> Vec<u8> {
    format!("{:016}", 2 * u64::from(i)).into_bytes()
}

/// Filters returned to their level's bits once writes pause: a tree filled in one go, where
/// tables move down to young levels keeping the bits of the level above, settles with its
/// tables' expected waste within 1.15 × Monkey's optimum for its shape and its filter memory
/// within 2 % of a uniform store's, the filters far from their level's rewritten in place.
#[test]
fn filters_far_from_their_levels_bits_are_rewritten_once_writes_pause() {
    let (dirs, dbs) = small_memtable_pair();
    fill_in_one_go(&dbs, KeyOrder::Random, |_| {});
    for db in &dbs {
        db.flush().unwrap();
        settle(db);
    }
    let [monkey, uniform] = &dbs;
    // How many tables moved down, and so how many refreshes follow, depends on how compactions
    // and puts interleaved; the next test moves every table, and asserts the refreshes.
    let refreshes = monkey.statistics().ticker(Ticker::FilterRefreshes);
    assert_eq!(uniform.statistics().ticker(Ticker::FilterRefreshes), 0);
    let expected = expected_waste(monkey);
    eprintln!(
        "{refreshes} tables refreshed; tables {}; expected waste {:.4}, optimum {:.4}, uniform {:.4}",
        Snapshot {
            files_per_level: tables_per_level(monkey),
            ..Snapshot::default()
        }
        .shape(),
        expected.tables,
        expected.optimum,
        expected.uniform
    );
    assert!(
        expected.tables <= 1.15 * expected.optimum,
        "the settled tables waste {:.2} × the optimum's reads",
        expected.tables / expected.optimum
    );
    let (m, u) = (live_filter_bytes(monkey), live_filter_bytes(uniform));
    assert!(
        m as f64 <= 1.02 * u as f64,
        "Monkey spends {m} filter bytes, uniform {u}"
    );
    // Nor much less: a table refreshed while others still overspent, which the memory bound held
    // below its plan, is refreshed again once they are done.
    assert!(
        m as f64 >= 0.98 * u as f64,
        "Monkey spends {m} filter bytes, uniform {u}"
    );
    // No false negative through the rewrites, nor after a reopen.
    drop(dbs);
    let monkey = open_small_memtables(dirs[0].path(), FilterAllocation::Monkey);
    for i in (0..SMALL_MEMTABLES.keys).step_by(3) {
        assert!(monkey.get(even_key(i)).unwrap().is_some(), "key {i}");
    }
}

/// Keys put in order never overlap a table below, so every compaction moves its tables down with
/// the filters of the level above: once writes pause, refreshes rewrite them, and the settled tree
/// wastes at most 1.15 × Monkey's optimum for its shape, within 3 % of a uniform store's filter
/// bytes.
#[test]
fn tables_moved_down_in_order_are_refreshed_to_their_levels_bits() {
    let (_dirs, dbs) = small_memtable_pair();
    fill_in_one_go(&dbs, KeyOrder::Ascending, |_| {});
    for db in &dbs {
        db.flush().unwrap();
        settle(db);
    }
    let [monkey, uniform] = &dbs;
    let stats = monkey.statistics();
    assert!(
        stats.ticker(Ticker::TrivialMoves) > 0,
        "no table moved down"
    );
    let refreshes = stats.ticker(Ticker::FilterRefreshes);
    assert!(refreshes > 0, "no filter was refreshed");
    let expected = expected_waste(monkey);
    let (m, u) = (live_filter_bytes(monkey), live_filter_bytes(uniform));
    eprintln!(
        "{refreshes} refreshes after {} moves; tables {}; expected waste {:.4}, optimum {:.4}; \
         filter bytes {m}, uniform's {u}",
        stats.ticker(Ticker::TrivialMoves),
        Snapshot {
            files_per_level: tables_per_level(monkey),
            ..Snapshot::default()
        }
        .shape(),
        expected.tables,
        expected.optimum,
    );
    assert!(
        expected.tables <= 1.15 * expected.optimum,
        "the settled tables waste {:.2} × the optimum's reads",
        expected.tables / expected.optimum
    );
    // 2.1–2.3 % over here, a little past the 2 % a random-order fill keeps (above).
    assert!(
        m as f64 <= 1.03 * u as f64,
        "Monkey spends {m} filter bytes, uniform {u}"
    );
    for i in (0..SMALL_MEMTABLES.keys).step_by(7) {
        assert!(monkey.get(even_key(i)).unwrap().is_some(), "key {i}");
    }
}

/// While writes flow, tables move down keeping their filters and L0 takes bits for the tree as it
/// is: a tree filled in one go, sampled after every memtable's worth of puts beside a uniform
/// store given the same writes, spends on average over the fill at most 5 % more filter bits per
/// key than uniform's, and at most 25 % more at any sample (about 10–15 %: the moments when a
/// compaction's inputs and the tables flushed meanwhile both hold their extra bits, or a table
/// has just moved down with the bits of the level above).
#[test]
fn monkey_stays_near_uniforms_memory_while_writes_flow() {
    let (_dirs, dbs) = small_memtable_pair();
    let bits_per_key = |db: &Db| {
        let entries: u64 = entries_per_level(db).iter().sum();
        live_filter_bytes(db) as f64 * 8.0 / entries.max(1) as f64
    };
    let mut ratios = Vec::new();
    fill_in_one_go(&dbs, KeyOrder::Random, |dbs| {
        let [monkey, uniform] = [&dbs[0], &dbs[1]].map(bits_per_key);
        if uniform > 0.0 {
            ratios.push(monkey / uniform);
        }
    });
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    let worst = ratios.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "{} samples while writes flowed: Monkey's bits per key {:+.2} % over uniform's on average, \
         {:+.2} % at most",
        ratios.len(),
        (mean - 1.0) * 100.0,
        (worst - 1.0) * 100.0
    );
    assert!(
        mean <= 1.05,
        "on average {mean:.3} × uniform's bits per key"
    );
    assert!(worst <= 1.25, "at most {worst:.3} × uniform's bits per key");
}

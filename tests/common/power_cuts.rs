//! The pieces of the power-cut loops: where a life's cut is aimed, opening through cuts, the
//! power failing, and what the loop counts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::Rng;
use siftdb::fault_injection::{FaultInjector, OpFilter, OpKind, OpSite, PowerCut};
use siftdb::Db;

/// A loop's stores: every `per_epoch` cuts a new one starts from nothing in its own directory, with
/// its own fault injector, so that no store's history grows long.
pub struct Epochs {
    root: PathBuf,
    per_epoch: usize,
    /// The current epoch's number.
    pub number: usize,
    /// The current epoch's store directory.
    pub dir: PathBuf,
    /// The fault injector over `dir`.
    pub faults: FaultInjector,
}

impl Epochs {
    /// Epoch 0, in `root`.
    pub fn new(root: &Path, per_epoch: usize) -> Epochs {
        let dir = root.join("epoch0");
        Epochs {
            root: root.to_path_buf(),
            per_epoch,
            number: 0,
            faults: FaultInjector::new(&dir).unwrap(),
            dir,
        }
    }

    /// Moves to the epoch of cut number `cuts`; true if that starts a new store.
    pub fn advance(&mut self, cuts: usize) -> bool {
        let number = cuts / self.per_epoch;
        if number == self.number {
            return false;
        }
        self.number = number;
        self.dir = self.root.join(format!("epoch{number}"));
        self.faults = FaultInjector::new(&self.dir).unwrap();
        true
    }
}

/// The upkeep a loop's step `pick` (drawn from `0..200`) asks for: a flush (0–2), a compaction (3)
/// or a WAL sync (10–12), each of which makes every write acknowledged so far durable. `None` for
/// the other picks, which are the loop's own; `Some(Err(()))` if the upkeep failed (the machine
/// is stopping).
pub fn upkeep(db: &Db, pick: u32) -> Option<Result<(), ()>> {
    let done = match pick {
        0..=2 => db.flush(),
        3 => db.compact(),
        10..=12 => db.sync_wal(),
        _ => return None,
    };
    Some(done.map_err(|_| ()))
}

/// Where the cut of one life is aimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Aim {
    AnyOperation,
    TableFiles,
    ManifestOrCurrent,
    FlushThread,
    CompactionThread,
    InjectedError,
}

pub fn aim(rng: &mut StdRng, faults: &FaultInjector) -> Aim {
    let (aim, n, filter): (Aim, u64, OpFilter) = match rng.gen_range(0..12) {
        0..=3 => (Aim::AnyOperation, rng.gen_range(0..400), Box::new(|_| true)),
        4 | 5 => (
            Aim::TableFiles,
            rng.gen_range(0..40),
            Box::new(|s: &OpSite| s.file.ends_with(".sst")),
        ),
        6 | 7 => (
            Aim::ManifestOrCurrent,
            rng.gen_range(0..12),
            Box::new(|s: &OpSite| s.file.starts_with("MANIFEST") || s.file.starts_with("CURRENT")),
        ),
        8 => (
            Aim::FlushThread,
            rng.gen_range(0..30),
            Box::new(|s: &OpSite| s.thread == "siftdb-flush"),
        ),
        9 => (
            Aim::CompactionThread,
            rng.gen_range(0..30),
            // The compaction thread and the threads a compaction splits its key range between.
            Box::new(|s: &OpSite| s.thread.starts_with("siftdb-compact")),
        ),
        _ => {
            let kind = [
                OpKind::Write,
                OpKind::Sync,
                OpKind::Rename,
                OpKind::SyncDir,
                OpKind::Create,
                OpKind::Remove,
            ][rng.gen_range(0..6)];
            let n = rng.gen_range(0..20);
            faults.fail_after(n, Box::new(move |s: &OpSite| s.kind == kind));
            return Aim::InjectedError;
        }
    };
    faults.cut_after(n, filter);
    aim
}

#[derive(Default)]
pub struct Tally {
    pub cuts: usize,
    pub in_open: usize,
    pub process_crashes: usize,
    pub by_aim: BTreeMap<String, usize>,
    pub by_thread: BTreeMap<String, usize>,
    pub by_file: BTreeMap<String, usize>,
    pub injected: usize,
    pub batches_acked: usize,
    pub synced_acked: usize,
    pub batches_lost: usize,
    pub bytes_lost: u64,
    pub names_reverted: usize,
    pub read_compactions: u64,
    /// L0 merges into L1 started by a pause of the writes (`compaction.idle.l0`).
    pub idle_merges: u64,
}

impl Tally {
    /// Stops the machine (if the cut has not come yet) and counts where the cut landed and the
    /// errors injected since `injected_before` of them had been.
    pub fn machine_stops(&mut self, faults: &FaultInjector, injected_before: usize) {
        faults.kill();
        if let Some(site) = faults.cut_site() {
            *self.by_thread.entry(site.thread.clone()).or_default() += 1;
            *self
                .by_file
                .entry(file_kind(&site.file).into())
                .or_default() += 1;
        }
        self.injected += faults.injected().len() - injected_before;
    }
}

/// 4 KiB memtables and tables, 16 KiB levels, L0 compacted at 2 tables, 512-byte blocks: a store
/// whose flushes, compactions and WAL switches happen all the time, for cuts to land in.
pub fn tiny_options() -> siftdb::Options {
    siftdb::Options::default()
        .write_buffer_size(4096)
        .max_immutable_memtables(2)
        .target_file_size(4096)
        .max_bytes_for_level_base(16 << 10)
        .level_size_multiplier(4)
        .level0_compaction_trigger(2)
        .block_size(512)
}

pub fn file_kind(name: &str) -> &'static str {
    if name.ends_with(".log") {
        "WAL"
    } else if name.ends_with(".sst") {
        "table"
    } else if name.starts_with("MANIFEST") {
        "MANIFEST"
    } else if name.starts_with("CURRENT") {
        "CURRENT"
    } else {
        "directory"
    }
}

/// Opens the store with `open`, letting a cut armed inside open land; after each interrupted open the
/// machine fails again (a power cut or a process crash) and open is tried again. Returns the store
/// and whether the power was cut on the way.
pub fn open_through_cuts(
    faults: &FaultInjector,
    rng: &mut StdRng,
    tally: &mut Tally,
    what: &str,
    open: impl Fn() -> siftdb::Result<Db>,
) -> (Db, bool) {
    let mut power_cut = false;
    for attempt in 0.. {
        if attempt < 3 && rng.gen_bool(0.3) {
            faults.cut_after(rng.gen_range(0..40), Box::new(|_| true));
        }
        match open() {
            Ok(db) if !faults.is_dead() => {
                faults.revive(); // disarms a cut that open did not reach
                return (db, power_cut);
            }
            Ok(db) => {
                // Cut in open's last steps (removing obsolete files), which it does not wait for.
                drop(db);
            }
            Err(e) => {
                assert!(
                    faults.is_dead(),
                    "{what}: open failed without a cut (attempt {attempt}): {e}"
                );
            }
        }
        tally.in_open += 1;
        tally.cuts += 1;
        if let Some(site) = faults.cut_site() {
            *tally
                .by_file
                .entry(file_kind(&site.file).into())
                .or_default() += 1;
        }
        power_cut |= power_fails(faults, rng, tally);
    }
    unreachable!()
}

/// The machine goes down: a power cut (usually) or a process crash.
pub fn power_fails(faults: &FaultInjector, rng: &mut StdRng, tally: &mut Tally) -> bool {
    if rng.gen_bool(0.15) {
        tally.process_crashes += 1;
        faults.revive();
        return false;
    }
    let report = faults.power_cut(PowerCut::random(rng.r#gen())).unwrap();
    tally.bytes_lost += report.bytes_lost;
    tally.names_reverted += report.names_reverted;
    true
}

//! The timed phases: point lookups, batched lookups and short scans that find nothing, each
//! checking every answer.

use std::time::Instant;

use rand::rngs::StdRng;
use rand::Rng;

use crate::engines::{Concurrent, Store};
use crate::key_formats::{self, Keys};
use crate::read_while_writing::{self, Plan, ReadWhileWriting, Target, Until};
use crate::run::Workload;

/// `n` as a 16-byte zero-padded decimal, built on the stack: the harness's own cost per
/// operation is paid by every store alike, so it is kept small to not blur their ratios.
pub(crate) fn decimal_key(mut n: u64) -> [u8; 16] {
    let mut k = [b'0'; 16];
    for d in k.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}
pub(crate) fn rate(n: usize, start: Instant) -> f64 {
    n as f64 / start.elapsed().as_secs_f64()
}

#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Present,
    Missing,
    Mixed,
}

/// A random key of `kind` and whether it is present: `2i` are present, `2i + 1` absent.
pub(crate) fn draw(rng: &mut StdRng, keys: u64, kind: Kind) -> (u64, bool) {
    let i = rng.gen_range(0..keys);
    let present = match kind {
        Kind::Present => true,
        Kind::Missing => false,
        Kind::Mixed => rng.gen_bool(0.5),
    };
    (if present { 2 * i } else { 2 * i + 1 }, present)
}

/// `reads` random gets of one kind; checks every answer; returns ops/s.
pub(crate) fn reads_phase(
    name: &str,
    db: &mut dyn Store,
    rng: &mut StdRng,
    keys: u64,
    reads: usize,
    kind: Kind,
) -> f64 {
    let start = Instant::now();
    for _ in 0..reads {
        let (n, present) = draw(rng, keys, kind);
        if db.get(&decimal_key(n)) != present {
            panic!("{name}: wrong answer for key {n}");
        }
    }
    rate(reads, start)
}

/// `w.reads` random lookups of one kind, `w.batch` keys per batched lookup (the last batch may
/// be smaller); checks every answer; returns keys looked up per second.
pub(crate) fn multi_get_phase(
    name: &str,
    db: &mut dyn Store,
    rng: &mut StdRng,
    w: Workload,
    kind: Kind,
) -> f64 {
    let (keys, reads, batch) = (w.keys, w.reads, w.batch);
    let mut numbers = Vec::with_capacity(batch);
    let mut batch_keys = Vec::with_capacity(batch);
    let start = Instant::now();
    let mut done = 0;
    while done < reads {
        let len = batch.min(reads - done);
        numbers.clear();
        batch_keys.clear();
        for _ in 0..len {
            let (n, present) = draw(rng, keys, kind);
            numbers.push((n, present));
            batch_keys.push(decimal_key(n));
        }
        let found = db.multi_get(&batch_keys);
        assert_eq!(found.len(), len, "{name}: one answer per key");
        for (&(n, present), found) in numbers.iter().zip(found) {
            if found != present {
                panic!("{name}: wrong batched answer for key {n}");
            }
        }
        done += len;
    }
    rate(reads, start)
}

/// A store as the read-while-writing phase reaches it: decimal keys, a wrong answer a panic.
struct DecimalKeys<'a>(&'a dyn Concurrent);

impl Target for DecimalKeys<'_> {
    type Error = String;
    fn put(&self, n: u64, value: &[u8]) -> Result<(), String> {
        self.0.put(&decimal_key(n), value);
        Ok(())
    }
    fn get(&self, n: u64) -> Result<bool, String> {
        Ok(self.0.get(&decimal_key(n)))
    }
    fn l0_tables(&self) -> Option<usize> {
        self.0.l0_tables()
    }
    fn wrong_answer(&self, n: u64) -> String {
        format!("wrong answer for key {n}")
    }
}

/// One writer overwriting random present keys at full speed (values of `ratio`, 100 bytes) for
/// `w.read_while_writing_secs` seconds while `w.readers_while_writing` threads Get present and absent keys in turn.
pub(crate) fn read_while_writing_phase(
    name: &str,
    db: &dyn Store,
    w: Workload,
    ratio: f64,
) -> ReadWhileWriting {
    let plan = Plan {
        keys: w.keys,
        readers: w.readers_while_writing,
        until: Until::Elapsed(std::time::Duration::from_secs_f64(
            w.read_while_writing_secs,
        )),
        value_size: 100,
        compression_ratio: ratio,
        seed: 42,
    };
    read_while_writing::run(&DecimalKeys(db.concurrent()), plan)
        .unwrap_or_else(|e| panic!("{name} readwhilewriting: {e}"))
}

/// The short scans of a run: their widths, the keys, and every present key, sorted (to draw
/// ranges that hold none).
pub(crate) struct ScanPlan {
    pub(crate) widths: Vec<u64>,
    pub(crate) keys: Keys,
    pub(crate) present: Vec<Box<[u8]>>,
}

impl ScanPlan {
    pub(crate) fn new(widths: Vec<u64>, keys: Keys, count: u64) -> ScanPlan {
        let mut k = Vec::new();
        let mut present: Vec<Box<[u8]>> = (0..count)
            .map(|i| {
                keys.key(2 * i, &mut k);
                k.as_slice().into()
            })
            .collect();
        present.sort_unstable();
        ScanPlan {
            widths,
            keys,
            present,
        }
    }

    /// A range `[a, a + width)` holding no key: anywhere, or (`after_key`) just after a present
    /// key.
    pub(crate) fn draw_empty(
        &self,
        rng: &mut StdRng,
        width: u64,
        after_key: bool,
    ) -> (Vec<u8>, Vec<u8>) {
        let (mut from, mut to, mut k) = (Vec::new(), Vec::new(), Vec::new());
        loop {
            if after_key {
                let key = &self.present[rng.gen_range(0..self.present.len())];
                key_formats::plus(key, 1, &mut from);
            } else {
                self.keys.anywhere(rng, &mut k);
                from.clone_from(&k);
            }
            key_formats::plus(&from, width, &mut to);
            // At the top of its last 8 bytes a range would be cut short: drawn again.
            let mut top = Vec::new();
            key_formats::minus(&to, width, &mut top);
            if top != from {
                continue;
            }
            let next = self.present.partition_point(|x| **x < *from);
            if self.present.get(next).is_none_or(|x| **x >= *to) {
                return (from, to);
            }
        }
    }

    /// The phase names, `empty-after-` for ranges just after a key.
    pub(crate) fn phase_names(&self) -> Vec<String> {
        self.widths
            .iter()
            .flat_map(|w| [format!("empty-w{w}"), format!("empty-after-w{w}")])
            .collect()
    }
}

/// `reads` scans of `width` keys holding no key (anywhere, or `after_key`); checks each finds
/// nothing; returns scans per second.
pub(crate) fn empty_scans_phase(
    name: &str,
    db: &mut dyn Store,
    rng: &mut StdRng,
    plan: &ScanPlan,
    (reads, width, after_key): (usize, u64, bool),
) -> f64 {
    let ranges: Vec<(Vec<u8>, Vec<u8>)> = (0..reads)
        .map(|_| plan.draw_empty(rng, width, after_key))
        .collect();
    let start = Instant::now();
    for (from, to) in &ranges {
        let found = db.scan(from, to);
        if found != 0 {
            panic!("{name}: {found} entries in the empty range from {from:?}, width {width}");
        }
    }
    rate(reads, start)
}

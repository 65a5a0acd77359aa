//! db_bench's `readwhilewriting`, for any store: one writer overwrites random present keys at
//! full speed while reader threads Get present and absent keys in turn, and a watcher samples
//! the L0 table count every 10 ms.
//!
//! Key numbers follow the runners' convention: `2i` is present, `2i + 1` absent. A Get of a
//! present key that finds nothing, or of an absent key that finds something, is an error (the
//! writer only overwrites present keys, so the answers never change).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::value_generator::ValueGenerator;

/// When the readers stop.
#[derive(Clone, Copy, Debug)]
pub enum Until {
    /// After this many Gets in all, split between the readers.
    Gets(u64),
    /// After this long.
    Elapsed(Duration),
}

/// What the phase measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadWhileWriting {
    /// Gets of present keys, and the seconds the readers spent in them (summed over readers).
    pub present_gets: u64,
    pub present_secs: f64,
    /// Gets of absent keys, and the seconds the readers spent in them.
    pub missing_gets: u64,
    pub missing_secs: f64,
    /// Puts the writer made, and the seconds it ran.
    pub puts: u64,
    pub write_secs: f64,
    /// L0 tables seen by the watcher: the mean and the most of its samples (none if the store
    /// does not tell).
    pub l0_mean: Option<f64>,
    pub l0_max: Option<usize>,
    /// Wall seconds of the phase.
    pub secs: f64,
    /// Seconds the readers ran on a core, and waited for one (summed over readers; from Linux's
    /// `/proc/thread-self/schedstat`, none elsewhere).
    pub reader_cpu_secs: Option<f64>,
    pub reader_wait_secs: Option<f64>,
}

impl ReadWhileWriting {
    /// Present Gets per second of all readers: the readers' present Gets over their time in
    /// them, times the readers. Readers alternate present and absent keys, so each kind has about
    /// half of every reader's time.
    pub fn present_per_sec(&self, readers: usize) -> f64 {
        rate(self.present_gets, self.present_secs) * readers as f64
    }

    /// Absent Gets per second of all readers, as [`present_per_sec`](Self::present_per_sec).
    pub fn missing_per_sec(&self, readers: usize) -> f64 {
        rate(self.missing_gets, self.missing_secs) * readers as f64
    }

    /// Mean µs of one present Get.
    pub fn present_us(&self) -> f64 {
        self.present_secs * 1e6 / self.present_gets.max(1) as f64
    }

    /// Mean µs of one absent Get.
    pub fn missing_us(&self) -> f64 {
        self.missing_secs * 1e6 / self.missing_gets.max(1) as f64
    }

    /// µs a reader spent on a core per Get, both kinds.
    pub fn reader_cpu_us_per_get(&self) -> Option<f64> {
        let gets = (self.present_gets + self.missing_gets).max(1) as f64;
        Some(self.reader_cpu_secs? * 1e6 / gets)
    }

    /// The share of their time the readers ran on a core rather than waited for one.
    pub fn reader_on_core_share(&self) -> Option<f64> {
        let (cpu, wait) = (self.reader_cpu_secs?, self.reader_wait_secs?);
        Some(cpu / (cpu + wait).max(1e-9))
    }

    /// The writer's puts per second.
    pub fn puts_per_sec(&self) -> f64 {
        rate(self.puts, self.write_secs)
    }

    /// Mean µs of one put.
    pub fn put_us(&self) -> f64 {
        self.write_secs * 1e6 / self.puts.max(1) as f64
    }
}

fn rate(n: u64, secs: f64) -> f64 {
    n as f64 / secs.max(1e-9)
}

/// How the phase reaches a store: `put` writes key number `n`, `get` tells whether key number
/// `n` is found, `l0_tables` counts L0's tables now (if the store tells).
pub trait Target: Sync {
    /// An error of the store.
    type Error: Send;
    fn put(&self, n: u64, value: &[u8]) -> Result<(), Self::Error>;
    fn get(&self, n: u64) -> Result<bool, Self::Error>;
    fn l0_tables(&self) -> Option<usize>;
    /// The error a wrong answer for key number `n` is reported as.
    fn wrong_answer(&self, n: u64) -> Self::Error;
}

/// The phase's shape: `keys` present keys, `readers` reader threads until `until`, values of
/// `value_size` bytes compressing to `compression_ratio` (the runners' value generator).
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub keys: u64,
    pub readers: usize,
    pub until: Until,
    pub value_size: usize,
    pub compression_ratio: f64,
    pub seed: u64,
}

/// Runs the phase on `store`.
///
/// # Errors
/// The first error of the writer or a reader, or a wrong answer.
pub fn run<T: Target>(store: &T, plan: Plan) -> Result<ReadWhileWriting, T::Error> {
    let Plan {
        keys,
        readers,
        until,
        value_size,
        compression_ratio,
        seed,
    } = plan;
    let readers = readers.max(1);
    let stop = AtomicBool::new(false);
    let readers_left = AtomicU64::new(readers as u64);
    let start = Instant::now();
    std::thread::scope(|s| {
        // Named, so that a profile tells the writer from the readers.
        let named = |name: &str| std::thread::Builder::new().name(name.to_string());
        let writer = spawn(s, named("writer"), || {
            let mut rng = StdRng::seed_from_u64(seed ^ 0x5752_5757);
            let mut values = ValueGenerator::new(compression_ratio, value_size, seed ^ 0x5641_4c55);
            let mut puts = 0u64;
            let t = Instant::now();
            let mut result = Ok(());
            // The flag is checked every 64 puts: a relaxed load is cheap, but not free.
            'writing: while !stop.load(Ordering::Relaxed) {
                for _ in 0..64 {
                    if let Err(e) = store.put(2 * rng.gen_range(0..keys), values.next(value_size)) {
                        result = Err(e);
                        break 'writing;
                    }
                    puts += 1;
                }
            }
            (result, puts, t.elapsed().as_secs_f64())
        });
        let reader_handles: Vec<_> = (0..readers)
            .map(|r| {
                let (stop, readers_left) = (&stop, &readers_left);
                spawn(s, named("reader"), move || {
                    let mut rng = StdRng::seed_from_u64(seed.wrapping_add(2000 + r as u64));
                    let share = match until {
                        Until::Gets(n) => {
                            n / readers as u64 + u64::from((r as u64) < n % readers as u64)
                        }
                        Until::Elapsed(_) => u64::MAX,
                    };
                    let deadline = match until {
                        Until::Elapsed(d) => Some(start + d),
                        Until::Gets(_) => None,
                    };
                    let mut m = ReadWhileWriting::default();
                    let sched_before = thread_sched();
                    let mut done = 0u64;
                    let result = (|| {
                        while done < share {
                            if deadline
                                .is_some_and(|d| done.is_multiple_of(256) && Instant::now() >= d)
                            {
                                break;
                            }
                            let present = done.is_multiple_of(2);
                            let n = 2 * rng.gen_range(0..keys) + u64::from(!present);
                            let t = Instant::now();
                            let found = store.get(n)?;
                            let secs = t.elapsed().as_secs_f64();
                            if found != present {
                                return Err(store.wrong_answer(n));
                            }
                            if present {
                                m.present_gets += 1;
                                m.present_secs += secs;
                            } else {
                                m.missing_gets += 1;
                                m.missing_secs += secs;
                            }
                            done += 1;
                        }
                        Ok(())
                    })();
                    // Linux brings a running thread's count up to date at each tick (a few ms):
                    // a shorter phase reads none.
                    if let (Some(a), Some(b)) = (sched_before, thread_sched()) {
                        if b.0 > a.0 {
                            m.reader_cpu_secs = Some((b.0 - a.0) as f64 / 1e9);
                            m.reader_wait_secs = Some(b.1.saturating_sub(a.1) as f64 / 1e9);
                        }
                    }
                    if readers_left.fetch_sub(1, Ordering::AcqRel) == 1 {
                        stop.store(true, Ordering::Relaxed);
                    }
                    result.map(|()| m)
                })
            })
            .collect();
        // The watcher: this thread samples L0 until the readers are done.
        let (mut samples, mut sum, mut most) = (0u64, 0u64, None::<usize>);
        while !stop.load(Ordering::Relaxed) {
            if let Some(n) = store.l0_tables() {
                samples += 1;
                sum += n as u64;
                most = Some(most.map_or(n, |m| m.max(n)));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut total = ReadWhileWriting::default();
        let mut first_error = None;
        for h in reader_handles {
            match h.join() {
                Ok(Ok(m)) => {
                    total.present_gets += m.present_gets;
                    total.present_secs += m.present_secs;
                    total.missing_gets += m.missing_gets;
                    total.missing_secs += m.missing_secs;
                    let add = |a: Option<f64>, b: Option<f64>| Some(a.unwrap_or(0.0) + b?);
                    total.reader_cpu_secs = add(total.reader_cpu_secs, m.reader_cpu_secs);
                    total.reader_wait_secs = add(total.reader_wait_secs, m.reader_wait_secs);
                }
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        let (written, puts, write_secs) = match writer.join() {
            Ok(w) => w,
            Err(p) => std::panic::resume_unwind(p),
        };
        if let Some(e) = first_error {
            return Err(e);
        }
        written?;
        total.puts = puts;
        total.write_secs = write_secs;
        total.l0_mean = (samples > 0).then(|| sum as f64 / samples as f64);
        total.l0_max = most;
        total.secs = start.elapsed().as_secs_f64();
        Ok(total)
    })
}

/// `f` on a scoped thread made by `builder`.
fn spawn<'scope, T: Send + 'scope>(
    s: &'scope std::thread::Scope<'scope, '_>,
    builder: std::thread::Builder,
    f: impl FnOnce() -> T + Send + 'scope,
) -> std::thread::ScopedJoinHandle<'scope, T> {
    match builder.spawn_scoped(s, f) {
        Ok(h) => h,
        Err(e) => panic!("cannot start a thread: {e}"),
    }
}

/// This thread's nanoseconds on a core and waiting for one, as Linux counts them.
fn thread_sched() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

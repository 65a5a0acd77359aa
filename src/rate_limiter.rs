//! [`RateLimiter`]: paces the bytes flushes and compactions write, so that background work leaves
//! the disk's bandwidth to foreground reads and to the WAL (neither is paced).
//!
//! A token bucket: tokens (bytes) accrue continuously at the rate, read from a monotonic clock on
//! every request rather than added in steps, and the bucket holds at most one request's worth, so
//! that after a pause at most one request goes through unpaced. A request asks for at most
//! [`request_bytes`] (10 ms of the rate, between 4 and 256 KiB): a table's writes are split into
//! requests that small, so no single one makes its writer wait long. Requests queue in order of
//! arrival, flushes ahead of compactions (a flush that waits holds back writers once memtables
//! fill up; a compaction that waits only lets L0 grow, and writers slow down as it does, which
//! leaves the bandwidth to compaction again).

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// The least and most bytes one request asks for.
const MIN_REQUEST_BYTES: u64 = 4 << 10;
const MAX_REQUEST_BYTES: u64 = 256 << 10;

/// The longest a waiting request sleeps before it looks again (after a change of rate, say).
const MAX_SLEEP: Duration = Duration::from_millis(50);

/// The most bytes one request asks for at `bytes_per_second`: 10 ms of the rate, at least 4 KiB
/// and at most 256 KiB.
pub(crate) fn request_bytes(bytes_per_second: u64) -> u64 {
    (bytes_per_second / 100).clamp(MIN_REQUEST_BYTES, MAX_REQUEST_BYTES)
}

/// Whose writes a request paces; flushes are served first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IoPriority {
    Flush = 0,
    Compaction = 1,
}

impl IoPriority {
    /// The priority of the writes of a table of `level`: flushes alone write L0 tables
    /// (compactions write into L1 and below).
    pub(crate) fn of_level(level: usize) -> IoPriority {
        if level == 0 {
            IoPriority::Flush
        } else {
            IoPriority::Compaction
        }
    }
}

/// A monotonic time source: the time since the limiter was made. Tests move one by hand.
pub(crate) trait MonotonicClock: Send + Sync {
    fn elapsed(&self) -> Duration;
}

/// The operating system's monotonic clock.
struct Steady(Instant);

impl MonotonicClock for Steady {
    fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

/// The bucket's arithmetic, apart from who waits: pure, so tests drive it with any times.
#[derive(Debug)]
struct Bucket {
    rate: u64,
    /// Bytes it holds at most: one request's worth.
    capacity: u64,
    /// Bytes available; below zero, a debt that later requests wait for (a request larger than
    /// the capacity, after the rate was lowered).
    tokens: i64,
    /// Credit below one byte, in byte-nanoseconds (less than a second's worth of one byte).
    carry: u128,
    /// When tokens were last credited.
    last: Duration,
}

impl Bucket {
    /// A full bucket at `rate` bytes per second (above 0), at time `now`.
    fn new(rate: u64, now: Duration) -> Bucket {
        let capacity = request_bytes(rate);
        Bucket {
            rate,
            capacity,
            tokens: capacity as i64,
            carry: 0,
            last: now,
        }
    }

    /// Credits the bytes accrued since it was last credited, up to its capacity.
    fn refill(&mut self, now: Duration) {
        let elapsed = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        let credit = elapsed.as_nanos() * u128::from(self.rate) + self.carry;
        let tokens = i128::from(self.tokens) + (credit / NANOS_PER_SECOND) as i128;
        if tokens >= i128::from(self.capacity) {
            self.tokens = self.capacity as i64;
            self.carry = 0;
        } else {
            // Below the capacity, so it fits.
            self.tokens = tokens as i64;
            self.carry = credit % NANOS_PER_SECOND;
        }
    }

    /// Takes `n` bytes if it holds them (or, for a request above its capacity, if it is full).
    fn try_take(&mut self, n: u64) -> bool {
        let need = n.min(self.capacity) as i64;
        if self.tokens < need {
            return false;
        }
        self.tokens -= n as i64;
        true
    }

    /// How long until `n` bytes can be taken, if nobody else takes any.
    fn time_until(&self, n: u64) -> Duration {
        let missing = i128::from(n.min(self.capacity)) - i128::from(self.tokens);
        if missing <= 0 || self.rate == 0 {
            return Duration::ZERO;
        }
        let credit_needed = missing as u128 * NANOS_PER_SECOND - self.carry;
        let nanos = credit_needed.div_ceil(u128::from(self.rate));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Changes the rate (above 0) from `now` on.
    fn set_rate(&mut self, rate: u64, now: Duration) {
        self.refill(now);
        self.rate = rate;
        self.capacity = request_bytes(rate);
        self.tokens = self.tokens.min(self.capacity as i64);
    }
}

/// The requests waiting: in order of arrival, flushes first.
#[derive(Debug, Default)]
struct Queue {
    waiting: [VecDeque<u64>; 2],
    next_ticket: u64,
}

impl Queue {
    fn join(&mut self, p: IoPriority) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.waiting[p as usize].push_back(ticket);
        ticket
    }

    /// Whether `ticket` (of priority `p`) is the request served next.
    fn is_next(&self, ticket: u64, p: IoPriority) -> bool {
        let flush = &self.waiting[IoPriority::Flush as usize];
        match p {
            IoPriority::Flush => flush.front() == Some(&ticket),
            IoPriority::Compaction => {
                flush.is_empty()
                    && self.waiting[IoPriority::Compaction as usize].front() == Some(&ticket)
            }
        }
    }

    fn leave(&mut self, ticket: u64, p: IoPriority) {
        self.waiting[p as usize].retain(|&t| t != ticket);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.waiting.iter().map(VecDeque::len).sum()
    }
}

/// What a [`RateLimiter`] has let through since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateLimiterStats {
    /// Bytes of tables flushes wrote through it.
    pub flush_bytes: u64,
    /// Bytes of tables compactions wrote through it.
    pub compaction_bytes: u64,
    /// Requests granted (a table's writes are split into requests of at most 256 KiB).
    pub requests: u64,
    /// Requests that waited for their bytes.
    pub waits: u64,
    /// Time requests waited, in microseconds, summed.
    pub wait_micros: u64,
}

/// The shared state of one limiter.
struct Limiter {
    state: Mutex<LimiterState>,
    /// Signalled whenever a request is granted or the rate changes: the next waiter looks.
    turn: Condvar,
    clock: Box<dyn MonotonicClock>,
    /// The rate (0: unlimited), readable without the lock.
    rate: AtomicU64,
}

struct LimiterState {
    /// `None` while the rate is unlimited.
    bucket: Option<Bucket>,
    queue: Queue,
    stats: RateLimiterStats,
}

/// Paces the table writes of flushes and compactions to a number of bytes per second (RocksDB's
/// `RateLimiter`). Give it to [`Options::rate_limiter`](crate::Options::rate_limiter) to share one
/// budget between stores, or set [`Options::rate_limit`](crate::Options::rate_limit) for a store's
/// own. The WAL and reads are not paced.
///
/// Flushes are served before compactions; requests of one kind in order of arrival. A `RateLimiter`
/// is a cheap handle: clones are the same limiter.
///
/// ```
/// use siftdb::{Db, Options, RateLimiter};
///
/// # fn main() -> siftdb::Result<()> {
/// let limiter = RateLimiter::new(64 << 20); // 64 MiB/s for both stores' flushes and compactions
/// let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
/// let first = Db::open(a.path(), Options::default().rate_limiter(limiter.clone()))?;
/// let second = Db::open(b.path(), Options::default().rate_limiter(limiter.clone()))?;
/// first.put("k", "v")?;
/// first.flush()?;
/// assert!(limiter.stats().flush_bytes > 0);
/// limiter.set_bytes_per_second(16 << 20); // quieter from now on
/// # drop(second);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RateLimiter {
    inner: Arc<Limiter>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("bytes_per_second", &self.bytes_per_second())
            .finish()
    }
}

impl RateLimiter {
    /// A limiter letting through `bytes_per_second` (0: no limit, only counting).
    pub fn new(bytes_per_second: u64) -> RateLimiter {
        RateLimiter::with_clock(bytes_per_second, Box::new(Steady(Instant::now())))
    }

    /// A limiter that reads the time from `clock`.
    pub(crate) fn with_clock(bytes_per_second: u64, clock: Box<dyn MonotonicClock>) -> RateLimiter {
        let now = clock.elapsed();
        RateLimiter {
            inner: Arc::new(Limiter {
                state: Mutex::new(LimiterState {
                    bucket: (bytes_per_second > 0).then(|| Bucket::new(bytes_per_second, now)),
                    queue: Queue::default(),
                    stats: RateLimiterStats::default(),
                }),
                turn: Condvar::new(),
                clock,
                rate: AtomicU64::new(bytes_per_second),
            }),
        }
    }

    /// The rate it lets through, in bytes per second (0: no limit).
    pub fn bytes_per_second(&self) -> u64 {
        self.inner.rate.load(Relaxed)
    }

    /// Changes the rate (0: no limit) from now on; requests waiting are served at the new rate.
    pub fn set_bytes_per_second(&self, bytes_per_second: u64) {
        let mut st = self.inner.state.lock();
        let now = self.inner.clock.elapsed();
        match (&mut st.bucket, bytes_per_second) {
            (_, 0) => st.bucket = None,
            (Some(b), rate) => b.set_rate(rate, now),
            (None, rate) => st.bucket = Some(Bucket::new(rate, now)),
        }
        self.inner.rate.store(bytes_per_second, Relaxed);
        drop(st);
        self.inner.turn.notify_all();
    }

    /// What it has let through so far.
    pub fn stats(&self) -> RateLimiterStats {
        self.inner.state.lock().stats
    }

    /// The most bytes one request should ask for now: 10 ms of the rate; any number while
    /// unlimited (only counted, they need not be split).
    pub(crate) fn request_bytes(&self) -> u64 {
        match self.bytes_per_second() {
            0 => u64::MAX,
            rate => request_bytes(rate),
        }
    }

    /// Waits until `n` bytes (at most [`request_bytes`](Self::request_bytes)) of `priority` may
    /// be written.
    pub(crate) fn request(&self, n: u64, priority: IoPriority) {
        let limiter = &*self.inner;
        let mut st = limiter.state.lock();
        let started = limiter.clock.elapsed();
        let ticket = st.queue.join(priority);
        let mut waited = false;
        loop {
            let now = limiter.clock.elapsed();
            let next = st.queue.is_next(ticket, priority);
            let sleep = match &mut st.bucket {
                None => break,
                Some(b) => {
                    b.refill(now);
                    if next && b.try_take(n) {
                        break;
                    }
                    if next {
                        b.time_until(n).min(MAX_SLEEP)
                    } else {
                        MAX_SLEEP
                    }
                }
            };
            waited = true;
            limiter.turn.wait_for(&mut st, sleep);
        }
        st.queue.leave(ticket, priority);
        let stats = &mut st.stats;
        match priority {
            IoPriority::Flush => stats.flush_bytes += n,
            IoPriority::Compaction => stats.compaction_bytes += n,
        }
        stats.requests += 1;
        if waited {
            let waited_for = limiter.clock.elapsed().saturating_sub(started);
            stats.waits += 1;
            stats.wait_micros += u64::try_from(waited_for.as_micros()).unwrap_or(u64::MAX);
        }
        drop(st);
        limiter.turn.notify_all();
    }

    /// Requests waiting now.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.inner.state.lock().queue.len()
    }

    /// Wakes every waiting request to look again (after a test moved its clock).
    #[cfg(test)]
    fn wake(&self) {
        self.inner.turn.notify_all();
    }
}

/// A limiter and the priority of the writes it paces.
#[derive(Clone)]
pub(crate) struct Pacer {
    pub(crate) limiter: RateLimiter,
    pub(crate) priority: IoPriority,
}

/// A writer whose writes, if it has a [`Pacer`], each wait for their bytes first.
pub(crate) struct PacedWriter<W> {
    inner: W,
    pacer: Option<Pacer>,
}

impl<W> PacedWriter<W> {
    pub(crate) fn new(inner: W, pacer: Option<Pacer>) -> Self {
        PacedWriter { inner, pacer }
    }

    pub(crate) fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }
}

impl<W: Write> Write for PacedWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(p) = &self.pacer else {
            return self.inner.write(buf);
        };
        if buf.is_empty() {
            return Ok(0);
        }
        // One request's worth at a time: `write_all` comes back for the rest.
        let n = buf.len().min(p.limiter.request_bytes() as usize);
        p.limiter.request(n as u64, p.priority);
        self.inner.write(&buf[..n])
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A clock moved by hand.
    #[derive(Clone, Default)]
    struct ManualClock(Arc<AtomicU64>);

    impl ManualClock {
        fn advance(&self, d: Duration) {
            self.0.fetch_add(d.as_nanos() as u64, Relaxed);
        }
    }

    impl MonotonicClock for ManualClock {
        fn elapsed(&self) -> Duration {
            Duration::from_nanos(self.0.load(Relaxed))
        }
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn request_sizes_are_ten_milliseconds_of_the_rate_within_bounds() {
        assert_eq!(request_bytes(1 << 20), (1 << 20) / 100);
        assert_eq!(request_bytes(1000), 4 << 10);
        assert_eq!(request_bytes(1 << 30), 256 << 10);
    }

    #[test]
    fn the_bucket_lets_through_the_rate_and_one_request_more() {
        // 1 MB/s: 10,000-byte requests, the bucket holds one.
        let mut b = Bucket::new(1_000_000, Duration::ZERO);
        assert_eq!(b.capacity, 10_000);
        assert!(b.try_take(10_000));
        assert!(!b.try_take(1));
        assert_eq!(b.time_until(10_000), 10 * MS);
        // Granted exactly when the bytes have accrued, not a nanosecond before.
        b.refill(10 * MS - Duration::from_nanos(1));
        assert!(!b.try_take(10_000));
        b.refill(10 * MS);
        assert!(b.try_take(10_000));
        // A long pause fills it only to its capacity: one request unpaced, then the rate again.
        b.refill(Duration::from_secs(60));
        assert!(b.try_take(10_000));
        assert!(!b.try_take(1));
        // Over one simulated second of back-to-back requests, the bytes granted are the rate's.
        let start = b.last;
        let mut granted = 0u64;
        let mut now = start;
        while now < start + Duration::from_secs(1) {
            now += b.time_until(4_000);
            b.refill(now);
            assert!(b.try_take(4_000), "at {now:?}");
            granted += 4_000;
        }
        assert_eq!(granted, 1_000_000);
    }

    #[test]
    fn fractions_of_a_byte_are_carried_over() {
        // 3 bytes per second, looked at every sixth of a second: each look accrues half a byte,
        // which only the carry keeps from being rounded away.
        let mut b = Bucket::new(3, Duration::ZERO);
        b.tokens = 0;
        let mut now = Duration::ZERO;
        let mut granted = 0;
        for _ in 0..600 {
            now += Duration::from_nanos(166_666_667);
            b.refill(now);
            if b.try_take(1) {
                granted += 1;
            }
        }
        assert_eq!(granted, 300);
    }

    #[test]
    fn a_lowered_rate_leaves_a_debt_the_next_requests_wait_for() {
        let mut b = Bucket::new(100 << 20, Duration::ZERO);
        assert_eq!(b.capacity, 256 << 10);
        // A request sized for the old rate is granted from a full bucket, then owed.
        b.set_rate(1_000_000, Duration::ZERO);
        assert_eq!(b.capacity, 10_000);
        assert!(b.try_take(256 << 10));
        assert_eq!(b.tokens, 10_000 - (256 << 10));
        // The next request waits for the debt and its own bytes.
        assert_eq!(b.time_until(10_000), Duration::from_micros(262_144));
    }

    #[test]
    fn flushes_go_first_then_requests_in_order_of_arrival() {
        let mut q = Queue::default();
        let c1 = q.join(IoPriority::Compaction);
        let c2 = q.join(IoPriority::Compaction);
        assert!(q.is_next(c1, IoPriority::Compaction));
        let f1 = q.join(IoPriority::Flush);
        assert!(!q.is_next(c1, IoPriority::Compaction));
        assert!(q.is_next(f1, IoPriority::Flush));
        q.leave(f1, IoPriority::Flush);
        assert!(q.is_next(c1, IoPriority::Compaction));
        assert!(!q.is_next(c2, IoPriority::Compaction));
        q.leave(c1, IoPriority::Compaction);
        assert!(q.is_next(c2, IoPriority::Compaction));
        assert_eq!(q.len(), 1);
    }

    /// Waits (in real time, without bound on how long it takes) until `done` holds.
    fn until(done: impl Fn() -> bool) {
        while !done() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_waiting_flush_is_served_before_a_compaction_that_came_first() {
        let clock = ManualClock::default();
        // 1 MB/s on a clock that moves only when told: 10,000-byte requests.
        let limiter = RateLimiter::with_clock(1_000_000, Box::new(clock.clone()));
        limiter.request(10_000, IoPriority::Compaction); // empties the bucket
        let spawn = |p: IoPriority, done: Arc<AtomicBool>| {
            let limiter = limiter.clone();
            std::thread::spawn(move || {
                limiter.request(10_000, p);
                done.store(true, Relaxed);
            })
        };
        let compaction_done = Arc::new(AtomicBool::new(false));
        let compaction = spawn(IoPriority::Compaction, Arc::clone(&compaction_done));
        until(|| limiter.waiting() == 1);
        let flush_done = Arc::new(AtomicBool::new(false));
        let flush = spawn(IoPriority::Flush, Arc::clone(&flush_done));
        until(|| limiter.waiting() == 2);
        // One request's bytes accrue: the flush takes them, the compaction still waits.
        clock.advance(10 * MS);
        limiter.wake();
        flush.join().unwrap();
        assert!(flush_done.load(Relaxed));
        assert!(!compaction_done.load(Relaxed));
        assert_eq!(limiter.waiting(), 1);
        clock.advance(10 * MS);
        limiter.wake();
        compaction.join().unwrap();
        let s = limiter.stats();
        assert_eq!((s.flush_bytes, s.compaction_bytes), (10_000, 20_000));
        assert_eq!((s.requests, s.waits), (3, 2));
        // The flush waited 10 ms of the clock, the compaction 20 ms.
        assert_eq!(s.wait_micros, 30_000);
    }

    #[test]
    fn an_unlimited_limiter_only_counts_and_a_rate_can_be_set_later() {
        let clock = ManualClock::default();
        let limiter = RateLimiter::with_clock(0, Box::new(clock.clone()));
        for _ in 0..100 {
            limiter.request(1 << 20, IoPriority::Compaction);
        }
        assert_eq!(limiter.stats().compaction_bytes, 100 << 20);
        assert_eq!(limiter.stats().waits, 0);
        assert_eq!(limiter.request_bytes(), u64::MAX);
        limiter.set_bytes_per_second(1_000_000);
        assert_eq!(limiter.request_bytes(), 10_000);
        limiter.request(10_000, IoPriority::Flush); // from a full bucket
        assert_eq!(limiter.stats().waits, 0);
    }

    #[test]
    fn a_paced_writer_asks_for_every_byte_one_request_at_a_time() {
        let limiter = RateLimiter::new(1 << 30);
        let pacer = Pacer {
            limiter: limiter.clone(),
            priority: IoPriority::Flush,
        };
        let mut w = PacedWriter::new(Vec::new(), Some(pacer));
        w.write_all(&vec![7u8; 1 << 20]).unwrap();
        w.write_all(&[]).unwrap();
        assert_eq!(w.get_mut().len(), 1 << 20);
        let s = limiter.stats();
        assert_eq!((s.flush_bytes, s.requests), (1 << 20, 4));
        let mut unpaced = PacedWriter::new(Vec::new(), None);
        unpaced.write_all(b"abc").unwrap();
        assert_eq!(unpaced.get_mut().as_slice(), b"abc");
    }
}

//! [`Clock`]: where the store reads the time of day, for the write times of keyspaces with a
//! time to live ([`Options::ttl`](crate::Options::ttl)). Tests give the store a clock of their
//! own ([`Options::clock`](crate::Options::clock)) and move it by hand.

use std::time::{Duration, SystemTime};

/// The time source of a store: the write time stamped on each value of a keyspace with a time
/// to live, and the time its entries' expiry is judged against (on reads and in compaction).
///
/// The store reads it in whole seconds since the Unix epoch. A clock that goes back in time makes
/// entries that had expired visible again, except those a compaction has already removed.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
///
/// /// A clock moved by hand: seconds since the Unix epoch.
/// struct ManualClock(AtomicU64);
///
/// impl siftdb::Clock for ManualClock {
///     fn now(&self) -> SystemTime {
///         UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::Relaxed))
///     }
/// }
/// ```
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The operating system's clock ([`SystemTime::now`]): the default [`Clock`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// `clock`'s time in whole seconds since the Unix epoch: 0 before it, and `u32::MAX` past what
/// four bytes hold (the year 2106).
pub(crate) fn unix_seconds(clock: &dyn Clock) -> u32 {
    clock
        .now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
}

/// `ttl` in whole seconds, rounded up (as the MANIFEST records it and expiry counts it).
pub(crate) fn ttl_seconds(ttl: Duration) -> u64 {
    ttl.as_secs()
        .saturating_add(u64::from(ttl.subsec_nanos() > 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    struct At(SystemTime);

    impl Clock for At {
        fn now(&self) -> SystemTime {
            self.0
        }
    }

    #[test]
    fn seconds_are_clamped_to_four_bytes() {
        assert_eq!(
            unix_seconds(&At(UNIX_EPOCH + Duration::from_millis(5_999))),
            5
        );
        assert_eq!(unix_seconds(&At(UNIX_EPOCH - Duration::from_secs(1))), 0);
        let far = UNIX_EPOCH + Duration::from_secs(u64::from(u32::MAX) + 10);
        assert_eq!(unix_seconds(&At(far)), u32::MAX);
        assert!(unix_seconds(&SystemClock) > 1_600_000_000);
    }
}

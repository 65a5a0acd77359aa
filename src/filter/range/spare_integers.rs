//! Integer buffers a thread's range filter builds hand on to its next build.
//!
//! A table's build holds its keys' integers, the radix sort's second array and the Elias–Fano low
//! bits: a few hundred KiB each at the default table size. Allocated afresh for every table, they
//! are large enough that glibc hands their pages back to the kernel when they are freed, and the
//! next build faults every page in again, zeroed (figures: docs/benchmarks.md, *Range filters*).
//! A flush or compaction thread builds one table after another, so it keeps the buffers instead:
//! the integer counterpart of the block buffers a reading thread keeps (`sst/block_buffers.rs`),
//! without their size matching, since one build's buffers are all about its key count.

use std::cell::RefCell;

/// Buffers a thread keeps: the most one build has free at once.
const MAX_SPARES: usize = 2;

/// The most integers a kept buffer may have room for (2 MiB): a table of unusually many keys
/// allocates its own, so a thread never holds more than a few MiB.
const MAX_SPARE_CAPACITY: usize = 1 << 18;

thread_local! {
    static SPARES: RefCell<Vec<Vec<u64>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer: one the thread kept, the largest first, else a new one.
pub(crate) fn take() -> Vec<u64> {
    SPARES
        .try_with(|spares| spares.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Keeps `buf` for this thread's next [`take`], unless it is too large or the thread keeps
/// enough already.
pub(crate) fn give(mut buf: Vec<u64>) {
    if buf.capacity() == 0 || buf.capacity() > MAX_SPARE_CAPACITY {
        return;
    }
    buf.clear();
    // A thread being torn down has no spares to keep: the buffer is freed.
    let _ = SPARES.try_with(|spares| {
        let mut spares = spares.borrow_mut();
        if spares.len() < MAX_SPARES {
            spares.push(buf);
            // The largest last, so `take` hands it out first.
            spares.sort_by_key(Vec::capacity);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_gets_back_its_buffers_largest_first_and_keeps_few_and_small_ones() {
        std::thread::spawn(|| {
            assert_eq!(take().capacity(), 0, "a new thread has no spares");
            let small = Vec::<u64>::with_capacity(100);
            let mut large = Vec::<u64>::with_capacity(5000);
            large.extend([1, 2, 3]);
            let (small_at, large_at) = (small.as_ptr(), large.as_ptr());
            give(small);
            give(large);
            give(Vec::with_capacity(10)); // a third: not kept
            give(Vec::with_capacity(MAX_SPARE_CAPACITY + 1)); // too large: not kept
            let first = take();
            assert_eq!(first.as_ptr(), large_at);
            assert!(first.is_empty() && first.capacity() >= 5000);
            let second = take();
            assert_eq!(second.as_ptr(), small_at);
            assert_eq!(take().capacity(), 0, "only two were kept");
        })
        .join()
        .unwrap();
    }
}

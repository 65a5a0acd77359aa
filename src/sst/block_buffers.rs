//! The buffers of dropped blocks, kept by each thread for the next blocks it reads.
//!
//! A Get that misses the block cache reads a block in and, once the cache is full, evicts
//! another: the evicted block's memory is long out of the CPU's caches, and handing it back to
//! the allocator and asking for new memory walked that cold memory's bookkeeping, a tenth of such
//! a Get. A block's buffer therefore goes to its thread's spares when the block is dropped, and
//! the next block read on that thread decodes into it.

use std::cell::RefCell;

/// Spare buffers a thread keeps at most.
const SPARES: usize = 4;
/// Larger buffers (index and filter blocks) go back to the allocator.
const LARGEST_SPARE: usize = 64 << 10;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `len` zero bytes: a spare that holds `len` without wasting much, else a new one
/// with some room above `len`, so that it can hold the somewhat larger blocks that follow (a
/// block ends at the first entry that takes it past its target size).
pub(crate) fn take(len: usize) -> Vec<u8> {
    let fits = |b: &Vec<u8>| (len..=len + len / 8 + 512).contains(&b.capacity());
    let spare = SPARE
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let i = s.iter().rposition(fits)?;
            Some(s.swap_remove(i))
        })
        .ok()
        .flatten();
    let mut buf = spare.unwrap_or_else(|| Vec::with_capacity((len | 255) + 1));
    buf.clear();
    buf.resize(len, 0);
    buf
}

/// Keeps `buf` for this thread's next [`take`] if there is room for it.
pub(crate) fn give(buf: Vec<u8>) {
    if buf.capacity() == 0 || buf.capacity() > LARGEST_SPARE {
        return;
    }
    // A thread being torn down drops the buffer instead.
    let _ = SPARE.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARES {
            s.push(buf);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_comes_back_zeroed_and_large_ones_are_not_kept() {
        let mut b = take(4000);
        assert_eq!(b.len(), 4000);
        assert!(b.capacity() >= 4096, "room above the length");
        b.fill(7);
        let ptr = b.as_ptr();
        give(b);
        let again = take(4090);
        assert_eq!(again.as_ptr(), ptr, "the spare is reused");
        assert!(again.iter().all(|&x| x == 0));
        give(vec![1; LARGEST_SPARE + 1]);
        let fresh = take(LARGEST_SPARE + 1);
        assert!(fresh.iter().all(|&x| x == 0));
        // A spare far larger than the block asked for stays a spare.
        let big = take(40_000);
        let big_ptr = big.as_ptr();
        give(big);
        let small = take(100);
        assert_ne!(small.as_ptr(), big_ptr);
        let near = take(39_000);
        assert_eq!(near.as_ptr(), big_ptr);
        // At most SPARES are kept.
        for _ in 0..2 * SPARES {
            give(Vec::with_capacity(100));
        }
        assert_eq!(SPARE.with_borrow(|s| s.len()), SPARES);
    }
}

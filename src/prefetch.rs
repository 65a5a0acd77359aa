//! The prefetch instruction, the one piece of unsafe code the read paths share (one `// SAFETY:`
//! comment): a batched lookup asks for the memory each key will read before it reads any, so
//! that the keys' cache misses overlap instead of following one another.
#![allow(unsafe_code)]

/// Asks the CPU to start loading the cache line holding the first byte of `value` into every
/// cache level, so that a later read of it does not wait for memory. Does nothing off x86_64,
/// where the hardware prefetcher is left to guess.
#[inline]
pub(crate) fn prefetch_line_of<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of the x86_64 baseline, so the intrinsic's feature is enabled; a
        // prefetch never faults, and the pointer is to a live value anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(value).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

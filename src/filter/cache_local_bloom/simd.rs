//! The cache-local bloom's CPU-specific code: the prefetch of a key's line (through
//! `crate::prefetch`), and an AVX2 line test, one `// SAFETY:` comment per unsafe block. The
//! format checks stay in the portable reader, which hands this module only whole 64-byte lines.
//!
//! Batches of keys use the AVX2 test, whose lines are prefetched: there it measured 1.4× the
//! portable test (`probe_absent_line` in `benches/filters.rs`). A single key's probe stays
//! portable (see `CacheLocalBloom::may_match_hash`). Off x86_64 no AVX2 test exists and
//! [`prefetch`] does nothing.
#![allow(unsafe_code)]

pub(crate) use avx2::Avx2;

use super::LINE_BYTES;

/// Asks the CPU to start loading `line` into every cache level, so that a later probe of it does
/// not wait for memory.
///
/// Only the line's first byte: a filter inside a buffer need not start on a cache line, so a
/// line may span two, but fetching the second too measured no faster at 1M keys.
#[inline]
pub(crate) fn prefetch(line: &[u8; LINE_BYTES]) {
    crate::prefetch::prefetch_line_of(&line[0]);
}

/// One key's line test: its line (`None` if its answer is already known), the hash's high half
/// and the number of probes.
pub(crate) type LineTest<'a> = (Option<&'a [u8; LINE_BYTES]>, u32, u32);

/// The AVX2 line test and its run-time detection.
mod avx2 {
    #[cfg(target_arch = "x86_64")]
    pub(crate) use x86::Avx2;

    #[cfg(not(target_arch = "x86_64"))]
    pub(crate) use portable::Avx2;

    #[cfg(target_arch = "x86_64")]
    mod x86 {
        use std::arch::x86_64::{
            __m256i, _mm256_blendv_epi8, _mm256_loadu_si256, _mm256_mullo_epi32,
            _mm256_permutevar8x32_epi32, _mm256_set1_epi32, _mm256_setr_epi32, _mm256_slli_epi32,
            _mm256_sllv_epi32, _mm256_srai_epi32, _mm256_srli_epi32, _mm256_sub_epi32,
            _mm256_testc_si256,
        };
        use std::sync::OnceLock;

        use super::super::super::{LINE_BYTES, REMIX};
        use super::super::LineTest;

        /// `REMIX^0 ..= REMIX^7`: lane `i` times `g` is the `g` of probe `i`, so one multiply gives
        /// eight probes' hashes at once (multiplication mod 2^32 is associative).
        const POWERS: [u32; 8] = {
            let mut p = [1u32; 8];
            let mut i = 1;
            while i < 8 {
                p[i] = p[i - 1].wrapping_mul(REMIX);
                i += 1;
            }
            p
        };
        /// `REMIX^8`: from probe `i`'s hash to probe `i + 8`'s.
        const POWER_8: u32 = POWERS[7].wrapping_mul(REMIX);

        /// Whether this CPU has AVX2, detected once: a probe then reads a cached flag.
        static HAS_AVX2: OnceLock<bool> = OnceLock::new();

        /// Proof that the CPU running this process has AVX2: only [`Avx2::detect`] makes one, so a
        /// safe method taking it may call `#[target_feature(enable = "avx2")]` code.
        #[derive(Clone, Copy, Debug)]
        pub(crate) struct Avx2(());

        impl Avx2 {
            /// `Some` if this CPU has AVX2 (detected on the first call, then cached).
            #[inline]
            pub(crate) fn detect() -> Option<Avx2> {
                HAS_AVX2
                    .get_or_init(|| is_x86_feature_detected!("avx2"))
                    .then_some(Avx2(()))
            }

            /// Whether every one of `probes` bits that `g` (the hash's high half) addresses in
            /// `line` is set: the portable `line_may_match`, eight probes per step.
            #[inline]
            pub(crate) fn line_may_match(
                self,
                line: &[u8; LINE_BYTES],
                g: u32,
                probes: u32,
            ) -> bool {
                // SAFETY: `self` exists only if `detect` found AVX2 on this CPU, which is all
                // `line_may_match_avx2` requires of its caller.
                unsafe { line_may_match_avx2(line, g, probes) }
            }

            /// [`line_may_match`](Self::line_may_match) of each test that has a line, into the
            /// answer beside it; the other answers are left as they are.
            #[inline]
            pub(crate) fn lines_may_match(self, tests: &[LineTest<'_>], answers: &mut [bool]) {
                // SAFETY: as in `line_may_match`: `self` proves this CPU has AVX2.
                unsafe { lines_may_match_avx2(tests, answers) }
            }
        }

        /// [`Avx2::lines_may_match`]: one call for a run of tests, so that the line test is
        /// inlined into the loop and its constants loaded once.
        #[target_feature(enable = "avx2")]
        fn lines_may_match_avx2(tests: &[LineTest<'_>], answers: &mut [bool]) {
            for (&(line, g, probes), answer) in tests.iter().zip(answers) {
                if let Some(line) = line {
                    *answer = line_may_match_avx2(line, g, probes);
                }
            }
        }

        /// [`Avx2::line_may_match`]. A bit address `b` (0..511, the top 9 bits of a probe's hash)
        /// is bit `b % 8` of byte `b / 8`, which on little-endian x86 is bit `b % 32` of the 32-bit
        /// word `b / 32`: the top 4 bits pick one of 16 words, the next 5 the bit.
        #[target_feature(enable = "avx2")]
        fn line_may_match_avx2(line: &[u8; LINE_BYTES], mut g: u32, probes: u32) -> bool {
            let ptr = line.as_ptr();
            // SAFETY: `line` is 64 readable bytes and the two loads read bytes 0..32 and 32..64 of
            // it; `loadu` has no alignment requirement; AVX2 is enabled on this function.
            let (low, high) = unsafe {
                (
                    _mm256_loadu_si256(ptr.cast::<__m256i>()),
                    _mm256_loadu_si256(ptr.add(32).cast::<__m256i>()),
                )
            };
            let powers = _mm256_setr_epi32(
                POWERS[0] as i32,
                POWERS[1] as i32,
                POWERS[2] as i32,
                POWERS[3] as i32,
                POWERS[4] as i32,
                POWERS[5] as i32,
                POWERS[6] as i32,
                POWERS[7] as i32,
            );
            let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            // The trailer allows up to 31 probes; the bytes decide, not the policy.
            let mut left = probes as i32;
            loop {
                let h = _mm256_mullo_epi32(_mm256_set1_epi32(g as i32), powers);
                // Word index 0..15. `permutevar8x32` uses its low 3 bits within each half; the top
                // bit (the hash's sign) picks the half.
                let word = _mm256_srli_epi32::<28>(h);
                let words = _mm256_blendv_epi8(
                    _mm256_permutevar8x32_epi32(low, word),
                    _mm256_permutevar8x32_epi32(high, word),
                    _mm256_srai_epi32::<31>(h),
                );
                // 1 in the lanes of probes still to test (lane − left is negative), else 0.
                let wanted =
                    _mm256_srli_epi32::<31>(_mm256_sub_epi32(lane, _mm256_set1_epi32(left)));
                let bit = _mm256_srli_epi32::<27>(_mm256_slli_epi32::<4>(h));
                // testc: every bit of the mask is set in the words.
                let all = _mm256_testc_si256(words, _mm256_sllv_epi32(wanted, bit)) != 0;
                if left <= 8 || !all {
                    return all;
                }
                g = g.wrapping_mul(POWER_8);
                left -= 8;
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    mod portable {
        use super::super::super::LINE_BYTES;

        /// Never made on this target: the AVX2 probe does not exist here.
        #[derive(Clone, Copy, Debug)]
        pub(crate) enum Avx2 {}

        impl Avx2 {
            /// Always `None`: not an x86_64 target.
            #[inline]
            pub(crate) fn detect() -> Option<Avx2> {
                None
            }

            /// Unreachable: no `Avx2` value exists.
            #[inline]
            pub(crate) fn line_may_match(
                self,
                _line: &[u8; LINE_BYTES],
                _g: u32,
                _probes: u32,
            ) -> bool {
                match self {}
            }

            /// Unreachable: no `Avx2` value exists.
            #[inline]
            pub(crate) fn lines_may_match(
                self,
                _tests: &[super::super::LineTest<'_>],
                _answers: &mut [bool],
            ) {
                match self {}
            }
        }
    }
}

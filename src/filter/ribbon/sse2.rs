//! The query's column parities with SSE2 vector instructions, which every x86-64 CPU has.
//!
//! The portable query (`portable.rs`) works on 64-bit words: each column's 128-bit dot product is
//! four loads and four ANDs, and eight parities fold through some eighty shifts, masks and XORs.
//! Here a column is one 16-byte register: two loads, two ANDs and an XOR; the parities then fold
//! as a tree across registers (128 → 64 → 32 bits a column, four columns a register), five
//! shift-and-XOR steps bring each column's parity to its lane's top bit, and one instruction
//! gathers the bits. A query runs 1.4–1.6 times as fast (`docs/benchmarks.md`, *The Ribbon query
//! in SSE2*); the tests check both against the parities' definition.
#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m128i, _mm_and_si128, _mm_castps_si128, _mm_castsi128_ps, _mm_movemask_ps, _mm_set_epi64x,
    _mm_setzero_si128, _mm_shuffle_ps, _mm_slli_epi32, _mm_unpackhi_epi64, _mm_unpacklo_epi64,
    _mm_xor_si128,
};

use super::solution::{ColumnParities, SEGMENT_BYTES};

/// The column parities in SSE2.
pub(super) struct Sse2;

impl ColumnParities for Sse2 {
    #[inline(always)]
    fn column_parities<const C: usize>(
        here: &[u8],
        next: &[u8],
        in_here: u128,
        in_next: u128,
    ) -> Option<u64> {
        const { assert!(C >= 1 && C <= 16) };
        let here = here.as_chunks::<SEGMENT_BYTES>().0.first_chunk::<C>()?;
        let next = next.as_chunks::<SEGMENT_BYTES>().0.first_chunk::<C>()?;
        // Eight columns at a time; the lengths are constants, so each call unrolls.
        let (here, here_more) = here.split_at(C.min(8));
        let (next, next_more) = next.split_at(C.min(8));
        let mut found = parities(here, next, in_here, in_next);
        if C > 8 {
            found |= parities(here_more, next_more, in_here, in_next) << 8;
        }
        Some(found)
    }

    /// Eight columns at a time; the bits past `columns` are 0.
    #[inline]
    fn many_column_parities(
        here: &[u8],
        next: &[u8],
        in_here: u128,
        in_next: u128,
        columns: u32,
    ) -> Option<u64> {
        let columns = columns as usize;
        let here = here.as_chunks::<SEGMENT_BYTES>().0.get(..columns)?;
        let next = next.as_chunks::<SEGMENT_BYTES>().0.get(..columns)?;
        Some(
            here.chunks(8)
                .zip(next.chunks(8))
                .enumerate()
                .fold(0, |found, (group, (h, n))| {
                    found | parities(h, n, in_here, in_next) << (8 * group)
                }),
        )
    }
}

/// The parities of the columns whose segments are `here` and `next` (at most eight of each; the
/// two as many).
#[inline(always)]
fn parities(
    here: &[[u8; SEGMENT_BYTES]],
    next: &[[u8; SEGMENT_BYTES]],
    in_here: u128,
    in_next: u128,
) -> u64 {
    debug_assert!(here.len() <= 8 && here.len() == next.len());
    // SAFETY: the intrinsics below need SSE2 alone, which is part of the x86_64 baseline (this
    // module is compiled only where `target_feature = "sse2"` is set), so the CPU running this
    // has it; none of them touches memory.
    unsafe {
        let vector = |v: u128| _mm_set_epi64x((v >> 64) as i64, v as i64);
        // Two columns' 128-bit values folded to 64 bits each: `a`'s in the low half, `b`'s in
        // the high.
        let fold_pair = |a, b| _mm_xor_si128(_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b));
        // Four columns' 64-bit folds (two in each of `ab` and `cd`) folded to 32 bits, in the
        // order a, b, c, d across the four 32-bit lanes: lanes 0 and 2 of each input are its
        // columns' low halves, lanes 1 and 3 their high halves.
        let fold_to_lanes = |ab: __m128i, cd: __m128i| {
            let (ab, cd) = (_mm_castsi128_ps(ab), _mm_castsi128_ps(cd));
            let lows = _mm_shuffle_ps::<0b10_00_10_00>(ab, cd);
            let highs = _mm_shuffle_ps::<0b11_01_11_01>(ab, cd);
            _mm_xor_si128(_mm_castps_si128(lows), _mm_castps_si128(highs))
        };
        // Each 32-bit lane's parity gathered into its top bit, and the four top bits into the
        // low four bits of an integer.
        let lane_parities = |x: __m128i| {
            let x = _mm_xor_si128(x, _mm_slli_epi32::<16>(x));
            let x = _mm_xor_si128(x, _mm_slli_epi32::<8>(x));
            let x = _mm_xor_si128(x, _mm_slli_epi32::<4>(x));
            let x = _mm_xor_si128(x, _mm_slli_epi32::<2>(x));
            let x = _mm_xor_si128(x, _mm_slli_epi32::<1>(x));
            _mm_movemask_ps(_mm_castsi128_ps(x)) as u64
        };
        let mask_here = vector(in_here);
        let mask_next = vector(in_next);
        let mut dots = [_mm_setzero_si128(); 8];
        for ((dot, h), n) in dots.iter_mut().zip(here).zip(next) {
            *dot = _mm_xor_si128(
                _mm_and_si128(vector(u128::from_le_bytes(*h)), mask_here),
                _mm_and_si128(vector(u128::from_le_bytes(*n)), mask_next),
            );
        }
        let [d0, d1, d2, d3, d4, d5, d6, d7] = dots;
        // Columns 0–3 in one register's lanes, 4–7 in another's; folding keeps the parity.
        let low = fold_to_lanes(fold_pair(d0, d1), fold_pair(d2, d3));
        let high = fold_to_lanes(fold_pair(d4, d5), fold_pair(d6, d7));
        lane_parities(low) | (lane_parities(high) << 4)
    }
}

//! The query's column parities on 64-bit words, for any target: each column's 128-bit dot
//! product with the row folded to a word, and eight words' parities taken at once. On x86-64 the
//! query uses `sse2.rs` instead, which computes the same bits; the tests check the two agree.

use super::solution::{ColumnParities, SEGMENT_BYTES};

/// The parities of eight words at once: bit `k` of the result is the parity of `words[k]`.
///
/// Without a population-count instruction (the baseline x86-64 target has none), a parity costs
/// a dozen operations; folding the eight words together halves that. Each step halves the width
/// that still counts and packs two words' halves into one: the first step leaves word `k`'s 32-bit
/// XOR fold in a 32-bit lane, the second a 16-bit fold, the third an 8-bit fold in byte `k`;
/// the words enter the steps in the order that puts word `k` in byte `k`. Three more shifts
/// reduce each byte to its parity in bit 0, and a multiplication gathers those eight bits.
#[inline(always)]
pub(super) fn parities8(words: &[u64; 8]) -> u64 {
    #[inline]
    fn pack(low: u64, high: u64, shift: u32, low_lanes: u64) -> u64 {
        ((low ^ (low >> shift)) & low_lanes) | ((high ^ (high << shift)) & !low_lanes)
    }
    let [c0, c1, c2, c3, c4, c5, c6, c7] = *words;
    let halves = 0x0000_0000_ffff_ffff;
    let quarters = 0x0000_ffff_0000_ffff;
    let bytes = 0x00ff_00ff_00ff_00ff;
    // 32-bit lanes [c0, c4], [c2, c6], [c1, c5], [c3, c7]; then 16-bit lanes [c0, c2, c4, c6] and
    // [c1, c3, c5, c7]; then bytes [c0, c1, …, c7].
    let a = pack(
        pack(c0, c4, 32, halves),
        pack(c2, c6, 32, halves),
        16,
        quarters,
    );
    let b = pack(
        pack(c1, c5, 32, halves),
        pack(c3, c7, 32, halves),
        16,
        quarters,
    );
    let mut x = pack(a, b, 8, bytes);
    x ^= x >> 4;
    x ^= x >> 2;
    x ^= x >> 1;
    // Bit 0 of byte k lands at bit 56 + k: the products' other bits stay below bit 56 or above
    // bit 63, and no two of them meet, so nothing carries.
    ((x & 0x0101_0101_0101_0101).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

#[inline]
fn segment(bytes: &[u8]) -> u128 {
    <[u8; SEGMENT_BYTES]>::try_from(bytes).map_or(0, u128::from_le_bytes)
}

/// Each column's 128-bit dot product with a row, folded to 64 bits (same parity), for the `C`
/// columns whose segments start `here` (this block's) and `next` (the next block's); the words
/// of columns `C..8` are 0. `None` if either slice holds fewer than `C` segments (a consistent
/// layout never does).
///
/// `C` is a constant so that the loop unrolls into straight-line loads, ANDs and XORs.
#[inline(always)]
fn fold<const C: usize>(
    here: &[u8],
    next: &[u8],
    in_here: u128,
    in_next: u128,
) -> Option<[u64; 8]> {
    if here.len() < C * SEGMENT_BYTES || next.len() < C * SEGMENT_BYTES {
        return None;
    }
    let mut folded = [0u64; 8];
    let mut j = 0;
    while j < C {
        let x = (segment_at(here, j) & in_here) ^ (segment_at(next, j) & in_next);
        folded[j] = (x as u64) ^ ((x >> 64) as u64);
        j += 1;
    }
    Some(folded)
}

/// Segment `j` of `bytes` (which holds it).
#[inline(always)]
fn segment_at(bytes: &[u8], j: usize) -> u128 {
    let mut s = [0u8; SEGMENT_BYTES];
    s.copy_from_slice(&bytes[j * SEGMENT_BYTES..(j + 1) * SEGMENT_BYTES]);
    u128::from_le_bytes(s)
}

/// The portable column parities.
pub(super) struct Portable;

impl ColumnParities for Portable {
    #[inline(always)]
    fn column_parities<const C: usize>(
        here: &[u8],
        next: &[u8],
        in_here: u128,
        in_next: u128,
    ) -> Option<u64> {
        if C > 8 {
            return Self::many_column_parities(here, next, in_here, in_next, C as u32);
        }
        fold::<C>(here, next, in_here, in_next).map(|folded| parities8(&folded))
    }

    /// In groups of eight, the columns past the block's last repeating it.
    #[inline]
    fn many_column_parities(
        here: &[u8],
        next: &[u8],
        in_here: u128,
        in_next: u128,
        columns: u32,
    ) -> Option<u64> {
        let cols = columns as usize * SEGMENT_BYTES;
        let (here, next) = (here.get(..cols)?, next.get(..cols)?);
        let last = (columns as usize).max(1) - 1;
        let mut found = 0u64;
        for group in 0..=last / 8 {
            let mut folded = [0u64; 8];
            for (k, word) in folded.iter_mut().enumerate() {
                let at = (group * 8 + k).min(last) * SEGMENT_BYTES;
                let x = (segment(here.get(at..at + SEGMENT_BYTES)?) & in_here)
                    ^ (segment(next.get(at..at + SEGMENT_BYTES)?) & in_next);
                *word = (x as u64) ^ ((x >> 64) as u64);
            }
            found |= parities8(&folded) << (8 * group);
        }
        Some(found)
    }
}

//! The interleaved solution storage: how the solution matrix is laid out in the filter bytes, how
//! many result columns each block has (the fractional bits per key), and the query's dot product.
//!
//! The solution has one row per slot and one column per result bit. Slots come in blocks of 128;
//! within a block each column is one 128-bit *segment* (bit `k` is the block's slot `k`), and a
//! block's segments follow each other: column-major in the small, for a query that takes a
//! column's parity with one AND, row-major in the large, so that a query reads two adjacent blocks.
//! The first `U` blocks have one column fewer than the rest, which is how a filter spends any
//! whole number of segments, so any bits per key: see `docs/filters.md`, *Ribbon*.

/// Slots per block: the width of a coefficient row.
pub(super) const BLOCK_SLOTS: u32 = 128;
/// Bytes of one segment (128 bits of one column).
pub(super) const SEGMENT_BYTES: usize = 16;
/// The most result columns a block may have: the result row is 64 bits.
pub(super) const MAX_COLUMNS: u32 = 64;
/// The block count is stored in 24 bits.
pub(super) const MAX_BLOCKS: u32 = (1 << 24) - 1;

/// The shape of a solution: how many blocks, and how many result columns each has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// `B`: blocks of 128 slots (at least 1).
    blocks: u32,
    /// The columns of the last blocks (0..=64).
    upper_columns: u32,
    /// `U`: blocks `0..U` have `upper_columns − 1` columns, blocks `U..B` have `upper_columns`.
    /// `U < B` always.
    upper_start_block: u32,
}

impl Layout {
    /// The layout a filter's trailer describes: `blocks` blocks of which the last have
    /// `upper_columns` columns, `segments` in all. The fewer-column blocks number
    /// `U = upper_columns · blocks − segments`, which must be below `blocks` (so `upper_columns`
    /// is `ceil(segments / blocks)`, checked without a division, which would cost a query more
    /// than the rest of its arithmetic). `None` if inconsistent or out of range.
    #[inline]
    pub(super) fn stored(blocks: u32, segments: u64, upper_columns: u32) -> Option<Layout> {
        if blocks == 0 || blocks > MAX_BLOCKS || upper_columns > MAX_COLUMNS {
            return None;
        }
        let full = u64::from(upper_columns) * u64::from(blocks);
        let lower = full.checked_sub(segments)?;
        // lower < blocks ≤ 2^24, so it fits a u32.
        (lower < u64::from(blocks)).then_some(Layout {
            blocks,
            upper_columns,
            upper_start_block: lower as u32,
        })
    }

    /// `blocks` blocks sharing `segments` segments as evenly as possible, the fuller blocks last:
    /// `upper_columns = ceil(segments / blocks)`, `U = upper_columns · blocks − segments`.
    ///
    /// `None` for no blocks, more than [`MAX_BLOCKS`], or more than 64 columns a block.
    pub(super) fn new(blocks: u32, segments: u64) -> Option<Layout> {
        if blocks == 0 || blocks > MAX_BLOCKS {
            return None;
        }
        let b = u64::from(blocks);
        if segments > u64::from(MAX_COLUMNS) * b {
            return None;
        }
        let upper = segments.div_ceil(b);
        // upper ≤ 64 and U < B, so both fit a u32.
        Some(Layout {
            blocks,
            upper_columns: upper as u32,
            upper_start_block: (upper * b - segments) as u32,
        })
    }

    /// Blocks of 128 slots.
    pub(super) fn blocks(&self) -> u32 {
        self.blocks
    }

    /// Slots: `128 · B`.
    pub(super) fn slots(&self) -> usize {
        self.blocks as usize * BLOCK_SLOTS as usize
    }

    /// Segments in all: `B · upper − U`.
    pub(super) fn segments(&self) -> usize {
        (self.blocks * self.upper_columns - self.upper_start_block) as usize
    }

    /// The slots a key's row may start at: `128 · B − 127`, so that the row's 128 slots fit.
    #[inline]
    pub(super) fn num_starts(&self) -> u32 {
        self.blocks * BLOCK_SLOTS - (BLOCK_SLOTS - 1)
    }

    /// The most columns any block has: the result bits the banding must satisfy.
    pub(super) fn upper_columns(&self) -> u32 {
        self.upper_columns
    }

    /// Result columns of block `block`.
    #[inline]
    pub(super) fn columns_of(&self, block: u32) -> u32 {
        self.upper_columns - u32::from(block < self.upper_start_block)
    }

    /// Index of the first segment of block `block`.
    #[inline]
    pub(super) fn first_segment_of(&self, block: u32) -> usize {
        (block * self.upper_columns - block.min(self.upper_start_block)) as usize
    }

    /// The false positive rate of a solution of this shape: a key starting in a block of `c`
    /// columns matches by chance with probability `2^-c`; starts are uniform over the
    /// `128 · B − 127` start slots, of which `128 · U` lie in the blocks with one column fewer.
    pub(super) fn fp_rate(&self) -> f64 {
        let lower_starts = f64::from(self.upper_start_block) * f64::from(BLOCK_SLOTS);
        let lower_portion = (lower_starts / f64::from(self.num_starts())).min(1.0);
        let upper = 0.5f64.powi(self.upper_columns as i32);
        lower_portion * 2.0 * upper + (1.0 - lower_portion) * upper
    }
}

/// The low `columns` bits set (all 64 for 64, none for 0).
#[inline]
pub(super) fn column_mask(columns: u32) -> u64 {
    1u64.checked_shl(columns).unwrap_or(0).wrapping_sub(1)
}

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
/// `C` is a constant so that the loop unrolls into straight-line loads, ANDs and XORs, which the
/// compiler does with 128-bit vector instructions (SSE2, which every x86-64 has).
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

/// Whether the solution in `data` (segments of `layout`) gives the row starting at slot `start`
/// with coefficients `coefficients` the result bits `result` (only its block's columns count).
/// Bytes too short for the layout answer `true`.
#[inline(always)]
pub(super) fn row_matches(
    data: &[u8],
    layout: &Layout,
    start: u32,
    coefficients: u128,
    result: u64,
) -> bool {
    let block = start / BLOCK_SLOTS;
    let offset = start % BLOCK_SLOTS;
    let columns = layout.columns_of(block);
    let mask = column_mask(columns);
    let here_at = layout.first_segment_of(block) * SEGMENT_BYTES;
    // Coefficient k applies to slot start + k: slot offset + k of this block while that is below
    // 128, else slot offset + k − 128 of the next block, whose first `columns` segments are the
    // same columns (the next block has as many columns or one more). With offset 0 the row lies
    // in this block alone (always so in the last block, which has no next): then no coefficient
    // reaches the next block and its bytes are this block's, read for nothing, which keeps the
    // choice a conditional move instead of a branch.
    let in_here = coefficients << offset;
    let in_next = (coefficients >> 1) >> (BLOCK_SLOTS - 1 - offset);
    let next_at = if offset == 0 {
        here_at
    } else {
        here_at + columns as usize * SEGMENT_BYTES
    };
    let (Some(here), Some(next)) = (data.get(here_at..), data.get(next_at..)) else {
        return true;
    };
    // Every column is computed and compared at once: no early exit, so an absent key (the common
    // case in an LSM tree) costs what a present key costs, with no mispredicted branch. Nor does
    // the work depend on the block's column count, which differs between neighbouring blocks:
    // the query reads the filter's upper column count of segments from each block (a block with
    // one column fewer lends its last from the next block, always there), and the columns past
    // the block's are masked off. The count is the same for every query of a filter, and of every
    // filter written at one bits/key, so the dispatch below is a well-predicted branch.
    let upper = layout.upper_columns();
    let folded = match upper {
        0 => return true,
        1 => fold::<1>(here, next, in_here, in_next),
        2 => fold::<2>(here, next, in_here, in_next),
        3 => fold::<3>(here, next, in_here, in_next),
        4 => fold::<4>(here, next, in_here, in_next),
        5 => fold::<5>(here, next, in_here, in_next),
        6 => fold::<6>(here, next, in_here, in_next),
        7 => fold::<7>(here, next, in_here, in_next),
        8 => fold::<8>(here, next, in_here, in_next),
        _ => {
            // Over 8 columns (over about 8.3 bits/key): groups of eight, the columns past the
            // block's last repeating it.
            let cols = columns as usize * SEGMENT_BYTES;
            let (Some(here), Some(next)) = (here.get(..cols), next.get(..cols)) else {
                return true;
            };
            let last = columns as usize - 1;
            let mut found = 0u64;
            for group in 0..=last / 8 {
                let mut folded = [0u64; 8];
                for (k, word) in folded.iter_mut().enumerate() {
                    let at = (group * 8 + k).min(last) * SEGMENT_BYTES;
                    let x = (segment(&here[at..at + SEGMENT_BYTES]) & in_here)
                        ^ (segment(&next[at..at + SEGMENT_BYTES]) & in_next);
                    *word = (x as u64) ^ ((x >> 64) as u64);
                }
                found |= parities8(&folded) << (8 * group);
            }
            return found & mask == result & mask;
        }
    };
    match folded {
        Some(folded) => parities8(&folded) & mask == result & mask,
        None => true,
    }
}

/// Appends the segments, each as 16 little-endian bytes.
pub(super) fn write_segments(segments: &[u128], out: &mut Vec<u8>) {
    out.reserve(segments.len() * SEGMENT_BYTES);
    for s in segments {
        out.extend_from_slice(&s.to_le_bytes());
    }
}

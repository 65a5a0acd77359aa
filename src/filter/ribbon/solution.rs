//! The interleaved solution storage: how the solution matrix is laid out in the filter bytes, how
//! many result columns each block has (the fractional bits per key), and the query's dot product.
//!
//! The solution has one row per slot and one column per result bit. Slots come in blocks of 128;
//! within a block each column is one 128-bit *segment* (bit `k` is the block's slot `k`), and a
//! block's segments follow each other: column-major in the small, for a query that takes a
//! column's parity with one AND, row-major in the large, so that a query reads two adjacent blocks.
//! The first `U` blocks have one column fewer than the rest, which is how a filter spends any
//! whole number of segments, so any bits per key: see `docs/filters.md`, *Ribbon*.

/// The column parities this build's queries use: SSE2 on x86-64, else the portable ones.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub(super) type Parities = super::sse2::Sse2;
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
pub(super) type Parities = super::portable::Portable;

/// How a query takes its column parities (`portable.rs`, `sse2.rs`): bit `j` of the answer is the
/// parity of column `j`'s 128-bit dot product with the row, for the columns whose segments start
/// `here` (this block's) and `next` (the next block's); `in_here` and `in_next` are the row's
/// coefficients for the slots of each. `None` if either slice holds fewer segments than asked (a
/// consistent layout never does).
pub(super) trait ColumnParities {
    /// The parities of `C ≤ 16` columns (a constant, so that the work unrolls).
    fn column_parities<const C: usize>(
        here: &[u8],
        next: &[u8],
        in_here: u128,
        in_next: u128,
    ) -> Option<u64>;

    /// The parities of any number of `columns` (up to 64; more than 16 above about 16.5
    /// bits/key). Bits at and above `columns` are unspecified.
    fn many_column_parities(
        here: &[u8],
        next: &[u8],
        in_here: u128,
        in_next: u128,
        columns: u32,
    ) -> Option<u64>;
}

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

/// Whether the solution in `data` (segments of `layout`) gives the row starting at slot `start`
/// with coefficients `coefficients` the result bits `result` (only its block's columns count).
/// Bytes too short for the layout answer `true`.
#[inline(always)]
pub(super) fn row_matches<P: ColumnParities>(
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
    if upper == 0 {
        return true;
    }
    match column_parities_of::<P>(upper, columns, here, next, in_here, in_next) {
        Some(found) => found & mask == result & mask,
        None => true,
    }
}

/// `P`'s parities of a row for a filter of `upper` columns (1 or more) in a block of `columns`:
/// up to 16 by a code path whose count is a constant, so that it unrolls; more, the block's own
/// `columns` in groups.
#[inline(always)]
pub(super) fn column_parities_of<P: ColumnParities>(
    upper: u32,
    columns: u32,
    here: &[u8],
    next: &[u8],
    in_here: u128,
    in_next: u128,
) -> Option<u64> {
    match upper {
        1 => P::column_parities::<1>(here, next, in_here, in_next),
        2 => P::column_parities::<2>(here, next, in_here, in_next),
        3 => P::column_parities::<3>(here, next, in_here, in_next),
        4 => P::column_parities::<4>(here, next, in_here, in_next),
        5 => P::column_parities::<5>(here, next, in_here, in_next),
        6 => P::column_parities::<6>(here, next, in_here, in_next),
        7 => P::column_parities::<7>(here, next, in_here, in_next),
        8 => P::column_parities::<8>(here, next, in_here, in_next),
        9 => P::column_parities::<9>(here, next, in_here, in_next),
        10 => P::column_parities::<10>(here, next, in_here, in_next),
        11 => P::column_parities::<11>(here, next, in_here, in_next),
        12 => P::column_parities::<12>(here, next, in_here, in_next),
        13 => P::column_parities::<13>(here, next, in_here, in_next),
        14 => P::column_parities::<14>(here, next, in_here, in_next),
        15 => P::column_parities::<15>(here, next, in_here, in_next),
        16 => P::column_parities::<16>(here, next, in_here, in_next),
        _ => P::many_column_parities(here, next, in_here, in_next, columns),
    }
}

/// Appends the segments, each as 16 little-endian bytes.
pub(super) fn write_segments(segments: &[u128], out: &mut Vec<u8>) {
    out.reserve(segments.len() * SEGMENT_BYTES);
    for s in segments {
        out.extend_from_slice(&s.to_le_bytes());
    }
}

//! Solving: how many slots a key set needs, banding (Gaussian elimination on the fly, one key at
//! a time) and back-substitution into the interleaved solution.
//!
//! Each key is one equation over GF(2): its 128 coefficients, at slots `start..start + 128`, dotted
//! with each solution column, must give its result bit for that column. Banding keeps the system
//! in upper-triangular band form as keys arrive: slot `i` holds at most one equation, whose first
//! coefficient is at `i`. A new equation goes to its first coefficient's slot if that is free;
//! otherwise the stored equation is XORed into it, which clears that coefficient, and it moves on
//! to its next non-zero coefficient. Coefficients only ever move right and stay within the key's
//! 128 slots, so every equation stays a 128-bit window. An equation that cancels to nothing is
//! redundant (a repeated key) if its result bits cancel too, and makes the system unsolvable with
//! this seed if they do not.

use super::solution::{Layout, BLOCK_SLOTS, MAX_COLUMNS};

/// For `2^k` slots (`k` the index, 8..=17), how many keys banding takes with at most a one in 20
/// chance of failing for one seed; 0 where the table has no figure. Measured by RocksDB for its
/// 128-bit rows without "smash" (`util/ribbon_config.cc`, `kOneIn20`).
const KEYS_FOR_POW2_SLOTS: [f64; 18] = [
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 248.851, 499.532, 1001.26, 2003.97, 4005.59, 8000.39,
    15966.6, 31828.1, 63447.3, 126506.0,
];
/// Beyond `2^17` slots, each doubling of the slots adds this much to the slots needed per key
/// (the same source).
const OVERHEAD_PER_DOUBLING: f64 = 0.0038;
/// The fewest slots a filter has: two blocks. (With one, every key would start at slot 0.)
pub(super) const MIN_SLOTS: u64 = 2 * BLOCK_SLOTS as u64;

/// Keys `2^log2_slots` slots take at a one-in-20 failure chance per seed (0 if unknown).
fn keys_for_pow2_slots(log2_slots: u32) -> f64 {
    match KEYS_FOR_POW2_SLOTS.get(log2_slots as usize) {
        Some(&keys) => keys,
        None => {
            let last = KEYS_FOR_POW2_SLOTS.len() as u32 - 1;
            let last_overhead = 2f64.powi(last as i32) / KEYS_FOR_POW2_SLOTS[last as usize];
            let overhead = last_overhead + f64::from(log2_slots - last) * OVERHEAD_PER_DOUBLING;
            2f64.powi(log2_slots as i32) / overhead
        }
    }
}

/// The slots for `num_keys` keys: at most a one-in-20 chance that banding fails for one seed,
/// interpolated linearly between the powers of two around it, rounded up to whole blocks, at least
/// [`MIN_SLOTS`]. About 1.024 slots per key at 10k keys, 1.035 at 100k, 1.048 at 1M.
pub(super) fn slots_for_keys(num_keys: u64) -> u64 {
    let n = num_keys as f64;
    let mut log2 = 8;
    if n <= keys_for_pow2_slots(log2) {
        return MIN_SLOTS;
    }
    while keys_for_pow2_slots(log2 + 1) <= n {
        log2 += 1;
    }
    let (low, high) = (keys_for_pow2_slots(log2), keys_for_pow2_slots(log2 + 1));
    let slots = 2f64.powi(log2 as i32) * (1.0 + (n - low) / (high - low));
    let block = u64::from(BLOCK_SLOTS);
    (slots.ceil() as u64).div_ceil(block) * block
}

/// The banded system: per slot, the equation whose first coefficient is there (coefficients 0
/// if none) and its result bits. Kept by the builder across filters.
#[derive(Default)]
pub(super) struct Banding {
    coefficients: Vec<u128>,
    results: Vec<u64>,
}

impl Banding {
    /// Empties the system for `slots` slots.
    pub(super) fn reset(&mut self, slots: usize) {
        self.coefficients.clear();
        self.coefficients.resize(slots, 0);
        self.results.clear();
        self.results.resize(slots, 0);
    }

    /// Adds the equation of a key starting at `start` (`start + 128 ≤ slots`) with coefficients
    /// `coefficients` (bit 0 set: the row starts at `start`) and result bits `result`. `false` if
    /// it contradicts the equations already banded: this seed cannot solve the key set.
    #[inline]
    pub(super) fn add(&mut self, start: u32, coefficients: u128, result: u64) -> bool {
        let mut slot = start as usize;
        let mut row = coefficients;
        let mut result = result;
        loop {
            // `row` has bit 0 set and spans slots `slot..` up to the key's last slot, which is in
            // range: `slot` is.
            let existing = self.coefficients[slot];
            if existing == 0 {
                self.coefficients[slot] = row;
                self.results[slot] = result;
                return true;
            }
            // Both rows have their first coefficient at `slot`: the XOR clears it.
            row ^= existing;
            result ^= self.results[slot];
            if row == 0 {
                // The key's equation is a sum of banded ones: harmless if the results agree.
                return result == 0;
            }
            let skip = row.trailing_zeros();
            slot += skip as usize;
            row >>= skip;
        }
    }

    /// Back-substitution: the solution of the banded system in `layout`'s interleaved segments.
    ///
    /// Going from the last slot down, the solution bit of slot `i` in column `j` is whatever makes
    /// slot `i`'s equation hold given the bits of the slots after it (0 for a slot without an
    /// equation). Each column's last 128 bits are kept as one `u128` (bit 0 the newest, slot `i`),
    /// which after a block's 128 slots is exactly that block's segment of the column.
    pub(super) fn solve(&self, layout: &Layout) -> Vec<u128> {
        let mut segments = vec![0u128; layout.segments()];
        let mut state = [0u128; MAX_COLUMNS as usize];
        let block_slots = BLOCK_SLOTS as usize;
        for block in (0..layout.blocks()).rev() {
            // In the blocks with one column fewer, the last column is no longer needed.
            let columns = layout.columns_of(block) as usize;
            let state = &mut state[..columns];
            let first_slot = block as usize * block_slots;
            let rows = &self.coefficients[first_slot..first_slot + block_slots];
            let results = &self.results[first_slot..first_slot + block_slots];
            for (&row, &result) in rows.iter().zip(results).rev() {
                for (j, column) in state.iter_mut().enumerate() {
                    let x = (*column << 1) & row;
                    let bit = ((x as u64) ^ ((x >> 64) as u64)).count_ones() as u64 & 1;
                    *column = (*column << 1) | u128::from(bit ^ ((result >> j) & 1));
                }
            }
            let first = layout.first_segment_of(block);
            segments[first..first + columns].copy_from_slice(state);
        }
        segments
    }
}

//! How filter memory is spread over the levels: uniformly, or as Monkey derives (Dayan,
//! Athanassoulis, Idreos, SIGMOD 2017).
//!
//! A missing key costs one wasted data-block read per *run* whose filter says "maybe": each L0
//! table and each deeper level is a run, and the expected cost is the sum of the runs' FP rates.
//! For a fixed total of filter bits, that sum is smallest when each run's FP rate is proportional
//! to its number of entries, so small runs (L0, L1) get more bits per key and the last level fewer.

/// The rule that sets each new table's bits per key.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum FilterAllocation {
    /// Every table gets the policy's bits per key.
    #[default]
    Uniform,
    /// The same total memory as uniform at the policy's bits per key, spread over the runs so that
    /// each run's FP rate is proportional to its entries (Monkey). Tables keep the bits they were
    /// built with; each new table also makes up for how far the tables that stay have drifted from
    /// Monkey's shape as the tree grew, so the tree's filter memory stays within 2 % of uniform's
    /// (−1.8 % to +1.5 % on the growing tree of `tests/monkey.rs`, most of it the filters'
    /// rounding on the small trees of the first steps). Policies without a bits-per-key knob (see
    /// [`FilterPolicy::with_bits_per_key`](crate::FilterPolicy::with_bits_per_key)) stay uniform.
    Monkey,
}

/// (ln 2)²: the e-folds a bloom's FP rate drops per bit per key (a Ribbon filter's drops ln 2).
pub(crate) const LN2_SQUARED: f64 = std::f64::consts::LN_2 * std::f64::consts::LN_2;

/// How many e-folds `policy`'s FP rate drops per added bit per key, from its theory between 8 and
/// 12 bits per key; a bloom's (ln 2)² for a policy without theory.
pub(crate) fn nats_per_bit(policy: &dyn crate::FilterPolicy) -> f64 {
    match (
        policy.theoretical_fp_rate(8.0),
        policy.theoretical_fp_rate(12.0),
    ) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 && a > b => (a.ln() - b.ln()) / 4.0,
        _ => LN2_SQUARED,
    }
}

/// Monkey's bits per key for each run: run `i` holds `entries[i]` keys and its false positive rate
/// is set in proportion to `shape[i]`, and together the runs spend `average` bits per key.
///
/// Sets pᵢ = c · shapeᵢ, with bitsᵢ = −ln(pᵢ) / `nats_per_bit` ((ln 2)² for a bloom, ln 2 for a
/// Ribbon filter: see [`nats_per_bit`]), choosing c so that
/// Σ entriesᵢ · bitsᵢ = average · Σ entriesᵢ. With `shape` equal to `entries` this is Monkey's
/// optimum: minimising a missing key's expected wasted reads, Σ pᵢ, for that memory gives pᵢ ∝
/// entriesᵢ. A caller passes another shape for a run whose size is about to change (a last level
/// still growing toward the size of the level above), so that the bits its tables keep suit it
/// for longer than the moment they were written. Runs whose pᵢ would reach 1 get no bits (they are so large that a filter buys less
/// there than anywhere else) and the rest is solved again. Runs with no entries or no shape get
/// no bits.
pub(crate) fn monkey_bits_per_key(
    shape: &[f64],
    entries: &[f64],
    average: f64,
    nats_per_bit: f64,
) -> Vec<f64> {
    debug_assert_eq!(shape.len(), entries.len());
    let mut bits = vec![0.0; shape.len().min(entries.len())];
    let mut active: Vec<usize> = (0..bits.len())
        .filter(|&i| shape[i] > 0.0 && entries[i] > 0.0)
        .collect();
    let total: f64 = active.iter().map(|&i| entries[i]).sum();
    if total <= 0.0 || average.is_nan() || average <= 0.0 {
        return bits;
    }
    let budget = average * total * nats_per_bit; // in units of nats × entries
    loop {
        let n: f64 = active.iter().map(|&i| entries[i]).sum();
        let n_ln_shape: f64 = active.iter().map(|&i| entries[i] * shape[i].ln()).sum();
        // Σ nᵢ · (−ln c − ln shapeᵢ) = budget  ⇒  ln c = −(budget + Σ nᵢ ln shapeᵢ) / Σ nᵢ
        let ln_c = -(budget + n_ln_shape) / n;
        let before = active.len();
        active.retain(|&i| ln_c + shape[i].ln() < 0.0);
        if active.len() == before {
            for &i in &active {
                bits[i] = -(ln_c + shape[i].ln()) / nats_per_bit;
            }
            return bits;
        }
        if active.is_empty() {
            return bits;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spent(runs: &[f64], bits: &[f64]) -> f64 {
        runs.iter().zip(bits).map(|(n, b)| n * b).sum::<f64>() / runs.iter().sum::<f64>()
    }

    fn expected_fp_sum(bits: &[f64]) -> f64 {
        bits.iter().map(|b| (-b * LN2_SQUARED).exp()).sum()
    }

    #[test]
    fn allocation_spends_exactly_the_budget_and_beats_uniform() {
        // Four L0 tables of 1, then levels growing ten-fold.
        let runs = [1.0, 1.0, 1.0, 1.0, 10.0, 100.0, 1000.0];
        for average in [2.0, 5.0, 10.0, 15.0] {
            let bits = monkey_bits_per_key(&runs, &runs, average, LN2_SQUARED);
            assert!((spent(&runs, &bits) - average).abs() < 1e-9, "{bits:?}");
            let uniform = vec![average; runs.len()];
            assert!(
                expected_fp_sum(&bits) <= expected_fp_sum(&uniform),
                "{bits:?}"
            );
            // Small runs get more bits than large ones.
            assert!(bits.windows(2).all(|w| w[0] >= w[1] - 1e-9), "{bits:?}");
        }
        // Ten-fold larger levels get ln 10 / (ln 2)² ≈ 4.8 fewer bits per key.
        let bits = monkey_bits_per_key(&runs, &runs, 10.0, LN2_SQUARED);
        assert!((bits[4] - bits[5] - 10f64.ln() / LN2_SQUARED).abs() < 1e-9);
    }

    #[test]
    fn a_tight_budget_leaves_the_largest_run_without_a_filter() {
        let runs = [1.0, 10.0, 100.0, 10_000.0];
        let bits = monkey_bits_per_key(&runs, &runs, 0.05, LN2_SQUARED);
        assert_eq!(bits[3], 0.0);
        assert!(bits[0] > 0.0);
        assert!((spent(&runs, &bits) - 0.05).abs() < 1e-9, "{bits:?}");
    }

    #[test]
    fn the_shape_sets_the_rates_and_the_entries_the_budget() {
        // The last run holds 10 but is set as if it held 100 (a level on its way there): it gets
        // a tenth of the rate of a run of 10 with the same c, and the memory is still the budget.
        let entries = [1.0, 10.0, 10.0];
        let shape = [1.0, 10.0, 100.0];
        let bits = monkey_bits_per_key(&shape, &entries, 8.0, LN2_SQUARED);
        assert!((spent(&entries, &bits) - 8.0).abs() < 1e-9, "{bits:?}");
        assert!((bits[1] - bits[2] - 10f64.ln() / LN2_SQUARED).abs() < 1e-9);
        assert!((bits[0] - bits[1] - 10f64.ln() / LN2_SQUARED).abs() < 1e-9);
        // A run with no entries spends nothing and gets nothing.
        let bits = monkey_bits_per_key(&[1.0, 10.0], &[0.0, 10.0], 8.0, LN2_SQUARED);
        assert_eq!(bits[0], 0.0);
        assert!((bits[1] - 8.0).abs() < 1e-9);
    }

    #[test]
    fn a_ribbon_filter_gives_larger_runs_fewer_bits_at_its_own_slope() {
        use crate::filter::{CacheLocalBloom, Ribbon};
        let ribbon = nats_per_bit(&Ribbon::new(8.0));
        assert!((ribbon - std::f64::consts::LN_2).abs() < 0.05, "{ribbon}");
        let bloom = nats_per_bit(&CacheLocalBloom::new(8.0));
        assert!((bloom - LN2_SQUARED).abs() < 0.05, "{bloom}");
        // Ten-fold larger runs: ln 10 / ln 2 ≈ 3.3 fewer bits for Ribbon, ≈ 4.8 for a bloom.
        let runs = [1.0, 10.0, 100.0];
        let b = monkey_bits_per_key(&runs, &runs, 8.0, ribbon);
        assert!((b[0] - b[1] - 10f64.ln() / ribbon).abs() < 1e-9);
        assert!(b[0] - b[1] < 3.5);
    }

    #[test]
    fn degenerate_inputs_give_no_bits() {
        let l = LN2_SQUARED;
        assert_eq!(monkey_bits_per_key(&[], &[], 10.0, l), Vec::<f64>::new());
        assert_eq!(
            monkey_bits_per_key(&[0.0, 0.0], &[0.0, 0.0], 10.0, l),
            vec![0.0, 0.0]
        );
        let one = monkey_bits_per_key(&[5.0], &[5.0], 10.0, LN2_SQUARED);
        assert!((one[0] - 10.0).abs() < 1e-9);
        assert_eq!(monkey_bits_per_key(&[5.0], &[5.0], f64::NAN, l), vec![0.0]);
    }
}

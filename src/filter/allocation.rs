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
    /// each run's FP rate is proportional to its entries (Monkey). Policies without a bits-per-key
    /// knob (see [`FilterPolicy::with_bits_per_key`](crate::FilterPolicy::with_bits_per_key)) stay
    /// uniform.
    Monkey,
}

/// (ln 2)², the bits per key a bloom needs per e-fold drop of its FP rate.
const LN2_SQUARED: f64 = std::f64::consts::LN_2 * std::f64::consts::LN_2;

/// Monkey's bits per key for each run, given each run's entries (any unit proportional to them)
/// and the average bits per key the whole tree may spend.
///
/// Solves: minimise Σ pᵢ subject to Σ nᵢ · bitsᵢ = average · Σ nᵢ, with bitsᵢ = −ln(pᵢ) / (ln 2)²
/// and pᵢ ≤ 1. The optimum is pᵢ = c · nᵢ; runs whose pᵢ would reach 1 get no bits (they are so
/// large that a filter buys less there than anywhere else) and the rest is solved again.
pub(crate) fn monkey_bits_per_key(runs: &[f64], average: f64) -> Vec<f64> {
    let mut bits = vec![0.0; runs.len()];
    let total: f64 = runs.iter().filter(|n| **n > 0.0).sum();
    if total <= 0.0 || average <= 0.0 {
        return bits;
    }
    let budget = average * total * LN2_SQUARED; // in units of nats × entries
    let mut active: Vec<usize> = (0..runs.len()).filter(|&i| runs[i] > 0.0).collect();
    loop {
        let n: f64 = active.iter().map(|&i| runs[i]).sum();
        let n_ln_n: f64 = active.iter().map(|&i| runs[i] * runs[i].ln()).sum();
        // Σ nᵢ · (−ln c − ln nᵢ) = budget  ⇒  ln c = −(budget + Σ nᵢ ln nᵢ) / Σ nᵢ
        let ln_c = -(budget + n_ln_n) / n;
        let before = active.len();
        active.retain(|&i| ln_c + runs[i].ln() < 0.0);
        if active.len() == before {
            for &i in &active {
                bits[i] = -(ln_c + runs[i].ln()) / LN2_SQUARED;
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
            let bits = monkey_bits_per_key(&runs, average);
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
        let bits = monkey_bits_per_key(&runs, 10.0);
        assert!((bits[4] - bits[5] - 10f64.ln() / LN2_SQUARED).abs() < 1e-9);
    }

    #[test]
    fn a_tight_budget_leaves_the_largest_run_without_a_filter() {
        let runs = [1.0, 10.0, 100.0, 10_000.0];
        let bits = monkey_bits_per_key(&runs, 0.05);
        assert_eq!(bits[3], 0.0);
        assert!(bits[0] > 0.0);
        assert!((spent(&runs, &bits) - 0.05).abs() < 1e-9, "{bits:?}");
    }

    #[test]
    fn degenerate_inputs_give_no_bits() {
        assert_eq!(monkey_bits_per_key(&[], 10.0), Vec::<f64>::new());
        assert_eq!(monkey_bits_per_key(&[0.0, 0.0], 10.0), vec![0.0, 0.0]);
        let one = monkey_bits_per_key(&[5.0], 10.0);
        assert!((one[0] - 10.0).abs() < 1e-9);
    }
}

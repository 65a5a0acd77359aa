//! How filter memory is spread over the levels: uniformly, or as Monkey derives (Dayan,
//! Athanassoulis, Idreos, SIGMOD 2017), for the tree the store settles in.
//!
//! A missing key costs one wasted data-block read per *run* whose filter says "maybe": each L0
//! table and each deeper level is a run, and the expected cost is the sum of the runs' FP rates.
//! For a fixed total of filter bits, that sum is smallest when each run's FP rate is proportional
//! to its number of entries, so small runs (L0, L1) get more bits per key and the last level fewer.
//! The derivation, and why the plan is made for the settled tree: docs/filters.md, *Filter memory
//! per level (Monkey)*.

/// The rule that sets each new table's bits per key.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum FilterAllocation {
    /// Every table gets the policy's bits per key.
    #[default]
    Uniform,
    /// Uniform's filter memory at the policy's bits per key, spread over the levels so that each
    /// run's FP rate is proportional to its entries (Monkey), for the tree the store settles in:
    /// L0 merged into L1 (with `compact_l0_when_idle`, the default) or else one table, every
    /// level above the deepest at most at its target size, the deepest with the rest. Each new
    /// table of a level takes the bits of its level in that plan, lowered only where the tree as
    /// it settles would otherwise spend more than 2 % over uniform's filter bytes; an L0 table
    /// that leaves before the tree settles takes Monkey's bits for the tree as it is, held to
    /// 4.5 % over uniform's while writes flow; a table moves down a level keeping its filter, and
    /// once writes pause, tables whose bits are more than a quarter bit per key from their level's
    /// are rewritten with them, one at a time, when no other compaction is due. `siftdb.stats`
    /// shows how far the tables are from Monkey's optimum for the current shape. Policies without
    /// a bits-per-key knob (see
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

/// Monkey's bits per key for runs `(keys, met)` that together spend `average` bits per key, each
/// met by the share `met` (in (0, 1]) of the missing keys: a run's wasted reads are `met · rate`,
/// so the rates that waste least are proportional to the runs' *effective* keys `eᵢ = nᵢ / metᵢ`,
/// which gives `average + ln(G / eᵢ) / nats_per_bit` bits per key, where `ln G = Σ nᵢ ln eᵢ / Σ
/// nᵢ`, so that `Σ nᵢ · bitsᵢ = average · Σ nᵢ`. A run every key meets gets `ln(1 / met) /
/// nats_per_bit` more than one of its size met by `met`. A run whose rate would reach 1 gets no
/// bits (it is so large that a filter buys less there than anywhere else) and the others are
/// solved again; runs with no keys get no bits.
pub(crate) fn monkey_bits_per_key_met(
    runs: &[(f64, f64)],
    average: f64,
    nats_per_bit: f64,
) -> Vec<f64> {
    let counted: Vec<(f64, f64, f64)> = runs.iter().map(|&(n, met)| (1.0, n, met)).collect();
    let rule = MonkeyRule::solve_met(&counted, average, nats_per_bit);
    let largest = rule.solved.map_or(0.0, |(_, _, largest)| largest);
    runs.iter()
        .map(|&(n, met)| {
            let effective = n / met.clamp(MIN_MET, 1.0);
            if effective > largest {
                0.0
            } else {
                rule.bits_met(n, met)
            }
        })
        .collect()
}

/// The least share of missing keys a run counts as meeting, however few meet it now: a run no
/// missing key meets keeps about 5.8 bits per key less than one every key meets, rather than none
/// for the Gets to come.
pub(crate) const MIN_MET: f64 = 1.0 / 16.0;

/// Monkey's rule solved for a set of runs: the bits per key of a run of any size in it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MonkeyRule {
    /// The mean bits per key of the runs that get bits, ln of their size-weighted geometric
    /// mean of effective keys, and the largest effective keys of them (the larger runs of the set
    /// get none); `None` if no run gets bits.
    solved: Option<(f64, f64, f64)>,
    nats_per_bit: f64,
}

impl MonkeyRule {
    /// The rule for `runs`, `(count, keys)`: `count` runs of `keys` each (a count may be a
    /// fraction: an expected number), together spending `average` bits per key.
    pub(crate) fn solve(runs: &[(f64, f64)], average: f64, nats_per_bit: f64) -> MonkeyRule {
        let met: Vec<(f64, f64, f64)> = runs.iter().map(|&(c, n)| (c, n, 1.0)).collect();
        Self::solve_met(&met, average, nats_per_bit)
    }

    /// The rule for `runs`, `(count, keys, met)`: as [`solve`](Self::solve), each run met by the
    /// share `met` of the missing keys (see [`monkey_bits_per_key_met`]).
    pub(crate) fn solve_met(
        runs: &[(f64, f64, f64)],
        average: f64,
        nats_per_bit: f64,
    ) -> MonkeyRule {
        let mut rule = MonkeyRule {
            solved: None,
            nats_per_bit,
        };
        if average.is_nan() || average <= 0.0 {
            return rule;
        }
        // (count, keys, effective keys)
        let mut active: Vec<(f64, f64, f64)> = runs
            .iter()
            .filter(|&&(c, n, _)| c > 0.0 && n > 0.0)
            .map(|&(c, n, met)| (c, n, n / met.clamp(MIN_MET, 1.0)))
            .collect();
        let budget = average * active.iter().map(|(c, n, _)| c * n).sum::<f64>();
        while !active.is_empty() {
            let n: f64 = active.iter().map(|(c, n, _)| c * n).sum();
            let ln_g = active.iter().map(|(c, n, e)| c * n * e.ln()).sum::<f64>() / n;
            let mean = budget / n;
            let before = active.len();
            active.retain(|&(_, _, e)| mean + (ln_g - e.ln()) / nats_per_bit > 0.0);
            if active.len() == before {
                let largest = active.iter().map(|&(_, _, e)| e).fold(0.0, f64::max);
                rule.solved = Some((mean, ln_g, largest));
                break;
            }
        }
        rule
    }

    /// The bits per key of a run of `keys` by the rule's formula (0 where it falls below 0).
    pub(crate) fn bits(&self, keys: f64) -> f64 {
        self.bits_met(keys, 1.0)
    }

    /// The bits per key of a run of `keys` that the share `met` of the missing keys meets.
    pub(crate) fn bits_met(&self, keys: f64, met: f64) -> f64 {
        match self.solved {
            Some((mean, ln_g, _)) if keys > 0.0 => {
                let effective = keys / met.clamp(MIN_MET, 1.0);
                (mean + (ln_g - effective.ln()) / self.nats_per_bit).max(0.0)
            }
            _ => 0.0,
        }
    }
}

/// The runs a lazy leveled tree of `total` keys holds on average, as `(count, keys)` for
/// [`MonkeyRule::solve`]: per tiered class `c` (runs of up to `base · tᶜ⁻¹` keys), `(t − 1) / 2`
/// runs of half that, for every class the last run stays above (its runs merge into a run of
/// the next class, not into the last); the last run holds the rest. Lazy leveling plans each
/// run's filter for this shape as well as for the tree of the moment, whose runs come and go as
/// levels fill.
pub(crate) fn lazy_leveled_runs(total: f64, base: f64, t: f64) -> Vec<(f64, f64)> {
    let mut runs = Vec::new();
    if total <= 0.0 || base <= 0.0 || t < 2.0 {
        return vec![(1.0, total.max(0.0))];
    }
    let per_class = (t - 1.0) / 2.0;
    let (mut tiered, mut full) = (0.0, base);
    while runs.len() < 64 && total - tiered - per_class * full / 2.0 > full {
        runs.push((per_class, full / 2.0));
        tiered += per_class * full / 2.0;
        full *= t;
    }
    runs.push((1.0, total - tiered));
    runs
}

/// The levels of a tree as Monkey sees them: L0's tables and each deeper level's keys.
#[derive(Debug, Clone, Default)]
pub(crate) struct TreeShape {
    /// The keys of each L0 table (each is a run of its own).
    pub(crate) l0_tables: Vec<f64>,
    /// The keys of each level, L0's unused: a level with no keys is not part of the tree.
    pub(crate) levels: Vec<f64>,
    /// The share of missing keys that meet each level's run (a level's key range may hold only
    /// part of theirs), measured by the Gets so far; 1 for a level not listed, and for L0's
    /// tables, which come and go within seconds.
    pub(crate) met: Vec<f64>,
}

impl TreeShape {
    /// The deepest level that holds keys (0 if none below L0 does).
    pub(crate) fn deepest(&self) -> usize {
        self.levels.iter().rposition(|&k| k > 0.0).unwrap_or(0)
    }

    /// The share of missing keys that meet the run of `level` (1 for L0's tables).
    pub(crate) fn met(&self, level: usize) -> f64 {
        match level {
            0 => 1.0,
            l => self.met.get(l).copied().unwrap_or(1.0),
        }
    }

    /// The runs, each L0 table then each level that holds keys, as `(keys, met)`, and the level of
    /// each.
    fn runs(&self) -> (Vec<(f64, f64)>, Vec<usize>) {
        let l0 = self
            .l0_tables
            .iter()
            .filter(|&&k| k > 0.0)
            .map(|&k| ((k, 1.0), 0));
        let levels = (1..self.levels.len())
            .filter(|&l| self.levels[l] > 0.0)
            .map(|l| ((self.levels[l], self.met(l)), l));
        l0.chain(levels).unzip()
    }

    /// The tree this one settles in. L0 is merged into L1 once writes pause when
    /// `l0_merges_when_idle` (its keys then count in L1 and it is no run); otherwise it stays as
    /// one table of their average size (it holds between none and one less than the compaction
    /// trigger at rest; one keeps the levels' bits within a fraction of a bit of the optimum for
    /// any of those). Each level above the deepest holds at most its budget (compactions drain
    /// it there): `target(level)` keys, or from L2 down the deepest level's keys divided by
    /// `multiplier` once per level between them if that is more, as the store's levels do
    /// (DESIGN.md, *Compaction*). The deepest holds what they hold over their budgets on top of
    /// its own. Its keys are first counted with every level drained to its target; the budgets
    /// scaled to that count are a little generous, by what the second count hands down less.
    pub(crate) fn settled(
        &self,
        target: impl Fn(usize) -> f64,
        multiplier: f64,
        l0_merges_when_idle: bool,
    ) -> TreeShape {
        let l0 = self.l0_tables.iter().filter(|&&k| k > 0.0);
        let (count, sum) = l0.fold((0.0, 0.0), |(c, s), k| (c + 1.0, s + k));
        let mut source = self.levels.clone();
        let mut deepest = self.deepest();
        let l0_tables = if l0_merges_when_idle {
            if sum > 0.0 && source.len() > 1 {
                source[1] += sum;
                deepest = deepest.max(1);
            }
            vec![]
        } else if count > 0.0 {
            vec![sum / count]
        } else {
            vec![]
        };
        let mut levels = vec![0.0; source.len()];
        let met = self.met.clone();
        if deepest == 0 {
            return TreeShape {
                l0_tables,
                levels,
                met,
            };
        }
        let handed_down = |budget: &dyn Fn(usize) -> f64| -> f64 {
            (1..deepest)
                .map(|l| source[l].max(0.0) - source[l].max(0.0).min(budget(l)))
                .sum()
        };
        let own = |l: usize| target(l).max(0.0);
        let deepest_keys = source[deepest] + handed_down(&own);
        let budget = |l: usize| {
            if deepest < 2 {
                return own(l);
            }
            let steps = i32::try_from(deepest - l).unwrap_or(i32::MAX);
            own(l).max(deepest_keys / multiplier.powi(steps))
        };
        for l in 1..deepest {
            levels[l] = source[l].max(0.0).min(budget(l));
        }
        levels[deepest] = source[deepest] + handed_down(&budget);
        TreeShape {
            l0_tables,
            levels,
            met,
        }
    }

    /// Monkey's bits per key for each L0 table and each level of this shape, at `average` bits
    /// per key over its keys, each run weighted by the share of missing keys that meet it:
    /// `(per L0 table, per level)` (0 for levels without keys).
    pub(crate) fn monkey_bits(&self, average: f64, nats_per_bit: f64) -> (Vec<f64>, Vec<f64>) {
        let (runs, level_of) = self.runs();
        let bits = monkey_bits_per_key_met(&runs, average, nats_per_bit);
        let mut l0 = vec![0.0; self.l0_tables.len()];
        let mut levels = vec![0.0; self.levels.len()];
        let mut l0_slots = (0..self.l0_tables.len()).filter(|&i| self.l0_tables[i] > 0.0);
        for (b, &level) in bits.iter().zip(&level_of) {
            if level == 0 {
                if let Some(i) = l0_slots.next() {
                    l0[i] = *b;
                }
            } else {
                levels[level] = *b;
            }
        }
        (l0, levels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Monkey's bits for runs of `runs[i]` keys, each met by every missing key.
    fn monkey_bits_per_key(runs: &[f64], average: f64, nats_per_bit: f64) -> Vec<f64> {
        let met: Vec<(f64, f64)> = runs.iter().map(|&n| (n, 1.0)).collect();
        monkey_bits_per_key_met(&met, average, nats_per_bit)
    }

    fn spent(runs: &[f64], bits: &[f64]) -> f64 {
        runs.iter().zip(bits).map(|(n, b)| n * b).sum::<f64>() / runs.iter().sum::<f64>()
    }

    fn rate(b: f64) -> f64 {
        (-b * LN2_SQUARED).exp()
    }

    fn fp_sum(bits: &[f64]) -> f64 {
        bits.iter().map(|&b| rate(b)).sum()
    }

    #[test]
    fn a_lazy_leveled_tree_holds_its_keys_in_classes_below_a_larger_last_run() {
        let runs = lazy_leveled_runs(10_000_000.0, 160_000.0, 4.0);
        let total: f64 = runs.iter().map(|(c, n)| c * n).sum();
        assert!((total - 10_000_000.0).abs() < 1e-3);
        // Classes of 80k, 320k and 1.28M keys a run, 1.5 runs each; the last holds the rest.
        assert_eq!(runs.len(), 4);
        let (last_count, last) = runs[runs.len() - 1];
        assert_eq!(last_count, 1.0);
        assert!(runs[..3].iter().all(|&(c, n)| c == 1.5 && n * 4.0 < last));
        assert_eq!(
            lazy_leveled_runs(1000.0, 160_000.0, 4.0),
            vec![(1.0, 1000.0)]
        );
        // Monkey's rule over them: smaller runs get more bits, at the budget on average.
        let rule = MonkeyRule::solve(&runs, 10.0, LN2_SQUARED);
        let spent: f64 = runs.iter().map(|&(c, n)| c * n * rule.bits(n)).sum::<f64>() / total;
        assert!((spent - 10.0).abs() < 1e-9);
        assert!(rule.bits(80_000.0) > rule.bits(1_280_000.0));
        assert!(rule.bits(last) < 10.0);
    }

    #[test]
    fn allocation_spends_exactly_the_budget_and_beats_uniform() {
        // Four L0 tables of 1, then levels growing ten-fold.
        let runs = [1.0, 1.0, 1.0, 1.0, 10.0, 100.0, 1000.0];
        for average in [2.0, 5.0, 10.0, 15.0] {
            let bits = monkey_bits_per_key(&runs, average, LN2_SQUARED);
            assert!((spent(&runs, &bits) - average).abs() < 1e-9, "{bits:?}");
            assert!(
                fp_sum(&bits) <= fp_sum(&vec![average; runs.len()]),
                "{bits:?}"
            );
            // Small runs get more bits than large ones.
            assert!(bits.windows(2).all(|w| w[0] >= w[1] - 1e-9), "{bits:?}");
        }
        // Ten-fold larger levels get ln 10 / (ln 2)² ≈ 4.8 fewer bits per key.
        let bits = monkey_bits_per_key(&runs, 10.0, LN2_SQUARED);
        assert!((bits[4] - bits[5] - 10f64.ln() / LN2_SQUARED).abs() < 1e-9);
    }

    /// The model: no other spread of the same bits over the runs wastes fewer reads. Moving bits
    /// from any run to any other, at equal memory, never lowers the sum of the rates.
    #[test]
    fn no_other_spread_of_the_same_memory_wastes_fewer_reads() {
        let shapes: [&[f64]; 4] = [
            &[20.0, 20.0, 85.0, 474.0],
            &[1.4, 1.4, 1.4, 8.5, 85.0, 104.0],
            &[85.0, 850.0, 9000.0],
            &[50.0, 50.0],
        ];
        for runs in shapes {
            let best = monkey_bits_per_key(runs, 8.0, LN2_SQUARED);
            for i in 0..runs.len() {
                for j in 0..runs.len() {
                    if i == j {
                        continue;
                    }
                    for step in [0.01, 0.1, 1.0] {
                        let mut moved = best.clone();
                        moved[i] -= step / runs[i];
                        moved[j] += step / runs[j];
                        assert!((spent(runs, &moved) - 8.0).abs() < 1e-9);
                        assert!(fp_sum(&moved) >= fp_sum(&best) - 1e-15, "{runs:?} {i}→{j}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_tight_budget_leaves_the_largest_run_without_a_filter() {
        let runs = [1.0, 10.0, 100.0, 10_000.0];
        let bits = monkey_bits_per_key(&runs, 0.05, LN2_SQUARED);
        assert_eq!(bits[3], 0.0);
        assert!(bits[0] > 0.0);
        assert!((spent(&runs, &bits) - 0.05).abs() < 1e-9, "{bits:?}");
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
        let b = monkey_bits_per_key(&runs, 8.0, ribbon);
        assert!((b[0] - b[1] - 10f64.ln() / ribbon).abs() < 1e-9);
        assert!(b[0] - b[1] < 3.5);
    }

    #[test]
    fn degenerate_inputs_give_no_bits() {
        let l = LN2_SQUARED;
        assert_eq!(monkey_bits_per_key(&[], 10.0, l), Vec::<f64>::new());
        assert_eq!(monkey_bits_per_key(&[0.0, 0.0], 10.0, l), vec![0.0, 0.0]);
        let one = monkey_bits_per_key(&[5.0], 10.0, l);
        assert!((one[0] - 10.0).abs() < 1e-9);
        assert_eq!(monkey_bits_per_key(&[5.0], f64::NAN, l), vec![0.0]);
        // A run with no keys spends nothing and gets nothing.
        let bits = monkey_bits_per_key(&[0.0, 10.0], 8.0, l);
        assert_eq!(bits, vec![0.0, 8.0]);
    }

    fn shape(l0: &[f64], levels: &[f64]) -> TreeShape {
        TreeShape {
            l0_tables: l0.to_vec(),
            levels: levels.to_vec(),
            met: Vec::new(),
        }
    }

    #[test]
    fn a_run_fewer_missing_keys_meet_gets_fewer_bits_at_the_same_memory() {
        let l = LN2_SQUARED;
        let runs = [100_000.0, 1_000_000.0, 10_000_000.0];
        let all_met: Vec<(f64, f64)> = runs.iter().map(|&n| (n, 1.0)).collect();
        assert_eq!(
            monkey_bits_per_key_met(&all_met, 10.0, l),
            monkey_bits_per_key(&runs, 10.0, l)
        );
        // Half the missing keys skip the middle run: it gives up ln 2 / (ln 2)² bits per key
        // against the others, and the same memory is spent.
        let met = [(runs[0], 1.0), (runs[1], 0.5), (runs[2], 1.0)];
        let bits = monkey_bits_per_key_met(&met, 10.0, l);
        let plain = monkey_bits_per_key(&runs, 10.0, l);
        assert!((spent(&runs, &bits) - 10.0).abs() < 1e-9);
        let gap = |b: &[f64]| b[0] - b[1];
        assert!((gap(&bits) - gap(&plain) - std::f64::consts::LN_2 / l).abs() < 1e-9);
        // No other spread of that memory wastes fewer reads, each run's rate counted as often as
        // missing keys meet it.
        let waste = |b: &[f64]| -> f64 { met.iter().zip(b).map(|(&(_, m), &b)| m * rate(b)).sum() };
        for (i, j) in [(0, 1), (1, 2), (0, 2)] {
            for step in [-0.2, 0.2] {
                let mut moved = bits.clone();
                moved[i] += step;
                moved[j] -= step * runs[i] / runs[j];
                assert!(
                    waste(&moved) > waste(&bits),
                    "moving bits {i}→{j} by {step}"
                );
            }
        }
        assert!(waste(&bits) < waste(&plain));
        // A run no missing key meets still keeps a filter, MIN_MET's worth.
        let unmet = monkey_bits_per_key_met(&[(runs[0], 0.0), (runs[1], 1.0)], 10.0, l);
        let floor = monkey_bits_per_key_met(&[(runs[0], MIN_MET), (runs[1], 1.0)], 10.0, l);
        assert_eq!(unmet, floor);
        assert!(unmet[0] > 0.0);
    }

    #[test]
    fn the_shape_weighs_each_level_by_its_measured_share_and_l0_by_one() {
        let mut s = shape(&[1_000.0], &[0.0, 10_000.0, 100_000.0]);
        let (l0, levels) = s.monkey_bits(10.0, LN2_SQUARED);
        s.met = vec![0.2, 0.5, 1.0];
        let (l0_met, levels_met) = s.monkey_bits(10.0, LN2_SQUARED);
        // L0 counts as met by every key whatever its entry says; L1 gives up bits to the others.
        assert!(levels_met[1] < levels[1]);
        assert!(l0_met[0] > l0[0] && levels_met[2] > levels[2]);
        assert_eq!(s.settled(|_| 1e9, 10.0, false).met, s.met);
    }

    #[test]
    fn the_settled_tree_has_middle_levels_at_most_at_target_and_l0_merged_or_one_table() {
        let targets = |l: usize| 10f64.powi(i32::try_from(l).unwrap_or(0));
        // L1 short of its target, L2 empty, L3 the deepest: it counts as it is, however young.
        let s = shape(&[2.0, 4.0, 0.0], &[0.0, 4.0, 0.0, 50.0]).settled(targets, 10.0, false);
        assert_eq!(s.l0_tables, vec![3.0]);
        assert_eq!(s.levels, vec![0.0, 4.0, 0.0, 50.0]);
        // L0 merged into L1 once writes pause: its keys fill L1 to its target, the rest drains
        // into the deepest level, and L0 is no run.
        let s = shape(&[2.0, 4.0, 0.0], &[0.0, 4.0, 0.0, 50.0]).settled(targets, 10.0, true);
        assert!(s.l0_tables.is_empty());
        assert_eq!(s.levels, vec![0.0, 10.0, 0.0, 50.0]);
        // L0 alone becomes L1.
        let s = shape(&[2.0, 4.0], &[0.0, 0.0, 0.0]).settled(targets, 10.0, true);
        assert_eq!(s.levels, vec![0.0, 6.0, 0.0]);
        // L1 over its target (an L0 compaction just filled it) drains into the deepest level,
        // L2, down to a tenth of the 220 keys L2 would then hold; no L0 tables, no L0 run.
        let s = shape(&[], &[0.0, 30.0, 200.0]).settled(targets, 10.0, false);
        assert!(s.l0_tables.is_empty());
        assert_eq!(s.levels, vec![0.0, 22.0, 208.0]);
        // Over a deepest L3 of 50 keys, L1 drains to its own target of 10.
        let s = shape(&[], &[0.0, 30.0, 0.0, 50.0]).settled(targets, 10.0, false);
        assert_eq!(s.levels, vec![0.0, 10.0, 0.0, 70.0]);
        // A tree of one level is one run.
        let s = shape(&[], &[0.0, 0.0, 0.0, 700.0]).settled(targets, 10.0, true);
        assert_eq!(s.levels, vec![0.0, 0.0, 0.0, 700.0]);
    }

    #[test]
    fn bits_map_back_to_tables_and_levels() {
        let s = shape(&[20.0, 0.0, 20.0], &[0.0, 85.0, 0.0, 474.0]);
        let (l0, levels) = s.monkey_bits(8.0, LN2_SQUARED);
        let runs = monkey_bits_per_key(&[20.0, 20.0, 85.0, 474.0], 8.0, LN2_SQUARED);
        assert_eq!(l0, vec![runs[0], 0.0, runs[1]]);
        assert_eq!(levels, vec![0.0, runs[2], 0.0, runs[3]]);
        // A 600k-key default tree settled (2 / 6 / 30 tables): about 13.6 / 10.6 / 7.0 bits per key, half of uniform's rates.
        assert!(
            (runs[0] - 13.6).abs() < 0.1 && (runs[2] - 10.6).abs() < 0.1,
            "{runs:?}"
        );
        assert!((runs[3] - 7.05).abs() < 0.1, "{runs:?}");
        assert!(fp_sum(&runs) < 0.55 * fp_sum(&[8.0; 4]));
    }

    /// The model of a settled tree that keeps its L0 tables when writes pause: whatever L0 holds
    /// at rest (none to three tables), the plan's bits, held back on L0 where they would spend
    /// over 1.5 % more than uniform, waste at most 1.15 × the reads of Monkey's optimum for that
    /// shape at uniform's memory. Trees of the default options (L0 tables of 23,000 keys, L1 of
    /// 152,000) at 200,000 (a young L2), 600,000, 1M and 10M keys, and of 256 KiB memtables and
    /// a 1 MiB level base at 200,000 (a young L3) and 400,000.
    #[test]
    fn the_settled_plan_stays_within_a_seventh_of_the_optimum() {
        let trees: [(f64, &[f64]); 6] = [
            (23e3, &[0.0, 152e3, 35e3]),
            (23e3, &[0.0, 152e3, 425e3]),
            (23e3, &[0.0, 152e3, 825e3]),
            (23e3, &[0.0, 152e3, 1.52e6, 8.3e6]),
            (1.4e3, &[0.0, 15e3, 150e3, 35e3]),
            (1.4e3, &[0.0, 15e3, 150e3, 235e3]),
        ];
        for (m, levels) in trees {
            for k in 0..=3 {
                let tree = shape(&vec![m; k], levels);
                let target = |l: usize| 15.2e3 * 10f64.powi(i32::try_from(l).unwrap_or(0) - 1);
                let target = |l: usize| if m > 2e3 { 10.0 * target(l) } else { target(l) };
                let (l0_plan, level_plan) = tree
                    .settled(target, 10.0, false)
                    .monkey_bits(8.0, LN2_SQUARED);
                let mut l0 = vec![l0_plan.first().copied().unwrap_or(8.0); k];
                let keys: f64 = m * k as f64 + levels.iter().sum::<f64>();
                let spent = |l0: &[f64]| {
                    l0.iter().map(|b| b * m).sum::<f64>()
                        + levels
                            .iter()
                            .zip(&level_plan)
                            .map(|(n, b)| n * b)
                            .sum::<f64>()
                };
                let over = spent(&l0) - 8.0 * keys * 1.015;
                if over > 0.0 {
                    for b in &mut l0 {
                        *b -= over / (m * k as f64);
                    }
                }
                assert!(spent(&l0) <= 8.0 * keys * 1.015 + 1e-6);
                let ours = fp_sum(&l0)
                    + fp_sum(
                        &level_plan[1..]
                            .iter()
                            .copied()
                            .filter(|&b| b > 0.0)
                            .collect::<Vec<_>>(),
                    );
                let (b0, bl) = tree.monkey_bits(8.0, LN2_SQUARED);
                let best = fp_sum(&b0)
                    + fp_sum(
                        &bl[1..]
                            .iter()
                            .copied()
                            .filter(|&b| b > 0.0)
                            .collect::<Vec<_>>(),
                    );
                assert!(
                    ours <= 1.15 * best,
                    "{m} × {k}, {levels:?}: {ours} against {best}"
                );
            }
        }
    }
}

//! Lazy leveling (Dostoevsky, Dayan and Idreos, SIGMOD 2018): which compaction a keyspace of
//! [`CompactionStyle::LazyLeveled`](crate::CompactionStyle::LazyLeveled) needs next.
//!
//! Every level below L0 holds one sorted run (as under leveled compaction), newer runs in shallower
//! levels, and the runs sit at the bottom of the tree without gaps: the last level (L6) holds the
//! last run, the levels above it the tiered runs. A run's *class* is its size's: class 1 up to
//! `max_bytes_for_level_base`, each next class `runs_per_level` (T) times more. Consecutive runs of
//! one class form a tiered level; once it holds T runs they are merged into one run, of about the
//! next class, where the deepest of them was; if that class reaches the last run's, they are merged
//! into the last run instead (the last level is leveled). L0's tables are merged into a new run
//! above the others at L0's trigger. A merge whose run would be the T-th of its class takes that
//! level's T − 1 runs in instead ([`cascade`]): the T-th run would only be read back at once, so it
//! is never written. Each byte is thus written once per class it passes, less a T-th, and a few
//! times in the last run, against about once per level in each of leveled compaction's levels.
//!
//! Seven levels leave six places for runs. When a new run finds none (L1 holds one), L0 is
//! merged with the shallowest tiered level instead, which frees places as it grows. A gap left
//! by a merge is closed by moving the runs above it down, an edit alone; a tree written under
//! leveled compaction is moved down the same way.

use super::{Triggers, Version};
use crate::options::{Options, NUM_LEVELS};

/// The level of the last run.
pub(crate) const LAST: usize = NUM_LEVELS - 1;

/// Tiered runs hold this many times the last run's bytes before all are merged into it, whatever
/// their classes: a net under the tree's space on disk, which the classes alone keep far below it
/// once the last run is the largest.
const MAX_TIERED_SHARE: f64 = 1.5;

/// What a lazy leveled tree needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Move the run of level `from` down to the empty level `to`, with no run between them.
    Move { from: usize, to: usize },
    /// Merge L0's tables (if `with_l0`) and the runs of `levels` (consecutive, shallowest first)
    /// into one run of `out`: the deepest of `levels`, or the empty level above every run.
    Merge {
        with_l0: bool,
        levels: Vec<usize>,
        out: usize,
    },
}

/// A step and how pressing it is (≥ 1: due; moves cost nothing and always are).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Due {
    pub(crate) step: Step,
    pub(crate) score: f64,
}

/// The class of a run of `bytes`: 1 up to `base`, then one more per `t` times as much.
fn class(bytes: u64, base: u64, t: usize) -> u32 {
    let (mut class, mut limit) = (1, base.max(1) as f64);
    while bytes as f64 > limit && class < 64 {
        class += 1;
        limit *= t as f64;
    }
    class
}

/// The runs below L0 of `version`: (level, bytes), shallowest first.
pub(crate) fn runs(version: &Version) -> Vec<(usize, u64)> {
    (1..NUM_LEVELS)
        .filter(|&l| !version.levels[l].is_empty())
        .map(|l| (l, version.level_bytes(l)))
        .collect()
}

/// The deepest empty level with a run above it, and that run's level, if the runs have a gap.
fn gap(version: &Version) -> Option<(usize, usize)> {
    let runs = runs(version);
    let shallowest = runs.first()?.0;
    let to = (shallowest + 1..NUM_LEVELS)
        .rev()
        .find(|&l| version.levels[l].is_empty())?;
    let from = (1..to).rev().find(|&l| !version.levels[l].is_empty())?;
    Some((from, to))
}

/// The tiered levels: runs above the last of one class, consecutive, shallowest first (with no
/// gap, each holds consecutive levels).
fn tiered_levels(version: &Version, options: &Options, t: usize) -> Vec<(u32, Vec<usize>)> {
    let base = options.max_bytes_for_level_base;
    let mut levels: Vec<(u32, Vec<usize>)> = Vec::new();
    for (level, bytes) in runs(version) {
        if level == LAST {
            break;
        }
        let c = class(bytes, base, t);
        match levels.last_mut() {
            Some((last, members)) if *last == c => members.push(level),
            _ => levels.push((c, vec![level])),
        }
    }
    levels
}

/// What `version` needs next under lazy leveling with `t` runs per level, if anything is due at
/// `triggers`: a move closing a gap first; then the most pressing of L0 at its trigger, a full
/// tiered level, and tiered runs grown past [`MAX_TIERED_SHARE`] of the last.
pub(crate) fn next_step(
    version: &Version,
    options: &Options,
    triggers: Triggers,
    t: usize,
) -> Option<Due> {
    if let Some((from, to)) = gap(version) {
        return Some(Due {
            step: Step::Move { from, to },
            score: f64::MAX,
        });
    }
    let mut best: Option<Due> = None;
    let mut consider = |due: Due| {
        if due.score >= 1.0 && best.as_ref().is_none_or(|b| due.score > b.score) {
            best = Some(due);
        }
    };
    let l0 = version.levels[0].len();
    if l0 > 0 {
        consider(Due {
            step: l0_merge(version, options, t),
            score: l0 as f64 / triggers.l0_tables.max(1) as f64,
        });
    }
    let base = options.max_bytes_for_level_base;
    let last_bytes = version.level_bytes(LAST);
    let last_class = class(last_bytes, base, t);
    let tiered = tiered_levels(version, options, t);
    for (g, (c, levels)) in tiered.iter().enumerate() {
        let Some(&deepest) = levels.last() else {
            continue;
        };
        let into_last = deepest + 1 == LAST && c + 1 >= last_class;
        let score = levels.len() as f64 / t as f64;
        let mut levels = levels.clone();
        let out = if into_last {
            levels.push(LAST);
            LAST
        } else {
            let bytes = levels.iter().map(|&l| version.level_bytes(l)).sum();
            let (more, out) = cascade(version, options, t, &tiered[g + 1..], bytes, deepest);
            levels.extend(more);
            out
        };
        consider(Due {
            score,
            step: Step::Merge {
                with_l0: false,
                levels,
                out,
            },
        });
    }
    let tiered_bytes: u64 = tiered
        .iter()
        .flat_map(|(_, levels)| levels)
        .map(|&l| version.level_bytes(l))
        .sum();
    if last_bytes > 0 && tiered_bytes > 0 {
        let levels: Vec<usize> = tiered
            .iter()
            .flat_map(|(_, levels)| levels.iter().copied())
            .chain([LAST])
            .collect();
        consider(Due {
            score: tiered_bytes as f64 / (MAX_TIERED_SHARE * last_bytes as f64),
            step: Step::Merge {
                with_l0: false,
                levels,
                out: LAST,
            },
        });
    }
    best
}

/// The runs a merge of `bytes` takes in on its way down, and the level of its run (`out`, where
/// it would be otherwise): the tiered level just below (`below`, the tiered levels under its run,
/// shallowest first) if it holds T − 1 runs of the class the merge's run would have, whose T-th
/// run it would be; with the last run too if that level's merge would go into the last run.
/// Only the one level: taking the next ones in as well made jobs long enough to hold L0 past the
/// writers' slowdown for twice as long, for no fewer bytes written.
fn cascade(
    version: &Version,
    options: &Options,
    t: usize,
    below: &[(u32, Vec<usize>)],
    bytes: u64,
    out: usize,
) -> (Vec<usize>, usize) {
    let base = options.max_bytes_for_level_base;
    let Some((c, members)) = below.first() else {
        return (Vec::new(), out);
    };
    let Some(&deepest) = members.last() else {
        return (Vec::new(), out);
    };
    if class(bytes, base, t) != *c || members.len() + 1 < t {
        return (Vec::new(), out);
    }
    let mut levels = members.clone();
    if deepest + 1 == LAST && c + 1 >= class(version.level_bytes(LAST), base, t) {
        levels.push(LAST);
        return (levels, LAST);
    }
    (levels, deepest)
}

/// L0's tables into a new run above every run (or into the level it would fill, see [`cascade`],
/// unless that level's merge would go into the last run: L0's merge is kept short, since L0 fills
/// while it runs, and writers slowed nearly twice as long in a ten-million-key fill), or, with no
/// level free above them, into the shallowest tiered level's runs (the last run if there is no
/// other).
pub(crate) fn l0_merge(version: &Version, options: &Options, t: usize) -> Step {
    let runs = runs(version);
    match runs.first() {
        None => Step::Merge {
            with_l0: true,
            levels: Vec::new(),
            out: LAST,
        },
        Some(&(shallowest, _)) if shallowest > 1 => {
            let tiered = tiered_levels(version, options, t);
            let bytes = version.level_bytes(0);
            let (levels, out) = match cascade(version, options, t, &tiered, bytes, shallowest - 1) {
                (_, LAST) => (Vec::new(), shallowest - 1),
                taken => taken,
            };
            Step::Merge {
                with_l0: true,
                levels,
                out,
            }
        }
        Some(_) => {
            let levels = tiered_levels(version, options, t)
                .into_iter()
                .next()
                .map_or_else(|| vec![LAST], |(_, levels)| levels);
            Step::Merge {
                with_l0: true,
                out: *levels.last().unwrap_or(&LAST),
                levels,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    fn options(t: usize) -> Options {
        Options::default()
            .max_bytes_for_level_base(10 * MB)
            .compaction_style(crate::CompactionStyle::LazyLeveled { runs_per_level: t })
    }

    /// A version of one table per `(level, bytes)`, over the same keys.
    fn version(runs: &[(usize, u64)]) -> Version {
        let tables: Vec<(usize, u64, &str, &str, u64)> = runs
            .iter()
            .enumerate()
            .map(|(i, &(level, bytes))| (level, i as u64 + 1, "a", "z", bytes))
            .collect();
        Version::for_tests(&tables)
    }

    fn quiet() -> Triggers {
        Triggers::quiet(&options(4))
    }

    #[test]
    fn classes_grow_by_the_runs_per_level() {
        assert_eq!(class(0, 10 * MB, 4), 1);
        assert_eq!(class(10 * MB, 10 * MB, 4), 1);
        assert_eq!(class(10 * MB + 1, 10 * MB, 4), 2);
        assert_eq!(class(40 * MB, 10 * MB, 4), 2);
        assert_eq!(class(41 * MB, 10 * MB, 4), 3);
    }

    #[test]
    fn the_first_run_is_the_last_level_and_new_runs_sit_above() {
        let o = options(4);
        let l0: Vec<(usize, u64)> = vec![(0, MB); 4];
        let step = next_step(&version(&l0), &o, quiet(), 4).map(|d| d.step);
        assert_eq!(
            step,
            Some(Step::Merge {
                with_l0: true,
                levels: vec![],
                out: LAST
            })
        );
        let with_runs = [&l0[..], &[(5, 4 * MB), (6, 400 * MB)]].concat();
        let step = next_step(&version(&with_runs), &o, quiet(), 4).map(|d| d.step);
        assert_eq!(
            step,
            Some(Step::Merge {
                with_l0: true,
                levels: vec![],
                out: 4
            })
        );
        // Below the trigger nothing is due.
        assert_eq!(next_step(&version(&l0[..3]), &o, quiet(), 4), None);
    }

    #[test]
    fn a_full_tiered_level_merges_into_one_run_or_into_the_last() {
        let o = options(4);
        // Four class-1 runs above a class-4 last run: one class-2 run where the deepest was.
        let v = version(&[
            (2, 8 * MB),
            (3, 8 * MB),
            (4, 8 * MB),
            (5, 8 * MB),
            (6, 600 * MB),
        ]);
        let due = next_step(&v, &o, quiet(), 4).map(|d| d.step);
        assert_eq!(
            due,
            Some(Step::Merge {
                with_l0: false,
                levels: vec![2, 3, 4, 5],
                out: 5
            })
        );
        // Three are not enough.
        let v = version(&[(3, 8 * MB), (4, 8 * MB), (5, 8 * MB), (6, 600 * MB)]);
        assert_eq!(next_step(&v, &o, quiet(), 4), None);
        // Four class-2 runs whose merge reaches the last run's class 3: into the last run.
        let v = version(&[
            (2, 30 * MB),
            (3, 30 * MB),
            (4, 30 * MB),
            (5, 30 * MB),
            (6, 150 * MB),
        ]);
        let due = next_step(&v, &o, quiet(), 4).map(|d| d.step);
        assert_eq!(
            due,
            Some(Step::Merge {
                with_l0: false,
                levels: vec![2, 3, 4, 5, 6],
                out: 6
            })
        );
    }

    #[test]
    fn a_run_that_would_be_the_t_th_of_its_class_takes_that_level_in() {
        let o = options(4);
        // L0's 12 MiB would be the fourth class-2 run: it takes the three in, where the deepest was.
        let l0: Vec<(usize, u64)> = vec![(0, 3 * MB); 4];
        let three = [(3, 12 * MB), (4, 12 * MB), (5, 12 * MB), (6, 600 * MB)];
        let step = next_step(&version(&[&l0[..], &three].concat()), &o, quiet(), 4);
        let merge = |levels: Vec<usize>, out: usize| Step::Merge {
            with_l0: true,
            levels,
            out,
        };
        assert_eq!(step.map(|d| d.step), Some(merge(vec![3, 4, 5], 5)));
        // With two, it is a new run above them.
        let two = &three[1..];
        let step = next_step(&version(&[&l0[..], two].concat()), &o, quiet(), 4);
        assert_eq!(step.map(|d| d.step), Some(merge(vec![], 3)));
        // Not where that level's T runs would go into the last run: L0's merge stays short, a new
        // run, and the level's merge into the last run follows on its own.
        let near_last = [(3, 12 * MB), (4, 12 * MB), (5, 12 * MB), (6, 100 * MB)];
        let step = next_step(&version(&[&l0[..], &near_last].concat()), &o, quiet(), 4);
        assert_eq!(step.map(|d| d.step), Some(merge(vec![], 2)));
        // A full tiered level's merge goes on down the same way: three class-1 runs at T = 3
        // make a class-2 run, the third of the two below.
        let o = options(3);
        let v = version(&[
            (1, 8 * MB),
            (2, 8 * MB),
            (3, 8 * MB),
            (4, 25 * MB),
            (5, 25 * MB),
            (6, 2000 * MB),
        ]);
        let step = next_step(&v, &o, Triggers::quiet(&o), 3).map(|d| d.step);
        assert_eq!(
            step,
            Some(Step::Merge {
                with_l0: false,
                levels: vec![1, 2, 3, 4, 5],
                out: 5
            })
        );
    }

    #[test]
    fn gaps_close_by_moves_and_a_leveled_tree_moves_down() {
        let o = options(4);
        let v = version(&[(1, 10 * MB), (2, 100 * MB), (3, 900 * MB)]);
        let due = next_step(&v, &o, quiet(), 4).map(|d| d.step);
        assert_eq!(due, Some(Step::Move { from: 3, to: 6 }));
        let v = version(&[(2, 10 * MB), (5, 8 * MB), (6, 900 * MB)]);
        let due = next_step(&v, &o, quiet(), 4).map(|d| d.step);
        assert_eq!(due, Some(Step::Move { from: 2, to: 4 }));
    }

    #[test]
    fn with_no_place_left_l0_joins_the_shallowest_tiered_level() {
        let o = options(4);
        let full = [
            (0, MB),
            (0, MB),
            (0, MB),
            (0, MB),
            (1, 8 * MB),
            (2, 30 * MB),
            (3, 30 * MB),
            (4, 150 * MB),
            (5, 150 * MB),
            (6, 3000 * MB),
        ];
        let step = l0_merge(&version(&full), &o, 4);
        assert_eq!(
            step,
            Step::Merge {
                with_l0: true,
                levels: vec![1],
                out: 1
            }
        );
    }

    #[test]
    fn tiered_runs_far_larger_than_the_last_merge_into_it() {
        let o = options(4);
        let v = version(&[(4, 30 * MB), (5, 30 * MB), (6, 20 * MB)]);
        let due = next_step(&v, &o, quiet(), 4).map(|d| d.step);
        assert_eq!(
            due,
            Some(Step::Merge {
                with_l0: false,
                levels: vec![4, 5, 6],
                out: 6
            })
        );
    }
}

//! The filter a new table gets: the configured one, or per level as the allocation rule says.

use super::version::Version;
use crate::filter::{monkey_bits_per_key, Filter, FilterAllocation};
use crate::options::Options;

/// The filter for a new table of `level`, about to receive `incoming_bytes`, given the tree now.
///
/// Runs are counted as Monkey counts them: each L0 table is one run (a Get asks each), each deeper
/// level one run; bytes stand in for entries. Middle levels count at their target size, the last
/// level at its real size.
pub(crate) fn filter_for_new_table(
    options: &Options,
    version: &Version,
    level: usize,
    incoming_bytes: u64,
) -> Filter {
    let configured = &options.filter;
    let Some(policy) = configured.policy() else {
        return configured.clone();
    };
    let last_level = version.deepest_nonempty_level().max(level);
    if options.no_filter_on_last_level && level > 0 && level == last_level {
        return Filter::none();
    }
    if options.filter_allocation == FilterAllocation::Uniform {
        return configured.clone();
    }
    // Middle levels count at their target size (the steady shape Monkey assumes), so a table's bits
    // do not depend on how full its level happened to be when it was written; the last level
    // counts at its real size, which is the data's.
    let mut runs: Vec<f64> = version.levels[0].iter().map(|f| f.size as f64).collect();
    let mut target = runs.len();
    if level == 0 {
        runs.push(incoming_bytes as f64);
    }
    for l in 1..=last_level {
        if l == level {
            target = runs.len();
        }
        let bytes = if l == last_level {
            version
                .level_bytes(l)
                .max(if l == level { incoming_bytes } else { 0 })
        } else {
            options.max_bytes_for_level(l)
        };
        runs.push(bytes as f64);
    }
    let bits = monkey_bits_per_key(&runs, policy.bits_per_key())[target];
    if bits < 0.5 {
        // Monkey spends nothing here: a filter this small would let almost everything through.
        return Filter::none();
    }
    match policy.with_bits_per_key(bits) {
        Some(p) => configured.with_policy(p),
        None => configured.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::version_edit::{NewFile, VersionEdit};
    use crate::key::{internal_key, ValueKind};

    fn version(files: &[(usize, u64, u64)]) -> Version {
        let added = files
            .iter()
            .enumerate()
            .map(|(i, &(level, size, lo))| NewFile {
                level,
                number: i as u64 + 1,
                size,
                smallest: internal_key(format!("{lo:06}").as_bytes(), 1, ValueKind::Value),
                largest: internal_key(format!("{:06}", lo + 99).as_bytes(), 1, ValueKind::Value),
            })
            .collect();
        Version::default().apply(&VersionEdit {
            added,
            ..Default::default()
        })
    }

    #[test]
    fn monkey_gives_small_levels_more_bits_and_the_last_level_fewer() {
        let v = version(&[(0, 1 << 20, 0), (1, 10 << 20, 0), (2, 100 << 20, 0)]);
        let opts = Options::default()
            .filter(Filter::full(10.0))
            .filter_allocation(FilterAllocation::Monkey);
        let bits = |level, incoming| {
            filter_for_new_table(&opts, &v, level, incoming)
                .policy()
                .map(|p| p.bits_per_key())
        };
        let (l0, l1, l2) = (
            bits(0, 1 << 20).unwrap(),
            bits(1, 1 << 20).unwrap(),
            bits(2, 1 << 20).unwrap(),
        );
        assert!(l0 > l1 && l1 > l2, "{l0} {l1} {l2}");
        assert!(l2 < 10.0 && l0 > 10.0);
        let uniform = Options::default().filter(Filter::full(10.0));
        assert_eq!(
            filter_for_new_table(&uniform, &v, 2, 1)
                .policy()
                .map(|p| p.bits_per_key()),
            Some(10.0)
        );
    }

    #[test]
    fn the_last_level_can_go_without_a_filter() {
        let v = version(&[(1, 10 << 20, 0), (2, 100 << 20, 0)]);
        let opts = Options::default().no_filter_on_last_level(true);
        assert!(filter_for_new_table(&opts, &v, 2, 1).policy().is_none());
        assert!(filter_for_new_table(&opts, &v, 1, 1).policy().is_some());
        assert!(filter_for_new_table(&opts, &v, 0, 1).policy().is_some());
        // Compacting into a new deepest level makes that level the last.
        assert!(filter_for_new_table(&opts, &v, 3, 1).policy().is_none());
    }
}

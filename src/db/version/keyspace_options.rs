//! The record of a keyspace's options in the MANIFEST, so a reopened store finds each keyspace
//! with the options it was created with.
//!
//! The record is text, one `name=value` line per option that belongs to a keyspace (filter,
//! prefix extractor, blocks, codecs, memtable and level sizes); the store-wide options (block
//! cache, open files, the file system) come from the options the store is opened with. A filter
//! policy or prefix extractor of the caller's own is recorded by name and found again in the
//! options the store is opened with; if they name another, the keyspace's new tables get no
//! filter (or no prefix extractor) and a warning is logged: its existing tables still read
//! correctly, since a table's filter is asked only through a policy of the name it was built with.
//! A compaction filter is recorded by name too, and looked for in the options' compaction filter
//! and registered ones; a time to live is recorded in seconds, as `expire_after` (puts expire
//! that long after they are written: `ttl.rs`) or, for a keyspace whose values carry their write
//! time, `ttl`. A merge operator is recorded by name as `merge_operator`, and a store opened
//! without an operator of that name (its merge operator or a registered one) refuses to open
//! ([`missing_merge_operator`]): its operands could not be read. These lines are written only when
//! set. `Keyspace::set_options` records a new record whole; [`changed_options`] names what differs
//! between two.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::ttl_seconds;
use crate::compaction_filter::CompactionFilter;
use crate::error::{Error, Result};
use crate::filter::{
    BinaryFuse, CacheLocalBloom, Filter, FilterAllocation, FilterLayout, FilterPolicy,
    LevelDbBloom, RangeFilter, Ribbon,
};
use crate::merge_operator::MergeOperator;
use crate::options::{CompactionStyle, Compression, Options};
use crate::prefix::PrefixExtractor;

const FIXED_PREFIX: &str = "siftdb.FixedPrefix.";

/// The names of the built-in filter policies, which every keyspace reads the tables of.
pub(crate) const BUILT_IN_POLICIES: [&str; 5] = [
    "leveldb.BuiltinBloomFilter2",
    "siftdb.CacheLocalBloom",
    "siftdb.BinaryFuse8",
    "siftdb.BinaryFuse16",
    "siftdb.Ribbon128",
];

/// The record of `options`' keyspace fields.
pub(crate) fn describe(options: &Options) -> String {
    let o = options;
    let filter = match (o.filter.layout(), o.filter.policy()) {
        (Some(layout), Some(policy)) => format!(
            "{} {} {} {}",
            layout.name(),
            policy.name(),
            policy.bits_per_key(),
            o.filter.target_partition_bytes()
        ),
        _ => "none".to_string(),
    };
    let per_level: Vec<String> = o
        .compression_per_level
        .iter()
        .map(|c| c.to_string())
        .collect();
    let lines = [
        ("filter", filter),
        (
            "filter_allocation",
            match o.filter_allocation {
                FilterAllocation::Uniform => "uniform".to_string(),
                FilterAllocation::Monkey => "monkey".to_string(),
            },
        ),
        (
            "no_filter_on_last_level",
            o.no_filter_on_last_level.to_string(),
        ),
        (
            "prefix_extractor",
            o.prefix_extractor
                .as_ref()
                .map_or_else(String::new, |p| p.name().to_string()),
        ),
        ("whole_key_filtering", o.whole_key_filtering.to_string()),
        ("block_size", o.block_size.to_string()),
        (
            "block_restart_interval",
            o.block_restart_interval.to_string(),
        ),
        ("compression", o.compression.to_string()),
        ("compression_per_level", per_level.join(",")),
        (
            "bottommost_compression",
            o.bottommost_compression
                .map_or_else(String::new, |c| c.to_string()),
        ),
        ("write_buffer_size", o.write_buffer_size.to_string()),
        (
            "max_immutable_memtables",
            o.max_immutable_memtables.to_string(),
        ),
        ("target_file_size", o.target_file_size.to_string()),
        (
            "level0_compaction_trigger",
            o.level0_compaction_trigger.to_string(),
        ),
        (
            "level0_compaction_trigger_during_writes",
            o.level0_compaction_trigger_during_writes.to_string(),
        ),
        (
            "level0_slowdown_trigger",
            o.level0_slowdown_trigger.to_string(),
        ),
        ("level0_stop_trigger", o.level0_stop_trigger.to_string()),
        (
            "level_budget_during_writes",
            o.level_budget_during_writes.to_string(),
        ),
        (
            "max_bytes_for_level_base",
            o.max_bytes_for_level_base.to_string(),
        ),
        ("level_size_multiplier", o.level_size_multiplier.to_string()),
        ("max_subcompactions", o.max_subcompactions.to_string()),
        ("compact_l0_for_reads", o.compact_l0_for_reads.to_string()),
    ];
    let mut record: String = lines.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    // Written only when set, so that the record of a keyspace without them reads as before.
    if !o.compact_l0_when_idle {
        record.push_str("compact_l0_when_idle=false\n");
    }
    if o.compaction_style != CompactionStyle::Leveled {
        record.push_str(&format!("compaction_style={}\n", o.compaction_style));
    }
    if let Some(f) = &o.compaction_filter {
        record.push_str(&format!("compaction_filter={}\n", f.name()));
    }
    if let Some(m) = &o.merge_operator {
        record.push_str(&format!("merge_operator={}\n", m.name()));
    }
    if let Some(ttl) = o.ttl {
        // A reader that knows neither line refuses the record: it could not read the values.
        let name = if o.write_times { "ttl" } else { "expire_after" };
        record.push_str(&format!("{name}={}\n", ttl_seconds(ttl)));
    }
    if let (Some(bits), Some(range)) = (o.range_filter.bits_per_key(), o.range_filter.max_range()) {
        record.push_str(&format!("range_filter=grafite {bits} {range}\n"));
    }
    record
}

/// The options of keyspace `name` whose record is `record`: `store`'s store-wide options with the
/// recorded keyspace fields. Names no option it does not know (a newer store's) are an error.
///
/// # Errors
/// `Error::InvalidArgument` naming the keyspace and the line for a record that does not parse
/// (the caller reports it as corruption of the MANIFEST).
pub(crate) fn restore(name: &str, record: &str, store: &Options) -> Result<Options> {
    let mut o = store.clone();
    // Recorded only when set: a record without them is a keyspace without them.
    o.compaction_filter = None;
    o.merge_operator = None;
    o.ttl = None;
    o.write_times = false;
    o.range_filter = RangeFilter::none();
    for line in record.lines().filter(|l| !l.is_empty()) {
        let bad = || Error::InvalidArgument(format!("keyspace {name}: bad option record {line:?}"));
        let (key, value) = line.split_once('=').ok_or_else(bad)?;
        let number = || value.parse::<u64>().map_err(|_| bad());
        let size = || value.parse::<usize>().map_err(|_| bad());
        let flag = || value.parse::<bool>().map_err(|_| bad());
        match key {
            "filter" => o.filter = restore_filter(name, value, store).ok_or_else(bad)?,
            "filter_allocation" => {
                o.filter_allocation = match value {
                    "uniform" => FilterAllocation::Uniform,
                    "monkey" => FilterAllocation::Monkey,
                    _ => return Err(bad()),
                }
            }
            "no_filter_on_last_level" => o.no_filter_on_last_level = flag()?,
            "prefix_extractor" => o.prefix_extractor = restore_prefix(name, value, store),
            "whole_key_filtering" => o.whole_key_filtering = flag()?,
            "block_size" => o.block_size = size()?,
            "block_restart_interval" => o.block_restart_interval = size()?,
            "compression" => o.compression = parse_compression(value).ok_or_else(bad)?,
            "compression_per_level" => {
                o.compression_per_level = value
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(parse_compression)
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(bad)?
            }
            "bottommost_compression" => {
                o.bottommost_compression = match value {
                    "" => None,
                    c => Some(parse_compression(c).ok_or_else(bad)?),
                }
            }
            "write_buffer_size" => o.write_buffer_size = size()?,
            "max_immutable_memtables" => o.max_immutable_memtables = size()?,
            "target_file_size" => o.target_file_size = number()?,
            "level0_compaction_trigger" => o.level0_compaction_trigger = size()?,
            "level0_compaction_trigger_during_writes" => {
                o.level0_compaction_trigger_during_writes = size()?
            }
            "level0_slowdown_trigger" => o.level0_slowdown_trigger = size()?,
            "level0_stop_trigger" => o.level0_stop_trigger = size()?,
            "level_budget_during_writes" => {
                o.level_budget_during_writes = value.parse::<f64>().map_err(|_| bad())?
            }
            "max_bytes_for_level_base" => o.max_bytes_for_level_base = number()?,
            "level_size_multiplier" => o.level_size_multiplier = number()?,
            "max_subcompactions" => o.max_subcompactions = size()?,
            "compact_l0_for_reads" => o.compact_l0_for_reads = flag()?,
            "compact_l0_when_idle" => o.compact_l0_when_idle = flag()?,
            "compaction_style" => o.compaction_style = value.parse().map_err(|()| bad())?,
            "compaction_filter" => {
                o.compaction_filter = restore_compaction_filter(name, value, store)
            }
            "merge_operator" => o.merge_operator = find_merge_operator(value, store),
            "expire_after" => o.ttl = Some(Duration::from_secs(number()?)),
            "ttl" => {
                o.ttl = Some(Duration::from_secs(number()?));
                o.write_times = true;
            }
            "range_filter" => {
                let mut parts = value.split(' ');
                let (Some("grafite"), Some(bits), Some(range), None) =
                    (parts.next(), parts.next(), parts.next(), parts.next())
                else {
                    return Err(bad());
                };
                let bits = bits.parse::<f64>().map_err(|_| bad())?;
                let range = range.parse::<u64>().map_err(|_| bad())?;
                o.range_filter = RangeFilter::grafite(bits, range);
            }
            _ => return Err(bad()),
        }
    }
    o.validate()?;
    Ok(o)
}

/// The names of the options whose lines differ between records `a` and `b`, in record order, as
/// `Options` calls them.
pub(crate) fn changed_options(a: &str, b: &str) -> Vec<String> {
    let lines = |r: &str| -> Vec<(String, String)> {
        r.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let (a, b) = (lines(a), lines(b));
    let value = |list: &[(String, String)], name: &str| {
        list.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    };
    let mut names: Vec<String> = Vec::new();
    for (line, _) in a.iter().chain(&b) {
        // Both lines of a time to live are `Options::ttl`.
        let name = if line == "expire_after" { "ttl" } else { line };
        if value(&a, line) != value(&b, line) && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

/// `none`, `none`..., `zstd:3`: what `Compression`'s `Display` writes.
fn parse_compression(s: &str) -> Option<Compression> {
    match s {
        "none" => Some(Compression::None),
        "snappy" => Some(Compression::Snappy),
        "lz4" => Some(Compression::Lz4),
        _ => Some(Compression::Zstd(s.strip_prefix("zstd:")?.parse().ok()?)),
    }
}

/// The filter a `filter=` line records: `none`, or layout, policy name, bits per key and
/// partition bytes.
fn restore_filter(keyspace: &str, value: &str, store: &Options) -> Option<Filter> {
    if value == "none" {
        return Some(Filter::none());
    }
    let mut parts = value.split(' ');
    let layout_name = parts.next()?;
    let layout = FilterLayout::ALL
        .into_iter()
        .find(|l| l.name() == layout_name)?;
    let policy_name = parts.next()?;
    let bits: f64 = parts.next()?.parse().ok()?;
    let partition_bytes: usize = parts.next()?.parse().ok()?;
    let [leveldb, local, fuse8, fuse16, ribbon] = BUILT_IN_POLICIES;
    let policy: Arc<dyn FilterPolicy> = match policy_name {
        p if p == leveldb => Arc::new(LevelDbBloom::new(bits)),
        p if p == local => Arc::new(CacheLocalBloom::new(bits)),
        p if p == fuse8 => Arc::new(BinaryFuse::fuse8()),
        p if p == fuse16 => Arc::new(BinaryFuse::fuse16()),
        p if p == ribbon => Arc::new(Ribbon::new(bits)),
        own => match store.filter.policy().filter(|p| p.name() == own) {
            Some(p) => Arc::clone(p),
            None => {
                log::warn!(
                    "keyspace {keyspace}: its filter policy {own} is not in the options the \
                     store was opened with; its new tables get no filter"
                );
                return Some(Filter::none());
            }
        },
    };
    Some(Filter::new(layout, policy).partition_bytes(partition_bytes))
}

/// The prefix extractor a `prefix_extractor=` line names.
fn restore_prefix(keyspace: &str, name: &str, store: &Options) -> Option<PrefixExtractor> {
    if name.is_empty() {
        return None;
    }
    if let Some(n) = name.strip_prefix(FIXED_PREFIX).and_then(|n| n.parse().ok()) {
        return Some(PrefixExtractor::fixed(n));
    }
    let own = store
        .prefix_extractor
        .as_ref()
        .filter(|p| p.name() == name)
        .cloned();
    if own.is_none() {
        log::warn!(
            "keyspace {keyspace}: its prefix extractor {name} is not in the options the store \
             was opened with; it is used without one"
        );
    }
    own
}

/// The merge operator named `name` among `store`'s (its own, then the registered ones).
fn find_merge_operator(name: &str, store: &Options) -> Option<Arc<dyn MergeOperator>> {
    store
        .merge_operator
        .iter()
        .chain(&store.registered_merge_operators)
        .find(|m| m.name() == name)
        .cloned()
}

/// `Ok` unless keyspace `keyspace`'s record names a merge operator that `store` (the options a
/// store is opened with) does not hold.
///
/// # Errors
/// `Error::InvalidArgument` naming the keyspace and the operator.
pub(crate) fn missing_merge_operator(keyspace: &str, record: &str, store: &Options) -> Result<()> {
    for name in record
        .lines()
        .filter_map(|l| l.strip_prefix("merge_operator="))
    {
        if find_merge_operator(name, store).is_none() {
            return Err(Error::InvalidArgument(format!(
                "keyspace {keyspace} was created with merge operator {name}, which the options \
                 the store is opened with do not hold (merge_operator, register_merge_operator): \
                 its merge operands could not be read"
            )));
        }
    }
    Ok(())
}

/// The compaction filter a `compaction_filter=` line names, found among the store's options.
fn restore_compaction_filter(
    keyspace: &str,
    name: &str,
    store: &Options,
) -> Option<Arc<dyn CompactionFilter>> {
    let found = store
        .compaction_filter
        .iter()
        .chain(&store.registered_compaction_filters)
        .find(|f| f.name() == name)
        .cloned();
    if found.is_none() {
        log::warn!(
            "keyspace {keyspace}: its compaction filter {name} is not in the options the store \
             was opened with (compaction_filter, register_compaction_filter); its compactions \
             keep every entry"
        );
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction_filter::CompactionDecision;

    struct KeepAll;

    impl CompactionFilter for KeepAll {
        fn name(&self) -> &str {
            "test.KeepAll"
        }
        fn filter(&self, _: usize, _: &[u8], _: &[u8]) -> CompactionDecision {
            CompactionDecision::Keep
        }
    }

    #[test]
    fn a_ttl_and_a_compaction_filter_are_recorded_only_when_set() {
        let plain = describe(&Options::default());
        assert!(!plain.contains("ttl") && !plain.contains("compaction_filter"));
        let o = Options::default()
            .ttl(Duration::from_millis(2_500))
            .compaction_filter(Arc::new(KeepAll));
        let record = describe(&o);
        assert_eq!(
            record,
            format!("{plain}compaction_filter=test.KeepAll\nexpire_after=3\n")
        );
        // The filter is found by name, in the store's filter or among the registered ones.
        let registered = Options::default().register_compaction_filter(Arc::new(KeepAll));
        let back = restore("k", &record, &registered).unwrap();
        assert_eq!(back.ttl, Some(Duration::from_secs(3)));
        assert_eq!(describe(&back), record);
        // Not found: none, and the record it makes names none.
        let back = restore("k", &record, &Options::default()).unwrap();
        assert!(back.compaction_filter.is_none());
        assert_eq!(back.ttl, Some(Duration::from_secs(3)));
        // A record without them clears what the store's options have.
        let store = Options::default().compaction_filter(Arc::new(KeepAll));
        let back = restore("k", &plain, &store).unwrap();
        assert!(back.compaction_filter.is_none() && back.ttl.is_none());
        // A keyspace whose values carry their write time keeps the line that says so.
        let written = restore("k", &format!("{plain}ttl=7\n"), &Options::default()).unwrap();
        assert!(written.write_times);
        assert_eq!(written.ttl, Some(Duration::from_secs(7)));
        assert_eq!(describe(&written), format!("{plain}ttl=7\n"));
        assert!(!back.write_times);
    }

    #[test]
    fn changed_options_are_named_in_record_order() {
        let plain = describe(&Options::default());
        let other = describe(
            &Options::default()
                .block_size(8192)
                .ttl(Duration::from_secs(60)),
        );
        assert_eq!(changed_options(&plain, &other), ["block_size", "ttl"]);
        assert_eq!(changed_options(&other, &plain), ["block_size", "ttl"]);
        assert!(changed_options(&plain, &plain).is_empty());
    }

    #[test]
    fn a_record_restores_the_options_it_describes() {
        let o = Options::default()
            .filter(Filter::partitioned(7.5).partition_bytes(8192))
            .prefix_extractor(PrefixExtractor::fixed(6))
            .compression(Compression::Zstd(-2))
            .bottommost_compression(Compression::Lz4)
            .block_size(16 << 10)
            .write_buffer_size(1 << 20)
            .compaction_style(CompactionStyle::LazyLeveled { runs_per_level: 3 });
        let record = describe(&o);
        let back = restore("k", &record, &Options::default()).unwrap();
        assert_eq!(describe(&back), record);
        let none = Options::default().filter(Filter::none());
        let back = restore("k", &describe(&none), &Options::default()).unwrap();
        assert!(back.filter.policy().is_none());
        assert!(restore("k", "block_size=big\n", &Options::default()).is_err());
        assert!(restore("k", "ttl=soon\n", &Options::default()).is_err());
        assert!(restore("k", "colour=blue\n", &Options::default()).is_err());
    }
}

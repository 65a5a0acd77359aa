//! `Filter`: the user's choice of layout and policy for new tables.

use std::fmt;
use std::sync::Arc;

use super::{BinaryFuse, CacheLocalBloom, FilterPolicy, LevelDbBloom, Ribbon};
use crate::prefix::PrefixExtractor;

/// Where a table keeps its filter bits and which keys each filter covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterLayout {
    /// One filter per 2 KiB of data-block offsets (LevelDB's filter block), asked after the index.
    BlockBased,
    /// One filter for the whole table, asked before the index.
    Full,
    /// The full filter cut into partitions behind a top-level index; partitions go through the
    /// block cache.
    Partitioned,
}

impl FilterLayout {
    /// Every layout, in the order statistics list them.
    pub const ALL: [FilterLayout; 3] = [
        FilterLayout::BlockBased,
        FilterLayout::Full,
        FilterLayout::Partitioned,
    ];

    /// A short name: `block-based`, `full` or `partitioned`.
    pub fn name(self) -> &'static str {
        match self {
            FilterLayout::BlockBased => "block-based",
            FilterLayout::Full => "full",
            FilterLayout::Partitioned => "partitioned",
        }
    }

    /// The prefix of this layout's metaindex entry (`filter.`, `fullfilter.`, `partitionedfilter.`).
    pub(crate) fn meta_prefix(self) -> &'static str {
        match self {
            FilterLayout::BlockBased => "filter.",
            FilterLayout::Full => "fullfilter.",
            FilterLayout::Partitioned => "partitionedfilter.",
        }
    }

    /// The layout and policy name a metaindex entry names, if it names a filter.
    pub(crate) fn parse_meta_name(name: &str) -> Option<(FilterLayout, &str)> {
        FilterLayout::ALL
            .into_iter()
            .find_map(|layout| Some((layout, name.strip_prefix(layout.meta_prefix())?)))
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for FilterLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Default target size of one filter partition.
pub const DEFAULT_PARTITION_BYTES: usize = 4096;

/// The filter new tables get: a layout and a policy, or none.
///
/// ```
/// use siftdb::{Filter, FilterLayout, LevelDbBloom};
/// use std::sync::Arc;
///
/// let full = Filter::full(10.0);                       // cache-local bloom, one per table
/// let old = Filter::block_based(10.0);                 // LevelDB bloom, one per 2 KiB of data
/// let parts = Filter::partitioned(10.0).partition_bytes(8192);
/// let small = Filter::ribbon(7.0);                     // Ribbon: the bloom's 1 % in 7 bits/key
/// let mine = Filter::new(FilterLayout::Full, Arc::new(LevelDbBloom::new(12.0)));
/// assert_eq!(mine.layout(), Some(FilterLayout::Full));
/// assert!(Filter::none().policy().is_none());
/// # let _ = (full, old, parts, small);
/// ```
///
/// The built-in constructors clamp `bits_per_key` to what their policy supports (the blooms 1 to
/// 100, Ribbon 1 to 64): more or fewer bits than that is what a caller asking for them means.
/// A `bits_per_key` that is not a number, infinite, or not above zero is a mistake:
/// [`Db::open`](crate::Db::open) refuses it with `Error::InvalidArgument`.
#[derive(Clone)]
pub struct Filter {
    layout: FilterLayout,
    policy: Option<Arc<dyn FilterPolicy>>,
    partition_bytes: usize,
    /// The bits per key a built-in constructor was asked for, before its policy clamped them.
    requested_bits_per_key: Option<f64>,
}

impl Filter {
    /// `policy` in `layout`.
    pub fn new(layout: FilterLayout, policy: Arc<dyn FilterPolicy>) -> Filter {
        Filter {
            layout,
            policy: Some(policy),
            partition_bytes: DEFAULT_PARTITION_BYTES,
            requested_bits_per_key: None,
        }
    }

    /// Remembers the bits per key a built-in constructor was asked for.
    fn requested(mut self, bits_per_key: f64) -> Filter {
        self.requested_bits_per_key = Some(bits_per_key);
        self
    }

    /// Whether the filter can be built as asked.
    ///
    /// # Errors
    /// `Error::InvalidArgument` for a built-in filter asked for a `bits_per_key` that is not a
    /// finite number above zero.
    pub(crate) fn validate(&self) -> crate::error::Result<()> {
        match self.requested_bits_per_key {
            Some(bits) if !(bits.is_finite() && bits > 0.0) => {
                Err(crate::error::Error::InvalidArgument(format!(
                    "filter bits per key {bits} is not a finite number above zero"
                )))
            }
            _ => Ok(()),
        }
    }

    /// LevelDB's bloom in LevelDB's block-based layout.
    pub fn block_based(bits_per_key: f64) -> Filter {
        Filter::new(
            FilterLayout::BlockBased,
            Arc::new(LevelDbBloom::new(bits_per_key)),
        )
        .requested(bits_per_key)
    }

    /// The cache-local bloom, one filter per table.
    pub fn full(bits_per_key: f64) -> Filter {
        Filter::new(
            FilterLayout::Full,
            Arc::new(CacheLocalBloom::new(bits_per_key)),
        )
        .requested(bits_per_key)
    }

    /// The cache-local bloom, partitioned (about 4 KiB a partition).
    pub fn partitioned(bits_per_key: f64) -> Filter {
        Filter::new(
            FilterLayout::Partitioned,
            Arc::new(CacheLocalBloom::new(bits_per_key)),
        )
        .requested(bits_per_key)
    }

    /// The Ribbon filter, one filter per table: the same false positive rate as the cache-local
    /// bloom for about 70 % of its bits (7 bits/key for the bloom's 1 % at 10), at a higher
    /// build and probe cost. `bits_per_key` is the space spent, any value from 1 to 64.
    pub fn ribbon(bits_per_key: f64) -> Filter {
        Filter::new(FilterLayout::Full, Arc::new(Ribbon::new(bits_per_key))).requested(bits_per_key)
    }

    /// No filter: every Get reads the index and a data block of every candidate table.
    pub fn none() -> Filter {
        Filter {
            layout: FilterLayout::Full,
            policy: None,
            partition_bytes: DEFAULT_PARTITION_BYTES,
            requested_bits_per_key: None,
        }
    }

    /// The same layout and partition size with another policy.
    pub(crate) fn with_policy(&self, policy: Arc<dyn FilterPolicy>) -> Filter {
        Filter {
            layout: self.layout,
            policy: Some(policy),
            partition_bytes: self.partition_bytes,
            requested_bits_per_key: None,
        }
    }

    /// Target bytes of one partition (partitioned layout only; default 4 KiB).
    pub fn partition_bytes(mut self, bytes: usize) -> Filter {
        self.partition_bytes = bytes.max(64);
        self
    }

    /// The layout, or `None` for no filter.
    pub fn layout(&self) -> Option<FilterLayout> {
        self.policy.as_ref().map(|_| self.layout)
    }

    /// The policy, or `None` for no filter.
    pub fn policy(&self) -> Option<&Arc<dyn FilterPolicy>> {
        self.policy.as_ref()
    }

    pub(crate) fn target_partition_bytes(&self) -> usize {
        self.partition_bytes
    }
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.policy {
            None => f.write_str("Filter::none()"),
            Some(p) => write!(
                f,
                "Filter({}, {} at {} bits/key)",
                self.layout,
                p.name(),
                p.bits_per_key()
            ),
        }
    }
}

/// What a store can read tables' filters with: the built-in policies plus the configured one, and
/// the configured prefix extractor.
#[derive(Clone)]
pub(crate) struct PolicyRegistry {
    policies: Vec<Arc<dyn FilterPolicy>>,
    prefix: Option<PrefixExtractor>,
}

impl PolicyRegistry {
    pub(crate) fn new(configured: &Filter, prefix: Option<PrefixExtractor>) -> PolicyRegistry {
        // Built-in policies read their parameters from the filter bytes, so any bits/key will do.
        let mut policies: Vec<Arc<dyn FilterPolicy>> = vec![
            Arc::new(LevelDbBloom::new(10.0)),
            Arc::new(CacheLocalBloom::new(10.0)),
            Arc::new(BinaryFuse::fuse8()),
            Arc::new(BinaryFuse::fuse16()),
            Arc::new(Ribbon::new(10.0)),
        ];
        if let Some(p) = configured.policy() {
            policies.retain(|b| b.name() != p.name());
            policies.insert(0, Arc::clone(p));
        }
        PolicyRegistry { policies, prefix }
    }

    /// The store's prefix extractor, if a table built with one of the name `name` may use it.
    pub(crate) fn prefix_named(&self, name: &str) -> Option<&PrefixExtractor> {
        self.prefix
            .as_ref()
            .filter(|p| !name.is_empty() && p.name() == name)
    }

    pub(crate) fn find(&self, name: &str) -> Option<&Arc<dyn FilterPolicy>> {
        self.policies.iter().find(|p| p.name() == name)
    }
}

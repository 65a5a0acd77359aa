//! Filter layouts: where a table keeps its filter's bits, and how a lookup finds the bits for a
//! key. The bits themselves come from a [`FilterPolicy`]; a layout decides which keys share one
//! filter and in which blocks the filters live.
//!
//! Layouts live with the table format (they are made of blocks, handles and an index) and depend
//! on policies, never the reverse: `filter/` knows nothing of tables.
//!
//! Each layout has a builder, fed by the table writer, and a reader, asked by the table reader;
//! both traits are here, and each layout's read path is in its own file:
//! [`block_based`] (LevelDB's filter block, asked after the index), [`full`] (one filter, asked
//! first) and [`partitioned`] (a pinned partition index, partitions through the block cache).

pub(crate) mod block_based;
pub(crate) mod full;
pub(crate) mod partitioned;

use std::sync::Arc;

use block_based::{BlockBasedFilterBuilder, BlockBasedFilterReader};
use full::{FullFilterBuilder, FullFilterReader};
use partitioned::{PartitionedFilterBuilder, PartitionedFilterReader};

use crate::error::{Error, Result};
use crate::filter::{Filter, FilterLayout, FilterPolicy, FilterProbe, PolicyRegistry};
use crate::sst::format::BlockHandle;

/// Writes one block (uncompressed, with its trailer) to the table being built, returning its handle.
pub(crate) type WriteBlock<'a> = dyn FnMut(&[u8]) -> Result<BlockHandle> + 'a;

/// What the table writer feeds as it writes data blocks. Keys are user keys, in table order.
pub(crate) trait FilterBlockBuilder: Send {
    /// A data block starting at `block_offset` is about to receive keys.
    fn start_block(&mut self, block_offset: u64);
    /// A user key of the current data block.
    fn add_key(&mut self, user_key: &[u8]);
    /// The prefix of a key of the current data block, fed just before that key (if whole keys are
    /// filtered too). Layouts that cut filters override it to keep prefixes that straddle a cut.
    fn add_prefix(&mut self, prefix: &[u8]) {
        self.add_key(prefix);
    }
    /// The current data block is complete; `last_user_key` is its last key. Partitions are cut here.
    fn finish_block(&mut self, last_user_key: &[u8]);
    /// Writes the filter block(s) through `write` and returns the handle the metaindex points to.
    fn finish(&mut self, write: &mut WriteBlock<'_>) -> Result<BlockHandle>;
    /// Bytes of filter written so far by `finish` (all partitions and the top-level index).
    fn filter_bytes(&self) -> u64;
    /// Distinct keys added (consecutive duplicates within a block count once).
    fn num_keys(&self) -> u64;
}

/// A builder for `filter`'s layout, or `None` for no filter.
pub(crate) fn new_filter_block_builder(filter: &Filter) -> Option<Box<dyn FilterBlockBuilder>> {
    let policy = Arc::clone(filter.policy()?);
    Some(match filter.layout()? {
        FilterLayout::BlockBased => Box::new(BlockBasedFilterBuilder::new(policy)),
        FilterLayout::Full => Box::new(FullFilterBuilder::new(policy)),
        FilterLayout::Partitioned => Box::new(PartitionedFilterBuilder::new(
            policy,
            filter.target_partition_bytes(),
        )),
    })
}

/// What a filter reader may read from its table besides what it keeps in memory.
pub(crate) trait BlockSource {
    /// The filter partition at `handle` (raw policy bytes), through the block cache.
    ///
    /// # Errors
    /// `Error::Corruption` naming the table if the block is damaged.
    fn filter_partition(&self, handle: BlockHandle) -> Result<Arc<Vec<u8>>>;

    /// The data block that would hold internal key `lookup`, as the index says; `None` if every
    /// key of the table is smaller.
    ///
    /// # Errors
    /// `Error::Corruption` naming the table if the index is damaged.
    fn data_block_for(&self, lookup: &[u8]) -> Result<Option<BlockHandle>>;

    /// An `Error::Corruption` naming the table, for damage a filter reader finds itself.
    fn corruption(&self, what: &str) -> Error;

    /// The reader of the filter's top-level block of `layout` at `handle`, through the block
    /// cache (a filter charged to the cache instead of pinned with its table).
    ///
    /// # Errors
    /// `Error::Corruption` naming the table if the block is damaged.
    fn filter_block(
        &self,
        layout: FilterLayout,
        handle: BlockHandle,
    ) -> Result<Arc<dyn FilterBlockReader>>;
}

/// A filter's answer for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FilterAnswer {
    /// Certainly not in the table.
    No,
    /// Perhaps in the table.
    Maybe,
    /// The filter had nothing to say: the table holds no block the key could be in (block-based:
    /// the key sorts after the last block). The table has no entry for it either.
    NotAsked,
}

impl FilterAnswer {
    /// `Maybe` if `maybe`, else `No`.
    pub(crate) fn from_maybe(maybe: bool) -> FilterAnswer {
        if maybe {
            FilterAnswer::Maybe
        } else {
            FilterAnswer::No
        }
    }
}

/// What an inspector can learn of a filter from its bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FilterShape {
    /// Probes per key, if the policy can read them from its filter bytes.
    pub(crate) probes: Option<u32>,
    /// Partitions (partitioned layout only).
    pub(crate) partitions: Option<usize>,
}

/// What a table reader keeps of its filter's top-level block, and how it answers for a key.
pub(crate) trait FilterBlockReader: Send + Sync {
    /// Whether the table may hold `probe`'s key, which a lookup of internal key `lookup` seeks.
    /// (They differ when the filter holds a key's prefix, and for prefix checks.)
    ///
    /// # Errors
    /// `Error::Corruption` naming the table if a block it reads is damaged.
    fn may_match(
        &self,
        policy: &dyn FilterPolicy,
        probe: &FilterProbe<'_>,
        lookup: &[u8],
        blocks: &dyn BlockSource,
    ) -> Result<FilterAnswer>;

    /// The answers for several keys at once, `out[i]` for `probes[i]` (whole keys), if this
    /// layout can give them without a lookup key per key: `true` if it did. The full layout
    /// does, through its policy's [`FilterPolicy::may_match_batch`]; the others (the default)
    /// return `false` and are asked one key at a time.
    fn may_match_batch(
        &self,
        policy: &dyn FilterPolicy,
        probes: &[FilterProbe<'_>],
        out: &mut [bool],
    ) -> bool {
        let _ = (policy, probes, out);
        false
    }

    /// Bytes kept in memory for as long as the table is open.
    fn pinned_bytes(&self) -> usize;

    /// The filter's shape, for inspection: probes per key and partitions.
    ///
    /// # Errors
    /// `Error::Corruption` naming the table if a block it reads is damaged.
    fn describe(&self, policy: &dyn FilterPolicy, blocks: &dyn BlockSource) -> Result<FilterShape>;
}

/// The reader of a filter's top-level block (the whole filter, LevelDB's filter block, or the
/// partition index) for `layout`; `None` if the block does not parse.
pub(crate) fn parse_filter_block(
    layout: FilterLayout,
    block: Vec<u8>,
) -> Option<Arc<dyn FilterBlockReader>> {
    Some(match layout {
        FilterLayout::BlockBased => Arc::new(BlockBasedFilterReader::new(block)?),
        FilterLayout::Full => Arc::new(FullFilterReader::new(block)),
        FilterLayout::Partitioned => Arc::new(PartitionedFilterReader::new(block)?),
    })
}

/// Where a table keeps its filter's top-level block.
enum FilterPlacement {
    /// A full filter, read at open and kept with the table: held as itself, not behind the
    /// reader trait, so that a batch of lookups reaches its bytes without a dynamic call.
    Whole(FullFilterReader),
    /// Another layout's block, read at open and kept with the table.
    Pinned(Arc<dyn FilterBlockReader>),
    /// In the block cache, charged to it, and read again after it is evicted.
    Cached(BlockHandle),
}

/// A filter's top-level block, as a lookup reads it: kept with the table, or from the cache.
enum TopBlock<'a> {
    Kept(&'a dyn FilterBlockReader),
    Cached(Arc<dyn FilterBlockReader>),
}

impl<'a> std::ops::Deref for TopBlock<'a> {
    type Target = dyn FilterBlockReader + 'a;

    fn deref(&self) -> &Self::Target {
        match self {
            TopBlock::Kept(r) => *r,
            TopBlock::Cached(r) => r.as_ref(),
        }
    }
}

/// A full filter kept in memory with its table, which answers for a key with one probe of its
/// bytes (see [`TableFilter::in_memory`]).
#[derive(Clone, Copy)]
pub(crate) struct InMemoryFilter<'a> {
    policy: &'a dyn FilterPolicy,
    bytes: &'a [u8],
    /// The cache lines a probe reads (see [`TableFilter::lines_per_probe`]).
    lines: u32,
}

impl<'a> InMemoryFilter<'a> {
    /// The policy that built the filter.
    pub(crate) fn policy(&self) -> &'a dyn FilterPolicy {
        self.policy
    }

    /// The filter's bytes, as its policy reads them.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Starts loading what the policy's `may_match_probe` of `probe` will read.
    #[inline]
    pub(crate) fn prefetch(&self, probe: &FilterProbe<'_>) {
        self.policy.prefetch(self.bytes, probe);
    }

    /// Whether the table may hold `probe`'s key.
    #[inline]
    pub(crate) fn may_match(&self, probe: &FilterProbe<'_>) -> bool {
        self.policy.may_match_probe(self.bytes, probe)
    }

    /// The cache lines a probe reads.
    pub(crate) fn lines(&self) -> u32 {
        self.lines
    }
}

/// A full filter kept in memory with its table, its policy and bytes shared with the table's
/// reader (see [`TableFilter::shared_in_memory`]).
#[derive(Clone)]
pub(crate) struct SharedFullFilter {
    policy: Arc<dyn FilterPolicy>,
    bytes: Arc<[u8]>,
    /// The cache lines a probe reads (see [`TableFilter::lines_per_probe`]).
    lines: u32,
}

impl std::fmt::Debug for SharedFullFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} filter of {} bytes",
            self.policy.name(),
            self.bytes.len()
        )
    }
}

impl SharedFullFilter {
    /// Starts loading what [`may_match`](Self::may_match) of `probe` reads.
    #[inline]
    pub(crate) fn prefetch(&self, probe: &FilterProbe<'_>) {
        self.policy.prefetch(&self.bytes, probe);
    }

    /// Whether the table may hold `probe`'s key: the answer of its reader's filter.
    #[inline]
    pub(crate) fn may_match(&self, probe: &FilterProbe<'_>) -> bool {
        self.policy.may_match_probe(&self.bytes, probe)
    }

    /// The cache lines a probe reads.
    pub(crate) fn lines(&self) -> u32 {
        self.lines
    }
}

/// A table's filter: its policy, its layout and where its top-level block is.
pub(crate) struct TableFilter {
    pub(crate) policy: Arc<dyn FilterPolicy>,
    layout: FilterLayout,
    placement: FilterPlacement,
    /// The cache lines a probe of a full filter kept in memory reads, as its policy says
    /// ([`FilterPolicy::lines_per_probe`]); 0 for other placements, or a policy that does not say.
    lines_per_probe: u32,
}

impl TableFilter {
    /// The filter a metaindex entry named `name` points to, whose top-level block is at `handle`.
    /// `Ok(None)` for an entry that names no filter, or a policy `policies` does not know (the
    /// table is then read without its filter). With `charge_to_cache` the block is left to the
    /// block cache (`pin_partition_index` keeps a partitioned filter's index with the table all
    /// the same); otherwise it is read now, through `read`, and kept.
    ///
    /// # Errors
    /// The error of `read`, or `malformed(layout)` if the block does not parse.
    pub(crate) fn open<E>(
        name: &[u8],
        handle: BlockHandle,
        policies: &PolicyRegistry,
        charge_to_cache: bool,
        pin_partition_index: bool,
        read: impl FnOnce() -> std::result::Result<Vec<u8>, E>,
        malformed: impl FnOnce(FilterLayout) -> E,
    ) -> std::result::Result<Option<TableFilter>, E> {
        let Some((layout, policy)) = std::str::from_utf8(name)
            .ok()
            .and_then(FilterLayout::parse_meta_name)
        else {
            return Ok(None);
        };
        let Some(policy) = policies.find(policy) else {
            return Ok(None);
        };
        let pin = !charge_to_cache || (layout == FilterLayout::Partitioned && pin_partition_index);
        let placement = if pin && layout == FilterLayout::Full {
            FilterPlacement::Whole(FullFilterReader::new(read()?))
        } else if pin {
            let reader = parse_filter_block(layout, read()?).ok_or_else(|| malformed(layout))?;
            FilterPlacement::Pinned(reader)
        } else {
            FilterPlacement::Cached(handle)
        };
        let lines_per_probe = match &placement {
            FilterPlacement::Whole(r) => policy.lines_per_probe(r.bytes()).unwrap_or(0),
            FilterPlacement::Pinned(_) | FilterPlacement::Cached(_) => 0,
        };
        Ok(Some(TableFilter {
            policy: Arc::clone(policy),
            layout,
            placement,
            lines_per_probe,
        }))
    }

    /// The cache lines one probe of this filter reads, when it is a full filter kept in memory
    /// and its policy says ([`FilterPolicy::lines_per_probe`]); else 0.
    #[inline]
    pub(crate) fn lines_per_probe(&self) -> u32 {
        self.lines_per_probe
    }

    pub(crate) fn layout(&self) -> FilterLayout {
        self.layout
    }

    /// The top-level block, fetched through `blocks` if it is charged to the cache.
    ///
    /// # Errors
    /// `Error::Corruption` naming the table if a block charged to the cache is damaged.
    #[inline]
    fn top_block(&self, blocks: &dyn BlockSource) -> Result<TopBlock<'_>> {
        Ok(match &self.placement {
            FilterPlacement::Whole(r) => TopBlock::Kept(r),
            FilterPlacement::Pinned(r) => TopBlock::Kept(r.as_ref()),
            FilterPlacement::Cached(h) => TopBlock::Cached(blocks.filter_block(self.layout, *h)?),
        })
    }

    /// See [`FilterBlockReader::may_match`].
    #[inline]
    pub(crate) fn may_match(
        &self,
        probe: &FilterProbe<'_>,
        lookup: &[u8],
        blocks: &dyn BlockSource,
    ) -> Result<FilterAnswer> {
        let policy = self.policy.as_ref();
        match &self.placement {
            // The full filter answers without a dynamic call: most Gets ask it.
            FilterPlacement::Whole(r) => r.may_match(policy, probe, lookup, blocks),
            _ => self
                .top_block(blocks)?
                .may_match(policy, probe, lookup, blocks),
        }
    }

    /// See [`FilterBlockReader::may_match_batch`]: `Ok(true)` if `out` holds the answers.
    ///
    /// # Errors
    /// `Error::Corruption` naming the table if a filter charged to the cache is damaged.
    pub(crate) fn may_match_batch(
        &self,
        probes: &[FilterProbe<'_>],
        blocks: &dyn BlockSource,
        out: &mut [bool],
    ) -> Result<bool> {
        let policy = self.policy.as_ref();
        Ok(self.top_block(blocks)?.may_match_batch(policy, probes, out))
    }

    /// The whole filter, if it is a full filter kept in memory with the table: its bytes answer
    /// for any whole key on their own, without a lookup key or a block read. `None` for other
    /// layouts, and for a full filter charged to the block cache (finding it would take a cache
    /// lookup).
    #[inline]
    pub(crate) fn in_memory(&self) -> Option<InMemoryFilter<'_>> {
        match &self.placement {
            FilterPlacement::Whole(r) => Some(InMemoryFilter {
                policy: self.policy.as_ref(),
                bytes: r.bytes(),
                lines: self.lines_per_probe,
            }),
            FilterPlacement::Pinned(_) | FilterPlacement::Cached(_) => None,
        }
    }

    /// [`in_memory`](Self::in_memory), shared: what a version keeps of the filter to reach it
    /// without going through the table's reader.
    pub(crate) fn shared_in_memory(&self) -> Option<SharedFullFilter> {
        match &self.placement {
            FilterPlacement::Whole(r) => Some(SharedFullFilter {
                policy: Arc::clone(&self.policy),
                bytes: Arc::clone(r.shared_bytes()),
                lines: self.lines_per_probe,
            }),
            FilterPlacement::Pinned(_) | FilterPlacement::Cached(_) => None,
        }
    }

    /// Bytes this filter keeps in memory for as long as its table is open (none when charged to
    /// the block cache).
    pub(crate) fn pinned_bytes(&self) -> usize {
        match &self.placement {
            FilterPlacement::Whole(r) => r.pinned_bytes(),
            FilterPlacement::Pinned(r) => r.pinned_bytes(),
            FilterPlacement::Cached(_) => 0,
        }
    }

    /// See [`FilterBlockReader::describe`].
    pub(crate) fn describe(&self, blocks: &dyn BlockSource) -> Result<FilterShape> {
        self.top_block(blocks)?
            .describe(self.policy.as_ref(), blocks)
    }
}

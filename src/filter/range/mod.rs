//! Range filters: whether a table may hold any key in a range, so a short bounded scan skips a
//! table that holds nothing there without reading its index or a data block.
//!
//! `key_map.rs` maps keys to order-preserving integers after a common prefix, `elias_fano.rs`
//! stores sorted integers compactly, and `grafite.rs` is the filter built of the two (its hash,
//! its query, and the single-window format tables were written in before segments);
//! `segmented.rs` is the format new tables get, the table's keys cut into segments, each mapped
//! its own way, in one Grafite, and `separator.rs` the way of a segment whose keys share a
//! separator byte; `spare_integers.rs` keeps a thread's build buffers for its next table.
//! [`RangeFilter`] is the user's choice for new tables; [`TableRangeFilter`] is a table's filter,
//! of any format, as the store asks it.

mod elias_fano;
mod grafite;
mod key_map;
mod segmented;
mod separator;
mod spare_integers;

use std::ops::Bound;

pub use grafite::{GrafiteBuilder, GrafiteFilter};
pub use segmented::{SegmentedGrafite, SegmentedGrafiteBuilder};

/// The metaindex name of a range filter block of the single-window format (read, no longer
/// written).
pub(crate) const GRAFITE_BLOCK: &str = "rangefilter.siftdb.Grafite";
/// The metaindex name of the range filter block new tables get: the segmented format with
/// separator windows (format byte 3). A name of its own, so that a reader from before reads such a
/// table without its range filter rather than refusing it.
pub(crate) const SEGMENTED_GRAFITE_BLOCK: &str = "rangefilter.siftdb.SegmentedGrafite3";
/// The metaindex name of a segmented range filter block before separator windows (format byte 2;
/// read, no longer written).
pub(crate) const SEGMENTED_GRAFITE_2_BLOCK: &str = "rangefilter.siftdb.SegmentedGrafite";

/// What a table's range filter answers for the keys of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeCheck {
    /// No key of the table can lie there (the range misses every stretch its keys map from).
    Absent,
    /// The range spans `width` integers, more than the filter answers (or a whole segment).
    TooWide { width: u64 },
    /// The filter was asked about `width` integers; `maybe` false means no key lies there.
    Asked { width: u64, maybe: bool },
}

impl RangeCheck {
    /// The range `[lower, upper]` (each `None` for unbounded) as the bounds `check` takes.
    pub(crate) fn closed<'a>(
        lower: Option<&'a [u8]>,
        upper: Option<&'a [u8]>,
    ) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
        (
            lower.map_or(Bound::Unbounded, Bound::Included),
            upper.map_or(Bound::Unbounded, Bound::Included),
        )
    }

    /// Whether the answer leaves a key possible in the range (a "maybe", or too wide to ask).
    pub(crate) fn may_hold(self) -> bool {
        !matches!(
            self,
            RangeCheck::Absent | RangeCheck::Asked { maybe: false, .. }
        )
    }

    /// The answer for two pieces of one range: widths add, either's "maybe" or "too wide" wins.
    pub(crate) fn and(self, other: RangeCheck) -> RangeCheck {
        match (self, other) {
            (RangeCheck::Absent, x) | (x, RangeCheck::Absent) => x,
            (RangeCheck::TooWide { width: a }, RangeCheck::TooWide { width: b })
            | (RangeCheck::TooWide { width: a }, RangeCheck::Asked { width: b, .. })
            | (RangeCheck::Asked { width: a, .. }, RangeCheck::TooWide { width: b }) => {
                RangeCheck::TooWide {
                    width: a.saturating_add(b),
                }
            }
            (
                RangeCheck::Asked { width: a, maybe: x },
                RangeCheck::Asked { width: b, maybe: y },
            ) => RangeCheck::Asked {
                width: a.saturating_add(b),
                maybe: x || y,
            },
        }
    }
}

/// A table's range filter, of the format its block is in.
#[derive(Debug, Clone)]
pub(crate) enum TableRangeFilter {
    /// The single-window format (`rangefilter.siftdb.Grafite`).
    SingleWindow(GrafiteFilter),
    /// The segmented format (`rangefilter.siftdb.SegmentedGrafite3`, or before separator
    /// windows `rangefilter.siftdb.SegmentedGrafite`).
    Segmented(SegmentedGrafite),
}

/// The format of a table's range filter block, which its metaindex name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeFilterFormat {
    SingleWindow,
    /// Segmented, before separator windows.
    Segmented2,
    Segmented,
}

impl RangeFilterFormat {
    /// The format of the block named `name`, if it names a range filter block this reader knows.
    pub(crate) fn of_block(name: &[u8]) -> Option<RangeFilterFormat> {
        if name == SEGMENTED_GRAFITE_BLOCK.as_bytes() {
            Some(RangeFilterFormat::Segmented)
        } else if name == SEGMENTED_GRAFITE_2_BLOCK.as_bytes() {
            Some(RangeFilterFormat::Segmented2)
        } else if name == GRAFITE_BLOCK.as_bytes() {
            Some(RangeFilterFormat::SingleWindow)
        } else {
            None
        }
    }
}

impl TableRangeFilter {
    /// Reads a filter of `format` from its block's bytes; `None` if they are not well-formed.
    pub(crate) fn read(format: RangeFilterFormat, bytes: &[u8]) -> Option<TableRangeFilter> {
        match format {
            RangeFilterFormat::Segmented => {
                SegmentedGrafite::from_bytes_of(segmented::FORMAT_SEPARATED, bytes)
                    .map(TableRangeFilter::Segmented)
            }
            RangeFilterFormat::Segmented2 => {
                SegmentedGrafite::from_bytes_of(segmented::FORMAT_SEGMENTED, bytes)
                    .map(TableRangeFilter::Segmented)
            }
            RangeFilterFormat::SingleWindow => {
                GrafiteFilter::from_bytes(bytes).map(TableRangeFilter::SingleWindow)
            }
        }
    }

    /// What it answers for the keys in `(lower, upper)`.
    pub(crate) fn check(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> RangeCheck {
        match self {
            TableRangeFilter::SingleWindow(f) => f.check(lower, upper),
            TableRangeFilter::Segmented(f) => f.check(lower, upper),
        }
    }

    /// Whether its table may hold a key `k` with `lower ≤ k ≤ upper` (each `None` for unbounded).
    #[cfg(test)]
    pub(crate) fn may_contain(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
        let (lo, hi) = RangeCheck::closed(lower, upper);
        self.check(lo, hi).may_hold()
    }

    /// The bits per key it was built with.
    pub(crate) fn bits_per_key(&self) -> f64 {
        match self {
            TableRangeFilter::SingleWindow(f) => f.bits_per_key(),
            TableRangeFilter::Segmented(f) => f.bits_per_key(),
        }
    }

    /// The widest range it answers, in integers.
    pub(crate) fn max_range(&self) -> u64 {
        match self {
            TableRangeFilter::SingleWindow(f) => f.max_range(),
            TableRangeFilter::Segmented(f) => f.max_range(),
        }
    }

    /// The number of distinct key integers it holds.
    pub(crate) fn num_keys(&self) -> u64 {
        match self {
            TableRangeFilter::SingleWindow(f) => f.num_keys(),
            TableRangeFilter::Segmented(f) => f.num_keys(),
        }
    }

    /// Bytes it holds in memory.
    pub(crate) fn memory_bytes(&self) -> usize {
        match self {
            TableRangeFilter::SingleWindow(f) => f.memory_bytes(),
            TableRangeFilter::Segmented(f) => f.memory_bytes(),
        }
    }
}

/// The range filter new tables get ([`Options::range_filter`](crate::Options::range_filter)):
/// none (the default) or Grafite.
///
/// ```
/// use siftdb::{Options, RangeFilter};
///
/// // 24 bits per key; ranges up to 2^16 integers wide (for keys of one length, 2^16 values of
/// // their last 8 bytes). An empty range of 2^16 integers is a "maybe" about 1.6 % of the time,
/// // one of 2^8 about 0.006 %.
/// let filter = RangeFilter::grafite(24.0, 1 << 16);
/// assert_eq!(filter.theoretical_fp_rate(1 << 16), Some(1.0 / 64.0));
/// assert_eq!(filter.theoretical_fp_rate(1 << 8), Some(1.0 / 16384.0));
/// let options = Options::default().range_filter(filter);
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeFilter {
    grafite: Option<(f64, u64)>,
}

impl RangeFilter {
    /// No range filter: a bounded scan opens every table whose key range overlaps its range.
    pub fn none() -> RangeFilter {
        RangeFilter { grafite: None }
    }

    /// Grafite with `bits_per_key` (3 to 60; [`Db::open`](crate::Db::open) refuses a value
    /// that is not a finite number in that span) answering ranges up to `max_range` integers wide
    /// (at least 1): for keys of one length, values of their last 8 bytes, whatever the bytes
    /// before them (a tenant, a head); for keys of varying lengths that share a separator (the
    /// `:` of `user:<id>:<field>`), values of their last bytes after it; for other keys of varying
    /// lengths, values of the 8 bytes after the common prefix of the keys around the range. The
    /// false positive rate for an empty range of `ℓ ≤ max_range` integers is about
    /// `ℓ / 2^(bits_per_key − 2)` (for which keys and ranges: docs/filters.md, *Range filters*), and
    /// wider ranges always read the table. Tables round `max_range` up to a power of two (at
    /// most 2^63).
    pub fn grafite(bits_per_key: f64, max_range: u64) -> RangeFilter {
        RangeFilter {
            grafite: Some((bits_per_key, max_range)),
        }
    }

    /// Whether it builds a filter.
    pub fn is_some(&self) -> bool {
        self.grafite.is_some()
    }

    /// The bits per key, if it builds a filter.
    pub fn bits_per_key(&self) -> Option<f64> {
        self.grafite.map(|(bits, _)| bits)
    }

    /// The widest range it answers, if it builds a filter.
    pub fn max_range(&self) -> Option<u64> {
        self.grafite.map(|(_, range)| range)
    }

    /// The false positive rate theory gives for an empty range of `width` integers, if it builds
    /// a filter.
    pub fn theoretical_fp_rate(&self, width: u64) -> Option<f64> {
        self.grafite
            .map(|(bits, range)| grafite::theoretical_fp_rate(bits, range, width))
    }

    /// A builder for one table's filter, if it builds one.
    pub(crate) fn builder(&self) -> Option<SegmentedGrafiteBuilder> {
        self.grafite
            .map(|(bits, range)| SegmentedGrafiteBuilder::new(bits, range))
    }

    /// Whether it can be built as asked.
    ///
    /// # Errors
    /// `Error::InvalidArgument` for bits per key that are not a finite number from 3 to 60, or a
    /// maximum range of 0.
    pub(crate) fn validate(&self) -> crate::error::Result<()> {
        match self.grafite {
            Some((bits, _)) if !(bits.is_finite() && (3.0..=60.0).contains(&bits)) => {
                Err(crate::error::Error::InvalidArgument(format!(
                    "range filter bits per key {bits} is not a finite number from 3 to 60"
                )))
            }
            Some((_, 0)) => Err(crate::error::Error::InvalidArgument(
                "range filter max range 0 holds no range".to_string(),
            )),
            _ => Ok(()),
        }
    }
}

impl Default for RangeFilter {
    fn default() -> RangeFilter {
        RangeFilter::none()
    }
}

//! Range filters: whether a table may hold any key in a range, so a short bounded scan skips a
//! table that holds nothing there without reading its index or a data block.
//!
//! `key_map.rs` maps keys to order-preserving integers (stripping a table's common prefix),
//! `elias_fano.rs` stores sorted integers compactly, and `grafite.rs` is the filter built of the
//! two; `spare_integers.rs` keeps a thread's build buffers for its next table. [`RangeFilter`] is
//! the user's choice for new tables.

mod elias_fano;
mod grafite;
mod key_map;
mod spare_integers;

pub use grafite::{GrafiteBuilder, GrafiteFilter};

/// The metaindex name of a table's Grafite range filter block.
pub(crate) const GRAFITE_BLOCK: &str = "rangefilter.siftdb.Grafite";

/// The range filter new tables get ([`Options::range_filter`](crate::Options::range_filter)):
/// none (the default) or Grafite.
///
/// ```
/// use siftdb::{Options, RangeFilter};
///
/// // 24 bits per key; ranges up to 2^16 integers wide (after a table's common prefix). An empty
/// // range of 2^16 integers is a "maybe" about 1.6 % of the time, one of 2^8 about 0.006 %.
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
    /// (at least 1) after a table's common prefix: the false positive rate for an empty range of
    /// `ℓ ≤ max_range` integers is about `ℓ / 2^(bits_per_key − 2)`, and wider ranges always
    /// read the table. Tables round `max_range` up to a power of two (at most 2^63).
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
    pub(crate) fn builder(&self) -> Option<GrafiteBuilder> {
        self.grafite
            .map(|(bits, range)| GrafiteBuilder::new(bits, range))
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

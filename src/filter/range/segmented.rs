//! The segmented Grafite, the range filter new tables get: the table's keys are cut into
//! *segments*, runs of neighbouring keys each mapped to integers its own way, and one Grafite
//! (`grafite.rs`) holds the integers of them all.
//!
//! One window of 8 bytes after a table's common prefix (the single-window format, which tables
//! were written in before) loses resolution when the table's keys fall into groups with different
//! leading bytes (tenants, key families): the prefix is short, and keys that differ only past the
//! window share an integer. Here:
//! - a segment whose keys all have one length `m` maps each key to its last 8 bytes, big-endian
//!   (the whole key if `m ≤ 8`), in the *context* of its first `m − 8` bytes: a range whose bounds
//!   share those bytes is asked about exactly the values of the last 8 bytes it spans, whatever
//!   the bytes before them (a tenant id, a fixed head, a hash);
//! - a segment of keys of varying lengths that share a separator byte maps each key by its suffix
//!   after it, down to its last byte for a key whose suffix is the longest of its class
//!   (`separator.rs`);
//! - another segment of keys of varying lengths maps each key to the 8 bytes after the segment's
//!   common prefix (at most its longest key's length less 8), as the single-window format maps a
//!   whole table's, but with the prefix of a few hundred neighbouring keys rather than of the
//!   table.
//!
//! The context (the segment's number, and for one length the key's leading bytes) is folded into
//! Grafite's block number (`grafite::hash`), so integers of different contexts fall in unrelated
//! blocks and the bound `ℓ / 2^(B−2)` holds within each. A segment ends where the key length
//! changes (one length) or where the keys stop sharing the segment's prefix (varying lengths),
//! once it holds [`MIN_SEGMENT_KEYS`] keys, and one of varying lengths, whose keys are kept whole
//! until it closes, at [`MAX_VARYING_KEYS`]; a one-length segment cut shorter than that is followed
//! by a segment of varying lengths, so a table has at most about `2n / MIN_SEGMENT_KEYS`
//! segments. Each but the first starts at the shortest string above the key before it; a query is
//! split at the starts it crosses, and a range holding a whole segment holds a key.
//!
//! Its bytes are the table's `rangefilter.siftdb.SegmentedGrafite3` block (format byte 3; tables
//! written before separator windows hold format 2, the same without them, named
//! `rangefilter.siftdb.SegmentedGrafite`); their layout is in `docs/table_format.md`, *Range
//! filter block*.

use std::borrow::Cow;
use std::ops::Bound;

use xxhash_rust::xxh3::xxh3_64;

use super::elias_fano::EliasFano;
use super::grafite::{
    any_in_range, block_size_for, clamp_bits, hash, hash_range, read_header, sort_below,
    theoretical_fp_rate,
};
use super::key_map::{common_prefix_len, has_prefix, integer_range, window as window_at};
use super::separator::{SeparatorRange, SeparatorWindow};
use super::spare_integers;
use super::RangeCheck;
use crate::coding::{put_length_prefixed, put_varint64, Decoder};

/// The format byte of segmented filters without separator windows (read, no longer written).
pub(super) const FORMAT_SEGMENTED: u8 = 2;
/// The format byte of segmented filters whose segments may have separator windows.
pub(super) const FORMAT_SEPARATED: u8 = 3;
/// The seed of the segments' contexts.
const SEGMENT_SEED: u64 = 0x7365_676d_656e_7473;
/// The fewest keys a segment holds before a change of length or of leading bytes ends it.
const MIN_SEGMENT_KEYS: usize = 256;
/// The keys a new segment collects before it settles whether its keys have one length.
const FIRST_KEYS: usize = 64;
/// The most keys a segment of varying lengths holds: they are kept whole until it closes.
const MAX_VARYING_KEYS: usize = 4096;

/// How a segment's keys become integers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Window {
    /// Keys of varying lengths that all start with these bytes: the 8 bytes after them.
    AfterPrefix(Box<[u8]>),
    /// Keys of this many bytes: their last 8 (all, if fewer), in the context of the rest.
    OneLength(usize),
    /// Keys of varying lengths that share a separator: their suffix after it, down to their
    /// last byte for the longest of their class (`separator.rs`).
    Separator(SeparatorWindow),
}

/// One segment of a table's keys.
#[derive(Debug, Clone)]
struct Segment {
    /// The least string of its stretch of the key space; empty for the first segment.
    start: Box<[u8]>,
    window: Window,
    /// The context of its integers (for one length, mixed with each key's leading bytes).
    seed: u64,
}

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn segment_seed(index: usize) -> u64 {
    mix(index as u64 ^ SEGMENT_SEED)
}

/// The big-endian number of `bytes` (at most 8 of them).
fn number(bytes: &[u8]) -> u64 {
    if let Ok(whole) = <[u8; 8]>::try_from(bytes) {
        return u64::from_be_bytes(whole);
    }
    let mut b = [0u8; 8];
    b[8 - bytes.len()..].copy_from_slice(bytes);
    u64::from_be_bytes(b)
}

/// The context of a one-length segment's key whose bytes before its last 8 are `head` (all of
/// one length within a segment, so up to 8 of them are taken as they are).
fn head_context(seed: u64, head: &[u8]) -> u64 {
    match head.len() {
        0 => seed,
        1..=8 => mix(seed ^ number(head)),
        _ => mix(seed ^ xxh3_64(head)),
    }
}

/// The shortest string above `below` and at most `next`, for `below < next` (or `below` a
/// prefix `next` does not start with); empty when `next` is.
fn separator(below: &[u8], next: &[u8]) -> Vec<u8> {
    next[..(common_prefix_len(below, next) + 1).min(next.len())].to_vec()
}

/// The segment being filled.
#[derive(Debug, Default)]
enum Open {
    #[default]
    Nothing,
    /// Its first keys, kept whole until they show whether they have one length.
    First { bytes: Vec<u8>, ends: Vec<usize> },
    /// Keys of one length: the head of the last key (its integer is the last value) and how
    /// many keys it holds.
    OneLength {
        len: usize,
        head: Vec<u8>,
        keys: usize,
        seed: u64,
    },
    /// Keys of varying lengths, kept whole until the segment closes.
    Varying(VaryingKeys),
}

/// The keys of a segment of varying lengths, in order, without repeats.
#[derive(Debug, Default)]
struct VaryingKeys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// The length of the bytes they all start with.
    prefix_len: usize,
    max_len: usize,
}

impl VaryingKeys {
    fn add(&mut self, key: &[u8]) {
        self.add_knowing(key, self.shares_prefix(key));
    }

    /// Adds `key`, which `shares` the keys' prefix or not.
    fn add_knowing(&mut self, key: &[u8], shares: bool) {
        if self.ends.is_empty() {
            self.prefix_len = key.len();
        } else if self.key(self.ends.len() - 1) == key {
            return;
        } else if !shares {
            self.prefix_len = common_prefix_len(&self.bytes[..self.prefix_len], key);
        }
        self.max_len = self.max_len.max(key.len());
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    fn key(&self, i: usize) -> &[u8] {
        let from = i.checked_sub(1).map_or(0, |j| self.ends[j]);
        &self.bytes[from..self.ends[i]]
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn prefix(&self) -> &[u8] {
        &self.bytes[..self.prefix_len.min(self.bytes.len())]
    }

    /// Whether `key` starts with every byte the keys so far share (true before the first).
    fn shares_prefix(&self, key: &[u8]) -> bool {
        self.ends.is_empty() || has_prefix(key, self.prefix())
    }
}

/// Collects a table's keys, in order, and builds its segmented Grafite filter.
#[derive(Debug)]
pub struct SegmentedGrafiteBuilder {
    bits_per_key: f64,
    max_range: u64,
    /// The segments closed so far.
    segments: Vec<Segment>,
    /// The open segment's start.
    start: Vec<u8>,
    open: Open,
    /// The next segment has keys of varying lengths: the one-length segment before it was cut
    /// short by a change of length.
    next_varying: bool,
    /// Every distinct key's integer, in order, and the context of each run of them.
    values: Vec<u64>,
    contexts: Vec<(usize, u64)>,
    added: usize,
    /// [`MIN_SEGMENT_KEYS`] and [`FIRST_KEYS`], smaller in tests.
    min_segment_keys: usize,
    first_keys: usize,
    /// Whether segments of varying lengths may have separator windows (format 3); tests write
    /// format 2 without.
    separators: bool,
    /// A segment's keys of varying lengths, its buffers kept for the next.
    spare: VaryingKeys,
}

impl SegmentedGrafiteBuilder {
    /// A builder for filters of `bits_per_key` (clamped to 3..=60) answering ranges of up to
    /// `max_range` integers (rounded up to a power of two, at most 2^63).
    pub fn new(bits_per_key: f64, max_range: u64) -> SegmentedGrafiteBuilder {
        SegmentedGrafiteBuilder {
            bits_per_key: clamp_bits(bits_per_key),
            max_range: block_size_for(max_range),
            segments: Vec::new(),
            start: Vec::new(),
            open: Open::Nothing,
            next_varying: false,
            values: Vec::new(),
            contexts: Vec::new(),
            added: 0,
            min_segment_keys: MIN_SEGMENT_KEYS,
            first_keys: FIRST_KEYS,
            separators: true,
            spare: VaryingKeys::default(),
        }
    }

    /// A builder that writes format 2, the segmented format before separator windows: for tests
    /// of the tables written in it.
    #[cfg(test)]
    pub(super) fn without_separators(mut self) -> Self {
        self.separators = false;
        self
    }

    /// A builder that cuts segments after `min_segment_keys` keys and settles a segment's length
    /// after `first_keys`: small key sets of many segments, for tests.
    #[cfg(test)]
    fn with_segment_sizes(mut self, min_segment_keys: usize, first_keys: usize) -> Self {
        self.min_segment_keys = min_segment_keys;
        self.first_keys = first_keys.max(1);
        self
    }

    /// Adds a key, not below the last one added (a repeat changes nothing in the filter).
    pub fn add_key(&mut self, key: &[u8]) {
        self.added += 1;
        match &mut self.open {
            Open::Nothing => self.begin(Vec::new(), key),
            Open::First { bytes, ends } => {
                let last_start = ends.len().checked_sub(2).map_or(0, |i| ends[i]);
                if bytes[last_start..] != *key {
                    bytes.extend_from_slice(key);
                    ends.push(bytes.len());
                    if ends.len() == self.first_keys {
                        self.settle_first_keys();
                    }
                }
            }
            Open::OneLength { len, keys, .. } if key.len() != *len => {
                self.next_varying = *keys < self.min_segment_keys;
                self.cut_before(key);
            }
            Open::OneLength { .. } => self.add_one_length(key),
            Open::Varying(keys) => {
                let shares = keys.shares_prefix(key);
                let full = keys.len() >= MAX_VARYING_KEYS
                    || keys.len() >= self.min_segment_keys && !shares;
                if !full {
                    keys.add_knowing(key, shares);
                } else if keys.key(keys.len() - 1) != key {
                    self.cut_before(key);
                }
            }
        }
    }

    /// Keys added so far (a repeat counted again).
    pub fn num_keys(&self) -> usize {
        self.added
    }

    /// Opens a segment starting at `start` with `key`.
    fn begin(&mut self, start: Vec<u8>, key: &[u8]) {
        self.start = start;
        if std::mem::take(&mut self.next_varying) {
            let mut keys = self.varying_keys();
            keys.add(key);
            self.open = Open::Varying(keys);
        } else {
            self.open = Open::First {
                bytes: key.to_vec(),
                ends: vec![key.len()],
            };
        }
    }

    /// Closes the open segment and opens one at `key`.
    fn cut_before(&mut self, key: &[u8]) {
        let start = self.close(Some(key));
        self.begin(start, key);
    }

    /// Turns the open segment's first keys into a segment of one length, if they all have one
    /// (and it is not 0), or of varying lengths.
    fn settle_first_keys(&mut self) {
        let Open::First { bytes, ends } = std::mem::take(&mut self.open) else {
            return;
        };
        let len = ends[0];
        let one_length = len > 0 && ends.windows(2).all(|w| w[1] - w[0] == len);
        let keys = ends.iter().scan(0, |from, &end| {
            let key = &bytes[*from..end];
            *from = end;
            Some(key)
        });
        if one_length {
            self.open = Open::OneLength {
                len,
                head: Vec::new(),
                keys: 0,
                seed: segment_seed(self.segments.len()),
            };
            for key in keys {
                self.add_one_length(key);
            }
        } else {
            let mut varying = self.varying_keys();
            for key in keys {
                varying.add(key);
            }
            self.open = Open::Varying(varying);
        }
    }

    /// Empty buffers for a segment of varying lengths.
    fn varying_keys(&mut self) -> VaryingKeys {
        let mut keys = std::mem::take(&mut self.spare);
        keys.bytes.clear();
        keys.ends.clear();
        keys.max_len = 0;
        keys
    }

    /// Adds a key of the open one-length segment's length.
    fn add_one_length(&mut self, key: &[u8]) {
        let Open::OneLength {
            len,
            head,
            keys,
            seed,
        } = &mut self.open
        else {
            return;
        };
        let (key_head, tail) = key.split_at(len.saturating_sub(8));
        let x = number(tail);
        let new_head = *keys == 0 || !has_prefix(key, head);
        if !new_head && self.values.last() == Some(&x) {
            return; // A repeat.
        }
        if new_head {
            head.clear();
            head.extend_from_slice(key_head);
            self.contexts
                .push((self.values.len(), head_context(*seed, key_head)));
        }
        if self.values.capacity() == 0 {
            self.values = spare_integers::take();
        }
        self.values.push(x);
        *keys += 1;
    }

    /// Closes the open segment, if any; with the `next` key, which a segment of varying lengths
    /// closes for only if it does not share the segment's prefix, returns where the next
    /// segment starts: the shortest string above the last key and at most `next`.
    fn close(&mut self, next: Option<&[u8]>) -> Vec<u8> {
        if matches!(self.open, Open::First { .. }) {
            self.settle_first_keys();
        }
        let seed = segment_seed(self.segments.len());
        let next = next.unwrap_or_default();
        let (window, start) = match std::mem::take(&mut self.open) {
            // Settled above.
            Open::Nothing | Open::First { .. } => return Vec::new(),
            Open::OneLength { len, mut head, .. } => {
                let tail = len - head.len();
                let x = self.values.last().copied().unwrap_or(0);
                head.extend_from_slice(&x.to_be_bytes()[8 - tail..]);
                (Window::OneLength(len), separator(&head, next))
            }
            Open::Varying(keys) => {
                // Where the last key and `next` part (`next` may share the prefix when the
                // segment is full).
                let start = match keys.shares_prefix(next) {
                    true => separator(keys.key(keys.len() - 1), next),
                    false => separator(keys.prefix(), next),
                };
                let window = self.close_varying(&keys, seed);
                self.spare = keys;
                (window, start)
            }
        };
        self.segments.push(Segment {
            start: std::mem::take(&mut self.start).into_boxed_slice(),
            window,
            seed,
        });
        start
    }

    /// The integers of a closed segment of varying lengths, after a separator if one maps more
    /// keys down to their last byte than the window after the segment's prefix, and its window.
    fn close_varying(&mut self, keys: &VaryingKeys, seed: u64) -> Window {
        if self.values.capacity() == 0 {
            self.values = spare_integers::take();
        }
        let at = keys.prefix_len.min(keys.max_len.saturating_sub(8));
        let chosen = match self.separators {
            true => SeparatorWindow::choose(|i| keys.key(i), keys.len(), keys.prefix_len, at),
            false => None,
        };
        let Some(w) = chosen else {
            self.contexts.push((self.values.len(), seed));
            let from = self.values.len();
            for i in 0..keys.len() {
                let x = window_at(keys.key(i), at);
                if self.values.len() == from || self.values.last() != Some(&x) {
                    self.values.push(x);
                }
            }
            return Window::AfterPrefix(keys.prefix()[..at].into());
        };
        let mut last_head: Option<&[u8]> = None;
        let widths = w.width_table();
        for i in 0..keys.len() {
            let Some((head, x)) = w.map_key_with(&widths, keys.key(i)) else {
                continue;
            };
            if last_head != Some(head) {
                last_head = Some(head);
                self.contexts
                    .push((self.values.len(), head_context(seed, head)));
            } else if self.values.last() == Some(&x) {
                continue; // Keys that differ only in trailing zero bytes.
            }
            self.values.push(x);
        }
        Window::Separator(w)
    }

    /// The filter's bytes over every key added; the builder starts empty again.
    pub fn finish(&mut self) -> Vec<u8> {
        self.close(None);
        let mut values = std::mem::take(&mut self.values);
        let contexts = std::mem::take(&mut self.contexts);
        let segments = std::mem::take(&mut self.segments);
        self.added = 0;
        self.next_varying = false;
        let r = hash_range(values.len() as u64, self.bits_per_key);
        let shift = self.max_range.trailing_zeros();
        for (i, &(from, context)) in contexts.iter().enumerate() {
            let to = contexts.get(i + 1).map_or(values.len(), |c| c.0);
            for x in &mut values[from..to] {
                *x = hash(*x, context, shift, r);
            }
        }
        sort_below(&mut values, r);
        let mut out = Vec::with_capacity(32 + 16 * segments.len());
        out.push(match self.separators {
            true => FORMAT_SEPARATED,
            false => FORMAT_SEGMENTED,
        });
        out.extend_from_slice(&self.bits_per_key.to_bits().to_le_bytes());
        out.extend_from_slice(&self.max_range.to_le_bytes());
        put_varint64(&mut out, segments.len() as u64);
        for s in &segments {
            put_length_prefixed(&mut out, &s.start);
            match &s.window {
                Window::AfterPrefix(prefix) => {
                    out.push(0);
                    put_length_prefixed(&mut out, prefix);
                }
                Window::OneLength(len) => {
                    out.push(1);
                    put_varint64(&mut out, *len as u64);
                }
                Window::Separator(w) => {
                    out.push(2);
                    put_length_prefixed(&mut out, &w.prefix);
                    out.push(w.separator);
                    put_varint64(&mut out, w.classes.len() as u64);
                    for &(byte, width) in w.classes.iter() {
                        out.push(byte);
                        put_varint64(&mut out, width as u64);
                    }
                }
            }
        }
        EliasFano::encode_sorted(&values, r, &mut out);
        spare_integers::give(values);
        out
    }
}

/// A segmented Grafite filter read from its bytes: asks whether a table may hold a key in a
/// range.
///
/// ```
/// use siftdb::filter::{SegmentedGrafite, SegmentedGrafiteBuilder};
///
/// // Two tenants (4 bytes) and their 8-byte big-endian ids: one length, so each key's integer is
/// // its id, in the context of its tenant.
/// let key = |tenant: &[u8; 4], id: u64| [tenant.as_slice(), &id.to_be_bytes()].concat();
/// let mut builder = SegmentedGrafiteBuilder::new(20.0, 1 << 16);
/// for tenant in [b"acme", b"zeta"] {
///     for id in (0..1000u64).map(|i| i * 1000) {
///         builder.add_key(&key(tenant, id));
///     }
/// }
/// let filter = SegmentedGrafite::from_bytes(&builder.finish()).expect("well-formed");
/// assert!(filter.may_contain(Some(&key(b"acme", 5000)), Some(&key(b"acme", 5000))));
/// assert!(filter.may_contain(Some(&key(b"zeta", 4990)), Some(&key(b"zeta", 5010))));
/// // An empty range of 10 ids: "maybe" about 10 / 2^18 of the time.
/// let _ = filter.may_contain(Some(&key(b"acme", 5001)), Some(&key(b"acme", 5010)));
/// ```
///
/// On its own the filter does not know its table's smallest and largest keys: a store clamps a
/// range to those before asking, so that a one-sided range becomes narrow.
#[derive(Debug, Clone)]
pub struct SegmentedGrafite {
    bits_per_key: f64,
    max_range: u64,
    /// The first segment (a placeholder when it holds no key), kept inline: most tables have
    /// one.
    first: Segment,
    /// The others, in order.
    more: Vec<Segment>,
    hashes: EliasFano,
}

impl SegmentedGrafite {
    /// Reads a filter from the bytes [`SegmentedGrafiteBuilder::finish`] wrote (or a builder
    /// before separator windows); `None` if they are not a well-formed segmented filter.
    pub fn from_bytes(bytes: &[u8]) -> Option<SegmentedGrafite> {
        match bytes.first() {
            Some(&FORMAT_SEGMENTED) => Self::from_bytes_of(FORMAT_SEGMENTED, bytes),
            _ => Self::from_bytes_of(FORMAT_SEPARATED, bytes),
        }
    }

    /// Reads a filter of format byte `format` (2, or 3 which adds separator windows).
    pub(super) fn from_bytes_of(format: u8, bytes: &[u8]) -> Option<SegmentedGrafite> {
        let (bits_per_key, max_range, rest) = read_header(bytes, format)?;
        let mut reader = Decoder::new(rest);
        let count = usize::try_from(reader.varint64()?).ok()?;
        // Each segment takes at least three bytes: no count beyond those can be true.
        if count > rest.len() / 3 {
            return None;
        }
        let mut segments: Vec<Segment> = Vec::with_capacity(count);
        for index in 0..count {
            let start = reader.length_prefixed()?;
            let in_order = match segments.last() {
                None => start.is_empty(),
                Some(previous) => start > &*previous.start,
            };
            if !in_order {
                return None;
            }
            let window = match reader.u8()? {
                0 => Window::AfterPrefix(reader.length_prefixed()?.into()),
                1 => match usize::try_from(reader.varint64()?) {
                    Ok(len) if len > 0 => Window::OneLength(len),
                    _ => return None,
                },
                2 if format == FORMAT_SEPARATED => Window::Separator(read_separator(&mut reader)?),
                _ => return None,
            };
            segments.push(Segment {
                start: start.into(),
                window,
                seed: segment_seed(index),
            });
        }
        let (hashes, rest) = EliasFano::decode(reader.remaining())?;
        if !rest.is_empty()
            || hashes.universe() != hash_range(hashes.len(), bits_per_key)
            || (hashes.len() == 0) != segments.is_empty()
        {
            return None;
        }
        // Collected afresh (not in place), so that a filter of one segment holds no vector.
        let more: Vec<Segment> = segments.drain(segments.len().min(1)..).collect();
        let first = segments.pop().unwrap_or(Segment {
            start: Box::default(),
            window: Window::OneLength(1),
            seed: segment_seed(0),
        });
        Some(SegmentedGrafite {
            bits_per_key,
            max_range,
            first,
            more,
            hashes,
        })
    }

    /// The bits per key it was built with.
    pub fn bits_per_key(&self) -> f64 {
        self.bits_per_key
    }

    /// The widest range (in integers of a segment's window) it answers; wider ones are "maybe".
    pub fn max_range(&self) -> u64 {
        self.max_range
    }

    /// The number of distinct key integers it holds.
    pub fn num_keys(&self) -> u64 {
        self.hashes.len()
    }

    /// The number of segments its table's keys were cut into.
    pub fn num_segments(&self) -> usize {
        match self.hashes.len() {
            0 => 0,
            _ => 1 + self.more.len(),
        }
    }

    /// Segment `index` (`< num_segments`).
    fn segment(&self, index: usize) -> &Segment {
        match index.checked_sub(1) {
            None => &self.first,
            Some(i) => &self.more[i],
        }
    }

    /// Its segments, in order.
    fn segments(&self) -> impl Iterator<Item = &Segment> {
        std::iter::once(&self.first)
            .chain(&self.more)
            .take(self.num_segments())
    }

    /// Bytes it holds in memory (beyond its own fields).
    pub fn memory_bytes(&self) -> usize {
        let bytes: usize = self
            .segments()
            .map(|s| {
                s.start.len()
                    + match &s.window {
                        Window::AfterPrefix(p) => p.len(),
                        Window::OneLength(_) => 0,
                        Window::Separator(w) => w.prefix.len() + std::mem::size_of_val(&*w.classes),
                    }
            })
            .sum();
        self.hashes.memory_bytes() + bytes + self.more.capacity() * std::mem::size_of::<Segment>()
    }

    /// Whether its table may hold a key `k` with `lower ≤ k ≤ upper` (each `None` for unbounded).
    /// Never `false` when it does; `true` for ranges wider than it answers.
    pub fn may_contain(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
        let (lo, hi) = RangeCheck::closed(lower, upper);
        self.check(lo, hi).may_hold()
    }

    /// The false positive rate theory gives for an empty range of `width` integers:
    /// `min(1, width / 2^(bits − 2))`, and 1 past [`max_range`](Self::max_range).
    pub fn theoretical_fp_rate(&self, width: u64) -> f64 {
        theoretical_fp_rate(self.bits_per_key, self.max_range, width)
    }

    /// What it answers for the keys in `(lower, upper)`: nothing can lie there, the range is too
    /// wide to ask, or the filter's answer and the number of integers asked about (summed over
    /// the segments the range meets).
    pub(crate) fn check(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> RangeCheck {
        if self.hashes.len() == 0 || is_empty_range(lower, upper) {
            return RangeCheck::Absent;
        }
        let first = match lower {
            Bound::Unbounded => 0,
            Bound::Included(k) | Bound::Excluded(k) => self.segments_starting(|s| s <= k) - 1,
        };
        let last = match upper {
            Bound::Unbounded => self.num_segments() - 1,
            Bound::Included(k) => self.segments_starting(|s| s <= k) - 1,
            Bound::Excluded(k) => self.segments_starting(|s| s < k) - 1,
        };
        if first > last {
            return RangeCheck::Absent;
        }
        if last - first >= 2 {
            // A segment between the two holds a key, and lies whole in the range.
            return RangeCheck::TooWide { width: u64::MAX };
        }
        let mut answer = RangeCheck::Absent;
        for index in first..=last {
            let lo = match index == first {
                true => lower,
                false => Bound::Included(&*self.segment(index).start),
            };
            let hi = match index == last {
                true => upper,
                false => Bound::Excluded(&*self.segment(index + 1).start),
            };
            answer = answer.and(self.check_segment(self.segment(index), lo, hi));
        }
        answer
    }

    /// How many segments start at a string `s` with `starts_below(s)`: the first always does.
    fn segments_starting(&self, starts_below: impl Fn(&[u8]) -> bool) -> usize {
        1 + self.more.partition_point(|s| starts_below(&s.start))
    }

    /// What segment `s` answers for the keys in `(lower, upper)`, all in its stretch.
    fn check_segment(&self, s: &Segment, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> RangeCheck {
        match &s.window {
            Window::AfterPrefix(prefix) => match integer_range(prefix, lower, upper) {
                None => RangeCheck::Absent,
                Some((lo, hi)) => self.ask(s.seed, lo, hi),
            },
            Window::Separator(w) => match w.range(lower, upper) {
                SeparatorRange::Absent => RangeCheck::Absent,
                SeparatorRange::TooWide => RangeCheck::TooWide { width: u64::MAX },
                SeparatorRange::At { head, lo, hi } => self.ask(head_context(s.seed, head), lo, hi),
            },
            Window::OneLength(len) => {
                let (Some(a), Some(b)) = (lowest_of(lower, *len), highest_of(upper, *len)) else {
                    return RangeCheck::Absent;
                };
                if a > b {
                    return RangeCheck::Absent;
                }
                let cut = len.saturating_sub(8);
                let (head_a, head_b) = (&a[..cut], &b[..cut]);
                let (xa, xb) = (number(&a[cut..]), number(&b[cut..]));
                if head_a == head_b {
                    self.ask(head_context(s.seed, head_a), xa, xb)
                } else if follows(head_a, head_b) {
                    // The range crosses from one head to the next: the top of the first's
                    // integers and the bottom of the second's.
                    self.ask(head_context(s.seed, head_a), xa, u64::MAX)
                        .and(self.ask(head_context(s.seed, head_b), 0, xb))
                } else {
                    RangeCheck::TooWide { width: u64::MAX }
                }
            }
        }
    }

    /// Asks about the integers `[lo, hi]` of `context`.
    fn ask(&self, context: u64, lo: u64, hi: u64) -> RangeCheck {
        let width = (hi - lo).saturating_add(1);
        if width > self.max_range {
            return RangeCheck::TooWide { width };
        }
        RangeCheck::Asked {
            width,
            maybe: any_in_range(&self.hashes, self.max_range, context, lo, hi),
        }
    }
}

#[cfg(test)]
impl SegmentedGrafite {
    /// The segment `key` falls in, and, if the segment has keys of varying lengths, the integer
    /// it maps `key` to.
    fn image(&self, key: &[u8]) -> (usize, Option<u64>) {
        let index = self.segments_starting(|s| s <= key) - 1;
        let x = match &self.segment(index).window {
            Window::AfterPrefix(prefix) => {
                integer_range(prefix, Bound::Included(key), Bound::Included(key)).map(|r| r.0)
            }
            Window::OneLength(_) | Window::Separator(_) => None,
        };
        (index, x)
    }

    /// Whether a range of `key`'s length just after it is asked about the values of its last
    /// bytes it spans (the key's window ends at its last byte).
    fn maps_to_last_byte(&self, key: &[u8]) -> bool {
        let index = self.segments_starting(|s| s <= key) - 1;
        match &self.segment(index).window {
            Window::AfterPrefix(prefix) => key.len() == prefix.len() + 8,
            Window::OneLength(len) => key.len() == *len,
            Window::Separator(w) => w.maps_to_last_byte(key),
        }
    }

    /// Whether `[lo, hi]`, in a separator window, is a range the bound is stated for.
    fn keeps_the_bound(&self, lo: &[u8], hi: &[u8]) -> bool {
        let index = self.segments_starting(|s| s <= lo) - 1;
        match &self.segment(index).window {
            Window::Separator(w) => w.keeps_the_bound(lo, hi),
            _ => false,
        }
    }

    /// How many of its segments have separator windows.
    fn separator_segments(&self) -> usize {
        self.segments()
            .filter(|s| matches!(s.window, Window::Separator(_)))
            .count()
    }

    /// How many of its segments have keys of one length.
    fn one_length_segments(&self) -> usize {
        self.segments()
            .filter(|s| matches!(s.window, Window::OneLength(_)))
            .count()
    }
}

/// A separator window's prefix, separator and classes; `None` unless there is at least one class,
/// their bytes ascend and each width is from 1 to 2^32.
fn read_separator(reader: &mut Decoder<'_>) -> Option<SeparatorWindow> {
    let prefix = reader.length_prefixed()?;
    let separator = reader.u8()?;
    let count = usize::try_from(reader.varint64()?).ok()?;
    if count == 0 || count > 256 {
        return None;
    }
    let mut classes = Vec::with_capacity(count);
    for _ in 0..count {
        let byte = reader.u8()?;
        let width = reader.varint64()?;
        if !(1..=1 << 32).contains(&width) || classes.last().is_some_and(|&(b, _)| b >= byte) {
            return None;
        }
        classes.push((byte, usize::try_from(width).ok()?));
    }
    Some(SeparatorWindow {
        prefix: prefix.into(),
        separator,
        classes: classes.into_boxed_slice(),
    })
}

/// Whether no string lies in `(lower, upper)`.
fn is_empty_range(lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    match (lower, upper) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    }
}

/// The least key of `len` bytes above `lower`, if there is one.
fn lowest_of(lower: Bound<&[u8]>, len: usize) -> Option<Cow<'_, [u8]>> {
    match lower {
        Bound::Unbounded => Some(Cow::Owned(vec![0; len])),
        Bound::Included(a) if a.len() == len => Some(Cow::Borrowed(a)),
        // Every key of `len` bytes at or above `a` (or above it: it is longer than `a`) is at or
        // above `a` padded with zeros.
        Bound::Included(a) | Bound::Excluded(a) if a.len() < len => {
            let mut k = a.to_vec();
            k.resize(len, 0);
            Some(Cow::Owned(k))
        }
        // Above `a` itself, or above its first `len` bytes (which lie below it).
        Bound::Included(a) | Bound::Excluded(a) => {
            let mut k = a[..len].to_vec();
            increment(&mut k).then_some(Cow::Owned(k))
        }
    }
}

/// The greatest key of `len` bytes below `upper`, if there is one.
fn highest_of(upper: Bound<&[u8]>, len: usize) -> Option<Cow<'_, [u8]>> {
    match upper {
        Bound::Unbounded => Some(Cow::Owned(vec![0xff; len])),
        // A key of `len` bytes at most `b` is at most its first `len` bytes (which lie at or
        // below it), and below `b` when `b` is longer.
        Bound::Included(b) if b.len() >= len => Some(Cow::Borrowed(&b[..len])),
        Bound::Excluded(b) if b.len() > len => Some(Cow::Borrowed(&b[..len])),
        // Below `b`, or, when `b` is shorter, below `b` padded with zeros (every key of `len`
        // bytes at or above that lies above `b`).
        Bound::Included(b) | Bound::Excluded(b) => {
            let mut k = b.to_vec();
            k.resize(len, 0);
            decrement(&mut k).then_some(Cow::Owned(k))
        }
    }
}

/// Adds 1 to `bytes` as a big-endian number; false if it was all `0xff`.
fn increment(bytes: &mut [u8]) -> bool {
    for b in bytes.iter_mut().rev() {
        let (sum, carry) = b.overflowing_add(1);
        *b = sum;
        if !carry {
            return true;
        }
    }
    false
}

/// Takes 1 from `bytes` as a big-endian number; false if it was all zeros.
fn decrement(bytes: &mut [u8]) -> bool {
    for b in bytes.iter_mut().rev() {
        let (difference, borrow) = b.overflowing_sub(1);
        *b = difference;
        if !borrow {
            return true;
        }
    }
    false
}

/// Whether `b` is `a` plus 1, both big-endian numbers of one length.
fn follows(a: &[u8], b: &[u8]) -> bool {
    let mut next = a.to_vec();
    increment(&mut next) && next == b
}

#[cfg(test)]
mod tests;

//! The window of a segment of keys of varying lengths that share a *separator*: a byte each key
//! holds somewhere after the segment's common prefix (the `:` of `user:<id>:<field>`). A key's
//! *suffix* is what follows the first separator at or after the prefix, and the suffix's first
//! byte picks its *class*; each class has one width `K`, the longest suffix of its keys. A key maps
//! to its suffix's bytes from `j = max(1, K − 8)` to `K`, big-endian, zero-padded if the key ends
//! sooner, in the context of its bytes up to the suffix's `j`-th: a key whose suffix is its class's
//! longest is mapped down to its last byte, so a range just after it, of its length, is asked about
//! exactly the values of its last bytes it spans.
//!
//! Why no key is missed: every string in `[a, b]` starts with the `λ` bytes `a` and `b` share. A
//! range is asked about only if those bytes hold a separator past the prefix and `j` more bytes
//! (else it is too wide), so every key in the range has its first separator where `a` has it, the
//! same class and the same context, and within one context the map keeps order. A key without a
//! separator, or ending at it, lies in no range that is asked: it needs no integer.
//!
//! Which separator: the byte of the segment's first key that, on a sample of 64 of its keys,
//! maps the most keys down to their last byte, each counted by the bytes of its integer (a
//! suffix of one byte has none: every range past it but one byte wide starts another class); none
//! (the segment keeps the window after its prefix) if no byte does better than that window, whose
//! keys that end with it count 8.

use std::ops::Bound;

use super::key_map::{common_prefix_len, position, Position};

/// Keys sampled to pick a separator.
const SAMPLE: usize = 64;
/// Separators tried: the first distinct bytes of the first key after the prefix.
const CANDIDATES: usize = 24;

/// How a segment's keys of varying lengths map to integers after a separator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SeparatorWindow {
    /// The bytes every key of the segment starts with.
    pub(super) prefix: Box<[u8]>,
    pub(super) separator: u8,
    /// Each class's first byte and its width `K` (at least 1), by ascending byte.
    pub(super) classes: Box<[(u8, usize)]>,
}

/// Where a range lies for a separator window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SeparatorRange<'a> {
    /// No key of the segment can lie there.
    Absent,
    /// Its keys may have several contexts: it is read.
    TooWide,
    /// Its keys map to `[lo, hi]` in the context of these bytes (after the prefix).
    At { head: &'a [u8], lo: u64, hi: u64 },
}

/// The `n ≤ 8` bytes of `key` from `from` on as a big-endian number, zero-padded.
fn bytes_at(key: &[u8], from: usize, n: usize) -> u64 {
    let mut x = 0u64;
    for i in 0..n {
        x = (x << 8) | u64::from(key.get(from + i).copied().unwrap_or(0));
    }
    x
}

/// Where the suffix of `key` starts: just past the first `separator` at or after `from`.
fn suffix_start(key: &[u8], from: usize, separator: u8) -> Option<usize> {
    let tail = key.get(from..)?;
    tail.iter()
        .position(|&b| b == separator)
        .map(|i| from + i + 1)
}

/// The bytes of a class's suffix that go into the context, `j`, for width `k`.
fn head_bytes(k: usize) -> usize {
    k.saturating_sub(8).max(1)
}

impl SeparatorWindow {
    /// The window for `keys` (ascending, all starting with their first `prefix_len` bytes), if a
    /// separator maps more of them down to their last byte than the window after the prefix
    /// (`AfterPrefix` at `window_at`) does.
    pub(super) fn choose<'k>(
        keys: impl Fn(usize) -> &'k [u8],
        count: usize,
        prefix_len: usize,
        window_at: usize,
    ) -> Option<SeparatorWindow> {
        if count == 0 {
            return None;
        }
        let step = count.div_ceil(SAMPLE).max(1);
        let sample: Vec<&[u8]> = (0..count).step_by(step).map(&keys).collect();
        // A key scores the bytes of its integer if it is mapped down to its last byte: keys
        // ending where the window after the prefix ends score 8.
        let baseline = 8 * sample.iter().filter(|k| k.len() == window_at + 8).count();
        // The candidates, and where each sampled key's suffix starts after each (0: none), from
        // one pass over each key.
        let mut candidates: Vec<u8> = Vec::with_capacity(CANDIDATES);
        for &b in keys(0).get(prefix_len..)? {
            if candidates.len() == CANDIDATES {
                break;
            }
            if !candidates.contains(&b) {
                candidates.push(b);
            }
        }
        let mut starts = vec![0usize; sample.len() * candidates.len()];
        let mut first_at = [usize::MAX; 256];
        for (row, k) in sample.iter().enumerate() {
            for (i, &b) in k.iter().enumerate().skip(prefix_len) {
                let at = &mut first_at[b as usize];
                if *at == usize::MAX {
                    *at = i;
                }
            }
            for (col, &separator) in candidates.iter().enumerate() {
                let at = first_at[separator as usize];
                starts[row * candidates.len() + col] = at.wrapping_add(1);
            }
            for &b in &k[prefix_len.min(k.len())..] {
                first_at[b as usize] = usize::MAX;
            }
        }
        let mut best: Option<(usize, u8)> = None;
        for (col, &separator) in candidates.iter().enumerate() {
            let start = |row: usize| starts[row * candidates.len() + col];
            // Widths past u16 (rare) all count as one, which scores such keys at worst too low.
            let suffix_len = |row: usize, k: &[u8]| (k.len() - start(row)).min(0xffff) as u16;
            let mut widths = [0u16; 256];
            for (row, k) in sample.iter().enumerate() {
                if let Some(&v) = k.get(start(row)).filter(|_| start(row) > 0) {
                    let w = &mut widths[v as usize];
                    *w = (*w).max(suffix_len(row, k));
                }
            }
            let score: usize = sample
                .iter()
                .enumerate()
                .filter_map(|(row, k)| {
                    let c = start(row);
                    let width = widths[*k.get(c).filter(|_| c > 0)? as usize];
                    let width = usize::from(width);
                    (width == k.len() - c).then(|| width - head_bytes(width))
                })
                .sum();
            if score > baseline && best.is_none_or(|(s, _)| score > s) {
                best = Some((score, separator));
            }
        }
        let (_, separator) = best?;
        let mut widths = [0usize; 256];
        for k in (0..count).map(&keys) {
            if let Some(c) = suffix_start(k, prefix_len, separator)
                && let Some(&v) = k.get(c)
            {
                let w = &mut widths[v as usize];
                *w = (*w).max(k.len() - c);
            }
        }
        let classes: Box<[(u8, usize)]> = (0..=255u8)
            .filter(|&v| widths[v as usize] > 0)
            .map(|v| (v, widths[v as usize]))
            .collect();
        (!classes.is_empty()).then(|| SeparatorWindow {
            prefix: keys(0)[..prefix_len].into(),
            separator,
            classes,
        })
    }

    /// The width of class `v`, if the segment has one.
    fn width(&self, v: u8) -> Option<usize> {
        self.classes
            .binary_search_by_key(&v, |c| c.0)
            .ok()
            .map(|i| self.classes[i].1)
    }

    /// Each class's width by its byte (0 for none), for [`map_key_with`](Self::map_key_with).
    pub(super) fn width_table(&self) -> [usize; 256] {
        let mut table = [0; 256];
        for &(v, k) in self.classes.iter() {
            table[v as usize] = k;
        }
        table
    }

    /// A key's context bytes (after the prefix) and integer; `None` for a key no asked range
    /// can hold (no separator, or none after it).
    #[cfg(test)]
    pub(super) fn map_key<'k>(&self, key: &'k [u8]) -> Option<(&'k [u8], u64)> {
        self.map_key_with(&self.width_table(), key)
    }

    /// [`map_key`](Self::map_key) with the window's [`width_table`](Self::width_table).
    pub(super) fn map_key_with<'k>(
        &self,
        widths: &[usize; 256],
        key: &'k [u8],
    ) -> Option<(&'k [u8], u64)> {
        let p = self.prefix.len();
        let c = suffix_start(key, p, self.separator)?;
        let k = widths[*key.get(c)? as usize];
        if k == 0 {
            return None;
        }
        let j = head_bytes(k);
        let head = key.get(p..c.saturating_add(j))?;
        Some((head, bytes_at(key, c + j, k - j)))
    }

    /// Whether `key` maps down to its last byte: its suffix is its class's longest.
    #[cfg(test)]
    pub(super) fn maps_to_last_byte(&self, key: &[u8]) -> bool {
        suffix_start(key, self.prefix.len(), self.separator).is_some_and(|c| {
            key.get(c)
                .and_then(|&v| self.width(v))
                .is_some_and(|k| key.len() - c == k && k > head_bytes(k))
        })
    }

    /// Whether `[lo, hi]` is a range the bound is stated for: both map down to their last byte,
    /// in one context.
    #[cfg(test)]
    pub(super) fn keeps_the_bound(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.maps_to_last_byte(lo)
            && self.maps_to_last_byte(hi)
            && self.map_key(lo).map(|m| m.0) == self.map_key(hi).map(|m| m.0)
    }

    /// Where the keys in `(lower, upper)` lie.
    pub(super) fn range<'a>(
        &self,
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
    ) -> SeparatorRange<'a> {
        let p = self.prefix.len();
        let a: &[u8] = match lower {
            Bound::Unbounded => return SeparatorRange::TooWide,
            Bound::Included(k) | Bound::Excluded(k) => match position(&self.prefix, k) {
                Position::Below => return SeparatorRange::TooWide,
                Position::Above => return SeparatorRange::Absent,
                Position::At(_) => k,
            },
        };
        let b: &[u8] = match upper {
            Bound::Unbounded => return SeparatorRange::TooWide,
            Bound::Included(k) | Bound::Excluded(k) => match position(&self.prefix, k) {
                Position::Below => return SeparatorRange::Absent,
                Position::Above => return SeparatorRange::TooWide,
                Position::At(_) => k,
            },
        };
        let shared = common_prefix_len(a, b);
        let Some(c) = suffix_start(&a[..shared], p, self.separator) else {
            return SeparatorRange::TooWide;
        };
        let Some(&v) = a[..shared].get(c) else {
            return SeparatorRange::TooWide;
        };
        let Some(k) = self.width(v) else {
            // Every key there would start its suffix with `v`: none of the segment does.
            return SeparatorRange::Absent;
        };
        let j = head_bytes(k);
        if shared < c.saturating_add(j) {
            return SeparatorRange::TooWide;
        }
        let lo = bytes_at(a, c + j, k - j);
        let mut hi = bytes_at(b, c + j, k - j);
        // An excluded upper bound that ends in the window, on a byte other than 0, maps exactly:
        // every key below it maps below it.
        if matches!(upper, Bound::Excluded(_))
            && b.len() > c + j
            && b.len() - c <= k
            && b.last().is_some_and(|&x| x != 0)
        {
            hi -= 1;
        }
        if lo > hi {
            return SeparatorRange::Absent;
        }
        SeparatorRange::At {
            head: &a[p..c + j],
            lo,
            hi,
        }
    }
}

//! Sorted `u64` words laid out as a static B-tree of cache lines, for lower-bound searches that
//! touch one line per layer.
//!
//! A binary search of a few thousand words touches a dozen cache lines, and a Get that reads a
//! data block from disk evicts them between lookups: each step is a miss. Here the words sit in
//! lines of eight, and each layer above holds the first word of every line of the layer below,
//! up to a layer of one line. A search scans one line per layer: five lines for 5,000 words, the
//! top ones small enough to stay cached. It costs one word in seven more than the words alone.

use std::ops::Range;

use crate::prefetch::prefetch_line_of;

/// Eight words, aligned so that each is one cache line.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line([u64; LINE]);

const LINE: usize = 8;

/// Padding after the last word of a layer: never below a searched word, so never counted.
const PAD: u64 = u64::MAX;

/// The words of one sorted list and the layers above them.
#[derive(Debug)]
pub(crate) struct WordTree {
    /// How many words there are.
    len: usize,
    /// The words, then each layer above, up to a top of one line.
    layers: Vec<Vec<Line>>,
}

impl WordTree {
    /// The tree over `words`, which must be sorted.
    pub(crate) fn new(words: &[u64]) -> WordTree {
        let mut layers = vec![lines(words)];
        // Each layer above: the first word of every line below, until one line holds a layer.
        while let Some(below) = layers.last().filter(|layer| layer.len() > 1) {
            let firsts: Vec<u64> = below.iter().map(|line| line.0[0]).collect();
            layers.push(lines(&firsts));
        }
        WordTree {
            len: words.len(),
            layers,
        }
    }

    /// How many words there are.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes it holds in memory.
    pub(crate) fn size(&self) -> usize {
        self.layers.iter().map(Vec::len).sum::<usize>() * std::mem::size_of::<Line>()
    }

    /// The word at `i`, if `i < len`.
    pub(crate) fn get(&self, i: usize) -> Option<u64> {
        if i >= self.len {
            return None;
        }
        self.layers
            .first()
            .and_then(|words| words.get(i / LINE))
            .map(|line| line.0[i % LINE])
    }

    /// The number of words below `w`: the index of the first word ≥ `w`.
    pub(crate) fn lower_bound(&self, w: u64) -> usize {
        let Some(l) = self.bottom_line(w) else {
            return 0;
        };
        let Some(line) = self.layers.first().and_then(|words| words.get(l)) else {
            return 0;
        };
        let count = line.0.iter().filter(|&&x| x < w).count();
        (l * LINE + count).min(self.len)
    }

    /// Starts loading the line of words [`lower_bound`](Self::lower_bound) of `w` will scan,
    /// found through the layers above it (few lines, which a batch of lookups keeps cached);
    /// returns the indices of that line's words, if there is such a line.
    pub(crate) fn prefetch(&self, w: u64) -> Option<Range<usize>> {
        let l = self.bottom_line(w)?;
        let line = self.layers.first()?.get(l)?;
        prefetch_line_of(line);
        Some(l * LINE..((l + 1) * LINE).min(self.len))
    }

    /// The line of the bottom layer that holds the lower bound of `w` (or whose end it is), found
    /// layer by layer from the top; `None` if no word is below `w`, so that the bound is 0.
    fn bottom_line(&self, w: u64) -> Option<usize> {
        // `below` is the lower bound in the layer above: that layer's word `below - 1` (the
        // first of this layer's line `below - 1`) is < `w`, and its word `below` (the first of
        // line `below`) is not. So this layer's lower bound lies in line `below - 1` or is the
        // first word of line `below`. Above the top layer, one virtual word below everything.
        let mut below: usize = 1;
        for layer in self.layers.iter().skip(1).rev() {
            // `None`: no word of the layer above is below `w`, nor is this layer's first.
            let line = layer.get(below.checked_sub(1)?)?;
            let count = line.0.iter().filter(|&&x| x < w).count();
            below = (below - 1) * LINE + count;
        }
        below.checked_sub(1)
    }
}

/// `words` in lines, the last padded.
fn lines(words: &[u64]) -> Vec<Line> {
    words
        .chunks(LINE)
        .map(|chunk| {
            let mut line = [PAD; LINE];
            line[..chunk.len()].copy_from_slice(chunk);
            Line(line)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lower_bound_is_a_binary_search_partition_point(
            mut words in proptest::collection::vec(prop_oneof![0u64..40, Just(u64::MAX)], 0..700),
            probes in proptest::collection::vec(prop_oneof![0u64..42, Just(u64::MAX)], 1..50),
        ) {
            words.sort_unstable();
            let tree = WordTree::new(&words);
            prop_assert_eq!(tree.len(), words.len());
            for (i, &w) in words.iter().enumerate() {
                prop_assert_eq!(tree.get(i), Some(w));
            }
            prop_assert_eq!(tree.get(words.len()), None);
            for w in probes {
                let bound = tree.lower_bound(w);
                prop_assert_eq!(bound, words.partition_point(|&x| x < w), "{}", w);
                // The line prefetched is the one the search scans.
                match tree.prefetch(w) {
                    Some(line) => prop_assert!(line.start <= bound && bound <= line.end, "{}", w),
                    None => prop_assert_eq!(bound, 0, "{}", w),
                }
            }
        }
    }

    #[test]
    fn five_thousand_words_take_five_layers() {
        let words: Vec<u64> = (0..5000u64).map(|i| i * 3).collect();
        let tree = WordTree::new(&words);
        assert_eq!(tree.layers.len(), 5);
        for (probe, want) in [(0, 0), (1, 1), (3, 1), (14_997, 4999), (14_998, 5000)] {
            assert_eq!(tree.lower_bound(probe), want, "{probe}");
        }
    }
}

//! Prefix extractors: which part of a key a prefix filter holds.

use std::fmt;
use std::sync::Arc;

/// Maps a key to its prefix, for prefix filters and prefix scans (RocksDB calls this a slice
/// transform).
///
/// Rules an implementation must keep, or prefix scans may skip tables that hold matching keys:
/// `transform(key)` is a prefix of `key` (its first bytes), and it is the same for every in-domain
/// key that starts with it. Keys outside the domain (for a fixed length, keys shorter than it) have
/// no prefix and are never filtered by one.
pub trait SliceTransform: Send + Sync {
    /// The name stored in each table; a table built with another name is read without its
    /// prefix filter.
    fn name(&self) -> &str;
    /// Whether `key` has a prefix.
    fn in_domain(&self, key: &[u8]) -> bool;
    /// The prefix of an in-domain `key`.
    fn transform<'a>(&self, key: &'a [u8]) -> &'a [u8];
}

/// The first `n` bytes of every key at least `n` long.
struct FixedPrefix {
    len: usize,
    name: String,
}

impl SliceTransform for FixedPrefix {
    fn name(&self) -> &str {
        &self.name
    }

    fn in_domain(&self, key: &[u8]) -> bool {
        key.len() >= self.len
    }

    fn transform<'a>(&self, key: &'a [u8]) -> &'a [u8] {
        &key[..self.len.min(key.len())]
    }
}

/// A prefix extractor for [`Options::prefix_extractor`](crate::Options::prefix_extractor).
///
/// ```
/// use siftdb::PrefixExtractor;
/// let p = PrefixExtractor::fixed(4);
/// assert_eq!(p.prefix(b"user1234"), Some(&b"user"[..]));
/// assert_eq!(p.prefix(b"usr"), None); // shorter than 4: not in the domain
/// ```
#[derive(Clone)]
pub struct PrefixExtractor(Arc<dyn SliceTransform>);

impl PrefixExtractor {
    /// The first `n` bytes of keys of at least `n` bytes (named `siftdb.FixedPrefix.<n>`).
    pub fn fixed(n: usize) -> PrefixExtractor {
        PrefixExtractor(Arc::new(FixedPrefix {
            len: n,
            name: format!("siftdb.FixedPrefix.{n}"),
        }))
    }

    /// Your own extractor.
    pub fn custom(transform: Arc<dyn SliceTransform>) -> PrefixExtractor {
        PrefixExtractor(transform)
    }

    /// The extractor's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The prefix of `key`, or `None` if `key` is not in the extractor's domain.
    pub fn prefix<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        self.0.in_domain(key).then(|| self.0.transform(key))
    }
}

impl fmt::Debug for PrefixExtractor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrefixExtractor({})", self.name())
    }
}

/// The smallest key greater than every key that starts with `prefix`, or `None` if there is none
/// (the prefix is empty or all 0xff).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xff {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successor_bounds_every_key_with_the_prefix() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
        assert_eq!(prefix_successor(b""), None);
    }
}

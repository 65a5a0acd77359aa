//! Iterators over internal keys, and the merge of many of them in internal-key order.

use std::cmp::Ordering;

use crate::error::Result;
use crate::key::compare_internal;

/// A sorted sequence of (internal key, value) entries: a memtable, a table, a level, a merge.
/// Errors (a damaged block) come back from the call that met them, and leave the iterator invalid.
pub(crate) trait InternalIterator: Send {
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions at the first entry whose key is ≥ `target` (an internal key).
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    fn next(&mut self) -> Result<()>;
    fn valid(&self) -> bool;
    /// The current internal key; only while `valid()`.
    fn key(&self) -> &[u8];
    /// The current value; only while `valid()`.
    fn value(&self) -> &[u8];
}

/// Merges children into one sequence in internal-key order. On equal keys (which the store never
/// writes twice) the earlier child wins. Children are few (memtables, L0 tables, one per level), so
/// the smallest is found by a linear pass.
pub(crate) struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
}

impl MergingIterator {
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            current: None,
        }
    }

    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            best = match best {
                Some(b) if compare_internal(c.key(), self.children[b].key()) != Ordering::Less => {
                    Some(b)
                }
                _ => Some(i),
            };
        }
        self.current = best;
    }
}

impl InternalIterator for MergingIterator {
    fn seek_to_first(&mut self) -> Result<()> {
        for c in &mut self.children {
            c.seek_to_first()?;
        }
        self.find_smallest();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        for c in &mut self.children {
            c.seek(target)?;
        }
        self.find_smallest();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some(i) = self.current {
            self.children[i].next()?;
        }
        self.find_smallest();
        Ok(())
    }

    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn key(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].value(),
            None => &[],
        }
    }
}

/// An iterator over a sorted vector, for tests.
#[cfg(test)]
pub(crate) struct VecIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

#[cfg(test)]
impl VecIter {
    pub(crate) fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
        let pos = entries.len();
        VecIter { entries, pos }
    }
}

#[cfg(test)]
impl InternalIterator for VecIter {
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self
            .entries
            .partition_point(|(k, _)| compare_internal(k, target) == Ordering::Less);
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        Ok(())
    }
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};

    #[test]
    fn merge_interleaves_children_in_internal_order() {
        let ik = |k: &str, s| internal_key(k.as_bytes(), s, ValueKind::Value);
        let a = VecIter::new(vec![
            (ik("a", 1), b"a1".to_vec()),
            (ik("c", 3), b"c3".to_vec()),
        ]);
        let b = VecIter::new(vec![
            (ik("a", 5), b"a5".to_vec()),
            (ik("b", 2), b"b2".to_vec()),
        ]);
        let mut m = MergingIterator::new(vec![Box::new(a), Box::new(b)]);
        m.seek_to_first().unwrap();
        let mut seen = Vec::new();
        while m.valid() {
            seen.push(m.value().to_vec());
            m.next().unwrap();
        }
        assert_eq!(
            seen,
            vec![
                b"a5".to_vec(),
                b"a1".to_vec(),
                b"b2".to_vec(),
                b"c3".to_vec()
            ]
        );
        m.seek(&ik("b", 9)).unwrap();
        assert_eq!(m.value(), b"b2");
    }
}

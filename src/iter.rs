//! Iterators over internal keys, and the merge of many of them in internal-key order.

use std::cmp::Ordering;

use crate::error::Result;
use crate::key::compare_internal;

/// A sorted sequence of (internal key, value) entries: a memtable, a table, a level, a merge. It
/// moves both ways: `next` and `prev` step from the current entry, and `seek` / `seek_for_prev`
/// position on the first entry ≥ / the last entry ≤ a target, so a walk may turn around at any
/// entry. Errors (a damaged block) come back from the call that met them, and leave the iterator
/// invalid; `next` and `prev` on an invalid iterator do nothing.
pub(crate) trait InternalIterator: Send {
    /// Positions at the first entry (invalid if there is none).
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions at the last entry (invalid if there is none).
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions at the first entry whose key is ≥ `target` (an internal key).
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions at the last entry whose key is ≤ `target` (an internal key).
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()>;
    /// Moves to the entry after the current one (invalid past the last).
    fn next(&mut self) -> Result<()>;
    /// Moves to the entry before the current one (invalid before the first).
    fn prev(&mut self) -> Result<()>;
    fn valid(&self) -> bool;
    /// The current internal key; only while `valid()`.
    fn key(&self) -> &[u8];
    /// The current value; only while `valid()`.
    fn value(&self) -> &[u8];
    /// The number of the table the current entry is in, for an iterator over tables.
    fn table_number(&self) -> Option<u64> {
        None
    }
}

/// Which way a [`MergingIterator`] last moved: forward, every valid child is at or after the
/// current key; in reverse, at or before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merges children into one sequence in internal-key order. On equal keys (which the store never
/// writes twice) the earlier child comes first going forward, and last going backward. Children
/// are few (memtables, L0 tables, one per level), so the smallest (or largest) is found by a
/// linear pass.
///
/// As LevelDB's: going forward every child is positioned at its first entry after the current key,
/// going backward at its last entry before it. Turning around re-seeks every other child relative
/// to the current key, so the first step after a turn costs a seek per child; the steps after it
/// are ordinary ones.
pub(crate) struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    direction: Direction,
    /// The current key, copied when turning around (the children move under it).
    turn_key: Vec<u8>,
}

impl MergingIterator {
    /// Calls `f` with each child, as it is positioned now.
    pub(crate) fn for_each_child(&self, mut f: impl FnMut(&dyn InternalIterator)) {
        for child in &self.children {
            f(child.as_ref());
        }
    }

    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            current: None,
            direction: Direction::Forward,
            turn_key: Vec::new(),
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

    /// The child at the largest key; on ties the later child, so a backward walk yields equal
    /// keys in the reverse of the forward order.
    fn find_largest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate().rev() {
            if !c.valid() {
                continue;
            }
            best = match best {
                Some(b)
                    if compare_internal(c.key(), self.children[b].key()) != Ordering::Greater =>
                {
                    Some(b)
                }
                _ => Some(i),
            };
        }
        self.current = best;
    }

    /// The position, among the children it was made with, of the child the merge is on.
    pub(crate) fn current_child(&self) -> Option<usize> {
        self.current
    }

    /// Moves the child the merge is on to `target` (going forward: to its first entry at or after
    /// it, which must lie ahead; going backward: to its last entry at or before it, which must lie
    /// behind) and settles on the child that is then first (or last). The other children stay: a
    /// reader that knows the child holds nothing it would show before `target` passes over its
    /// entries with one seek.
    ///
    /// # Errors
    /// The child's error; the merge is then invalid.
    pub(crate) fn skip_current_to(&mut self, target: &[u8]) -> Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        let r = match self.direction {
            Direction::Forward => self.children[cur]
                .seek(target)
                .map(|()| self.find_smallest()),
            Direction::Reverse => self.children[cur]
                .seek_for_prev(target)
                .map(|()| self.find_largest()),
        };
        self.settle(r)
    }

    /// Leaves the merge invalid if `r` is an error, so no caller reads a child that failed.
    fn settle(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.current = None;
        }
        r
    }

    fn seek_all(
        &mut self,
        direction: Direction,
        f: impl Fn(&mut dyn InternalIterator) -> Result<()>,
    ) -> Result<()> {
        self.direction = direction;
        for c in &mut self.children {
            f(c.as_mut())?;
        }
        match direction {
            Direction::Forward => self.find_smallest(),
            Direction::Reverse => self.find_largest(),
        }
        Ok(())
    }

    fn step_forward(&mut self) -> Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        if self.direction == Direction::Reverse {
            // Every other child is before the current key: move each to its first entry after it.
            self.turn_key.clear();
            self.turn_key.extend_from_slice(self.children[cur].key());
            let key = &self.turn_key;
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek(key)?;
                if c.valid() && compare_internal(key, c.key()) == Ordering::Equal {
                    c.next()?;
                }
            }
            self.direction = Direction::Forward;
        }
        self.children[cur].next()?;
        self.find_smallest();
        Ok(())
    }

    fn step_backward(&mut self) -> Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        if self.direction == Direction::Forward {
            // Every other child is after the current key: move each to its last entry before it.
            self.turn_key.clear();
            self.turn_key.extend_from_slice(self.children[cur].key());
            let key = &self.turn_key;
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek(key)?;
                if c.valid() {
                    c.prev()?;
                } else {
                    c.seek_to_last()?;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.children[cur].prev()?;
        self.find_largest();
        Ok(())
    }
}

impl InternalIterator for MergingIterator {
    fn seek_to_first(&mut self) -> Result<()> {
        let r = self.seek_all(Direction::Forward, |c| c.seek_to_first());
        self.settle(r)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let r = self.seek_all(Direction::Reverse, |c| c.seek_to_last());
        self.settle(r)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.seek_all(Direction::Forward, |c| c.seek(target));
        self.settle(r)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let r = self.seek_all(Direction::Reverse, |c| c.seek_for_prev(target));
        self.settle(r)
    }

    fn next(&mut self) -> Result<()> {
        let r = self.step_forward();
        self.settle(r)
    }

    fn prev(&mut self) -> Result<()> {
        let r = self.step_backward();
        self.settle(r)
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
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self
            .entries
            .len()
            .checked_sub(1)
            .unwrap_or(self.entries.len());
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self
            .entries
            .partition_point(|(k, _)| compare_internal(k, target) == Ordering::Less);
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let after = self
            .entries
            .partition_point(|(k, _)| compare_internal(k, target) != Ordering::Greater);
        self.pos = after.checked_sub(1).unwrap_or(self.entries.len());
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        if self.valid() {
            self.pos += 1;
        }
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        if self.valid() {
            self.pos = self.pos.checked_sub(1).unwrap_or(self.entries.len());
        }
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

/// Checks an iterator against a sorted model: random seeks of every kind, then random walks that
/// turn around often, comparing every position. Shared by the tests of every iterator.
#[cfg(test)]
pub(crate) fn check_against_model(
    it: &mut dyn InternalIterator,
    model: &[(Vec<u8>, Vec<u8>)],
    probes: &[Vec<u8>],
    rng: &mut impl rand::Rng,
    rounds: usize,
) {
    // The model's position, as an index into `model` (`model.len()` = invalid).
    let at = |it: &dyn InternalIterator, pos: usize, what: &str| match model.get(pos) {
        Some((k, v)) => {
            assert!(it.valid(), "{what}: expected entry {pos}, iterator invalid");
            assert_eq!(
                (it.key(), it.value()),
                (&k[..], &v[..]),
                "{what}: entry {pos}"
            );
        }
        None => assert!(!it.valid(), "{what}: expected the end"),
    };
    let n = model.len();
    // Whole walks both ways.
    it.seek_to_first().unwrap();
    for i in 0..=n {
        at(it, i, "forward walk");
        it.next().unwrap();
    }
    it.seek_to_last().unwrap();
    for i in (0..n).rev() {
        at(it, i, "backward walk");
        it.prev().unwrap();
    }
    at(it, n, "before the first");
    for round in 0..rounds {
        let mut pos;
        let what;
        match rng.gen_range(0..4) {
            0 => {
                it.seek_to_first().unwrap();
                pos = 0;
                what = "seek_to_first";
            }
            1 => {
                it.seek_to_last().unwrap();
                pos = n.checked_sub(1).unwrap_or(n);
                what = "seek_to_last";
            }
            2 => {
                let t = &probes[rng.gen_range(0..probes.len())];
                it.seek(t).unwrap();
                pos = model.partition_point(|(k, _)| compare_internal(k, t) == Ordering::Less);
                what = "seek";
            }
            _ => {
                let t = &probes[rng.gen_range(0..probes.len())];
                it.seek_for_prev(t).unwrap();
                let after =
                    model.partition_point(|(k, _)| compare_internal(k, t) != Ordering::Greater);
                pos = after.checked_sub(1).unwrap_or(n);
                what = "seek_for_prev";
            }
        }
        at(it, pos, &format!("round {round}: {what}"));
        for step in 0..rng.gen_range(0..12) {
            if pos == n {
                break;
            }
            if rng.gen_bool(0.5) {
                it.next().unwrap();
                pos += 1;
            } else {
                it.prev().unwrap();
                pos = pos.checked_sub(1).unwrap_or(n);
            }
            at(it, pos, &format!("round {round}: {what}, step {step}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::key::{internal_key, ValueKind};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn ik(k: &str, s: u64) -> Vec<u8> {
        internal_key(k.as_bytes(), s, ValueKind::Value)
    }

    #[test]
    fn merge_interleaves_children_in_internal_order() {
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
        // Backward, from the end and from a seek_for_prev.
        m.seek_to_last().unwrap();
        let mut seen = Vec::new();
        while m.valid() {
            seen.push(m.value().to_vec());
            m.prev().unwrap();
        }
        assert_eq!(
            seen,
            vec![
                b"c3".to_vec(),
                b"b2".to_vec(),
                b"a1".to_vec(),
                b"a5".to_vec()
            ]
        );
        m.seek_for_prev(&ik("b", 1)).unwrap();
        assert_eq!(m.value(), b"b2");
        m.seek_for_prev(&ik("a", 3)).unwrap();
        assert_eq!(m.value(), b"a5");
        m.seek_for_prev(&ik("a", 9)).unwrap();
        assert!(!m.valid());
    }

    #[test]
    fn merge_turns_around_at_every_entry() {
        // Three children whose entries interleave, so every turn re-seeks children on both sides.
        let mut children: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); 3];
        let mut all = Vec::new();
        for i in 0..60u64 {
            let e = (
                ik(&format!("k{:02}", i / 2), 100 - i),
                i.to_le_bytes().to_vec(),
            );
            children[(i * 7 % 3) as usize].push(e.clone());
            all.push(e);
        }
        all.sort_by(|a, b| compare_internal(&a.0, &b.0));
        let boxed = || {
            children
                .iter()
                .map(|c| Box::new(VecIter::new(c.clone())) as Box<dyn InternalIterator>)
                .collect::<Vec<_>>()
        };
        for turn_at in 0..all.len() {
            let mut m = MergingIterator::new(boxed());
            m.seek_to_first().unwrap();
            for _ in 0..turn_at {
                m.next().unwrap();
            }
            assert_eq!(m.key(), &all[turn_at].0[..]);
            m.prev().unwrap();
            match turn_at.checked_sub(1) {
                Some(p) => assert_eq!(m.key(), &all[p].0[..]),
                None => assert!(!m.valid()),
            }
            // And back forward from a backward walk.
            let mut m = MergingIterator::new(boxed());
            m.seek_to_last().unwrap();
            for _ in 0..(all.len() - 1 - turn_at) {
                m.prev().unwrap();
            }
            assert_eq!(m.key(), &all[turn_at].0[..]);
            m.next().unwrap();
            match all.get(turn_at + 1) {
                Some(e) => assert_eq!(m.key(), &e.0[..]),
                None => assert!(!m.valid()),
            }
        }
    }

    #[test]
    fn merge_matches_a_model_under_random_walks() {
        let mut rng = StdRng::seed_from_u64(11);
        for children_count in [0, 1, 2, 5] {
            let mut children = Vec::new();
            let mut all = Vec::new();
            let mut seq = 1u64;
            for c in 0..children_count {
                let mut v = Vec::new();
                for _ in 0..rng.gen_range(0..40) {
                    let k = format!("k{:03}", rng.gen_range(0..50));
                    let e = (ik(&k, seq), format!("{c}:{seq}").into_bytes());
                    seq += 1;
                    v.push(e.clone());
                    all.push(e);
                }
                children.push(Box::new(VecIter::new(v)) as Box<dyn InternalIterator>);
            }
            all.sort_by(|a, b| compare_internal(&a.0, &b.0));
            let mut probes: Vec<Vec<u8>> = all.iter().map(|e| e.0.clone()).collect();
            for i in 0..52 {
                probes.push(ik(&format!("k{i:03}"), rng.gen_range(0..seq + 2)));
            }
            probes.push(Vec::new());
            let mut m = MergingIterator::new(children);
            check_against_model(&mut m, &all, &probes, &mut rng, 3000);
        }
    }

    /// An iterator that fails on every move after the first `ok` moves.
    struct Failing {
        inner: VecIter,
        ok: usize,
    }

    impl Failing {
        fn tick(&mut self) -> Result<()> {
            if self.ok == 0 {
                self.inner.pos = self.inner.entries.len();
                return Err(Error::corruption(std::path::Path::new("t"), "injected"));
            }
            self.ok -= 1;
            Ok(())
        }
    }

    impl InternalIterator for Failing {
        fn seek_to_first(&mut self) -> Result<()> {
            self.tick()?;
            self.inner.seek_to_first()
        }
        fn seek_to_last(&mut self) -> Result<()> {
            self.tick()?;
            self.inner.seek_to_last()
        }
        fn seek(&mut self, t: &[u8]) -> Result<()> {
            self.tick()?;
            self.inner.seek(t)
        }
        fn seek_for_prev(&mut self, t: &[u8]) -> Result<()> {
            self.tick()?;
            self.inner.seek_for_prev(t)
        }
        fn next(&mut self) -> Result<()> {
            self.tick()?;
            self.inner.next()
        }
        fn prev(&mut self) -> Result<()> {
            self.tick()?;
            self.inner.prev()
        }
        fn valid(&self) -> bool {
            self.inner.valid()
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            self.inner.value()
        }
    }

    #[test]
    fn a_failing_child_leaves_the_merge_invalid() {
        // The failing child's keys interleave with the other's, so it is stepped on every other
        // move and re-sought on a turn: the failure comes at a seek, a step, or a turn.
        let keys = |odd: u64| -> Vec<(Vec<u8>, Vec<u8>)> {
            (0..8)
                .map(|i| (ik(&format!("k{:02}", 2 * i + odd), 1), vec![]))
                .collect()
        };
        for ok in 0..8 {
            let good = VecIter::new(keys(0));
            let bad = Failing {
                inner: VecIter::new(keys(1)),
                ok,
            };
            let mut m = MergingIterator::new(vec![Box::new(good), Box::new(bad)]);
            let mut failed = false;
            for step in 0..20 {
                let r = match step {
                    0 => m.seek_to_first(),
                    1..=7 => m.next(),
                    _ => m.prev(),
                };
                if r.is_err() {
                    assert!(!m.valid(), "ok {ok}, step {step}");
                    assert_eq!(m.key(), b"");
                    // Stepping an invalid merge does nothing.
                    m.next().unwrap();
                    m.prev().unwrap();
                    assert!(!m.valid());
                    failed = true;
                    break;
                }
            }
            assert!(failed, "ok {ok}");
        }
    }
}

//! Range scans: a merge of every memtable and table, read at the sequence of the call, newest
//! version of each key first, tombstones hiding what they delete.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use super::level_iter::LevelIter;
use super::version::FileMeta;
use super::{Db, DbInner, SuperVersion};
use crate::error::Result;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{lookup_key, parse_internal_key, ValueKind, MAX_SEQUENCE};
use crate::prefix::prefix_successor;
use crate::stats::Ticker;
use crate::Error;

impl Db {
    /// The live entries whose keys fall in `range`, in key order, as of this call: later writes are
    /// not seen, and compactions that run meanwhile change nothing the scan returns.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// for k in ["a", "b", "c"] { db.put(k, k)?; }
    /// let keys: Vec<Vec<u8>> = db.scan(b"b".to_vec()..).map(|r| r.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, vec![b"b".to_vec(), b"c".to_vec()]);
    /// # Ok(()) }
    /// ```
    ///
    /// Each item is `Err` if a table the scan reads is damaged; the scan ends after it.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Scan {
        let own = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let (start, end) = (own(range.start_bound()), own(range.end_bound()));
        let prefix = self.shared_prefix(&start, &end);
        let (sv, seq) = self.inner.read_view();
        Scan {
            inner: Arc::clone(&self.inner),
            sv,
            seq,
            prefix,
            start,
            end,
            merged: None,
            last_key: None,
            done: false,
        }
    }
}

impl Db {
    /// The live entries whose keys start with `prefix`, in key order, as of this call. With a
    /// prefix extractor whose prefix `prefix` is in the domain of, tables whose prefix filter says
    /// "no" are skipped (`bloom.filter.prefix.useful`).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use siftdb::{Db, Options, PrefixExtractor};
    /// let db = Db::open(dir.path(), Options::default().prefix_extractor(PrefixExtractor::fixed(4)))?;
    /// db.put("user1:name", "ann")?;
    /// db.put("user2:name", "bob")?;
    /// db.flush()?;
    /// let rows: Vec<_> = db.scan_prefix("user1").collect::<Result<_, _>>()?;
    /// assert_eq!(rows, vec![(b"user1:name".to_vec(), b"ann".to_vec())]);
    /// # Ok(()) }
    /// ```
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Scan {
        let prefix = prefix.as_ref().to_vec();
        let end = match prefix_successor(&prefix) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        };
        self.scan((Bound::Included(prefix), end))
    }

    /// The extractor prefix every key in `[start, end]` shares, if both bounds are in the
    /// extractor's domain and have the same prefix (`scan_prefix` bounds do).
    fn shared_prefix(&self, start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> Option<Vec<u8>> {
        let extractor = self.inner.options.prefix_extractor.as_ref()?;
        let (Bound::Included(s) | Bound::Excluded(s)) = start else {
            return None;
        };
        let prefix = extractor.prefix(s)?;
        let shares = match end {
            Bound::Included(e) => extractor.prefix(e) == Some(prefix),
            // An exclusive end at the prefix's successor closes exactly the prefix's keys.
            Bound::Excluded(e) => {
                extractor.prefix(e) == Some(prefix)
                    || prefix_successor(prefix).is_some_and(|succ| e.as_slice() <= succ.as_slice())
            }
            Bound::Unbounded => false,
        };
        shares.then(|| prefix.to_vec())
    }
}

/// The iterator [`Db::scan`] returns: `Result<(key, value)>` items in key order.
pub struct Scan {
    inner: Arc<DbInner>,
    sv: Arc<SuperVersion>,
    seq: u64,
    /// The extractor prefix all keys of the range share: tables whose filter rules it out are
    /// skipped.
    prefix: Option<Vec<u8>>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    merged: Option<MergingIterator>,
    /// The user key most recently returned or hidden: older versions of it are skipped.
    last_key: Option<Vec<u8>>,
    done: bool,
}

impl Scan {
    /// Builds the merge and seeks it to the start bound.
    fn start(&mut self) -> Result<MergingIterator> {
        let sv = &self.sv;
        let mut children: Vec<Box<dyn InternalIterator>> = vec![Box::new(sv.mem.iter())];
        children.extend(
            sv.imm
                .iter()
                .map(|m| Box::new(m.iter()) as Box<dyn InternalIterator>),
        );
        for f in sv.version.levels[0].iter().rev() {
            if self.may_hold_prefix(f)? {
                children.push(Box::new(self.inner.tables.get(f)?.iter(true)));
            }
        }
        for files in sv.version.levels.iter().skip(1).filter(|f| !f.is_empty()) {
            let mut kept = Vec::with_capacity(files.len());
            for f in files {
                if self.may_hold_prefix(f)? {
                    kept.push(Arc::clone(f));
                }
            }
            let tables = Arc::clone(&self.inner.tables);
            children.push(Box::new(LevelIter::new(kept, tables, true)));
        }
        let mut merged = MergingIterator::new(children);
        match &self.start {
            Bound::Included(k) => merged.seek(&lookup_key(k, MAX_SEQUENCE))?,
            Bound::Excluded(k) => {
                merged.seek(&lookup_key(k, MAX_SEQUENCE))?;
                self.last_key = Some(k.clone());
            }
            Bound::Unbounded => merged.seek_to_first()?,
        }
        Ok(merged)
    }

    /// Whether table `f` may hold keys of the scan's prefix: its key range must reach the prefix,
    /// and its prefix filter (if it has one) must not say "no".
    fn may_hold_prefix(&self, f: &FileMeta) -> Result<bool> {
        let Some(prefix) = &self.prefix else {
            return Ok(true);
        };
        let past = |k: &[u8]| !k.starts_with(prefix) && k > prefix.as_slice();
        if f.largest_user() < prefix.as_slice() || past(f.smallest_user()) {
            return Ok(false);
        }
        let stats = &self.inner.stats;
        match self.inner.tables.get(f)?.prefix_may_match(prefix)? {
            None => Ok(true),
            Some(maybe) => {
                stats.inc(Ticker::BloomFilterPrefixChecked);
                if !maybe {
                    stats.inc(Ticker::BloomFilterPrefixUseful);
                }
                Ok(maybe)
            }
        }
    }

    fn advance(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if self.merged.is_none() {
            self.merged = Some(self.start()?);
        }
        let Some(it) = self.merged.as_mut() else {
            return Ok(None);
        };
        while it.valid() {
            let parsed = parse_internal_key(it.key()).ok_or_else(|| {
                Error::corruption(&self.inner.dir, "scan met a malformed internal key")
            })?;
            let past_end = match &self.end {
                Bound::Included(e) => parsed.user_key > e.as_slice(),
                Bound::Excluded(e) => parsed.user_key >= e.as_slice(),
                Bound::Unbounded => false,
            };
            if past_end {
                return Ok(None);
            }
            let seen = self.last_key.as_deref() == Some(parsed.user_key);
            if parsed.seq <= self.seq && !seen {
                self.last_key = Some(parsed.user_key.to_vec());
                if parsed.kind == ValueKind::Value {
                    let item = (parsed.user_key.to_vec(), it.value().to_vec());
                    it.next()?;
                    return Ok(Some(item));
                }
            }
            it.next()?;
        }
        Ok(None)
    }
}

impl Iterator for Scan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.advance() {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

//! `Db::explain_get`: what a point lookup would consult and read.

use std::sync::Arc;

use super::range_filtering::{answer, RangeAnswer};
use super::TableVisit;
use crate::db::tree::SuperVersion;
use crate::db::Db;
use crate::error::Result;
use crate::filter::FilterProbe;
use crate::inspect::{
    FilterCheck, GetAnswer, GetExplanation, GetSource, ScanDecision, ScanExplanation,
    ScanTableStep, TableHeld, TableStep,
};
use crate::key::{InternalKey, SEEK_KIND};
use crate::key_range::KeyRange;
use crate::memtable::NewestEntry;
use crate::sst::table_reader::CopyValue;

impl Db {
    /// Says, for every table of the store, what a [`scan`](Db::scan) of `range` does with it: left
    /// out because its key range misses the range or its range filter says "no", or read (and
    /// why). Nothing is counted and no block is read.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// use siftdb::{inspect::ScanDecision, Db, Options, RangeFilter};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default().range_filter(RangeFilter::grafite(16.0, 1 << 16)))?;
    /// db.put(b"sensor:0000000000100", b"20.5")?;
    /// db.put(b"sensor:0000000000900", b"21.0")?;
    /// db.flush()?;
    /// let e = db.explain_scan(&b"sensor:0000000000200"[..]..&b"sensor:0000000000300"[..])?;
    /// assert!(e.range_filters_asked);
    /// println!("{e}");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if a table cannot be opened, `Error::Closed` once the
    /// store is closed.
    pub fn explain_scan<R: KeyRange>(&self, range: R) -> Result<ScanExplanation> {
        self.inner.check_open()?;
        self.tree.check_live()?;
        let (lower, upper) = range.into_bounds();
        let sv = self.tree.super_version();
        let bounded = !matches!(lower, std::ops::Bound::Unbounded)
            && !matches!(upper, std::ops::Bound::Unbounded);
        let mut tables = Vec::new();
        let l0 = sv.version.levels[0].iter().rev();
        let deeper = sv.version.levels.iter().skip(1).flatten();
        for f in l0.chain(deeper) {
            let decision = match answer(&self.tree, f, &lower, &upper)? {
                RangeAnswer::OutsideRange => ScanDecision::OutsideRange,
                RangeAnswer::RangeTombstones => ScanDecision::RangeTombstones,
                RangeAnswer::NoRangeFilter => ScanDecision::NoRangeFilter,
                RangeAnswer::TooWide { width } => ScanDecision::TooWide(width),
                RangeAnswer::Filtered {
                    width,
                    maybe: false,
                } => ScanDecision::RangeFilterNo { width },
                RangeAnswer::Filtered { width, maybe: true } => {
                    ScanDecision::RangeFilterMaybe { width }
                }
            };
            tables.push(ScanTableStep {
                level: f.level,
                file_number: f.number,
                smallest: f.smallest_user().to_vec(),
                largest: f.largest_user().to_vec(),
                decision,
            });
        }
        Ok(ScanExplanation {
            keyspace: self.tree.name.clone(),
            lower,
            upper,
            range_filters_asked: bounded && self.tree.options().range_filter.is_some(),
            tables,
        })
    }

    /// Looks `key` up the way [`get`](Db::get) does and reports each step: whether a memtable
    /// answered; otherwise each table considered in order (its level, file number, key range, the
    /// filter's layout and answer, the data block read and what it held); then the answer.
    ///
    /// The filter counters (`bloom.filter.*`) and the Get counters are left alone, so explaining
    /// does not skew the measured false positive rate. Block reads still go through the block
    /// cache and count as block reads.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put(b"apple", b"red")?;
    /// db.flush()?;
    /// let e = db.explain_get(b"apricot")?;
    /// assert_eq!(e.answer, siftdb::GetAnswer::NotFound);
    /// println!("{e}");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As for [`get`](Db::get): `Error::Corruption` naming the file if a table it reads is damaged,
    /// `Error::Closed` once the store is closed.
    pub fn explain_get(&self, key: impl AsRef<[u8]>) -> Result<GetExplanation> {
        let key = key.as_ref();
        let inner = &self.inner;
        inner.check_open()?;
        self.tree.check_live()?;
        let (sv, seq) = inner.read_view(&self.tree);
        let mut e = GetExplanation {
            keyspace: self.tree.name.clone(),
            key: key.to_vec(),
            sequence: seq,
            memtables: 1 + sv.imm.len(),
            tables: Vec::new(),
            source: GetSource::Nowhere,
            answer: GetAnswer::NotFound,
        };
        let lookup = InternalKey::new(key, seq, SEEK_KIND);
        let mem_hit =
            sv.mem
                .get(&lookup)
                .map(|l| (GetSource::Memtable, l))
                .or_else(|| {
                    sv.imm.iter().enumerate().find_map(|(i, m)| {
                        m.get(&lookup).map(|l| (GetSource::ImmutableMemtable(i), l))
                    })
                });
        if let Some((source, hit)) = mem_hit {
            e.source = source;
            e.answer = self.answer_of(
                self.tree.expire_found(&inner.dir, Some(hit))?,
                (&sv, key, seq),
            )?;
            return Ok(e);
        }

        let mut steps = Vec::new();
        let found = self.tree.search_tables::<CopyValue>(
            &sv.version,
            &lookup,
            &FilterProbe::new(key),
            |level, file, visit| {
                let mut step = TableStep {
                    level,
                    file_number: file.number,
                    smallest: file.smallest_user().to_vec(),
                    largest: file.largest_user().to_vec(),
                    key_in_range: false,
                    filter: None,
                    data_block: None,
                    held: TableHeld::NotSearched,
                };
                // The search reports the filter's verdict; nothing is counted in the statistics.
                if let TableVisit::Searched(search, _) = visit {
                    step.key_in_range = true;
                    step.filter = search
                        .filter
                        .map(|(layout, may_match)| FilterCheck { layout, may_match });
                    step.data_block = search.data_block.map(Into::into);
                    step.held = match &search.found {
                        _ if search.covered() => TableHeld::Tombstone,
                        Some(
                            NewestEntry::Value(v)
                            | NewestEntry::Expiring(v)
                            | NewestEntry::Merge(v),
                        ) => TableHeld::Value(v.len()),
                        Some(NewestEntry::Deleted | NewestEntry::RangeDeleted) => {
                            TableHeld::Tombstone
                        }
                        None if step.filter.is_none_or(|c| c.may_match) => TableHeld::NoEntry,
                        None => TableHeld::NotSearched,
                    };
                }
                steps.push(step);
            },
        )?;
        e.tables = steps;
        if let (Some(hit), Some(last)) = (found, e.tables.last()) {
            e.source = GetSource::Table {
                level: last.level,
                file_number: last.file_number,
            };
            e.answer = self.answer_of(
                self.tree.expire_found(&inner.dir, Some(hit))?,
                (&sv, key, seq),
            )?;
        }
        Ok(e)
    }

    /// The answer of an entry found, as a Get sees it (an expired value is a tombstone, merge
    /// operands of `key` are resolved as of `seq` in `sv`).
    ///
    /// # Errors
    /// As [`read_merged`](Db::read_merged).
    fn answer_of(
        &self,
        hit: Option<NewestEntry>,
        (sv, key, seq): (&Arc<SuperVersion>, &[u8], u64),
    ) -> Result<GetAnswer> {
        Ok(match hit {
            Some(NewestEntry::Value(v)) => GetAnswer::Value(v),
            Some(NewestEntry::Merge(_)) => match self.read_merged(sv, key, seq)? {
                Some(v) => GetAnswer::Value(v),
                None => GetAnswer::Deleted,
            },
            // `expire_found` made an expiring value a value or a tombstone.
            Some(NewestEntry::Deleted | NewestEntry::RangeDeleted | NewestEntry::Expiring(_)) => {
                GetAnswer::Deleted
            }
            None => GetAnswer::NotFound,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::inspect::{GetAnswer, GetSource, TableHeld};
    use crate::{Db, Filter, FilterLayout, Options, Ticker};

    #[test]
    fn explains_memtable_tables_filters_and_tombstones() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default().filter(Filter::full(10.0))).unwrap();
        for i in 0..1000u32 {
            db.put(format!("k{i:05}"), format!("v{i}")).unwrap();
        }
        db.flush().unwrap();
        db.delete("k00007").unwrap();
        db.flush().unwrap();
        db.put("mem", "x").unwrap();
        let before = db.statistics();

        let e = db.explain_get("mem").unwrap();
        assert_eq!(e.source, GetSource::Memtable);
        assert_eq!(e.answer, GetAnswer::Value(b"x".to_vec()));
        assert!(e.tables.is_empty());

        // Newest L0 table holds only the tombstone: the key range check skips it for k00500.
        let e = db.explain_get("k00500").unwrap();
        assert_eq!(e.answer, GetAnswer::Value(b"v500".to_vec()));
        assert_eq!(e.tables.len(), 2);
        assert!(!e.tables[0].key_in_range);
        assert_eq!(e.tables[1].held, TableHeld::Value(4));
        let check = e.tables[1].filter.unwrap();
        assert_eq!(check.layout, FilterLayout::Full);
        assert!(check.may_match);
        assert!(e.tables[1].data_block.is_some());
        assert_eq!(e.data_blocks_read(), 1);

        let e = db.explain_get("k00007").unwrap();
        assert_eq!(e.answer, GetAnswer::Deleted);
        assert_eq!(e.tables[0].held, TableHeld::Tombstone);

        // Absent keys inside the range: almost always the filter says no.
        let mut skipped = 0;
        for i in 0..200u32 {
            let e = db.explain_get(format!("k{i:05}x")).unwrap();
            assert_eq!(e.answer, GetAnswer::NotFound);
            assert_eq!(e.source, GetSource::Nowhere);
            let t = e.tables.last().unwrap();
            if t.filter.is_some_and(|c| !c.may_match) {
                assert_eq!(t.held, TableHeld::NotSearched);
                assert!(t.data_block.is_none());
                skipped += 1;
            }
        }
        assert!(skipped > 180, "{skipped}");
        let text = db.explain_get("k00001x").unwrap().to_string();
        assert!(text.contains("answer: not found"), "{text}");

        // Explaining leaves the filter and Get counters alone.
        let d = db.statistics().since(&before);
        for t in [
            Ticker::BloomFilterUseful,
            Ticker::BloomFilterFullPositive,
            Ticker::BloomFilterFullTruePositive,
            Ticker::NumberKeysRead,
        ] {
            assert_eq!(d.ticker(t), 0, "{}", t.name());
        }
    }
}

//! Walks one level ≥ 1 (tables in key order, none overlapping) in either direction, opening each
//! table only when the walk reaches it.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::db::version::table_cache::TableCache;
use crate::db::version::FileMeta;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::sst::table_reader::TableIter;

pub(crate) struct LevelIter {
    files: Vec<Arc<FileMeta>>,
    tables: Arc<TableCache>,
    fill_cache: bool,
    /// The index in `files` of the current table (meaningless while `current` is `None`).
    file: usize,
    /// The current table's iterator; `None` before the first table or past the last.
    current: Option<TableIter>,
}

impl LevelIter {
    pub(crate) fn new(
        files: Vec<Arc<FileMeta>>,
        tables: Arc<TableCache>,
        fill_cache: bool,
    ) -> Self {
        LevelIter {
            files,
            tables,
            fill_cache,
            file: 0,
            current: None,
        }
    }

    /// Opens file `i` as the current table (or ends the walk if there is no such file).
    fn open(&mut self, i: usize) -> Result<()> {
        self.current = None;
        self.file = i;
        if let Some(f) = self.files.get(i) {
            self.current = Some(self.tables.get(f)?.iter(self.fill_cache));
        }
        Ok(())
    }

    fn skip_exhausted_tables(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            self.open(self.file + 1)?;
            if let Some(cur) = self.current.as_mut() {
                cur.seek_to_first()?;
            }
        }
        Ok(())
    }

    fn skip_exhausted_tables_backward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            let Some(before) = self.file.checked_sub(1) else {
                self.current = None;
                break;
            };
            self.open(before)?;
            if let Some(cur) = self.current.as_mut() {
                cur.seek_to_last()?;
            }
        }
        Ok(())
    }

    /// Leaves the iterator invalid if `r` is an error.
    fn settle(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.current = None;
        }
        r
    }

    fn try_seek_to_first(&mut self) -> Result<()> {
        self.open(0)?;
        if let Some(cur) = self.current.as_mut() {
            cur.seek_to_first()?;
        }
        self.skip_exhausted_tables()
    }

    fn try_seek_to_last(&mut self) -> Result<()> {
        let Some(last) = self.files.len().checked_sub(1) else {
            self.current = None;
            return Ok(());
        };
        self.open(last)?;
        if let Some(cur) = self.current.as_mut() {
            cur.seek_to_last()?;
        }
        self.skip_exhausted_tables_backward()
    }

    /// The first table whose largest key is ≥ `target`: the only one that may hold the first key
    /// ≥ target, and the one whose range or whose predecessor's holds the last key ≤ target.
    fn table_for(&self, target: &[u8]) -> usize {
        self.files
            .partition_point(|f| compare_internal(&f.largest, target) == Ordering::Less)
    }

    fn try_seek(&mut self, target: &[u8]) -> Result<()> {
        self.open(self.table_for(target))?;
        if let Some(cur) = self.current.as_mut() {
            cur.seek(target)?;
        }
        self.skip_exhausted_tables()
    }

    fn try_seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let i = self.table_for(target);
        if i == self.files.len() {
            // Every table ends before target.
            return self.try_seek_to_last();
        }
        self.open(i)?;
        if let Some(cur) = self.current.as_mut() {
            cur.seek_for_prev(target)?;
        }
        self.skip_exhausted_tables_backward()
    }

    fn try_next(&mut self) -> Result<()> {
        if let Some(cur) = self.current.as_mut() {
            cur.next()?;
        }
        self.skip_exhausted_tables()
    }

    fn try_prev(&mut self) -> Result<()> {
        if let Some(cur) = self.current.as_mut() {
            cur.prev()?;
        }
        self.skip_exhausted_tables_backward()
    }
}

impl InternalIterator for LevelIter {
    fn seek_to_first(&mut self) -> Result<()> {
        let r = self.try_seek_to_first();
        self.settle(r)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let r = self.try_seek_to_last();
        self.settle(r)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.try_seek(target);
        self.settle(r)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let r = self.try_seek_for_prev(target);
        self.settle(r)
    }

    fn next(&mut self) -> Result<()> {
        let r = self.try_next();
        self.settle(r)
    }

    fn prev(&mut self) -> Result<()> {
        let r = self.try_prev();
        self.settle(r)
    }

    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map(|c| c.key()).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map(|c| c.value()).unwrap_or_default()
    }

    fn table_number(&self) -> Option<u64> {
        self.current.as_ref().and_then(|c| c.table_number())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::check_against_model;
    use crate::key::{internal_key, lookup_key, ValueKind, MAX_SEQUENCE};
    use crate::{Db, Options};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn level_iterator_walks_its_tables_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::default()
            .write_buffer_size(64 << 10)
            .target_file_size(4 << 10)
            .max_bytes_for_level_base(64 << 20)
            // No background job: `compact` rewrites every flushed table into small ones.
            .level0_compaction_trigger(50);
        let db = Db::open(dir.path(), options).unwrap();
        for i in 0..3000u32 {
            db.put(format!("key{i:05}"), format!("value-{i}")).unwrap();
        }
        db.compact().unwrap();
        let sv = db.tree.super_version();
        let files = sv
            .version
            .levels
            .iter()
            .skip(1)
            .find(|l| !l.is_empty())
            .unwrap();
        assert!(files.len() > 5, "{} tables", files.len());
        let tables = &db.tree.tables;
        // The model: each table's entries, table after table.
        let entries_of = |files: &[Arc<FileMeta>]| {
            let mut out = Vec::new();
            for f in files {
                let mut t = tables.get(f).unwrap().iter(true);
                t.seek_to_first().unwrap();
                while t.valid() {
                    out.push((t.key().to_vec(), t.value().to_vec()));
                    t.next().unwrap();
                }
            }
            out
        };
        let mut probes: Vec<Vec<u8>> = Vec::new();
        for i in (0..3010u32).step_by(7) {
            let user = format!("key{i:05}").into_bytes();
            probes.push(lookup_key(&user, MAX_SEQUENCE));
            probes.push(internal_key(&user, 0, ValueKind::Deletion));
        }
        for f in files.iter() {
            probes.push(f.smallest.clone());
            probes.push(f.largest.clone());
        }
        probes.push(Vec::new());
        let mut rng = StdRng::seed_from_u64(9);
        // Every table; every other one (as a prefix scan skips tables); one; none.
        let every_other: Vec<_> = files.iter().step_by(2).cloned().collect();
        for files in [files.clone(), every_other, files[..1].to_vec(), Vec::new()] {
            let model = entries_of(&files);
            let mut it = LevelIter::new(files, Arc::clone(tables), true);
            check_against_model(&mut it, &model, &probes, &mut rng, 2000);
        }
    }
}

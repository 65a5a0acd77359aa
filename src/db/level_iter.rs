//! Walks one level ≥ 1 (tables in key order, none overlapping), opening each table only when the
//! walk reaches it.

use std::cmp::Ordering;
use std::sync::Arc;

use super::table_cache::TableCache;
use super::version::FileMeta;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::sst::table_reader::TableIter;

pub(crate) struct LevelIter {
    files: Vec<Arc<FileMeta>>,
    tables: Arc<TableCache>,
    fill_cache: bool,
    next_file: usize,
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
            next_file: 0,
            current: None,
        }
    }

    /// Opens file `i` as the current table (or ends the walk past the last one).
    fn open(&mut self, i: usize) -> Result<()> {
        self.current = None;
        self.next_file = i + 1;
        if let Some(f) = self.files.get(i) {
            self.current = Some(self.tables.get(f)?.iter(self.fill_cache));
        }
        Ok(())
    }

    fn skip_exhausted_tables(&mut self) -> Result<()> {
        while let Some(cur) = &self.current {
            if cur.valid() {
                break;
            }
            self.open(self.next_file)?;
            if let Some(cur) = self.current.as_mut() {
                cur.seek_to_first()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for LevelIter {
    fn seek_to_first(&mut self) -> Result<()> {
        self.open(0)?;
        if let Some(cur) = self.current.as_mut() {
            cur.seek_to_first()?;
        }
        self.skip_exhausted_tables()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let i = self
            .files
            .partition_point(|f| compare_internal(&f.largest, target) == Ordering::Less);
        self.open(i)?;
        if let Some(cur) = self.current.as_mut() {
            cur.seek(target)?;
        }
        self.skip_exhausted_tables()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(cur) = self.current.as_mut() {
            cur.next()?;
        }
        self.skip_exhausted_tables()
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
}

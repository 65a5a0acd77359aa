//! The write path: validate, make room, append to the WAL (fsync if asked), apply to the memtable,
//! publish the sequence.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::filename::log_path;
use super::manifest::sync_dir;
use super::{Db, DbInner, SuperVersion, WalState};
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::stats::Ticker;
use crate::wal::writer::LogWriter;
use crate::write_batch::{decode_batch, WriteBatch};

/// The largest key accepted.
pub(crate) const MAX_KEY_BYTES: usize = 64 << 10;
/// The largest value accepted.
pub(crate) const MAX_VALUE_BYTES: usize = 256 << 20;

impl Db {
    /// Sets `key` to `value`.
    ///
    /// # Errors
    /// `InvalidArgument` for a key over 64 KiB or a value over 256 MiB; `Io` if the WAL cannot be
    /// written; `Background` after an earlier flush or compaction failed.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b)
    }

    /// Removes `key`. Removing an absent key is not an error.
    ///
    /// # Errors
    /// As [`put`](Db::put).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b)
    }

    /// Applies `batch` atomically, without waiting for an fsync.
    ///
    /// # Errors
    /// As [`put`](Db::put).
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies `batch` atomically; with `sync: true` it returns only after the WAL is fsynced.
    ///
    /// # Errors
    /// As [`put`](Db::put).
    pub fn write_opt(&self, mut batch: WriteBatch, options: &WriteOptions) -> Result<()> {
        let (max_key, max_value) = batch.largest_key_and_value();
        if max_key > MAX_KEY_BYTES {
            return Err(Error::InvalidArgument(format!(
                "key of {max_key} bytes (at most {MAX_KEY_BYTES})"
            )));
        }
        if max_value > MAX_VALUE_BYTES {
            return Err(Error::InvalidArgument(format!(
                "value of {max_value} bytes (at most {MAX_VALUE_BYTES})"
            )));
        }
        if batch.is_empty() {
            return Ok(());
        }
        let inner = &self.inner;
        let mut wal = inner.wal.lock();
        let mem = inner.make_room_for_write(&mut wal)?;
        let first = inner.last_sequence.load(Ordering::Acquire) + 1;
        batch.set_sequence(first);
        let record = batch.encoded();
        let logged = wal.log.add_record(record).and_then(|()| {
            if options.sync {
                wal.log.sync()
            } else {
                wal.log.flush()
            }
        });
        if let Err(e) = logged {
            // The WAL's tail is now unknown: refuse writes until reopen rather than risk a hole.
            inner.set_background_error(&e);
            return Err(e);
        }
        inner.stats.add(Ticker::WalBytes, record.len() as u64);
        if options.sync {
            inner.stats.inc(Ticker::WalSyncs);
        }
        let entries = decode_batch(record)
            .ok_or_else(|| Error::InvalidArgument("malformed write batch".into()))?;
        for e in &entries {
            mem.add(e.seq, e.kind, e.key, e.value);
        }
        inner
            .stats
            .add(Ticker::NumberKeysWritten, entries.len() as u64);
        // Readers take their snapshot from here: the batch becomes visible all at once.
        inner
            .last_sequence
            .store(first + entries.len() as u64 - 1, Ordering::Release);
        Ok(())
    }
}

impl DbInner {
    /// Returns the memtable to write into, freezing a full one and waiting while the flushes or L0
    /// compactions lag too far behind. Called with the WAL lock held.
    pub(crate) fn make_room_for_write(&self, wal: &mut WalState) -> Result<Arc<MemTable>> {
        let mut slowed = false;
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(e.clone()));
            }
            let l0 = st.sv.version.levels[0].len();
            if !slowed && l0 >= self.options.level0_slowdown_trigger {
                // Give compaction a millisecond per write instead of stopping writers outright.
                drop(st);
                let t = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                self.stats
                    .add(Ticker::WriteStallMicros, t.elapsed().as_micros() as u64);
                slowed = true;
                st = self.state.lock();
                continue;
            }
            if st.sv.mem.approximate_bytes() < self.options.write_buffer_size {
                return Ok(Arc::clone(&st.sv.mem));
            }
            if st.sv.imm.len() >= self.options.max_immutable_memtables
                || l0 >= self.options.level0_stop_trigger
            {
                let t = Instant::now();
                self.changed.wait_for(&mut st, Duration::from_millis(100));
                self.stats
                    .add(Ticker::WriteStallMicros, t.elapsed().as_micros() as u64);
                continue;
            }
            drop(st);
            self.switch_memtable(wal)?;
            st = self.state.lock();
        }
    }

    /// Starts a new WAL and memtable; the old memtable joins the flush queue.
    pub(crate) fn switch_memtable(&self, wal: &mut WalState) -> Result<()> {
        let number = self.new_file_number();
        let log = LogWriter::create(&log_path(&self.dir, number))?;
        // The new log's directory entry must be durable before a synced write relies on it.
        sync_dir(&self.dir)?;
        wal.log.flush()?;
        wal.log = log;
        wal.log_number = number;
        let mut st = self.state.lock();
        let mut imm = Vec::with_capacity(st.sv.imm.len() + 1);
        imm.push(Arc::clone(&st.sv.mem));
        imm.extend(st.sv.imm.iter().cloned());
        st.sv = Arc::new(SuperVersion {
            mem: Arc::new(MemTable::new(number)),
            imm,
            version: Arc::clone(&st.sv.version),
        });
        drop(st);
        self.changed.notify_all();
        Ok(())
    }
}

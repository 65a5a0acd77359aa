//! The two background workers: one flushes frozen memtables, one compacts. Both stop at the first
//! error, which is kept in `State::bg_error` and returned to writers and to every waiter. A panic
//! in user code they call (a filter policy, a prefix extractor) is such an error, not the end of
//! the thread.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::DbInner;
use crate::error::{Error, Result};

/// Runs `f`, turning a panic into `Error::Background` that says what panicked. Work that panics
/// leaves what it had made as garbage for the next open; the data it read from stays where it was.
pub(crate) fn catch_panic<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".to_string());
            Err(Error::Background(format!("{what} panicked: {message}")))
        }
    }
}

pub(crate) fn spawn_workers(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    let flusher = {
        let inner = Arc::clone(inner);
        std::thread::Builder::new()
            .name("siftdb-flush".into())
            .spawn(move || flush_loop(&inner))?
    };
    let compactor = {
        let inner = Arc::clone(inner);
        std::thread::Builder::new()
            .name("siftdb-compact".into())
            .spawn(move || compaction_loop(&inner))?
    };
    Ok(vec![flusher, compactor])
}

fn flush_loop(inner: &DbInner) {
    loop {
        {
            let mut st = inner.state.lock();
            while !st.shutting_down && (st.bg_error.is_some() || st.sv.imm.is_empty()) {
                inner.changed.wait(&mut st);
            }
            if st.shutting_down {
                return;
            }
        }
        if let Err(e) = catch_panic("flush", || inner.flush_oldest_memtable()) {
            inner.set_background_error(&e);
        }
    }
}

fn compaction_loop(inner: &DbInner) {
    loop {
        {
            let mut st = inner.state.lock();
            while !st.shutting_down
                && (st.bg_error.is_some()
                    || st.sv.version.compaction_level(&inner.options).is_none())
            {
                inner.changed.wait(&mut st);
            }
            if st.shutting_down {
                return;
            }
        }
        let mut pointers = inner.compaction.lock();
        let done = catch_panic("compaction", || {
            match inner.pick_compaction(&mut pointers) {
                Some(job) => inner.run_compaction(job),
                None => Ok(()),
            }
        });
        if let Err(e) = done {
            inner.set_background_error(&e);
        }
    }
}

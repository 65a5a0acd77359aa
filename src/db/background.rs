//! The two background workers: one flushes frozen memtables, one compacts. Both stop at the first
//! error, which is kept in `State::bg_error` and returned to writers.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::DbInner;
use crate::error::Result;

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
        if let Err(e) = inner.flush_oldest_memtable() {
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
        if let Some(job) = inner.pick_compaction(&mut pointers) {
            if let Err(e) = inner.run_compaction(job) {
                inner.set_background_error(&e);
            }
        }
    }
}

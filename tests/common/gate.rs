//! A gate inside a filter builder, so that a test can hold a flush where a slow flush would be:
//! the cache-local bloom, whose builder waits at the gate before it finishes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use siftdb::fault_injection::FaultInjector;
use siftdb::{CacheLocalBloom, Filter, FilterBitsBuilder, FilterLayout, FilterPolicy, Options};

/// A gate the flush thread waits at, inside the filter builder's `finish`.
#[derive(Default)]
pub struct Gate {
    closed: Mutex<bool>,
    arrived: AtomicBool,
    opened: Condvar,
}

impl Gate {
    pub fn close(&self) {
        *self.closed.lock().unwrap() = true;
    }

    pub fn open(&self) {
        *self.closed.lock().unwrap() = false;
        self.opened.notify_all();
    }

    fn pass(&self) {
        self.arrived.store(true, Ordering::SeqCst);
        let mut closed = self.closed.lock().unwrap();
        while *closed {
            closed = self.opened.wait(closed).unwrap();
        }
    }

    /// Waits until a flush has reached the gate.
    pub fn wait_arrival(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.arrived.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "no flush reached the gate");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

struct GatedBloom {
    inner: CacheLocalBloom,
    gate: Arc<Gate>,
}

struct GatedBuilder {
    inner: Box<dyn FilterBitsBuilder>,
    gate: Arc<Gate>,
}

impl FilterBitsBuilder for GatedBuilder {
    fn add_key(&mut self, key: &[u8]) {
        self.inner.add_key(key);
    }
    fn num_keys(&self) -> usize {
        self.inner.num_keys()
    }
    fn estimated_len(&self) -> usize {
        self.inner.estimated_len()
    }
    fn finish(&mut self) -> Vec<u8> {
        self.gate.pass();
        self.inner.finish()
    }
}

impl FilterPolicy for GatedBloom {
    fn name(&self) -> &str {
        "test.GatedBloom"
    }
    fn bits_per_key(&self) -> f64 {
        self.inner.bits_per_key()
    }
    fn builder(&self) -> Box<dyn FilterBitsBuilder> {
        Box::new(GatedBuilder {
            inner: self.inner.builder(),
            gate: Arc::clone(&self.gate),
        })
    }
    fn may_match(&self, filter: &[u8], key: &[u8]) -> bool {
        self.inner.may_match(filter, key)
    }
}

/// 4 KiB memtables, up to 8 waiting, whose flushes pass through `gate`, on `faults`.
pub fn gated_options(gate: &Arc<Gate>, faults: &FaultInjector) -> Options {
    let policy = GatedBloom {
        inner: CacheLocalBloom::new(10.0),
        gate: Arc::clone(gate),
    };
    Options::default()
        .write_buffer_size(4096)
        .max_immutable_memtables(8)
        .filter(Filter::new(FilterLayout::Full, Arc::new(policy)))
        .fault_injector(faults.clone())
}

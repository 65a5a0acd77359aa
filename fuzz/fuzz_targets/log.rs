//! WAL/MANIFEST replay: the record log reader, then each record as a write batch and as a
//! version edit; and each record decoder on raw bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    siftdb::fuzzing::log(data);
    siftdb::fuzzing::write_batch(data);
    siftdb::fuzzing::version_edit(data);
});

//! Block decompression (none, snappy, LZ4, zstd) on arbitrary bytes, then the block it gives.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the codec; the rest is the stored block.
    siftdb::fuzzing::compressed_block(data);
});

//! Block decoding: `Block::new` and its iterator in both key orders, on arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte says how long the seek target is; the rest is the block.
    let (target, block) = match data.split_first() {
        Some((&n, rest)) => rest.split_at((n as usize).min(rest.len())),
        None => (&[][..], data),
    };
    siftdb::fuzzing::block(block, target);
});

//! Every filter reader (LevelDbBloom and CacheLocalBloom `may_match`, full, block-based and
//! partitioned filter readers) on arbitrary filter bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let offset = u64::from_le_bytes(data[..8].try_into().unwrap());
    let klen = (data[8] as usize % 24).min(data.len() - 9);
    let (key, filter) = data[9..].split_at(klen);
    siftdb::fuzzing::filters(filter, key, offset);
});

//! Helpers the policies' unit tests share: keys, building a filter, counting false positives,
//! and a tiny deterministic byte source for garbage inputs.

use super::FilterPolicy;

/// Key `i` of a family (`"absent:"` keys are never added to a filter).
pub(crate) fn key(prefix: &str, i: u64) -> Vec<u8> {
    format!("{prefix}{i:012}").into_bytes()
}

/// A filter of `policy` over keys `0..n` of `prefix`, checking the builder's bookkeeping on the way:
/// `num_keys` counts every add, `estimated_len` is exact (no duplicates here), and `finish` resets.
pub(crate) fn build(policy: &dyn FilterPolicy, prefix: &str, n: u64) -> Vec<u8> {
    let mut b = policy.builder();
    for i in 0..n {
        b.add_key(&key(prefix, i));
    }
    assert_eq!(b.num_keys(), n as usize);
    let len = b.estimated_len();
    let f = b.finish();
    assert_eq!(f.len(), len, "estimated_len is exact without duplicates");
    assert_eq!(b.num_keys(), 0);
    f
}

/// How many of `probes` absent keys `filter` lets through.
pub(crate) fn fp_hits(policy: &dyn FilterPolicy, filter: &[u8], probes: u64) -> u64 {
    (0..probes)
        .filter(|&i| policy.may_match(filter, &key("absent:", i)))
        .count() as u64
}

/// The false positive rate of `filter` over `probes` absent keys.
pub(crate) fn fp_rate(policy: &dyn FilterPolicy, filter: &[u8], probes: u64) -> f64 {
    fp_hits(policy, filter, probes) as f64 / probes as f64
}

/// xorshift64: a fixed stream of bytes for garbage inputs, the same in every run.
pub(crate) fn xorshift() -> impl FnMut() -> u64 {
    let mut state = 0x1234_5678_9abc_def0u64;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

//! The sort the solved filters' constructions start with (binary fuse, Ribbon): the keys' remixed
//! hashes, sorted and deduplicated in linear time.

/// Sorts and deduplicates uniformly distributed `values` (remixed hashes) in linear time, as a
/// two-level bucket sort: a counting sort on the top 8 bits (256 output streams, which the write
/// buffers and caches handle well), then within each of those buckets a counting sort on the next
/// bits into sub-buckets of about two values, each finished by insertion sort. Every second-level
/// pass works on 1/256 of the data, which stays in cache. Up to 2^16 values (a partition's worth),
/// where everything is in cache anyway, one level on the top bits does it; `sort_unstable` below
/// 1024 values or from 2^32. Measured at 1M values: 20 ns/value against `sort_unstable`'s 40.
pub(super) fn sort_dedup(values: &mut Vec<u64>, spare: &mut Vec<u64>, buckets: &mut Vec<u32>) {
    let n = values.len();
    // u32 offsets below need n < 2^32.
    if n < 1024 || u32::try_from(n).is_err() {
        values.sort_unstable();
        values.dedup();
        return;
    }
    spare.clear();
    spare.resize(n, 0);
    if n <= 1 << 16 {
        // Everything fits in cache: one level, values → spare → back by `copy_from_slice`.
        let bits = usize::BITS - 1 - n.leading_zeros();
        buckets.clear();
        buckets.resize((1usize << bits) + 1, 0);
        counting_pass(values, spare, buckets, 64 - bits, bits);
        sort_buckets(spare, buckets);
        values.copy_from_slice(spare);
        values.dedup();
        return;
    }
    // Level 1: top 8 bits, values → spare. `top[b]..top[b + 1]` is bucket b afterwards.
    let mut top = [0u32; 257];
    counting_pass(values, spare, &mut top, 56, 8);
    // Level 2: each top bucket, spare → values at the same offsets, on the next bits.
    for b in 0..256 {
        let (start, end) = (top[b] as usize, top[b + 1] as usize);
        let len = end - start;
        let (src, dst) = (&spare[start..end], &mut values[start..end]);
        if len < 64 {
            dst.copy_from_slice(src);
            insertion_sort(dst);
            continue;
        }
        // About two values per sub-bucket; len < 2^32 so at most 31 bits, taken below the 8.
        let sub_bits = usize::BITS - 1 - len.leading_zeros();
        buckets.clear();
        buckets.resize((1usize << sub_bits) + 1, 0);
        counting_pass(src, dst, buckets, 56 - sub_bits, sub_bits);
        sort_buckets(dst, buckets);
    }
    values.dedup();
}

/// Stably distributes `src` into `dst` by the `bits` bits of each value starting at bit `shift`
/// (masked, so higher bits may differ). On return
/// `offsets[b]..offsets[b + 1]` is the range of bucket `b` in `dst`. `offsets` has
/// `2^bits + 1` entries and `src.len() < 2^32`.
fn counting_pass(src: &[u64], dst: &mut [u64], offsets: &mut [u32], shift: u32, bits: u32) {
    let mask = (1u64 << bits) - 1;
    offsets.fill(0);
    for &v in src {
        offsets[((v >> shift) & mask) as usize + 1] += 1;
    }
    for b in 1..offsets.len() {
        offsets[b] += offsets[b - 1];
    }
    // Fill each bucket from its start, advancing `offsets[b]` as the write cursor: afterwards it
    // is bucket b's end. Shifting the array one place up then makes `offsets[b]` bucket b's start
    // again (b's start is b − 1's end), and the last entry stays `src.len()`.
    let last = offsets.len() - 1;
    for &v in src {
        let b = ((v >> shift) & mask) as usize;
        dst[offsets[b] as usize] = v;
        offsets[b] += 1;
    }
    offsets.copy_within(0..last, 1);
    offsets[0] = 0;
}

/// Sorts each bucket `offsets[b]..offsets[b + 1]` of `values`.
fn sort_buckets(values: &mut [u64], offsets: &[u32]) {
    let mut from = 0usize;
    for &to in &offsets[1..] {
        insertion_sort(&mut values[from..to as usize]);
        from = to as usize;
    }
}

/// Sorts a short slice (a bucket of a few values). A long one (only when many copies of a few
/// hashes were added) goes to `sort_unstable`, which keeps the worst case at O(n log n).
fn insertion_sort(v: &mut [u64]) {
    if v.len() > 32 {
        v.sort_unstable();
        return;
    }
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

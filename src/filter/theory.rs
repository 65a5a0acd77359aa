//! What theory predicts for filters' false positive rates, and the space they cannot beat.
//!
//! These are the formulas behind [`FilterPolicy::theoretical_fp_rate`](super::FilterPolicy) and the
//! tolerances of the policies' tests. They are estimates for random hashing and a large number of
//! keys; the tests check that the real filters stay close to them.

/// False positive rate of a standard bloom filter with `bits_per_key` bits per key and `k` probes:
/// `(1 − e^(−k/b))^k`.
///
/// A non-positive `bits_per_key` gives 1 (a filter without bits matches everything).
pub(crate) fn standard_fp_rate(bits_per_key: f64, k: u32) -> f64 {
    if bits_per_key.is_nan() || bits_per_key <= 0.0 {
        return 1.0;
    }
    // -expm1(x) = 1 - e^x, accurate when k/b is small (many bits per key).
    (-(-f64::from(k) / bits_per_key).exp_m1()).powi(k as i32)
}

/// False positive rate of a cache-local (blocked) bloom filter whose probes all fall in one line of
/// `line_bits` bits.
///
/// Keys fall into lines unevenly: a line holds on average `kpl = line_bits / bits_per_key` keys,
/// with a standard deviation of about `√kpl` (Poisson). The rate is the average of a standard bloom
/// filter's rate for a line one deviation more crowded and one deviation less crowded than average.
/// When `kpl ≤ √kpl` (more bits per key than bits per line) the less crowded line holds no key and
/// contributes 0.
pub(crate) fn cache_local_fp_rate(bits_per_key: f64, k: u32, line_bits: u32) -> f64 {
    if bits_per_key.is_nan() || bits_per_key <= 0.0 {
        return 1.0;
    }
    let c = f64::from(line_bits);
    let keys_per_line = c / bits_per_key;
    let sd = keys_per_line.sqrt();
    let crowded = standard_fp_rate(c / (keys_per_line + sd), k);
    let uncrowded = if keys_per_line > sd {
        standard_fp_rate(c / (keys_per_line - sd), k)
    } else {
        0.0
    };
    (crowded + uncrowded) / 2.0
}

/// Probability that an absent key's `fingerprint_bits`-bit hash equals one of `num_keys` present
/// keys' hashes: `1 − e^(−n / 2^bits)`. Such a key matches whatever the bits say.
pub(crate) fn fingerprint_fp_rate(num_keys: f64, fingerprint_bits: u32) -> f64 {
    let space = 2f64.powi(fingerprint_bits as i32);
    -(-num_keys / space).exp_m1()
}

/// False positive rate of an XOR-family filter (xor, binary fuse) with `fingerprint_bits`-bit
/// fingerprints: `2^-bits`.
///
/// An absent key's slots hold XORs of other keys' fingerprints, uniformly distributed and
/// independent of the absent key's own fingerprint, so they match it with probability `2^-bits`
/// whatever the bits per key: 0.390625 % at 8 bits, 0.0015259 % at 16.
pub(crate) fn xor_filter_fp_rate(fingerprint_bits: u32) -> f64 {
    2f64.powi(-(fingerprint_bits as i32))
}

/// The information-theoretic minimum bits per key of any filter with false positive rate
/// `fp_rate`: `log2(1 / ε)` (6.64 at 1 %, 8 at 2^-8). Infinite for 0, 0 for rates of 1 or more.
pub(crate) fn space_limit_bits_per_key(fp_rate: f64) -> f64 {
    if fp_rate.is_nan() || fp_rate >= 1.0 {
        return 0.0;
    }
    -fp_rate.log2()
}

/// Probability that either of two independent events happens: `a + b − ab`.
pub(crate) fn independent_probability_sum(a: f64, b: f64) -> f64 {
    a + b - a * b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_matches_known_values() {
        // 10 bits/key, k = 6 (LevelDB): the textbook 0.84 %.
        let r = standard_fp_rate(10.0, 6);
        assert!((r - 0.008_43).abs() < 0.000_05, "{r}");
        // 10 bits/key, k = 7: the optimum, 0.819 %.
        let r = standard_fp_rate(10.0, 7);
        assert!((r - 0.008_19).abs() < 0.000_05, "{r}");
        assert_eq!(standard_fp_rate(0.0, 6), 1.0);
        assert_eq!(standard_fp_rate(f64::NAN, 6), 1.0);
    }

    #[test]
    fn cache_local_matches_rocksdb_figure() {
        // RocksDB's FastLocalBloom at 10 bits/key, 6 probes, 512-bit lines: 0.9535 %.
        let r = cache_local_fp_rate(10.0, 6, 512);
        assert!((r - 0.009_535).abs() < 0.000_01, "{r}");
        // Always worse than a standard filter with the same bits and probes.
        for b in [4.0, 6.0, 10.0, 16.0, 24.0] {
            assert!(cache_local_fp_rate(b, 6, 512) > standard_fp_rate(b, 6));
        }
        // Absurdly many bits per key: finite, tiny, no NaN.
        let r = cache_local_fp_rate(1000.0, 24, 512);
        assert!(r.is_finite() && (0.0..1e-9).contains(&r), "{r}");
    }

    #[test]
    fn fingerprint_term() {
        let r = fingerprint_fp_rate(1e6, 32);
        assert!((r - 1e6 / 4_294_967_296.0).abs() < 1e-7, "{r}");
        assert!(fingerprint_fp_rate(1e7, 64) < 1e-12);
        let s = independent_probability_sum(0.01, 0.02);
        assert!((s - 0.0298).abs() < 1e-12);
    }

    #[test]
    fn xor_family_and_space_limit() {
        assert_eq!(xor_filter_fp_rate(8), 1.0 / 256.0);
        assert_eq!(xor_filter_fp_rate(16), 1.0 / 65536.0);
        assert_eq!(space_limit_bits_per_key(xor_filter_fp_rate(8)), 8.0);
        assert!((space_limit_bits_per_key(0.01) - 6.6439).abs() < 1e-4);
        assert_eq!(space_limit_bits_per_key(1.0), 0.0);
        assert_eq!(space_limit_bits_per_key(0.0), f64::INFINITY);
        // A cache-local bloom at 10 bits/key is 1.50× the limit for its rate; the binary fuse
        // filter's 9.04 bits/key at 2^-8 is 1.13×.
        let bloom = cache_local_fp_rate(10.0, 6, 512);
        let ratio = 10.0 / space_limit_bits_per_key(bloom);
        assert!((1.45..1.55).contains(&ratio), "{ratio}");
    }
}

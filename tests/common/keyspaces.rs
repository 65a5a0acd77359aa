//! Helpers of the keyspace tests: a keyspace's contents, its tables, and the error its dropped
//! handles give.

use std::collections::BTreeMap;
use std::fmt::Debug;

use siftdb::{Error, Keyspace, Result, NUM_LEVELS};

/// One keyspace's contents, read with a scan.
pub fn contents(ks: &Keyspace) -> BTreeMap<Vec<u8>, Vec<u8>> {
    ks.iter()
        .map(|r| r.unwrap_or_else(|e| panic!("scan of keyspace {}: {e}", ks.name())))
        .collect()
}

/// A keyspace's tables per level, L0 first (`siftdb.num-files-at-level<N>`).
pub fn tables_per_level(ks: &Keyspace) -> Vec<usize> {
    (0..NUM_LEVELS)
        .map(|l| {
            ks.property(&format!("siftdb.num-files-at-level{l}"))
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

/// Asserts that `r` is `Error::InvalidArgument` whose message names the keyspace `name`.
#[track_caller]
pub fn assert_invalid_argument_naming<T: Debug>(r: Result<T>, name: &str, what: &str) {
    match r {
        Err(Error::InvalidArgument(message)) => assert!(
            message.contains(name),
            "{what}: the error does not name keyspace {name}: {message}"
        ),
        other => panic!("{what}: expected Error::InvalidArgument naming {name}, got {other:?}"),
    }
}

/// The bytes of the WAL files (`*.log`) in `dir`.
pub fn wal_bytes(dir: &std::path::Path) -> u64 {
    super::files_with_ext(dir, "log")
        .iter()
        // A WAL removed between the listing and the stat counts for nothing.
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

//! The store's identity: 16 random bytes chosen when the store is created, kept in the MANIFEST
//! and written into every table's properties. A table file whose identity is not its store's (a
//! file copied in from another store under a known name) is refused as corrupt rather than read.
//! And the keyspace every store has: its name and the id the WAL and the MANIFEST give it.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::SystemTime;

/// A store's identity.
pub(crate) type StoreId = [u8; 16];

/// The name of the keyspace every store has, which `Db`'s own reads and writes act on.
pub const DEFAULT_KEYSPACE: &str = "default";

/// The id of the keyspace every store has (the WAL and the MANIFEST name keyspaces by id), and
/// the one a MANIFEST written before keyspaces existed holds.
pub(crate) const DEFAULT_KEYSPACE_ID: u32 = 0;

/// A new identity. `RandomState` is seeded from the operating system's randomness once per
/// process and varied per call; the time and process id are mixed in for good measure.
pub(crate) fn new_store_id() -> StoreId {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut id = [0u8; 16];
    for (i, half) in id.chunks_mut(8).enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.write_usize(i);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_differ() {
        let ids: std::collections::HashSet<StoreId> = (0..1000).map(|_| new_store_id()).collect();
        assert_eq!(ids.len(), 1000);
    }
}

//! The record log's constants and fragment checksum, shared by the writer and the reader. The
//! format is described in `docs/log_format.md`.

/// The log is laid out in blocks of this many bytes; no fragment crosses a block boundary.
pub(crate) const BLOCK_SIZE: usize = 32 * 1024;

/// Bytes in a fragment header: crc32 (4) + payload length (2) + type (1).
pub(crate) const HEADER_SIZE: usize = 7;

/// The largest payload one fragment can carry: a whole block minus its header.
pub(crate) const MAX_FRAGMENT_PAYLOAD: usize = BLOCK_SIZE - HEADER_SIZE;

// The payload length is stored in a u16, so a block-sized fragment must fit in one.
const _: () = assert!(MAX_FRAGMENT_PAYLOAD <= u16::MAX as usize);

/// Fragment type: a whole record in one fragment.
pub(crate) const FULL: u8 = 1;
/// Fragment type: the first piece of a record that continues in later fragments.
pub(crate) const FIRST: u8 = 2;
/// Fragment type: an inner piece of a record (neither first nor last).
pub(crate) const MIDDLE: u8 = 3;
/// Fragment type: the final piece of a record begun by a [`FIRST`] fragment.
pub(crate) const LAST: u8 = 4;

/// The checksum stored in a fragment header: crc32 over the type byte, then the payload.
pub(crate) fn fragment_crc(kind: u8, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&[kind]);
    hasher.update(payload);
    hasher.finalize()
}

//! Helpers shared by the whole-store tests that take a table file apart by hand: they read the
//! format of DESIGN.md directly (not through the crate), so a test can aim at one region.

/// A varint at `*pos` of a pristine file, advancing `*pos`.
pub fn varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
    }
    panic!("bad varint in a pristine table");
}

/// A block handle: (offset, size of the contents, trailer excluded).
pub fn handle(b: &[u8]) -> (usize, usize) {
    let mut p = 0;
    let offset = varint(b, &mut p);
    let size = varint(b, &mut p);
    (offset as usize, size as usize)
}

/// The (key, value) entries of an uncompressed block.
pub fn block_entries(block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let n = block.len();
    let restarts = u32::from_le_bytes(block[n - 4..].try_into().unwrap()) as usize;
    let end = n - 4 - 4 * restarts;
    let (mut p, mut key, mut out) = (0, Vec::new(), Vec::new());
    while p < end {
        let shared = varint(block, &mut p) as usize;
        let unshared = varint(block, &mut p) as usize;
        let vlen = varint(block, &mut p) as usize;
        key.truncate(shared);
        key.extend_from_slice(&block[p..p + unshared]);
        p += unshared;
        out.push((key.clone(), block[p..p + vlen].to_vec()));
        p += vlen;
    }
    out
}

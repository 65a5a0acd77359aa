//! Little-endian fixed-width integers and LEB128 varints, the two integer encodings of every file.

/// Appends `v` as 4 little-endian bytes.
pub(crate) fn put_fixed32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
pub(crate) fn put_fixed64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as a varint (7 bits a byte, low first, high bit = more follows).
pub(crate) fn put_varint64(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends a varint length followed by the bytes.
pub(crate) fn put_length_prefixed(buf: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

/// Reads a little-endian u32 at `at`, or `None` if the slice is too short.
pub(crate) fn fixed32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Reads a little-endian u64 at `at`, or `None` if the slice is too short.
pub(crate) fn fixed64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

/// A cursor over encoded bytes. Every read returns `None` on a short or malformed input, which
/// callers turn into `Error::Corruption` naming their file.
#[derive(Debug, Clone)]
pub(crate) struct Decoder<'a> {
    rest: &'a [u8],
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Decoder { rest: bytes }
    }

    /// The bytes not read yet.
    pub(crate) fn remaining(&self) -> &'a [u8] {
        self.rest
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    #[inline]
    pub(crate) fn varint64(&mut self) -> Option<u64> {
        // One byte is the common case (lengths under 128).
        if let Some((&b, rest)) = self.rest.split_first()
            && b < 0x80
        {
            self.rest = rest;
            return Some(u64::from(b));
        }
        let mut v: u64 = 0;
        for (i, &b) in self.rest.iter().enumerate().take(10) {
            let bits = u64::from(b & 0x7f);
            // The tenth byte may carry only the top bit of a u64.
            if i == 9 && b > 1 {
                return None;
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                self.rest = &self.rest[i + 1..];
                return Some(v);
            }
        }
        None
    }

    pub(crate) fn varint32(&mut self) -> Option<u32> {
        u32::try_from(self.varint64()?).ok()
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(b)
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.rest.len() {
            return None;
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(head)
    }

    pub(crate) fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint64()?).ok()?;
        self.bytes(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_width() {
        let values = [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ];
        let mut buf = Vec::new();
        for &v in &values {
            put_varint64(&mut buf, v);
        }
        let mut d = Decoder::new(&buf);
        for &v in &values {
            assert_eq!(d.varint64(), Some(v));
        }
        assert!(d.is_empty());
    }

    #[test]
    fn truncated_and_overlong_varints_are_rejected() {
        let mut buf = Vec::new();
        put_varint64(&mut buf, 1 << 40);
        assert_eq!(Decoder::new(&buf[..buf.len() - 1]).varint64(), None);
        assert_eq!(Decoder::new(&[0xff; 11]).varint64(), None);
        assert_eq!(
            Decoder::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]).varint32(),
            Some(u32::MAX)
        );
        assert_eq!(
            Decoder::new(&[0xff, 0xff, 0xff, 0xff, 0x7f]).varint32(),
            None
        );
        let mut big = Vec::new();
        put_varint64(&mut big, u64::from(u32::MAX) + 1);
        assert_eq!(Decoder::new(&big).varint32(), None);
    }

    #[test]
    fn fixed_and_length_prefixed_round_trip() {
        let mut buf = Vec::new();
        put_fixed32(&mut buf, 0xdead_beef);
        put_fixed64(&mut buf, 0x0123_4567_89ab_cdef);
        put_length_prefixed(&mut buf, b"hello");
        assert_eq!(fixed32_at(&buf, 0), Some(0xdead_beef));
        assert_eq!(fixed64_at(&buf, 4), Some(0x0123_4567_89ab_cdef));
        assert_eq!(fixed64_at(&buf, buf.len() - 7), None);
        let mut d = Decoder::new(&buf[12..]);
        assert_eq!(d.length_prefixed(), Some(&b"hello"[..]));
        assert_eq!(d.u8(), None);
    }
}

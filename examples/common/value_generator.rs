//! Values as db_bench makes them, for the examples that write users' kind of data.

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

/// db_bench's value generator: a buffer of at least 1 MiB (and at least one value) made of
/// 100-byte pieces, each `ratio` × 100 random bytes repeated to fill it; values are cut from it
/// one after another, from the start again at its end.
pub struct ValueGenerator {
    data: Vec<u8>,
    pos: usize,
}

impl ValueGenerator {
    /// Values of about `value_size` bytes that compress to about `ratio`, from `seed`.
    pub fn new(ratio: f64, value_size: usize, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let len = value_size.max(1 << 20);
        let random = ((100.0 * ratio) as usize).clamp(1, 100);
        let mut data = Vec::with_capacity(len + 100);
        let mut piece = vec![0u8; random];
        while data.len() < len {
            rng.fill_bytes(&mut piece);
            data.extend(piece.iter().cycle().take(100));
        }
        ValueGenerator { data, pos: 0 }
    }

    /// The next `len` bytes.
    pub fn next(&mut self, len: usize) -> &[u8] {
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        self.pos += len;
        &self.data[self.pos - len..self.pos]
    }
}

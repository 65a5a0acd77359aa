//! The keys of the workload runner's and the comparison harness's short-scan runs, and the
//! ranges they scan. Three formats:
//! - `binary`: a fixed head (`siftkey:`, cut or repeated to the key size less 8) and a 64-bit
//!   number, big-endian; key `n`'s number is a bijective scramble of `n`, so keys spread over
//!   all numbers.
//! - `tenants`: a tenant id of the key size less 8 bytes (a scramble of the tenant's number, so
//!   tenants differ in their first byte) and an 8-byte big-endian id below 2^40; key `n` belongs
//!   to tenant `(n / 2) mod T`, and keys `2i` and `2i + 1` are neighbouring ids of one tenant.
//! - `strings`: `user:<id>:<field>`, the id a decimal below 10^12 without padding, the field
//!   one of six names of 4 to 10 letters; keys `2i` are three fields of each user (`name`,
//!   `address`, `last_login`), keys `2i + 1` the user's three others.
//!
//! Key `n` is present when `n` is even. A range "of width `w`" starting at a string `a` is `[a,
//! a + w − 1]`, where `+` adds to the number the last 8 bytes of `a` (all of them if fewer) form:
//! the next `w` keys of `a`'s length and leading bytes. For `binary` and `tenants` that is `w`
//! numbers or ids; for `strings`, `w` values of the key's last bytes.

use rand::Rng;

/// The formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Binary,
    Tenants,
    Strings,
}

/// How a run's keys are made.
#[derive(Clone, Copy, Debug)]
pub struct Keys {
    format: Format,
    /// Bytes per key (`binary`, `tenants`).
    size: usize,
    /// Tenants (`tenants`).
    tenants: u64,
}

/// The head of `binary` keys, cut or repeated to length.
const BINARY_HEAD: &[u8] = b"siftkey:";

/// The fields of `strings` keys: present keys have the even ones, absent keys the odd ones.
const FIELDS: [&str; 6] = ["name", "email", "address", "phone", "last_login", "plan"];

/// `strings` ids are below this.
const STRING_IDS: u64 = 1_000_000_000_000;

/// A bijection of the 64-bit numbers (splitmix64's finaliser), spreading key numbers over them.
pub fn scramble(n: u64) -> u64 {
    let mut z = n;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A bijection of the numbers below 2^39: multiplications by odd numbers and xor-shifts, each a
/// bijection of the numbers below 2^39.
fn scramble39(n: u64) -> u64 {
    const MASK: u64 = (1 << 39) - 1;
    let mut z = n & MASK;
    z = z.wrapping_mul(0x9e37_79b9_7f4a_7c15) & MASK;
    z ^= z >> 19;
    z = z.wrapping_mul(0xbf58_476d_1ce4_e5b9) & MASK;
    z ^ (z >> 20)
}

impl Keys {
    /// `binary` keys of `size` bytes (at least 9).
    pub fn binary(size: usize) -> Keys {
        Keys {
            format: Format::Binary,
            size,
            tenants: 1,
        }
    }

    /// `tenants` keys of `size` bytes (at least 9) for `tenants` tenants (at least 1).
    pub fn tenants(size: usize, tenants: u64) -> Keys {
        Keys {
            format: Format::Tenants,
            size,
            tenants: tenants.max(1),
        }
    }

    /// `strings` keys.
    pub fn strings() -> Keys {
        Keys {
            format: Format::Strings,
            size: 0,
            tenants: 1,
        }
    }

    /// Key `n`, into `buf`.
    pub fn key(&self, n: u64, buf: &mut Vec<u8>) {
        buf.clear();
        match self.format {
            Format::Binary => self.binary_key(scramble(n), buf),
            Format::Tenants => {
                let m = n / 2;
                let id = scramble39(m / self.tenants) * 2 + (n & 1);
                self.tenant_key(m % self.tenants, id, buf);
            }
            Format::Strings => {
                let m = n / 2;
                let field = 2 * (m % 3) as usize + (n & 1) as usize;
                Self::string_key(scramble(m / 3) % STRING_IDS, field, buf);
            }
        }
    }

    /// A string of the format drawn anywhere in its space (it may be a key).
    pub fn anywhere(&self, rng: &mut impl Rng, buf: &mut Vec<u8>) {
        buf.clear();
        match self.format {
            Format::Binary => self.binary_key(rng.r#gen(), buf),
            Format::Tenants => {
                let t = rng.gen_range(0..self.tenants);
                self.tenant_key(t, rng.gen_range(0..1 << 40), buf);
            }
            Format::Strings => Self::string_key(
                rng.gen_range(0..STRING_IDS),
                rng.gen_range(0..FIELDS.len()),
                buf,
            ),
        }
    }

    fn binary_key(&self, x: u64, buf: &mut Vec<u8>) {
        buf.extend(BINARY_HEAD.iter().cycle().take(self.size - 8));
        buf.extend_from_slice(&x.to_be_bytes());
    }

    fn tenant_key(&self, tenant: u64, id: u64, buf: &mut Vec<u8>) {
        let head = (self.size - 8).min(8);
        buf.resize(self.size - 8 - head, 0);
        buf.extend_from_slice(&scramble(tenant + 1).to_be_bytes()[..head]);
        buf.extend_from_slice(&id.to_be_bytes());
    }

    fn string_key(id: u64, field: usize, buf: &mut Vec<u8>) {
        use std::io::Write;
        let _ = write!(buf, "user:{id}:{}", FIELDS[field]);
    }
}

/// `key` plus `n` (see the module documentation), at most all `0xff`, into `out`.
pub fn plus(key: &[u8], n: u64, out: &mut Vec<u8>) {
    shift(key, out, |x, max| x.saturating_add(n).min(max));
}

/// `key` less `n`, at least all zeros, into `out`.
pub fn minus(key: &[u8], n: u64, out: &mut Vec<u8>) {
    shift(key, out, |x, _| x.saturating_sub(n));
}

fn shift(key: &[u8], out: &mut Vec<u8>, f: impl Fn(u64, u64) -> u64) {
    let cut = key.len().saturating_sub(8);
    let tail = key.len() - cut;
    let mut bytes = [0u8; 8];
    bytes[8 - tail..].copy_from_slice(&key[cut..]);
    let max = match tail {
        8 => u64::MAX,
        t => (1 << (8 * t)) - 1,
    };
    let x = f(u64::from_be_bytes(bytes), max);
    out.clear();
    out.extend_from_slice(&key[..cut]);
    out.extend_from_slice(&x.to_be_bytes()[8 - tail..]);
}

//! The built-in merge operators, which are also examples of the trait: [`U64Add`] (counters) and
//! [`Append`] (lists).

use super::MergeOperator;

/// Adds little-endian `u64`s, wrapping on overflow: a counter that takes increments with no
/// read. A missing value counts as 0. An operand or value that is not 8 bytes is refused (the
/// read returns `Error::Corruption`), never a panic.
///
/// ```
/// use std::sync::Arc;
/// use siftdb::{Db, Options, U64Add};
///
/// # fn main() -> siftdb::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default().merge_operator(Arc::new(U64Add)))?;
/// db.put("hits", 40u64.to_le_bytes())?;
/// db.merge("hits", 2u64.to_le_bytes())?;
/// assert_eq!(db.get("hits")?, Some(42u64.to_le_bytes().to_vec()));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct U64Add;

/// `bytes` as a little-endian `u64`, if they are 8.
fn le_u64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// The wrapping sum of `operands`, each 8 little-endian bytes.
fn sum(start: u64, operands: &[&[u8]]) -> Option<u64> {
    operands
        .iter()
        .try_fold(start, |acc, op| Some(acc.wrapping_add(le_u64(op)?)))
}

impl MergeOperator for U64Add {
    fn name(&self) -> &str {
        "siftdb.U64Add"
    }

    fn full_merge(&self, _: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let start = match existing {
            Some(v) => le_u64(v)?,
            None => 0,
        };
        Some(sum(start, operands)?.to_le_bytes().to_vec())
    }

    fn partial_merge(&self, _: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        Some(sum(0, operands)?.to_le_bytes().to_vec())
    }
}

/// Appends each operand to the value, `separator` between them (none before the first when
/// there is no value): a list that takes new items with no read.
///
/// ```
/// use std::sync::Arc;
/// use siftdb::{Append, Db, Options};
///
/// # fn main() -> siftdb::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default().merge_operator(Arc::new(Append::new(","))))?;
/// db.merge("tags", "red")?;
/// db.merge("tags", "blue")?;
/// assert_eq!(db.get("tags")?, Some(b"red,blue".to_vec()));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Append {
    separator: Vec<u8>,
    /// `siftdb.Append` and the separator: a store reopened with another separator is refused.
    name: String,
}

impl Append {
    /// An operator joining operands with `separator` (which may be empty).
    pub fn new(separator: impl AsRef<[u8]>) -> Append {
        let separator = separator.as_ref().to_vec();
        let hex: String = separator.iter().map(|b| format!("{b:02x}")).collect();
        Append {
            name: format!("siftdb.Append.{hex}"),
            separator,
        }
    }

    fn join<'a>(&self, parts: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, p) in parts.enumerate() {
            if i > 0 {
                out.extend_from_slice(&self.separator);
            }
            out.extend_from_slice(p);
        }
        out
    }
}

impl MergeOperator for Append {
    fn name(&self) -> &str {
        &self.name
    }

    fn full_merge(&self, _: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        Some(self.join(existing.into_iter().chain(operands.iter().copied())))
    }

    fn partial_merge(&self, _: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        Some(self.join(operands.iter().copied()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(n: u64) -> [u8; 8] {
        n.to_le_bytes()
    }

    #[test]
    fn u64_add_sums_wrapping_and_refuses_what_is_not_eight_bytes() {
        let (one, two, max) = (le(1), le(2), le(u64::MAX));
        assert_eq!(
            U64Add.full_merge(b"k", None, &[&one, &two]),
            Some(le(3).to_vec())
        );
        assert_eq!(
            U64Add.full_merge(b"k", Some(&two), &[&one]),
            Some(le(3).to_vec())
        );
        assert_eq!(
            U64Add.full_merge(b"k", Some(&max), &[&two]),
            Some(le(1).to_vec())
        );
        assert_eq!(U64Add.full_merge(b"k", None, &[b"short"]), None);
        assert_eq!(U64Add.full_merge(b"k", Some(b"x"), &[&one]), None);
        assert_eq!(
            U64Add.partial_merge(b"k", &[&one, &two]),
            Some(le(3).to_vec())
        );
        assert_eq!(U64Add.partial_merge(b"k", &[&one, b""]), None);
        // A partial merge then a full one reads as the full one alone.
        let ops: [&[u8]; 3] = [&le(5), &le(7), &le(11)];
        let partial = U64Add.partial_merge(b"k", &ops[1..]).unwrap();
        assert_eq!(
            U64Add.full_merge(b"k", Some(&le(1)), &[ops[0], &partial]),
            U64Add.full_merge(b"k", Some(&le(1)), &ops)
        );
    }

    #[test]
    fn append_joins_with_its_separator_and_names_it() {
        let a = Append::new(", ");
        assert_eq!(a.full_merge(b"k", None, &[b"x"]), Some(b"x".to_vec()));
        assert_eq!(
            a.full_merge(b"k", Some(b"w"), &[b"x", b"y"]),
            Some(b"w, x, y".to_vec())
        );
        let partial = a.partial_merge(b"k", &[b"x", b"y"]).unwrap();
        assert_eq!(
            a.full_merge(b"k", Some(b"w"), &[&partial]),
            Some(b"w, x, y".to_vec())
        );
        assert_eq!(
            Append::new("").full_merge(b"k", Some(b"a"), &[b"b"]),
            Some(b"ab".to_vec())
        );
        assert_eq!(a.name(), "siftdb.Append.2c20");
        assert_ne!(a.name(), Append::new(",").name());
    }
}

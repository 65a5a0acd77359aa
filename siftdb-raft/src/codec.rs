//! Values in the store: log keys, serde values, and the errors openraft is handed.

use std::path::Path;

use openraft::{ErrorSubject, ErrorVerb, StorageError, StorageIOError};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::NodeId;

/// The key of log entry `index`: 8 big-endian bytes, so key order is index order.
pub(crate) fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// The smallest key after `index_key(index)`: a range ending here includes `index`.
pub(crate) fn after_index(index: u64) -> Vec<u8> {
    let mut key = index_key(index).to_vec();
    key.push(0);
    key
}

/// A key after every log key (they are 8 bytes).
pub(crate) const PAST_LAST_INDEX: [u8; 9] = [0xFF; 9];

/// The index a log key names.
pub(crate) fn key_index(key: &[u8], file: &Path) -> Result<u64, siftdb::Error> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| siftdb::Error::Corruption {
        file: file.to_path_buf(),
        what: format!("a log key of {} bytes, not 8", key.len()),
    })?;
    Ok(u64::from_be_bytes(bytes))
}

/// `value` as postcard bytes.
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, siftdb::Error> {
    postcard::to_stdvec(value)
        .map_err(|e| siftdb::Error::InvalidArgument(format!("cannot encode a value: {e}")))
}

/// Postcard bytes read from `file` (the store, or a snapshot file) as a `T`; `what` names the
/// value in the error.
pub(crate) fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    file: &Path,
    what: &str,
) -> Result<T, siftdb::Error> {
    postcard::from_bytes(bytes).map_err(|e| siftdb::Error::Corruption {
        file: file.to_path_buf(),
        what: format!("{what} does not decode: {e}"),
    })
}

/// A siftdb error as the storage error openraft expects, about `subject` while doing `verb`.
pub(crate) fn storage_error(
    subject: ErrorSubject<NodeId>,
    verb: ErrorVerb,
    e: siftdb::Error,
) -> StorageError<NodeId> {
    StorageIOError::new(subject, verb, openraft::AnyError::new(&e)).into()
}

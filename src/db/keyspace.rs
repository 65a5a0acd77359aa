//! Keyspaces: several ordered maps in one store. Each has its own memtable, tables, levels and
//! options (`tree.rs`); all share the WAL, so a [`WriteBatch`](crate::WriteBatch) writes to
//! several atomically. This file holds the handle and the store's methods that create, list and
//! drop keyspaces.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::tree::SuperVersion;
use super::tree::{Tree, TreeState};
use super::version::edit::{KeyspaceRecord, VersionEdit};
use super::version::keyspace_options::{changed_options, describe, restore, BUILT_IN_POLICIES};
use super::{Db, DbInner};
use crate::clock::ttl_seconds;
use crate::error::{Error, Result};
use crate::filter::PolicyRegistry;
use crate::key_range::KeyRange;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::stats::{Statistics, Stats};
use crate::store_id::{StoreId, DEFAULT_KEYSPACE, DEFAULT_KEYSPACE_ID};
use crate::write_batch::{Target, WriteBatch};

/// The longest keyspace name, in bytes.
pub const MAX_KEYSPACE_NAME_BYTES: usize = 255;

/// A handle to one keyspace of a store: an ordered map of its own, with its own filters, codecs
/// and sizes, beside the store's other keyspaces. Get one from [`Db::keyspace`] or
/// [`Db::keyspace_with`].
///
/// It is a cheap `Clone + Send + Sync` handle with the reads and writes of [`Db`] (which act on
/// the keyspace named `"default"`): `put`, `get`, `delete`, `multi_get`, `scan`, `scan_prefix`,
/// `iter`, `cursor`, their `_at(&snapshot)` forms and the rest, through [`Deref`] to a `Db`
/// handle whose reads and writes act on this keyspace. A [`Db::snapshot`] taken from any handle
/// is one consistent view of every keyspace, and a [`WriteBatch`](crate::WriteBatch) with
/// [`put_in`](crate::WriteBatch::put_in) writes to several atomically. A batch written through a
/// keyspace's handle (`users.write(batch)`) puts its entries that name no keyspace
/// ([`put`](crate::WriteBatch::put), …) in that keyspace.
///
/// Like a `Db` clone, it keeps the store open while it lives. Once its keyspace is dropped
/// ([`Db::drop_keyspace`]), its reads and writes fail with `Error::InvalidArgument` naming it.
///
/// ```
/// use siftdb::{Db, Filter, Options, PrefixExtractor, WriteBatch};
///
/// # fn main() -> siftdb::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// let users = db.keyspace("users")?; // the store's options
/// let messages = db.keyspace_with(
///     "messages",
///     Options::default().prefix_extractor(PrefixExtractor::fixed(8)).filter(Filter::full(12.0)),
/// )?;
/// let mut batch = WriteBatch::new();
/// batch.put_in(&users, b"ada", b"Ada Lovelace");
/// batch.put_in(&messages, b"conv0001:0001", b"hello");
/// db.write(batch)?; // both or, after a crash, neither
/// assert_eq!(users.get(b"ada")?, Some(b"Ada Lovelace".to_vec()));
/// assert_eq!(messages.scan_prefix(b"conv0001").count(), 1);
/// assert_eq!(db.get(b"ada")?, None); // the default keyspace is another map
/// drop((users, messages, db));
///
/// let db = Db::open(dir.path(), Options::default())?; // finds both, with their options
/// assert_eq!(db.keyspace_names(), ["default", "messages", "users"]);
/// assert_eq!(db.keyspace("messages")?.get(b"conv0001:0001")?, Some(b"hello".to_vec()));
/// # Ok(())
/// # }
/// ```
///
/// [`Deref`]: std::ops::Deref
#[derive(Clone)]
pub struct Keyspace {
    db: Db,
}

impl Keyspace {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.db.tree.name
    }

    /// This keyspace's counters: its reads, its filters' answers by level and layout, its
    /// flushes and compactions. [`Db::statistics`] has the store's totals.
    pub fn statistics(&self) -> Statistics {
        self.db.tree.stats.snapshot()
    }

    pub(crate) fn id(&self) -> u32 {
        self.db.tree.id
    }

    pub(crate) fn store_id(&self) -> StoreId {
        self.db.inner.store_id
    }
}

impl std::ops::Deref for Keyspace {
    type Target = Db;

    /// A `Db` handle whose reads and writes act on this keyspace.
    fn deref(&self) -> &Db {
        &self.db
    }
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keyspace({})", self.name())
    }
}

impl Db {
    /// The keyspace `name`, created with the options this store was opened with if it does not
    /// exist. An existing keyspace opens with the options it was created with: the store records
    /// them, so a reopened store finds every keyspace without being told.
    ///
    /// # Errors
    /// As [`keyspace_with`](Db::keyspace_with).
    pub fn keyspace(&self, name: &str) -> Result<Keyspace> {
        self.open_keyspace(name, None)
    }

    /// The keyspace `name`, created with `options` if it does not exist: its filter (layout,
    /// policy, bits per key, allocation), prefix extractor, blocks, codecs, memtable and level
    /// sizes, compaction filter and [`ttl`](Options::ttl). The store-wide fields of `options`
    /// (block cache, open files, file system, clock, `create_if_missing`) are the store's and are
    /// not looked at. The store records the keyspace's options; a filter policy, prefix extractor
    /// or compaction filter of your own is recorded by name, and a reopened store finds it in the
    /// options it is opened with (otherwise the keyspace goes without it, and a warning is
    /// logged).
    ///
    /// # Errors
    /// - `Error::InvalidArgument` for an empty name, a name over
    ///   [`MAX_KEYSPACE_NAME_BYTES`], options out of range, or an existing keyspace whose
    ///   recorded options differ from `options`;
    /// - `Error::ReadOnly` to create a keyspace in a store opened read-only;
    /// - `Error::Io` if the MANIFEST edit cannot be written; `Error::Closed` once the store is
    ///   closed; `Error::Background` after a background failure.
    pub fn keyspace_with(&self, name: &str, options: Options) -> Result<Keyspace> {
        self.open_keyspace(name, Some(options))
    }

    /// The default keyspace, the one `Db`'s own reads and writes act on, as a [`Keyspace`].
    pub fn default_keyspace(&self) -> Keyspace {
        Keyspace {
            db: self.with_tree(Arc::clone(&self.inner.default_tree)),
        }
    }

    /// The names of every keyspace: `"default"` first, then the others in name order.
    pub fn keyspace_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .inner
            .trees()
            .iter()
            .filter(|t| t.id != DEFAULT_KEYSPACE_ID)
            .map(|t| t.name.clone())
            .collect();
        names.sort();
        names.insert(0, DEFAULT_KEYSPACE.to_string());
        names
    }

    /// Drops keyspace `name` and all it holds. Once this returns `Ok`, the keyspace is gone, now
    /// and after any crash; its tables are removed from disk once no scan or cursor still reads
    /// them (or, after a crash, at the next open), and its writes still in WALs are never
    /// replayed. Its handles fail every call from then on. A keyspace created later with the same
    /// name is a new, empty one.
    ///
    /// # Errors
    /// - `Error::InvalidArgument` for the default keyspace or a name that is not a keyspace;
    /// - `Error::ReadOnly` in a store opened read-only; `Error::Io` if the MANIFEST edit cannot
    ///   be written (the keyspace then stays); `Error::Closed`, `Error::Background` as for writes.
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        let inner = &self.inner;
        inner.check_background_error()?;
        if name == DEFAULT_KEYSPACE {
            return Err(Error::InvalidArgument(
                "the default keyspace cannot be dropped".into(),
            ));
        }
        // No commit group is in flight while the keyspace goes: a group either wrote to it
        // before, or finds it gone.
        let _wal = inner.wal.lock();
        inner.check_open()?;
        let mut manifest = inner.manifest.lock();
        let tree = inner
            .tree_named(name)
            .ok_or_else(|| Error::InvalidArgument(format!("no keyspace {name}")))?;
        let edit = VersionEdit {
            dropped: Some(tree.id),
            ..Default::default()
        };
        manifest.log_and_apply(edit, inner.next_file.load(Ordering::SeqCst))?;
        tree.mark_dropped();
        inner
            .dropped_names
            .lock()
            .insert(tree.id, tree.name.clone());
        let removed = inner.state.lock().trees.remove(&tree.id);
        drop(manifest);
        if let Some(removed) = removed {
            for f in removed.sv.version.levels.iter().flatten() {
                f.mark_obsolete(Arc::clone(&inner.retire));
            }
        }
        // Handles of the dropped keyspace keep its tree: let go of its memtables and tables.
        let empty = SuperVersion::first(Arc::new(MemTable::new(0)), Default::default());
        drop(std::mem::replace(
            &mut *tree.current.write(),
            Arc::new(empty),
        ));
        let mut gone = tree.stats.snapshot();
        gone.forget_filter_memory();
        let mut dropped = inner.dropped_stats.lock();
        match dropped.as_mut() {
            Some(d) => d.merge(&gone),
            None => *dropped = Some(gone),
        }
        drop(dropped);
        inner.changed.notify_all();
        log::info!("siftdb {}: dropped keyspace {name}", inner.dir.display());
        Ok(())
    }

    /// Another handle to this store, acting on `tree`.
    fn with_tree(&self, tree: Arc<Tree>) -> Db {
        self.inner.lifecycle.handles.fetch_add(1, Ordering::Relaxed);
        Db {
            inner: Arc::clone(&self.inner),
            tree,
        }
    }

    fn open_keyspace(&self, name: &str, options: Option<Options>) -> Result<Keyspace> {
        let inner = &self.inner;
        inner.check_open()?;
        check_name(name)?;
        if let Some(o) = &options {
            o.validate()?;
        }
        if let Some(tree) = inner.tree_named(name) {
            if let Some(o) = options.as_ref().filter(|_| tree.id != DEFAULT_KEYSPACE_ID) {
                let changed = changed_options(&describe(&tree.options()), &tree.record_of(o));
                if !changed.is_empty() {
                    return Err(Error::InvalidArgument(format!(
                        "keyspace {name} exists with other options: {} (open it with \
                         Db::keyspace, or change them with Keyspace::set_options)",
                        changed.join(", ")
                    )));
                }
            }
            return Ok(Keyspace {
                db: self.with_tree(tree),
            });
        }
        let wanted = options.is_some();
        inner.check_background_error()?;
        let options = options.unwrap_or_else(|| inner.options.clone());
        let mut manifest = inner.manifest.lock();
        // Another thread may have created it meanwhile.
        if inner.tree_named(name).is_some() {
            drop(manifest);
            return self.open_keyspace(name, wanted.then_some(options));
        }
        let (record, options) = inner.keyspace_options(name, &options)?;
        let id = manifest.counters.next_keyspace_id;
        let log = inner.current_log.load(Ordering::Acquire);
        let edit = VersionEdit {
            keyspace: id,
            keyspace_log_number: Some(log),
            created: Some(KeyspaceRecord {
                id,
                name: name.to_string(),
                options: record,
            }),
            ..Default::default()
        };
        let version = manifest.log_and_apply(edit, inner.next_file.load(Ordering::SeqCst))?;
        let mem = Arc::new(MemTable::for_buffer(log, options.write_buffer_size));
        let tree = make_tree(&inner.tables, id, name.to_string(), options, mem, version);
        inner.state.lock().trees.insert(
            id,
            TreeState {
                tree: Arc::clone(&tree),
                sv: tree.super_version(),
            },
        );
        drop(manifest);
        log::info!("siftdb {}: created keyspace {name}", inner.dir.display());
        Ok(Keyspace {
            db: self.with_tree(tree),
        })
    }
}

impl Keyspace {
    /// Changes this keyspace's options to `options`' keyspace fields (those
    /// [`Db::keyspace_with`] takes; the store-wide ones are not looked at). The store records
    /// them at once, so a reopened store finds the keyspace with them; they apply from the
    /// keyspace's next write, flush and compaction on (tables keep the filter and codec they
    /// were written with, and an entry the expiry time it was written with: a new
    /// [`ttl`](Options::ttl) applies to the puts that follow).
    ///
    /// The default keyspace takes the options [`Db::open`] is given: changed here, they last
    /// until the store closes. A keyspace's prefix extractor cannot change (its tables' prefix
    /// filters are read with it), nor its filter to a policy of your own other than its own, nor
    /// the TTL of a keyspace created with one by an older version of the store (its values
    /// carry their write time, and expire by it).
    ///
    /// ```
    /// use std::time::Duration;
    /// use siftdb::{Db, Options};
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let sessions = db.keyspace("sessions")?; // the store's options: no TTL
    /// sessions.set_options(Options::default().ttl(Duration::from_secs(1800)))?;
    /// sessions.put("s1", "ada")?; // expires in thirty minutes
    /// drop((sessions, db));
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let same = Options::default().ttl(Duration::from_secs(1800));
    /// assert!(db.keyspace_with("sessions", same).is_ok()); // recorded
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// - `Error::InvalidArgument` for options out of range, or naming an option that cannot
    ///   change; nothing is changed then;
    /// - `Error::ReadOnly` in a store opened read-only; `Error::Io` if the MANIFEST edit cannot
    ///   be written; `Error::Closed`, `Error::Background` as for writes; `Error::InvalidArgument`
    ///   once the keyspace is dropped.
    pub fn set_options(&self, options: Options) -> Result<()> {
        let (inner, tree) = (&self.db.inner, &self.db.tree);
        inner.check_background_error()?;
        options.validate()?;
        let current = tree.options();
        let name = &tree.name;
        let refused = |what: &str| Err(Error::InvalidArgument(format!("keyspace {name}: {what}")));
        let extractor = |o: &Options| o.prefix_extractor.as_ref().map(|p| p.name().to_string());
        if extractor(&options) != extractor(&current) {
            return refused(
                "prefix_extractor cannot change (its tables' prefix filters are read with the \
                 one it has)",
            );
        }
        let policy = |o: &Options| o.filter.policy().map(|p| p.name().to_string());
        if let Some(asked) = policy(&options)
            && !BUILT_IN_POLICIES.contains(&asked.as_str())
            && Some(&asked) != policy(&current).as_ref()
        {
            return refused(&format!(
                "filter cannot change to policy {asked}: its tables are read with the \
                     built-in policies and its own"
            ));
        }
        if tree.write_times && options.ttl.map(ttl_seconds) != current.ttl.map(ttl_seconds) {
            // Another TTL would move the expiry of values already written, and bring back
            // expired ones no compaction has removed yet.
            return refused(
                "ttl cannot change: its values carry their write time (it was created with a \
                 ttl by an older version of the store), which expire by it",
            );
        }
        let mut manifest = inner.manifest.lock();
        tree.check_live()?;
        let (record, new) = inner.keyspace_options(name, &options_as(tree, options))?;
        if record == describe(&tree.options()) {
            return Ok(());
        }
        if tree.id != DEFAULT_KEYSPACE_ID {
            let edit = VersionEdit {
                keyspace: tree.id,
                options: Some(record),
                ..Default::default()
            };
            manifest.log_and_apply(edit, inner.next_file.load(Ordering::SeqCst))?;
        }
        tree.replace_options(new);
        drop(manifest);
        // New triggers or budgets may make a flush or compaction due.
        inner.changed.notify_all();
        log::info!(
            "siftdb {}: changed the options of keyspace {name}",
            inner.dir.display()
        );
        Ok(())
    }
}

/// `options` with `tree`'s value layout (whether plain values carry their write time), which
/// never changes.
fn options_as(tree: &Tree, mut options: Options) -> Options {
    options.write_times = tree.write_times;
    options
}

impl Tree {
    /// The record `options` would make for this keyspace (with its value layout).
    fn record_of(&self, options: &Options) -> String {
        describe(&options_as(self, options.clone()))
    }
}

impl DbInner {
    /// The record and the options of keyspace `name` given `options`: its keyspace fields, the
    /// store's store-wide ones (a policy, extractor or compaction filter of the caller's own is
    /// found in `options` itself).
    ///
    /// # Errors
    /// `Error::InvalidArgument` if the options' record does not restore.
    fn keyspace_options(&self, name: &str, options: &Options) -> Result<(String, Options)> {
        let record = describe(options);
        let mut lookup = self.options.clone();
        lookup.filter = options.filter.clone();
        lookup.prefix_extractor = options.prefix_extractor.clone();
        lookup.compaction_filter = options.compaction_filter.clone();
        lookup.merge_operator = options.merge_operator.clone();
        let options = restore(name, &record, &lookup)?;
        Ok((record, options))
    }

    /// The live tree of the keyspace named `name`.
    pub(crate) fn tree_named(&self, name: &str) -> Option<Arc<Tree>> {
        let st = self.state.lock();
        let t = st.trees.values().find(|t| t.tree.name == name)?;
        Some(Arc::clone(&t.tree))
    }
}

/// A keyspace's tree over `mem` and `version`, with its own counters and a table cache made from
/// `tables` (the store's).
pub(crate) fn make_tree(
    tables: &super::version::table_cache::TableCache,
    id: u32,
    name: String,
    options: Options,
    mem: Arc<MemTable>,
    version: Arc<super::version::Version>,
) -> Arc<Tree> {
    let stats = Arc::new(Stats::new());
    let policies = PolicyRegistry::new(&options.filter, options.prefix_extractor.clone());
    let tables = Arc::new(tables.for_keyspace(Arc::clone(&stats), policies));
    let sv = Arc::new(SuperVersion::first(mem, version));
    Arc::new(Tree::new(id, name, options, stats, tables, sv))
}

/// A keyspace name must be 1 to [`MAX_KEYSPACE_NAME_BYTES`] bytes.
fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_KEYSPACE_NAME_BYTES {
        return Err(Error::InvalidArgument(format!(
            "a keyspace name is 1 to {MAX_KEYSPACE_NAME_BYTES} bytes, not {}",
            name.len()
        )));
    }
    Ok(())
}

/// Where the entries of `keyspace`'s `_in` methods go.
fn target(keyspace: &Keyspace) -> Target {
    Target::In(keyspace.id(), keyspace.store_id())
}

/// The batch methods that name a keyspace, here beside the handle they take.
impl WriteBatch {
    /// Sets `key` to `value` in `keyspace`. One batch may write to any keyspaces of one store:
    /// [`Db::write`](crate::Db::write) applies all of it or, after a crash, none of it, in every
    /// keyspace.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// let (users, names) = (db.keyspace("users")?, db.keyspace("names")?);
    /// let mut batch = siftdb::WriteBatch::new();
    /// batch.put_in(&users, b"u1", b"Ada").put_in(&names, b"Ada", b"u1");
    /// db.write(batch)?;
    /// assert_eq!(names.get(b"Ada")?, Some(b"u1".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn put_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.put_to(target(keyspace), key.as_ref(), value.as_ref())
    }

    /// Removes `key` from `keyspace` (see [`put_in`](Self::put_in)).
    pub fn delete_in(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> &mut Self {
        self.delete_to(target(keyspace), key.as_ref())
    }

    /// [`merge`](Self::merge) into `keyspace` (see [`put_in`](Self::put_in)).
    pub fn merge_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.merge_to(target(keyspace), key.as_ref(), operand.as_ref())
    }

    /// [`put_with_ttl`](Self::put_with_ttl) in `keyspace` (see [`put_in`](Self::put_in)).
    pub fn put_with_ttl_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> &mut Self {
        self.put_with_ttl_to(target(keyspace), key.as_ref(), value.as_ref(), ttl)
    }

    /// [`delete_range`](Self::delete_range) in `keyspace` (see [`put_in`](Self::put_in)).
    pub fn delete_range_in<R: KeyRange>(&mut self, keyspace: &Keyspace, range: R) -> &mut Self {
        self.delete_range_to(target(keyspace), range)
    }
}

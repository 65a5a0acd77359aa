//! A fault-injection layer over the store's real files, for power-cut and I/O-error tests.
//!
//! The store's files stay real files on disk; what the layer adds is a record of what a power cut
//! would keep. It knows, for every file the store wrote through it, which bytes were fsynced and
//! which were only written, and for every name in the directory, which binding was made durable by
//! a directory fsync and which creations, renames and removals came after. A simulated power cut
//! ([`FaultInjector::power_cut`]) rewrites the directory to one state a real machine could come
//! back with: each file's fsynced bytes plus, by the chosen [`PowerCut`], none, a prefix, or a
//! zero-filled stretch of what was written after; and each name as it was at the last directory
//! fsync, as it is now, or as it was in between.
//!
//! The layer can also stop the store at a chosen operation ([`FaultInjector::cut_after`]: that
//! operation and every later one fail, as if the machine had died there; a cut write may leave a
//! prefix of its bytes, as a process killed inside `write(2)` does) and fail one chosen operation
//! with `EIO` without stopping anything else ([`FaultInjector::fail_after`]).
//!
//! The layer stands in for the disk's durability: a followed file's or the directory's fsync is
//! recorded, not made, since the tests cut the power by the layer's record and never for real
//! (a real fsync would only hold every crash loop to the disk's sync latency).
//!
//! One injector follows one directory; files elsewhere pass through untouched. Files that were in
//! the directory when the injector was made count as durable. `LOCK` is not followed. Drop every
//! `Db` using the directory before [`power_cut`](FaultInjector::power_cut), which rewrites files
//! under their feet.
//!
//! Built only with the internal `__fault-injection` feature; not an API.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

/// The kinds of operation the layer sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// Creating a file (or a hard link to one).
    Create,
    /// One `write(2)` to a file.
    Write,
    /// `fdatasync` of a file.
    Sync,
    /// Renaming a file.
    Rename,
    /// Removing a file.
    Remove,
    /// `fsync` of the directory.
    SyncDir,
}

/// One operation: what it was, on which file, from which thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpSite {
    /// The operation.
    pub kind: OpKind,
    /// The file's name in the directory (the directory's own path for `SyncDir`; for a rename,
    /// the source).
    pub file: String,
    /// The name of the thread that made it (`siftdb-flush`, `siftdb-compact`, `siftdb-compact-sub`
    /// for the threads a compaction splits its key range between, or the caller's).
    pub thread: String,
}

impl fmt::Display for OpSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {} on {}", self.kind, self.file, self.thread)
    }
}

/// Which operations a cut or failure counts.
pub type OpFilter = Box<dyn Fn(&OpSite) -> bool + Send + Sync>;

/// What a power cut keeps of the bytes written to a file after its last fsync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsyncedData {
    /// Nothing.
    Drop,
    /// All of them (as after a process crash: the page cache survived).
    Keep,
    /// A prefix of random length.
    KeepPrefix,
    /// A random length of zeros in their place (the file's size reached the disk, its data did
    /// not).
    ZeroFill,
    /// One of the four above, chosen per file.
    Random,
}

/// What a power cut keeps of directory changes (creations, renames, removals) made after the last
/// fsync of the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsyncedNames {
    /// None: every name is as the last directory fsync left it.
    Revert,
    /// All of them.
    Keep,
    /// For each name, one of its states since the last directory fsync, chosen at random.
    Random,
}

/// How a simulated power cut treats what was not made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowerCut {
    /// File contents written after their last fsync.
    pub data: UnsyncedData,
    /// Directory changes after the last directory fsync.
    pub names: UnsyncedNames,
    /// Seeds the random choices.
    pub seed: u64,
}

impl PowerCut {
    /// Random choices for both data and names.
    pub fn random(seed: u64) -> PowerCut {
        PowerCut {
            data: UnsyncedData::Random,
            names: UnsyncedNames::Random,
            seed,
        }
    }

    /// Loses everything that was not fsynced.
    pub fn strict() -> PowerCut {
        PowerCut {
            data: UnsyncedData::Drop,
            names: UnsyncedNames::Revert,
            seed: 0,
        }
    }
}

/// What a power cut did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PowerCutReport {
    /// Files that lost bytes (or had them zero-filled).
    pub files_cut: usize,
    /// Bytes written but lost (or zero-filled).
    pub bytes_lost: u64,
    /// Names whose state went back to an earlier one.
    pub names_reverted: usize,
}

/// The fault-injection layer for one directory (see the module docs). Cloning shares it.
#[derive(Clone)]
pub struct FaultInjector {
    shared: Arc<Shared>,
}

impl fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultInjector({})", self.shared.dir.display())
    }
}

struct Shared {
    dir: PathBuf,
    state: Mutex<State>,
}

/// Why an operation may not go ahead.
enum Refusal {
    /// This operation is the armed cut.
    Cut,
    /// The layer was cut earlier.
    Dead,
    /// An armed one-off failure.
    Injected,
}

impl Refusal {
    fn error(&self) -> io::Error {
        match self {
            Refusal::Cut | Refusal::Dead => {
                io::Error::other("simulated power cut: the machine is down")
            }
            Refusal::Injected => io::Error::from_raw_os_error(5), // EIO
        }
    }
}

struct Arm {
    remaining: u64,
    filter: OpFilter,
}

/// One file's bytes as a power cut sees them. Files are only ever appended to (the store never
/// truncates or overwrites), so the bytes on disk are `synced` followed by `unsynced`.
#[derive(Default)]
struct Inode {
    /// The name it was created under, for reports.
    name: String,
    synced: Vec<u8>,
    unsynced: Vec<u8>,
    /// Open `TrackedFile`s.
    handles: usize,
}

#[derive(Default)]
struct State {
    ops: u64,
    dead: bool,
    cut: Option<Arm>,
    failures: Vec<Arm>,
    cut_site: Option<OpSite>,
    injected: Vec<OpSite>,
    next_inode: u64,
    inodes: HashMap<u64, Inode>,
    /// Names as they are now.
    live: BTreeMap<String, u64>,
    /// Names as the last directory fsync left them.
    durable: BTreeMap<String, u64>,
    /// For each name changed since the last directory fsync, the bindings it had since, in order
    /// (`None`: absent).
    changed: BTreeMap<String, Vec<Option<u64>>>,
}

impl State {
    /// Counts an operation and says whether it may go ahead.
    fn begin(&mut self, kind: OpKind, file: &str) -> Result<(), Refusal> {
        if self.dead {
            return Err(Refusal::Dead);
        }
        self.ops += 1;
        let site = OpSite {
            kind,
            file: file.to_string(),
            thread: std::thread::current()
                .name()
                .unwrap_or("unnamed")
                .to_string(),
        };
        if let Some(arm) = &mut self.cut
            && (arm.filter)(&site)
        {
            if arm.remaining == 0 {
                self.dead = true;
                self.cut = None;
                self.cut_site = Some(site);
                return Err(Refusal::Cut);
            }
            arm.remaining -= 1;
        }
        let mut fire = None;
        for (i, arm) in self.failures.iter_mut().enumerate() {
            if (arm.filter)(&site) {
                if arm.remaining == 0 {
                    fire = Some(i);
                    break;
                }
                arm.remaining -= 1;
            }
        }
        if let Some(i) = fire {
            self.failures.remove(i);
            self.injected.push(site);
            return Err(Refusal::Injected);
        }
        Ok(())
    }

    fn bind(&mut self, name: &str, inode: Option<u64>) {
        match inode {
            Some(id) => {
                self.live.insert(name.to_string(), id);
            }
            None => {
                self.live.remove(name);
            }
        }
        self.changed
            .entry(name.to_string())
            .or_default()
            .push(inode);
    }

    /// Forgets inodes no name can bring back and no handle writes to.
    fn collect_garbage(&mut self) {
        let named: BTreeSet<u64> = self
            .live
            .values()
            .chain(self.durable.values())
            .copied()
            .chain(self.changed.values().flatten().flatten().copied())
            .collect();
        self.inodes
            .retain(|id, inode| inode.handles > 0 || named.contains(id));
    }

    fn new_inode(&mut self, inode: Inode) -> u64 {
        let id = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(id, inode);
        id
    }
}

impl FaultInjector {
    /// Follows directory `dir`, creating it if needed. Files already in it count as durable.
    ///
    /// # Errors
    /// Any failure to create or read the directory.
    pub fn new(dir: impl AsRef<Path>) -> io::Result<FaultInjector> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir)?;
        let injector = FaultInjector {
            shared: Arc::new(Shared {
                dir,
                state: Mutex::new(State::default()),
            }),
        };
        injector.reload()?;
        Ok(injector)
    }

    /// The directory followed.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Operations seen so far (every create, write, sync, rename, remove and directory sync).
    pub fn ops(&self) -> u64 {
        self.shared.state.lock().ops
    }

    /// Arms a cut: of the operations for which `filter` holds, the first `n` go ahead and the next
    /// one fails, and so does every operation after it, until [`revive`](Self::revive) or
    /// [`power_cut`](Self::power_cut). A cut write may leave a prefix of its bytes.
    pub fn cut_after(&self, n: u64, filter: OpFilter) {
        self.shared.state.lock().cut = Some(Arm {
            remaining: n,
            filter,
        });
    }

    /// Cuts now: every operation from here on fails.
    pub fn kill(&self) {
        let mut st = self.shared.state.lock();
        st.dead = true;
        st.cut = None;
    }

    /// Arms a one-off failure: of the operations for which `filter` holds, the first `n` go ahead
    /// and the next fails with `EIO`; nothing else is affected.
    pub fn fail_after(&self, n: u64, filter: OpFilter) {
        self.shared.state.lock().failures.push(Arm {
            remaining: n,
            filter,
        });
    }

    /// Whether a cut has happened.
    pub fn is_dead(&self) -> bool {
        self.shared.state.lock().dead
    }

    /// The operation the armed cut stopped, if it fired (until the next revive or power cut).
    pub fn cut_site(&self) -> Option<OpSite> {
        self.shared.state.lock().cut_site.clone()
    }

    /// The operations failed by [`fail_after`](Self::fail_after) since the last power cut.
    pub fn injected(&self) -> Vec<OpSite> {
        self.shared.state.lock().injected.clone()
    }

    /// Ends a cut as a process crash would: the machine stayed up, so everything written is still
    /// there, and what was not fsynced is still not durable. Disarms every cut and failure.
    pub fn revive(&self) {
        let mut st = self.shared.state.lock();
        st.dead = false;
        st.cut = None;
        st.cut_site = None;
        st.failures.clear();
    }

    /// Simulates a power cut: rewrites the directory to what `cut` keeps of it, then starts afresh
    /// with every file durable, every cut and failure disarmed. Drop every `Db` on the directory
    /// first.
    ///
    /// # Errors
    /// Any failure to rewrite the directory.
    pub fn power_cut(&self, cut: PowerCut) -> io::Result<PowerCutReport> {
        let mut rng = SplitMix64(cut.seed ^ 0x5eed_f00d_cafe_d00d);
        let mut report = PowerCutReport::default();
        {
            let mut st = self.shared.state.lock();
            st.dead = true;
            let mut names: BTreeSet<String> = st.live.keys().cloned().collect();
            names.extend(st.durable.keys().cloned());
            names.extend(st.changed.keys().cloned());
            let mut kept: BTreeMap<String, u64> = BTreeMap::new();
            for name in &names {
                let binding = match st.changed.get(name) {
                    Some(history) => {
                        let durable = st.durable.get(name).copied();
                        let last = history.last().copied().flatten();
                        let chosen = match cut.names {
                            UnsyncedNames::Revert => durable,
                            UnsyncedNames::Keep => last,
                            UnsyncedNames::Random => {
                                let i = rng.below(history.len() as u64 + 1) as usize;
                                if i == 0 {
                                    durable
                                } else {
                                    history[i - 1]
                                }
                            }
                        };
                        if chosen != last {
                            report.names_reverted += 1;
                        }
                        chosen
                    }
                    None => st.live.get(name).copied(),
                };
                if let Some(id) = binding {
                    kept.insert(name.clone(), id);
                }
            }
            let mut contents: HashMap<u64, Vec<u8>> = HashMap::new();
            for &id in kept.values() {
                if contents.contains_key(&id) {
                    continue;
                }
                let Some(inode) = st.inodes.get(&id) else {
                    continue;
                };
                let mut bytes = inode.synced.clone();
                let unsynced = &inode.unsynced;
                let mode = match cut.data {
                    UnsyncedData::Random => match rng.below(4) {
                        0 => UnsyncedData::Drop,
                        1 => UnsyncedData::Keep,
                        2 => UnsyncedData::KeepPrefix,
                        _ => UnsyncedData::ZeroFill,
                    },
                    other => other,
                };
                let len = unsynced.len() as u64;
                match mode {
                    UnsyncedData::Keep | UnsyncedData::Random => bytes.extend_from_slice(unsynced),
                    UnsyncedData::Drop => {}
                    UnsyncedData::KeepPrefix => {
                        let n = rng.below(len + 1) as usize;
                        bytes.extend_from_slice(&unsynced[..n]);
                    }
                    UnsyncedData::ZeroFill => {
                        let n = rng.below(len + 1) as usize;
                        bytes.resize(bytes.len() + n, 0);
                    }
                }
                let kept_len = (bytes.len() - inode.synced.len()) as u64;
                if len > 0 && (kept_len < len || mode == UnsyncedData::ZeroFill) {
                    report.files_cut += 1;
                    report.bytes_lost += if mode == UnsyncedData::ZeroFill {
                        len
                    } else {
                        len - kept_len
                    };
                }
                contents.insert(id, bytes);
            }
            for name in &names {
                let path = self.shared.dir.join(name);
                match kept.get(name) {
                    None => match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e),
                    },
                    Some(id) => {
                        let bytes = contents.get(id).map(Vec::as_slice).unwrap_or(&[]);
                        // Written as a new file: the name may be a hard link now, to a file
                        // outside the directory (a follower's link to its writer's table),
                        // whose bytes a power cut here must not rewrite.
                        match std::fs::remove_file(&path) {
                            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                            _ => {}
                        }
                        std::fs::write(&path, bytes)?;
                    }
                }
            }
        }
        self.reload()?;
        Ok(report)
    }

    /// Forgets the history and takes the directory as it is now as durable.
    fn reload(&self) -> io::Result<()> {
        let mut fresh = State::default();
        for entry in std::fs::read_dir(&self.shared.dir)? {
            let entry = entry?;
            if !entry.file_type()?.is_file() {
                continue;
            }
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name == "LOCK" {
                continue;
            }
            let bytes = std::fs::read(entry.path())?;
            let id = fresh.new_inode(Inode {
                name: name.clone(),
                synced: bytes,
                ..Inode::default()
            });
            fresh.live.insert(name.clone(), id);
            fresh.durable.insert(name, id);
        }
        let mut st = self.shared.state.lock();
        // Inode numbers are never reused, so a handle left from before cannot reach a new file.
        fresh.next_inode = fresh.next_inode.max(st.next_inode);
        *st = fresh;
        Ok(())
    }

    /// The name of `path` in the followed directory, or `None` for a path elsewhere.
    fn name_of(&self, path: &Path) -> Option<String> {
        if path.parent()? != self.shared.dir {
            return None;
        }
        path.file_name()?.to_str().map(str::to_string)
    }

    pub(crate) fn create(&self, path: &Path) -> io::Result<(File, Option<TrackedFile>)> {
        let open = || File::options().write(true).create_new(true).open(path);
        let Some(name) = self.name_of(path) else {
            return Ok((open()?, None));
        };
        let mut st = self.shared.state.lock();
        st.begin(OpKind::Create, &name).map_err(|r| r.error())?;
        let file = open()?;
        let id = st.new_inode(Inode {
            name: name.clone(),
            handles: 1,
            ..Inode::default()
        });
        st.bind(&name, Some(id));
        Ok((
            file,
            Some(TrackedFile {
                injector: self.clone(),
                inode: id,
            }),
        ))
    }

    pub(crate) fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (Some(a), Some(b)) = (self.name_of(from), self.name_of(to)) else {
            return std::fs::rename(from, to);
        };
        let mut st = self.shared.state.lock();
        st.begin(OpKind::Rename, &a).map_err(|r| r.error())?;
        std::fs::rename(from, to)?;
        let id = st.live.get(&a).copied();
        st.bind(&a, None);
        st.bind(&b, id);
        Ok(())
    }

    pub(crate) fn remove(&self, path: &Path) -> io::Result<()> {
        let Some(name) = self.name_of(path) else {
            return std::fs::remove_file(path);
        };
        let mut st = self.shared.state.lock();
        st.begin(OpKind::Remove, &name).map_err(|r| r.error())?;
        std::fs::remove_file(path)?;
        st.bind(&name, None);
        Ok(())
    }

    /// A hard link counts as a `Create` of its new name. A link into the followed directory shares
    /// the source's record when the source is followed too; a source from elsewhere counts as
    /// durable, as files found by [`new`](Self::new) do.
    pub(crate) fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let Some(name) = self.name_of(to) else {
            return std::fs::hard_link(from, to);
        };
        let mut st = self.shared.state.lock();
        st.begin(OpKind::Create, &name).map_err(|r| r.error())?;
        std::fs::hard_link(from, to)?;
        let id = match self.name_of(from).and_then(|n| st.live.get(&n).copied()) {
            Some(id) => id,
            None => {
                let bytes = std::fs::read(to)?;
                st.new_inode(Inode {
                    name: name.clone(),
                    synced: bytes,
                    ..Inode::default()
                })
            }
        };
        st.bind(&name, Some(id));
        Ok(())
    }

    /// `fdatasync` of a file by name: its bytes written so far become durable.
    pub(crate) fn sync_existing(&self, path: &Path) -> io::Result<()> {
        let sync = || File::open(path)?.sync_data();
        let Some(name) = self.name_of(path) else {
            return sync();
        };
        let mut st = self.shared.state.lock();
        st.begin(OpKind::Sync, &name).map_err(|r| r.error())?;
        // Opened as a real sync would, so a missing file fails the same way.
        File::open(path)?;
        let id = st.live.get(&name).copied();
        if let Some(inode) = id.and_then(|id| st.inodes.get_mut(&id)) {
            let mut bytes = std::mem::take(&mut inode.unsynced);
            inode.synced.append(&mut bytes);
        }
        Ok(())
    }

    pub(crate) fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let sync = || super::sync_directory(dir);
        if dir != self.shared.dir {
            return sync();
        }
        let mut st = self.shared.state.lock();
        st.begin(OpKind::SyncDir, &dir.display().to_string())
            .map_err(|r| r.error())?;
        st.durable = st.live.clone();
        st.changed.clear();
        st.collect_garbage();
        Ok(())
    }
}

/// The layer's view of one file the store writes.
pub(crate) struct TrackedFile {
    injector: FaultInjector,
    inode: u64,
}

impl TrackedFile {
    pub(crate) fn write(&self, file: &mut File, buf: &[u8]) -> io::Result<usize> {
        let mut st = self.injector.shared.state.lock();
        let name = st
            .inodes
            .get(&self.inode)
            .map(|i| i.name.clone())
            .unwrap_or_default();
        match st.begin(OpKind::Write, &name) {
            Ok(()) => {}
            Err(Refusal::Cut) => {
                // A process killed inside write(2) may leave part of the buffer behind.
                let mut rng = SplitMix64(st.ops ^ buf.len() as u64);
                let n = rng.below(buf.len() as u64 + 1) as usize;
                if file.write_all(&buf[..n]).is_ok()
                    && let Some(inode) = st.inodes.get_mut(&self.inode)
                {
                    inode.unsynced.extend_from_slice(&buf[..n]);
                }
                return Err(Refusal::Cut.error());
            }
            Err(r) => return Err(r.error()),
        }
        let n = file.write(buf)?;
        if let Some(inode) = st.inodes.get_mut(&self.inode) {
            inode.unsynced.extend_from_slice(&buf[..n]);
        }
        Ok(n)
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        let mut st = self.injector.shared.state.lock();
        let name = st
            .inodes
            .get(&self.inode)
            .map(|i| i.name.clone())
            .unwrap_or_default();
        st.begin(OpKind::Sync, &name).map_err(|r| r.error())?;
        if let Some(inode) = st.inodes.get_mut(&self.inode) {
            let mut bytes = std::mem::take(&mut inode.unsynced);
            inode.synced.append(&mut bytes);
        }
        Ok(())
    }
}

impl Drop for TrackedFile {
    fn drop(&mut self) {
        let mut st = self.injector.shared.state.lock();
        if let Some(inode) = st.inodes.get_mut(&self.inode) {
            inode.handles = inode.handles.saturating_sub(1);
        }
    }
}

/// A small deterministic generator for the layer's random choices.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 for `n == 0`).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::FileSystem;
    use std::io::Write;

    /// A scratch directory, an injector following it, and a file system through the injector.
    fn layer() -> (tempfile::TempDir, FaultInjector, FileSystem) {
        let dir = tempfile::tempdir().unwrap();
        let faults = FaultInjector::new(dir.path()).unwrap();
        let fs = FileSystem::with_faults(Some(faults.clone()));
        (dir, faults, fs)
    }

    #[test]
    fn a_power_cut_keeps_synced_bytes_and_synced_names_only() {
        let (dir, faults, fs) = layer();
        let a = dir.path().join("000001.log");
        let mut f = fs.create(&a).unwrap();
        fs.sync_dir(dir.path()).unwrap();
        f.write_all(b"synced").unwrap();
        f.sync().unwrap();
        f.write_all(b"+lost").unwrap();
        let b = dir.path().join("000002.sst");
        let mut g = fs.create(&b).unwrap();
        g.write_all(b"data").unwrap();
        g.sync().unwrap(); // the data is durable, the name is not
        assert_eq!(std::fs::read(&a).unwrap(), b"synced+lost");
        drop((f, g));
        let report = faults.power_cut(PowerCut::strict()).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"synced");
        assert!(!b.exists());
        assert_eq!(report.files_cut, 1);
        assert_eq!(report.bytes_lost, 5);
        assert_eq!(report.names_reverted, 1);
    }

    /// Writes "new" to `CURRENT.dbtmp`, syncs it and renames it over CURRENT (no directory sync).
    fn switch_current(fs: &FileSystem, dir: &Path) {
        let tmp = dir.join("CURRENT.dbtmp");
        let mut t = fs.create(&tmp).unwrap();
        t.write_all(b"new\n").unwrap();
        t.sync().unwrap();
        drop(t);
        fs.rename(&tmp, &dir.join("CURRENT")).unwrap();
    }

    #[test]
    fn reverted_renames_and_removals_come_back_with_their_synced_bytes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("CURRENT"), b"old\n").unwrap();
        std::fs::write(dir.path().join("000003.log"), b"log").unwrap();
        let faults = FaultInjector::new(dir.path()).unwrap();
        let fs = FileSystem::with_faults(Some(faults.clone()));
        switch_current(&fs, dir.path());
        fs.remove_file(&dir.path().join("000003.log")).unwrap();
        faults.power_cut(PowerCut::strict()).unwrap();
        let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
        assert_eq!(read("CURRENT"), b"old\n");
        assert_eq!(read("000003.log"), b"log");
        assert!(!dir.path().join("CURRENT.dbtmp").exists());

        // The same again, made durable by a directory sync.
        switch_current(&fs, dir.path());
        fs.sync_dir(dir.path()).unwrap();
        faults.power_cut(PowerCut::strict()).unwrap();
        assert_eq!(read("CURRENT"), b"new\n");
    }

    #[test]
    fn a_cut_stops_every_later_operation_until_revived() {
        let (dir, faults, fs) = layer();
        faults.cut_after(1, Box::new(|s: &OpSite| s.kind == OpKind::Sync));
        let mut f = fs.create(&dir.path().join("000001.log")).unwrap();
        fs.sync_dir(dir.path()).unwrap();
        f.write_all(b"a").unwrap();
        f.sync().unwrap();
        f.write_all(b"b").unwrap();
        assert!(f.sync().is_err());
        assert!(faults.is_dead());
        assert_eq!(faults.cut_site().unwrap().kind, OpKind::Sync);
        assert!(f.write_all(b"c").is_err());
        assert!(fs.create(&dir.path().join("000002.log")).is_err());
        faults.revive();
        f.write_all(b"d").unwrap();
        // A process crash keeps what was written; a power cut then loses what was not synced.
        assert_eq!(
            std::fs::read(dir.path().join("000001.log")).unwrap(),
            b"abd"
        );
        drop(f);
        faults.power_cut(PowerCut::strict()).unwrap();
        assert_eq!(std::fs::read(dir.path().join("000001.log")).unwrap(), b"a");
    }

    #[test]
    fn an_injected_failure_fails_one_operation_only() {
        let (dir, faults, fs) = layer();
        faults.fail_after(0, Box::new(|s: &OpSite| s.kind == OpKind::Rename));
        let a = dir.path().join("a");
        drop(fs.create(&a).unwrap());
        let err = fs
            .rename(&a, &dir.path().join("b"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("Input/output error"), "{err}");
        assert!(err.contains(&a.display().to_string()), "{err}");
        fs.rename(&a, &dir.path().join("b")).unwrap();
        assert!(!faults.is_dead());
        assert_eq!(faults.injected().len(), 1);
    }

    #[test]
    fn a_hard_link_is_a_create_of_its_new_name() {
        let (dir, faults, fs) = layer();
        let elsewhere = tempfile::tempdir().unwrap();
        let outside = elsewhere.path().join("000001.sst");
        std::fs::write(&outside, b"table").unwrap();
        // Into the followed directory: a new name, durable once the directory is synced.
        let inside = dir.path().join("000001.sst");
        fs.hard_link(&outside, &inside).unwrap();
        let second = dir.path().join("000002.sst");
        fs.hard_link(&inside, &second).unwrap();
        fs.sync_dir(dir.path()).unwrap();
        let third = dir.path().join("000003.sst");
        fs.hard_link(&inside, &third).unwrap();
        faults.fail_after(0, Box::new(|s: &OpSite| s.kind == OpKind::Create));
        assert!(fs.hard_link(&outside, &dir.path().join("x")).is_err());
        // Out of it: not followed.
        fs.hard_link(&inside, &elsewhere.path().join("copy"))
            .unwrap();
        faults.power_cut(PowerCut::strict()).unwrap();
        assert_eq!(std::fs::read(&inside).unwrap(), b"table");
        assert_eq!(std::fs::read(&second).unwrap(), b"table");
        assert!(!third.exists(), "its entry was never synced");
        assert!(elsewhere.path().join("copy").exists());
    }

    #[test]
    fn random_cuts_keep_a_prefix_of_the_unsynced_bytes_or_zeros() {
        for seed in 0..200 {
            let (dir, faults, fs) = layer();
            let p = dir.path().join("000001.log");
            let mut f = fs.create(&p).unwrap();
            fs.sync_dir(dir.path()).unwrap();
            f.write_all(b"durable").unwrap();
            f.sync().unwrap();
            f.write_all(b"0123456789").unwrap();
            drop(f);
            faults.power_cut(PowerCut::random(seed)).unwrap();
            let got = std::fs::read(&p).unwrap();
            assert!(got.starts_with(b"durable"), "seed {seed}");
            let tail = &got[7..];
            assert!(
                b"0123456789".starts_with(tail) || tail.iter().all(|&b| b == 0),
                "seed {seed}: {tail:?}"
            );
        }
    }
}

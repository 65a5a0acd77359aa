//! Crash loops with real SIGKILL: the parent re-executes its own test binary as a child that runs
//! one test (which acts only when the child's environment variables are set), reads the child's
//! acknowledgements from its stdout, and kills it.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use siftdb::{Filter, Options};

/// Held while spawning a child and while the parent has a store open. Crash loops run in
/// parallel threads of one process, and a fork briefly holds copies of all its descriptors: a
/// spawn during another loop's check would hand that loop's LOCK (a `flock`, owned by the open
/// file description) to the forked child for a moment, and the next open of that store could
/// fail with `Error::Locked`.
static SPAWN: Mutex<()> = Mutex::new(());

/// The spawn lock (see [`SPAWN`]).
pub fn spawn_lock() -> MutexGuard<'static, ()> {
    SPAWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// A SIGKILL loop of `kills` lives over fresh stores of `per_epoch` lives each, in directories
/// `epoch<n>` under `root`. Each life runs the child test `child` with its store's directory in
/// `dir_env`, and in `<env_prefix>_START` and `<env_prefix>_EPOCH` the operation to start from
/// and the epoch; it is killed after a delay (mostly short lives, for recovery and the first
/// flushes; some long enough for compactions). `check(dir, epoch, last_ack, kill, start)` then
/// checks the store and returns the operation the next life starts from. Returns the operations
/// acknowledged in all.
#[allow(clippy::too_many_arguments)]
pub fn kill_loop(
    kills: usize,
    rng: &mut impl rand::Rng,
    root: &std::path::Path,
    per_epoch: usize,
    child: &str,
    dir_env: &str,
    env_prefix: &str,
    mut check: impl FnMut(&std::path::Path, u64, Option<u64>, usize, u64) -> u64,
) -> u64 {
    let mut acked_total = 0;
    let mut dir = root.join("epoch0");
    let mut start = 0;
    for kill in 0..kills {
        let epoch = (kill / per_epoch) as u64;
        if kill % per_epoch == 0 {
            dir = root.join(format!("epoch{epoch}"));
            start = 0;
        }
        let delay = if rng.gen_bool(0.3) {
            Duration::from_millis(rng.gen_range(0..30))
        } else {
            Duration::from_millis(rng.gen_range(30..250))
        };
        let env = [
            (dir_env, dir.display().to_string()),
            (&*format!("{env_prefix}_START"), start.to_string()),
            (&*format!("{env_prefix}_EPOCH"), epoch.to_string()),
        ];
        let acked = run_child(child, &env, delay).last_ack;
        let next = check(&dir, epoch, acked, kill, start);
        if let Some(a) = acked {
            acked_total += a + 1 - start;
        }
        start = next;
    }
    acked_total
}

/// The name libtest gives the test `name` of the module `module` (its `module_path!()`): the
/// path below the test binary's crate, which [`run_child`] runs with `--exact`.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, below)) => format!("{below}::{name}"),
        None => name.to_string(),
    }
}

/// What the child said before it was killed: the last `ack <i>` line's `i`, and how many lines
/// started with `synced `.
pub struct ChildReport {
    pub last_ack: Option<u64>,
    pub syncs: u64,
}

/// Runs the test `test` of this binary as a child with `env` until it is killed (SIGKILL) after
/// `delay`. Panics if the child exits on its own before.
pub fn run_child(test: &str, env: &[(&str, String)], delay: Duration) -> ChildReport {
    let mut report = ChildReport {
        last_ack: None,
        syncs: 0,
    };
    for line in run_child_lines(test, env, delay) {
        if let Some(n) = line.strip_prefix("ack ") {
            report.last_ack = Some(n.parse::<u64>().unwrap());
        } else if line.starts_with("synced ") {
            report.syncs += 1;
        }
    }
    report
}

/// [`run_child`], returning every line the child printed before it was killed.
pub fn run_child_lines(test: &str, env: &[(&str, String)], delay: Duration) -> Vec<String> {
    let guard = spawn_lock();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(guard);
    let stdout = child.stdout.take().unwrap();
    // Read concurrently so the pipe never fills and blocks the child.
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map(|l| l.unwrap())
            .collect::<Vec<String>>()
    });
    let deadline = Instant::now() + delay;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("child exited on its own ({status}) before the kill:\n{err}");
        }
        std::thread::sleep(Duration::from_millis(1).min(deadline - Instant::now()));
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    reader.join().unwrap()
}

/// The key operation `i` of a crash loop writes.
pub fn key(i: u64) -> Vec<u8> {
    format!("key{i:09}").into_bytes()
}

/// The `i` of [`key`]`(i)`.
pub fn parse_key(k: &[u8]) -> u64 {
    std::str::from_utf8(&k[3..]).unwrap().parse().unwrap()
}

/// The value operation `i` writes: of varying length, some long enough to cross WAL blocks, so
/// memtables fill quickly.
pub fn value(i: u64) -> Vec<u8> {
    let pad = (i.wrapping_mul(2_654_435_761) % 200) as usize;
    let pad = if i.is_multiple_of(97) { pad * 100 } else { pad };
    let mut v = format!("value-{i}-").into_bytes();
    v.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, pad));
    v
}

/// The operations `expected` holds and `got` lacks, and those `got` holds and `expected` lacks
/// (ten of each at most, for a failure message); `None` if the two are the same.
pub fn differences(expected: &[u64], got: &[u64]) -> Option<(Vec<u64>, Vec<u64>)> {
    if got == expected {
        return None;
    }
    let missing = expected.iter().filter(|j| !got.contains(j)).take(10);
    let extra = got.iter().filter(|j| !expected.contains(j)).take(10);
    Some((missing.copied().collect(), extra.copied().collect()))
}

/// The options of a crash loop's `epoch`-th store: the filter layout rotates so all three meet
/// crashes, and everything is tiny (a flush every ~100 writes, a compaction every few flushes, L1
/// spilling into L2).
pub fn options(epoch: u64) -> Options {
    let filter = match epoch % 3 {
        0 => Filter::full(10.0),
        1 => Filter::partitioned(10.0),
        _ => Filter::block_based(10.0),
    };
    Options::default()
        .write_buffer_size(16 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(32 << 10)
        .level0_compaction_trigger(2)
        // L0 gathers tables while writes flow, as with the defaults.
        .level0_compaction_trigger_during_writes(4)
        .block_size(1024)
        .filter(filter)
}

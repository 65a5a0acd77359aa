//! Table open, point lookup and scan over arbitrary file contents.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;

fuzz_target!(|data: &[u8]| {
    // One file per fuzzing process, on tmpfs when there is one.
    thread_local! {
        static PATH: PathBuf = {
            let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
            dir.join(format!("siftdb-fuzz-{}.sst", std::process::id()))
        };
    }
    let (key, table) = match data.split_first() {
        Some((&n, rest)) => rest.split_at((n as usize % 32).min(rest.len())),
        None => (&[][..], data),
    };
    PATH.with(|p| siftdb::fuzzing::table(p, table, key));
});

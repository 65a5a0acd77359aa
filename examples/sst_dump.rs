//! Dumps SSTables: footer, properties, data blocks and filter, through `siftdb::inspect`.
//!
//! cargo run -p siftdb-examples --example sst_dump -- path/to/000012.sst          # one table
//! cargo run -p siftdb-examples --example sst_dump -- path/to/db                  # every table of a store
//! cargo run -p siftdb-examples --example sst_dump -- path/to/db --key 0000000000000042
//!                                                              # and explain a Get of that key
//! cargo run -p siftdb-examples --example sst_dump -- path/to/000012.sst --blocks # list every data block
//! cargo run -p siftdb-examples --example sst_dump -- path/to/db --scan-from a --scan-to b
//!                                                              # and explain a scan of [a, b)
//!
//! Keys may carry `\xNN` escapes for bytes that are not printable (`--key 'siftkey:\x00\x01…'`).
//! A scan is explained as a store opened with Grafite range filters of `--range-filter-bits`
//! would run it (tables read, tables their range filter leaves out).
//!
//! A file that is not a siftdb table gives a one-line error and exit code 1.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use siftdb::inspect::TableInfo;
use siftdb::{Compression, Db, Options, RangeFilter};

#[derive(Parser, Debug)]
#[command(about = "Dump siftdb tables (a .sst file or every table of a database directory)")]
struct Args {
    /// A `.sst` file or a database directory.
    path: PathBuf,
    /// On a directory: open the store and explain a Get of this key.
    #[arg(long)]
    key: Option<String>,
    /// List every data block (offset, stored size, compression).
    #[arg(long)]
    blocks: bool,
    /// On a directory: explain a scan from this key (inclusive) to `--scan-to` (exclusive).
    #[arg(long, requires = "scan_to")]
    scan_from: Option<String>,
    /// The end of the scan `--scan-from` explains.
    #[arg(long, requires = "scan_from")]
    scan_to: Option<String>,
    /// The range filter the store is opened with for `--scan-from` (bits per key; 0 for none).
    #[arg(long, default_value_t = 20.0)]
    range_filter_bits: f64,
}

/// `text` with every `\xNN` replaced by that byte.
fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"\\x") {
            let hex = text
                .get(i + 2..i + 4)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad \\x escape in {text:?}"))?;
            out.push(hex);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sst_dump: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if !args.path.is_dir() {
        if args.key.is_some() || args.scan_from.is_some() {
            return Err("--key and --scan-from need a database directory, not a file".into());
        }
        return Ok(dump(&args.path, args.blocks)?);
    }
    let mut tables: Vec<PathBuf> = std::fs::read_dir(&args.path)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    tables.sort();
    println!("{}: {} tables", args.path.display(), tables.len());
    for t in &tables {
        println!();
        dump(t, args.blocks)?;
    }
    if let Some(key) = &args.key {
        // Opening takes the directory's LOCK: this fails if another process has the store open.
        let db = Db::open(&args.path, Options::default().create_if_missing(false))?;
        println!("\n{}", db.explain_get(unescape(key)?)?);
    }
    if let (Some(from), Some(to)) = (&args.scan_from, &args.scan_to) {
        let range_filter = match args.range_filter_bits {
            0.0 => RangeFilter::none(),
            bits => RangeFilter::grafite(bits, 1 << 16),
        };
        let options = Options::default()
            .create_if_missing(false)
            .range_filter(range_filter);
        // Read-only: explaining writes nothing, even with other options than the store's.
        let db = Db::open_read_only(&args.path, options)?;
        println!("\n{}", db.explain_scan(unescape(from)?..unescape(to)?)?);
    }
    Ok(())
}

fn dump(path: &Path, list_blocks: bool) -> Result<(), siftdb::Error> {
    let t = TableInfo::open(path).map_err(|e| match e {
        // Corruption names the file already; an I/O error does not.
        siftdb::Error::Io(io) => siftdb::Error::Io(std::io::Error::new(
            io.kind(),
            format!("{}: {io}", path.display()),
        )),
        e => e,
    })?;
    println!(
        "{} ({} bytes) of keyspace {}",
        t.path.display(),
        t.file_size,
        t.keyspace
    );
    println!(
        "  footer      metaindex @{} ({} B), index @{} ({} B)",
        t.metaindex.offset, t.metaindex.size, t.index.offset, t.index.size
    );
    for m in &t.meta_blocks {
        println!(
            "  meta block  {} @{} ({} B)",
            m.name, m.block.offset, m.block.size
        );
    }
    println!(
        "  properties  {} entries ({} deletions), {} range tombstones, {} data blocks, raw keys {} B, raw values {} B, data {} B, index {} B",
        t.num_entries,
        t.num_deletions,
        t.num_range_deletions,
        t.num_data_blocks,
        t.raw_key_bytes,
        t.raw_value_bytes,
        t.data_bytes,
        t.index_bytes
    );
    let sizes: Vec<u64> = t.data_blocks.iter().map(|b| b.block.size).collect();
    let compressed = t
        .data_blocks
        .iter()
        .filter(|b| b.compression != Compression::None)
        .count();
    let codec = t
        .compression
        .map_or_else(|| "not recorded".to_string(), |c| c.to_string());
    if let (Some(min), Some(max)) = (sizes.iter().min(), sizes.iter().max()) {
        println!(
            "  data blocks {} (checksums verified), stored {}..{} B, avg {} B; codec {codec}: {} compressed, {} stored raw",
            sizes.len(),
            min,
            max,
            sizes.iter().sum::<u64>() / sizes.len() as u64,
            compressed,
            sizes.len() - compressed
        );
    }
    if list_blocks {
        for (i, b) in t.data_blocks.iter().enumerate() {
            println!(
                "    block {i:>5} @{:<10} {:>6} B  {}",
                b.block.offset, b.block.size, b.compression
            );
        }
    }
    match &t.filter {
        None => println!("  filter      none"),
        Some(f) => {
            println!(
                "  filter      {} layout, policy {}{}",
                f.layout,
                f.policy,
                if f.policy_known {
                    ""
                } else {
                    " (unknown to this build)"
                }
            );
            println!(
                "              {} B for {} keys = {:.2} bits/key (configured {}), probes {}{}",
                f.bytes,
                f.keys,
                f.bits_per_key(),
                f.configured_bits_per_key,
                f.probes.map_or("unknown".to_string(), |k| k.to_string()),
                f.partitions
                    .map_or(String::new(), |n| format!(", {n} partitions"))
            );
        }
    }
    Ok(())
}

//! A messaging app's store: three keyspaces in one store, each with the filter its reads need.
//!
//! cargo run --release -p siftdb-examples --example keyspaces                      # 100k users, messages, events
//! cargo run --release -p siftdb-examples --example keyspaces -- --keys 20000 --dir /tmp/app
//!
//! - `users` is read by whole keys (`user:<id>`): a full filter of 10 bits per key, so a Get for
//!   a user that does not exist is answered by the filter, without a data block read.
//! - `messages` is read a conversation at a time (`conv:<id>:<seq>`, scanned by its `conv:<id>:`
//!   prefix): a prefix extractor puts each conversation's prefix in the filter instead of whole
//!   keys, so a scan of a conversation skips the tables that hold none of it.
//! - `events` is an append-only log (`event:<seq>`) read by ranges of sequence numbers, never by
//!   point lookups: no filter at all, so no memory or disk goes to one.
//!
//! Sending a message is one batch over the three keyspaces (the message, the event that records
//! it, the sender's last-sent field), applied whole or not at all. Users are the even ids and
//! conversations the even numbers; the reads then ask for even and odd ones alike, so half of
//! them miss, and print what each keyspace's filter did, from its own statistics: `useful` (said
//! "no"), `positive` (said "maybe"), `true positive` (said "maybe" and the table held the key),
//! the measured false positive rate, and for prefix scans the tables checked and skipped (and,
//! over the scans of missing conversations, the prefix filter's measured false positive rate).
//!
//! Values are db_bench's (random bytes that compress to about half), as `--example workload`
//! writes them. The store is made in a temporary directory, or in `--dir` (which then keeps it).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use siftdb::{Db, Filter, Keyspace, Options, PrefixExtractor, Ticker, WriteBatch, NUM_LEVELS};
use value_generator::ValueGenerator;

#[path = "common/value_generator.rs"]
mod value_generator;

#[derive(Parser, Debug)]
#[command(about = "Three keyspaces, each with the filter its reads need")]
struct Args {
    /// Users, and messages (and events): the size of the run.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(20..=100_000_000))]
    keys: u64,
    /// Directory of the store (kept afterwards); a temporary one if not given.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seed of the values.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// Messages per conversation.
const MESSAGES_PER_CONVERSATION: u64 = 20;

/// The length of a conversation's prefix, `conv:<8 digits>:`.
const CONVERSATION_PREFIX_LEN: usize = 14;

fn user_key(id: u64) -> String {
    format!("user:{id:010}")
}

fn conversation_prefix(conv: u64) -> String {
    format!("conv:{conv:08}:")
}

fn message_key(conv: u64, seq: u64) -> String {
    format!("{}{seq:06}", conversation_prefix(conv))
}

fn event_key(seq: u64) -> String {
    format!("event:{seq:012}")
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    // A temporary directory lives as long as `_tmp` and is removed when it drops.
    let (_tmp, dir) = match &args.dir {
        Some(d) => (None, d.clone()),
        None => {
            let t = tempfile::tempdir()?;
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    };
    // Small memtables and tables, so that even a small run spreads over several tables.
    let sizes = || {
        Options::default()
            .write_buffer_size(1 << 20)
            .target_file_size(1 << 20)
            .max_bytes_for_level_base(4 << 20)
    };
    let db = Db::open(&dir, sizes())?;
    let users = db.keyspace_with("users", sizes().filter(Filter::full(10.0)))?;
    let messages = db.keyspace_with(
        "messages",
        sizes()
            .filter(Filter::full(10.0))
            .prefix_extractor(PrefixExtractor::fixed(CONVERSATION_PREFIX_LEN))
            .whole_key_filtering(false),
    )?;
    let events = db.keyspace_with("events", sizes().filter(Filter::none()))?;
    println!(
        "store in {}: keyspaces {:?}",
        dir.display(),
        db.keyspace_names()
    );

    let mut values = ValueGenerator::new(0.5, 200, args.seed);
    let n = args.keys;
    // Users: the even ids.
    for id in 0..n {
        users.put(user_key(2 * id), values.next(200))?;
    }
    // Messages: conversations are the even numbers, each with its messages; sending one is a
    // batch over the three keyspaces.
    let conversations = n.div_ceil(MESSAGES_PER_CONVERSATION);
    for seq in 0..n {
        let conv = 2 * (seq % conversations);
        let sender = 2 * (seq * 7919 % n);
        let mut batch = WriteBatch::new();
        batch
            .put_in(&messages, message_key(conv, seq), values.next(100))
            .put_in(
                &events,
                event_key(seq),
                format!("sent {seq} by {} in {conv}", user_key(sender)),
            )
            .put_in(
                &users,
                format!("{}:last-sent", user_key(sender)),
                seq.to_string(),
            );
        db.write(batch)?;
    }
    for ks in [&users, &messages, &events] {
        ks.flush()?;
    }

    // Reads: users by id, half of them missing.
    let before = users.statistics();
    let mut found = 0u64;
    for i in 0..n {
        let id = (i * 7919) % (2 * n);
        found += u64::from(users.get(user_key(id))?.is_some());
    }
    let user_reads = users.statistics().since(&before);
    println!("\nusers: {n} gets by id, {found} found");

    // Conversations by prefix: the even ones, which exist, then the odd ones, which do not (so
    // every table whose prefix filter passes one of them is a false positive).
    let before = messages.statistics();
    let mut rows = 0u64;
    for conv in (0..2 * conversations).step_by(2) {
        for row in messages.scan_prefix(conversation_prefix(conv)) {
            row?;
            rows += 1;
        }
    }
    let between = messages.statistics();
    for conv in (1..2 * conversations).step_by(2) {
        if messages
            .scan_prefix(conversation_prefix(conv))
            .next()
            .transpose()?
            .is_some()
        {
            return Err(format!("conversation {conv} was never written, yet has messages").into());
        }
    }
    let message_reads = messages.statistics().since(&before);
    let missing = messages.statistics().since(&between);
    let (checked, skipped) = (
        missing.ticker(Ticker::BloomFilterPrefixChecked),
        missing.ticker(Ticker::BloomFilterPrefixUseful),
    );
    let prefix_fp = if checked > 0 {
        format!(
            "{:.3}%",
            (checked - skipped) as f64 * 100.0 / checked as f64
        )
    } else {
        "-".to_string()
    };
    println!(
        "messages: {} conversations scanned by prefix, {rows} messages read; for the {} missing \
         ones the prefix filter skipped {skipped} of {checked} tables (measured false positive \
         rate {prefix_fp})",
        2 * conversations,
        conversations
    );

    // The log's newest events, by range.
    let before = events.statistics();
    let newest: Vec<(Vec<u8>, Vec<u8>)> = events
        .scan(event_key(n.saturating_sub(100))..)
        .rev()
        .take(100)
        .collect::<Result<_, _>>()?;
    let event_reads = events.statistics().since(&before);
    let last = newest
        .first()
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned());
    println!(
        "events: the newest {} read by range; the last one: {}",
        newest.len(),
        last.unwrap_or_default()
    );

    println!(
        "\n{:<9} {:>16} {:>8} {:>9} {:>13} {:>11} {:>11} {:>13} {:>13}",
        "keyspace",
        "tables L0..",
        "useful",
        "positive",
        "true positive",
        "measured-fp",
        "data blocks",
        "prefix checks",
        "prefix useful"
    );
    for (ks, s) in [
        (&users, &user_reads),
        (&messages, &message_reads),
        (&events, &event_reads),
    ] {
        let f = s.filter_totals();
        let fp = f
            .fp_rate()
            .map_or("-".to_string(), |r| format!("{:.3}%", r * 100.0));
        println!(
            "{:<9} {:>16} {:>8} {:>9} {:>13} {:>11} {:>11} {:>13} {:>13}",
            ks.name(),
            tables(ks),
            f.useful,
            f.positive,
            f.true_positive,
            fp,
            s.ticker(Ticker::DataBlocksRead),
            s.ticker(Ticker::BloomFilterPrefixChecked),
            s.ticker(Ticker::BloomFilterPrefixUseful)
        );
    }
    println!(
        "\nThe store's totals, every keyspace together: {} gets, {} filter checks ({} useful).",
        db.statistics().ticker(Ticker::NumberKeysRead),
        db.statistics().filter_totals().checks(),
        db.statistics().filter_totals().useful
    );
    db.close()?;
    Ok(())
}

/// The keyspace's tables per level, down to its deepest non-empty level: `2,3`.
fn tables(ks: &Keyspace) -> String {
    let per_level: Vec<String> = (0..NUM_LEVELS)
        .map(|l| {
            ks.property(&format!("siftdb.num-files-at-level{l}"))
                .unwrap_or_default()
        })
        .collect();
    let deepest = per_level
        .iter()
        .rposition(|t| t != "0")
        .map_or(1, |l| l + 1);
    per_level[..deepest].join(",")
}

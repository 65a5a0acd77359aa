//! What a comparison prints: the phases side by side, the filters' tickers and sizes, and the
//! JSON line.

use crate::engines::WriteStats;
use crate::phases::ScanPlan;
use crate::run::{Outcome, Shape, Workload};
use crate::KeyFormatArg;

/// "n/a" for a figure a store does not expose, else the figure in `format`'s way.
pub(crate) fn or_na<T>(v: Option<T>, format: impl FnOnce(T) -> String) -> String {
    v.map_or("n/a".to_string(), format)
}

/// The fill's (and the overwrite's) rate, write amplification and stalls per store.
pub(crate) fn print_writes(results: &[(&str, Outcome)], keys: u64, overwrite: bool) {
    println!("\nwrites (w-amp: bytes of tables written by flushes and compactions / bytes put):");
    println!(
        "{:<18} {:>12} {:>12} {:>14} {:>14} {:>9} {:>9}",
        "store",
        "fill keys/s",
        "fill µs/op",
        "w-amp fill end",
        "w-amp settled",
        "stall s",
        "stall %"
    );
    for (name, r) in results {
        let us_per_op = r.fill_secs * 1e6 / keys as f64;
        let per_sec = keys as f64 / r.fill_secs;
        let amp = |s: Option<WriteStats>| or_na(s, |s| format!("{:.2}", s.amplification()));
        let (stall_s, stall_pct) = match r.stall() {
            Some((s, pct)) => (format!("{s:.2}"), format!("{pct:.1}")),
            None => ("n/a".to_string(), "n/a".to_string()),
        };
        println!(
            "{name:<18} {per_sec:>12.0} {us_per_op:>12.2} {:>14} {:>14} {stall_s:>9} {stall_pct:>9}",
            amp(r.writes_fill_end),
            amp(r.writes_settled)
        );
    }

    if overwrite {
        println!("\noverwrite (its own table bytes over its own bytes put, and its stalls):");
        println!(
            "{:<18} {:>12} {:>12} {:>14} {:>14} {:>9} {:>9}",
            "store", "keys/s", "µs/op", "w-amp end", "w-amp settled", "stall s", "stall %"
        );
        for (name, r) in results {
            let Some(o) = r.overwrite else { continue };
            let amp = |s: Option<WriteStats>| or_na(s, |s| format!("{:.2}", s.amplification()));
            let (stall_s, stall_pct) = match o.stall() {
                Some((s, pct)) => (format!("{s:.2}"), format!("{pct:.1}")),
                None => ("n/a".to_string(), "n/a".to_string()),
            };
            println!(
                "{name:<18} {:>12.0} {:>12.2} {:>14} {:>14} {stall_s:>9} {stall_pct:>9}",
                keys as f64 / o.secs,
                o.secs * 1e6 / keys as f64,
                amp(o.end),
                amp(o.settled)
            );
        }
    }
}

/// Space on disk once settled after the fill (and after the overwrite) and the sorted runs a Get
/// meets then, per store.
pub(crate) fn print_space(results: &[(&str, Outcome)]) {
    let mib = |b: u64| format!("{:.1}", b as f64 / f64::from(1 << 20));
    let rows = results.iter().flat_map(|(name, r)| {
        let after_overwrite = r.overwrite.map(|o| (*name, r, "overwrite", o.shape));
        std::iter::once((*name, r, "fill", r.shape_settled)).chain(after_overwrite)
    });
    println!(
        "\nspace once settled (disk: every file in the store's directory; disk/put: that over the \
         bytes of keys and values the fill put; the overwrite puts the same keys again):"
    );
    println!(
        "{:<18} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10}",
        "store", "after", "disk MiB", "disk/put", "table MiB", "sorted runs", "L0 tables"
    );
    for (name, r, after, s) in rows {
        println!(
            "{name:<18} {after:>10} {:>10} {:>10.3} {:>10} {:>12} {:>10}",
            mib(s.disk_bytes),
            s.disk_bytes as f64 / r.fill_bytes.max(1) as f64,
            or_na(s.table_bytes, mib),
            or_na(s.runs, |r| r.total().to_string()),
            or_na(s.runs, |r| r.l0_tables.to_string())
        );
    }
}

/// The JSON fields of a settled store's shape, their names starting with `prefix`.
fn shape_fields(prefix: &str, s: &Shape) -> String {
    let mut fields = vec![format!("\"{prefix}disk_bytes_settled\":{}", s.disk_bytes)];
    if let Some(b) = s.table_bytes {
        fields.push(format!("\"{prefix}table_bytes_settled\":{b}"));
    }
    if let Some(r) = s.runs {
        fields.push(format!(
            "\"{prefix}sorted_runs_settled\":{},\"{prefix}l0_tables_settled\":{}",
            r.total(),
            r.l0_tables
        ));
    }
    fields.join(",")
}

pub(crate) fn print_bloom_tickers(results: &[(&str, Outcome)], reads: usize) {
    println!("\nbloom tickers during readmissing ({reads} gets of absent keys):");
    println!(
        "{:<18} {:>12} {:>14} {:>19} {:>10} {:>11}",
        "store", "useful", "full.positive", "full.true.positive", "fp-rate", "probes/get"
    );
    for (name, r) in results {
        match r.bloom {
            Some((u, p, tp)) => {
                let fp = or_na(r.fp_rate(), |f| format!("{:.3}%", f * 100.0));
                let probes = (u + p) as f64 / reads.max(1) as f64;
                println!("{name:<18} {u:>12} {p:>14} {tp:>19} {fp:>10} {probes:>11.2}");
            }
            None => println!(
                "{name:<18} {:>12} {:>14} {:>19} {:>10} {:>11}",
                "n/a", "n/a", "n/a", "n/a", "n/a"
            ),
        }
    }
}

pub(crate) fn print_filter_sizes(results: &[(&str, Outcome)], keys: u64) {
    println!("\nfilter size after the reads (target: 10 bits/key x {keys} keys):");
    for (name, r) in results {
        match r.filter_bytes {
            Some(b) => println!(
                "{name:<18} {b:>12} bytes {:>8.3} bits/key {:>+7.2}% vs target",
                b as f64 * 8.0 / keys as f64,
                (b as f64 * 8.0 / (10.0 * keys as f64) - 1.0) * 100.0
            ),
            None => println!("{name:<18} {:>12}", "n/a"),
        }
    }
}

/// The read-while-writing phase per store: the readers' rates and µs per Get of each kind, the
/// writer's, and L0's tables while it ran.
pub(crate) fn print_read_while_writing(results: &[(&str, Outcome)], w: Workload) {
    println!(
        "\nreads while writing ({} s, 1 writer overwriting at full speed, {} reader(s), present and absent keys in turn):",
        w.read_while_writing_secs, w.readers_while_writing
    );
    println!(
        "{:<18} {:>14} {:>10} {:>14} {:>10} {:>12} {:>8} {:>8} {:>7} {:>14} {:>8}",
        "store",
        "present Gets/s",
        "µs",
        "absent Gets/s",
        "µs",
        "puts/s",
        "µs/put",
        "L0 mean",
        "L0 max",
        "reader CPU µs",
        "on core"
    );
    for (name, r) in results {
        let Some(m) = r.read_while_writing else {
            continue;
        };
        let readers = w.readers_while_writing;
        println!(
            "{name:<18} {:>14.0} {:>10.2} {:>14.0} {:>10.2} {:>12.0} {:>8.2} {:>8} {:>7} {:>14} {:>8}",
            m.present_per_sec(readers),
            m.present_us(),
            m.missing_per_sec(readers),
            m.missing_us(),
            m.puts_per_sec(),
            m.put_us(),
            or_na(m.l0_mean, |x| format!("{x:.1}")),
            or_na(m.l0_max, |x| x.to_string()),
            or_na(m.reader_cpu_us_per_get(), |x| format!("{x:.2}")),
            or_na(m.reader_on_core_share(), |x| format!("{:.0}%", 100.0 * x))
        );
    }
}

/// The ops/s of `siftdb-range`, if run, else of `siftdb`: what the ratios compare to.
pub(crate) fn reference<'a>(results: &'a [(&str, Outcome)]) -> Option<&'a [f64]> {
    ["siftdb-range", "siftdb", "siftdb-lazy"]
        .iter()
        .find_map(|want| results.iter().find(|(n, _)| n == want))
        .map(|r| r.1.ops.as_slice())
}

/// ops/s per phase and store, the reference's ratio to each; for short scans also the filter
/// checks and the tables they ruled out per scan, and data blocks asked per scan.
pub(crate) fn print_phases(results: &[(&str, Outcome)], phases: &[String], reads: usize) {
    let sift = reference(results);
    println!(
        "\n{:<18} {:>18} {:>14} {:>10} {:>13} {:>15} {:>12}",
        "phase", "store", "ops/s", "siftdb/x", "checks/scan", "ruled out/scan", "blocks/scan"
    );
    for (p, phase) in phases.iter().enumerate() {
        for (name, r) in results {
            let ratio = sift
                .map(|s| format!("{:.2}", s[p] / r.ops[p]))
                .unwrap_or_default();
            let per_scan = |x: u64| format!("{:.3}", x as f64 / reads.max(1) as f64);
            // The short-scan phases come last, after the fill (and the overwrite).
            let first_scan = phases.len() - r.scan_counters.len();
            let (checks, ruled_out, blocks) =
                match p.checked_sub(first_scan).map(|i| r.scan_counters.get(i)) {
                    Some(Some(Some(c))) => (
                        per_scan(c.checked),
                        per_scan(c.ruled_out),
                        per_scan(c.blocks),
                    ),
                    Some(Some(None)) => ("n/a".to_string(), "n/a".to_string(), "n/a".to_string()),
                    _ => Default::default(),
                };
            println!(
                "{phase:<18} {name:>18} {:>14.0} {ratio:>10} {checks:>13} {ruled_out:>15} {blocks:>12}",
                r.ops[p]
            );
        }
    }
}

/// The results as one JSON line.
pub(crate) fn print_json(
    results: &[(&str, Outcome)],
    phases: &[String],
    w: Workload,
    scans: Option<&ScanPlan>,
    key_format: KeyFormatArg,
) {
    let (keys, reads) = (w.keys, w.reads);
    let stores: Vec<String> = results
            .iter()
            .map(|(name, r)| {
                let mut fields: Vec<String> = phases
                    .iter()
                    .zip(&r.ops)
                    .map(|(p, v)| format!("\"{p}\":{v:.0}"))
                    .collect();
                fields.push(format!(
                    "\"fill_us_per_op\":{:.3}",
                    r.fill_secs * 1e6 / keys as f64
                ));
                if let Some(s) = r.writes_fill_end {
                    fields.push(format!("\"wamp_fill_end\":{:.4}", s.amplification()));
                }
                if let Some(s) = r.writes_settled {
                    fields.push(format!("\"wamp_settled\":{:.4}", s.amplification()));
                }
                fields.push(format!(
                    "\"fill_keys_per_sec\":{:.0}",
                    keys as f64 / r.fill_secs
                ));
                fields.push(shape_fields("", &r.shape_settled));
                if let Some((secs, pct)) = r.stall() {
                    fields.push(format!("\"stall_s\":{secs:.3},\"stall_pct\":{pct:.2}"));
                }
                if let Some(o) = r.overwrite {
                    fields.push(format!(
                        "\"overwrite_us_per_op\":{:.3}",
                        o.secs * 1e6 / keys as f64
                    ));
                    if let Some(s) = o.end {
                        fields.push(format!("\"overwrite_wamp_end\":{:.4}", s.amplification()));
                    }
                    if let Some(s) = o.settled {
                        fields.push(format!(
                            "\"overwrite_wamp_settled\":{:.4}",
                            s.amplification()
                        ));
                    }
                    fields.push(shape_fields("overwrite_", &o.shape));
                    if let Some((secs, pct)) = o.stall() {
                        fields.push(format!(
                            "\"overwrite_stall_s\":{secs:.3},\"overwrite_stall_pct\":{pct:.2}"
                        ));
                    }
                }
                if let Some((u, p, tp)) = r.bloom {
                    fields.push(format!(
                        "\"bloom_useful\":{u},\"bloom_full_positive\":{p},\"bloom_full_true_positive\":{tp}"
                    ));
                }
                if let Some(fp) = r.fp_rate() {
                    fields.push(format!("\"fp_rate\":{fp}"));
                }
                if let Some(b) = r.filter_bytes {
                    fields.push(format!("\"filter_bytes\":{b}"));
                }
                if let Some(m) = r.read_while_writing {
                    fields.push(format!(
                        "\"readwhilewriting_present_us\":{:.3},\"readwhilewriting_missing_us\":{:.3},\"readwhilewriting_put_us\":{:.3}",
                        m.present_us(),
                        m.missing_us(),
                        m.put_us()
                    ));
                    if let Some(cpu) = m.reader_cpu_us_per_get() {
                        fields.push(format!("\"readwhilewriting_reader_cpu_us_per_get\":{cpu:.3}"));
                    }
                    if let (Some(mean), Some(max)) = (m.l0_mean, m.l0_max) {
                        fields.push(format!("\"readwhilewriting_l0_mean\":{mean:.2},\"readwhilewriting_l0_max\":{max}"));
                    }
                }
                for (phase, c) in phases.iter().skip(1).zip(&r.scan_counters) {
                    if let Some(c) = c {
                        fields.push(format!(
                            "\"{phase}_counters\":{{\"checked\":{},\"ruled_out\":{},\"blocks\":{}}}",
                            c.checked, c.ruled_out, c.blocks
                        ));
                    }
                }
                format!("\"{name}\":{{{}}}", fields.join(","))
            })
            .collect();
    let scan_fields = match scans {
        Some(plan) => format!(
            "\"scan_widths\":{:?},\"key_format\":\"{}\",\"range_filter_bits\":{},\"rocksdb_prefix_len\":{},",
            plan.widths,
            key_format.name(),
            w.range_filter_bits,
            w.rocksdb_prefix.json()
        ),
        None => String::new(),
    };
    println!(
            "{{\"keys\":{keys},\"reads\":{reads},\"batch\":{},\"compacted\":{},\"peer_shape\":\"{}\",\"compression_ratio\":{},\"siftdb_monkey\":{},\"siftdb_ribbon\":{},\"runs_per_level\":{},\"read_while_writing_secs\":{},\"readers_while_writing\":{},{scan_fields}\"stores\":{{{}}}}}",
            w.batch,
            w.compacted,
            w.shape.name(),
            w.compression_ratio.map_or("null".to_string(), |r| r.to_string()),
            w.siftdb_monkey,
            w.siftdb_ribbon,
            w.runs_per_level,
            w.read_while_writing_secs,
            w.readers_while_writing,
            stores.join(",")
        );
}

//! False positive rate against bits per key for the built-in filter policies (LevelDB's bloom, the
//! cache-local bloom, the binary fuse and the Ribbon filter), measured on the policies themselves
//! (a builder and `may_match`, no store), next to what theory predicts.
//!
//! cargo run --release -p siftdb-examples --example fpr_chart                            # writes docs/fpr_chart.{svg,csv}
//! cargo run --release -p siftdb-examples --example fpr_chart -- --keys 20000 --probes 20000 --out-dir /tmp/fpr
//!
//! For each bits/key from 2 to 20 a filter is built over `--keys` present keys and asked about
//! `--probes` absent keys; every "maybe" for an absent key is a false positive.
//!
//! Keys are 16 random bytes by default, as theory assumes. `--key-kind decimal` uses 16-byte
//! zero-padded decimals instead (even numbers present, odd absent, as in the other examples):
//! LevelDB's 32-bit hash maps many such keys onto one value, and its false positive rate stops
//! falling with more bits per key.
//!
//! `--range` measures the Grafite range filter instead: for 12, 16, 20 and 24 bits per key and
//! ranges of 2^0 to 2^16 integers, empty ranges starting anywhere (uniform) or just after a key
//! (correlated), against theory's `min(1, width / 2^(bits − 2))`; it writes
//! `range_fpr_chart.csv`:
//!
//! cargo run --release -p siftdb-examples --example fpr_chart -- --range --keys 1000000 --probes 200000

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, ValueEnum};
use plotters::prelude::*;
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use siftdb::filter::{SegmentedGrafite, SegmentedGrafiteBuilder};
use siftdb::{BinaryFuse, CacheLocalBloom, FilterPolicy, LevelDbBloom, Ribbon};

#[derive(Parser, Debug)]
#[command(about = "Measure and chart the false positive rate of siftdb's filter policies")]
struct Args {
    /// Where to write fpr_chart.svg and fpr_chart.csv.
    #[arg(long, default_value = "docs")]
    out_dir: PathBuf,
    /// Keys each filter is built from.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    keys: u64,
    /// Absent keys each filter is asked about.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    probes: u64,
    /// What the keys look like.
    #[arg(long, value_enum, default_value_t = KeyKind::Random)]
    key_kind: KeyKind,
    /// Measure the range filter (range false positive rate against width and bits per key).
    #[arg(long)]
    range: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum KeyKind {
    /// 16 random bytes.
    Random,
    /// 16-byte zero-padded decimal numbers.
    Decimal,
}

/// One measured point.
struct Point {
    policy: String,
    bits_per_key: f64,
    k: u32,
    false_positives: u64,
    measured: f64,
    theory: Option<f64>,
}

const BITS: std::ops::RangeInclusive<u32> = 2..=20;

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fpr_chart: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The `n`-th present (or absent) key, written into `buf`. Present and absent keys never coincide:
/// decimal ones are even and odd numbers; random ones come from two streams (a 128-bit clash is
/// not going to happen).
struct Keys {
    kind: KeyKind,
    present: bool,
    rng: StdRng,
    n: u64,
    buf: Vec<u8>,
}

impl Keys {
    fn new(kind: KeyKind, present: bool) -> Keys {
        Keys {
            kind,
            present,
            rng: StdRng::seed_from_u64(if present { 1 } else { 2 }),
            n: 0,
            buf: Vec::with_capacity(16),
        }
    }

    fn next_key(&mut self) -> &[u8] {
        self.buf.clear();
        match self.kind {
            KeyKind::Random => {
                self.buf.resize(16, 0);
                self.rng.fill_bytes(&mut self.buf);
            }
            KeyKind::Decimal => {
                let v = 2 * self.n + u64::from(!self.present);
                let _ = write!(DecimalWriter(&mut self.buf), "{v:016}");
            }
        }
        self.n += 1;
        &self.buf
    }
}

/// `fmt::Write` into a byte buffer, so decimal keys need no allocation.
struct DecimalWriter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for DecimalWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Builds one filter of `policy` over `keys` present keys and counts the false positives among
/// `probes` absent keys; also returns the filter's size in bytes and its probes as the policy
/// reads them from the bytes.
fn measure(policy: &dyn FilterPolicy, args: &Args) -> (u64, usize, Option<u32>) {
    let mut builder = policy.builder();
    let mut present = Keys::new(args.key_kind, true);
    for _ in 0..args.keys {
        builder.add_key(present.next_key());
    }
    let filter = builder.finish();
    // No false negatives, ever: check while we are here.
    let mut present = Keys::new(args.key_kind, true);
    for _ in 0..args.keys {
        assert!(policy.may_match(&filter, present.next_key()));
    }
    let mut absent = Keys::new(args.key_kind, false);
    let fps = (0..args.probes)
        .filter(|_| policy.may_match(&filter, absent.next_key()))
        .count() as u64;
    (fps, filter.len(), policy.probes_in(&filter))
}

/// The binary fuse filters: fixed fingerprint widths, so one point each, at the bits/key their
/// filters really take.
fn fuse_points(args: &Args) -> Vec<Point> {
    [(BinaryFuse::fuse8(), 8u32), (BinaryFuse::fuse16(), 16)]
        .into_iter()
        .map(|(policy, w)| {
            let (fp, bytes, _) = measure(&policy, args);
            Point {
                policy: "BinaryFuse".to_string(),
                bits_per_key: bytes as f64 * 8.0 / args.keys as f64,
                k: w,
                false_positives: fp,
                measured: fp as f64 / args.probes as f64,
                theory: policy.theoretical_fp_rate(f64::from(w)),
            }
        })
        .collect()
}

/// The Ribbon filter at every bits/key: the bits it really spends (trailer included), its result
/// bits as `k` (each halves the rate, as a bloom probe does at the optimum), and the theory for
/// this many keys (the rate depends a little on the key count).
fn ribbon_points(args: &Args) -> Vec<Point> {
    BITS.map(|bits| {
        let policy = Ribbon::new(f64::from(bits));
        let (fp, bytes, k) = measure(&policy, args);
        Point {
            policy: "Ribbon".to_string(),
            bits_per_key: bytes as f64 * 8.0 / args.keys as f64,
            k: k.unwrap_or(0),
            false_positives: fp,
            measured: fp as f64 / args.probes as f64,
            theory: Some(policy.theoretical_fp_rate_for(args.keys as usize)),
        }
    })
    .collect()
}

/// Every bits/key for one policy family (`make` builds the policy at a bits/key).
fn sweep(
    name: &str,
    make: impl Fn(f64) -> (Arc<dyn FilterPolicy>, u32),
    args: &Args,
) -> Vec<Point> {
    BITS.map(|bits| {
        let (policy, k) = make(f64::from(bits));
        let (fp, _, _) = measure(policy.as_ref(), args);
        Point {
            policy: name.to_string(),
            bits_per_key: f64::from(bits),
            k,
            false_positives: fp,
            measured: fp as f64 / args.probes as f64,
            theory: policy.theoretical_fp_rate(f64::from(bits)),
        }
    })
    .collect()
}

/// The range filter's false positive rate against range width, bits per key and query kind, on
/// 16-byte keys (an 8-byte head, then a random big-endian number).
fn run_range(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut rng = StdRng::seed_from_u64(11);
    let mut ints: Vec<u64> = (0..args.keys).map(|_| rng.next_u64()).collect();
    ints.sort_unstable();
    ints.dedup();
    let key = |x: u64| {
        let mut k = b"sensor:1".to_vec();
        k.extend_from_slice(&x.to_be_bytes());
        k
    };
    let mut csv = String::from(
        "bits_per_key,width,queries,correlated,empty_ranges,false_positives,measured_fp_rate,theoretical_fp_rate,filter_bits_per_key\n",
    );
    println!(
        "{} keys, {} ranges per point\n\n{:>8} {:>7} {:>10} {:>10} {:>10} {:>9}",
        ints.len(),
        args.probes,
        "bits/key",
        "width",
        "queries",
        "measured",
        "theory",
        "bits used"
    );
    for bits in [12.0, 16.0, 20.0, 24.0] {
        let mut builder = SegmentedGrafiteBuilder::new(bits, 1 << 16);
        for &x in &ints {
            builder.add_key(&key(x));
        }
        let bytes = builder.finish();
        let filter = SegmentedGrafite::from_bytes(&bytes).ok_or("filter did not read back")?;
        let used = filter.memory_bytes() as f64 * 8.0 / ints.len() as f64;
        for exp in 0..=16u32 {
            let width = 1u64 << exp;
            for correlated in [false, true] {
                let (mut empty, mut fp) = (0u64, 0u64);
                for _ in 0..args.probes {
                    let lo = match correlated {
                        true => ints[(rng.next_u64() % ints.len() as u64) as usize].wrapping_add(1),
                        false => rng.next_u64(),
                    };
                    let hi = lo.saturating_add(width - 1);
                    let next = ints.partition_point(|&x| x < lo);
                    if ints.get(next).is_some_and(|&x| x <= hi) {
                        continue;
                    }
                    empty += 1;
                    fp += u64::from(filter.may_contain(Some(&key(lo)), Some(&key(hi))));
                }
                let measured = fp as f64 / empty.max(1) as f64;
                let theory = filter.theoretical_fp_rate(width);
                println!(
                    "{bits:>8} {width:>7} {:>10} {:>9.4}% {:>9.4}% {used:>9.2}",
                    if correlated { "correlated" } else { "uniform" },
                    measured * 100.0,
                    theory * 100.0
                );
                let _ = writeln!(
                    csv,
                    "{bits},{width},{},{correlated},{empty},{fp},{measured:.8},{theory:.8},{used:.3}",
                    args.probes
                );
            }
        }
    }
    std::fs::create_dir_all(&args.out_dir)?;
    let csv_path = args.out_dir.join("range_fpr_chart.csv");
    std::fs::write(&csv_path, csv)?;
    println!("\nwrote {}", csv_path.display());
    Ok(())
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.range {
        return run_range(args);
    }
    // The three sweeps are measured on three threads; each is independent.
    let (leveldb, local, ribbon) = std::thread::scope(|s| {
        let a = s.spawn(|| {
            sweep(
                "LevelDbBloom",
                |b| {
                    let p = LevelDbBloom::new(b);
                    let k = p.num_probes();
                    (Arc::new(p) as Arc<dyn FilterPolicy>, k)
                },
                args,
            )
        });
        let b = s.spawn(|| {
            sweep(
                "CacheLocalBloom",
                |b| {
                    let p = CacheLocalBloom::new(b);
                    let k = p.num_probes();
                    (Arc::new(p) as Arc<dyn FilterPolicy>, k)
                },
                args,
            )
        });
        let c = s.spawn(|| ribbon_points(args));
        (a.join(), b.join(), c.join())
    });
    let series = [
        leveldb.map_err(|_| "measuring thread panicked")?,
        local.map_err(|_| "measuring thread panicked")?,
        fuse_points(args),
        ribbon.map_err(|_| "measuring thread panicked")?,
    ];

    let pct = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{:.4}%", r * 100.0));
    println!(
        "{} present keys, {} absent keys per filter, {:?} keys\n",
        args.keys, args.probes, args.key_kind
    );
    println!(
        "{:<16} {:>8} {:>3} {:>10} {:>10} {:>10}",
        "policy", "bits/key", "k", "FPs", "measured", "theory"
    );
    let mut csv = String::from(
        "policy,key_kind,bits_per_key,k,keys,absent_keys,false_positives,measured_fp_rate,theoretical_fp_rate\n",
    );
    for p in series.iter().flatten() {
        println!(
            "{:<16} {:>8.2} {:>3} {:>10} {:>10} {:>10}",
            p.policy,
            p.bits_per_key,
            p.k,
            p.false_positives,
            pct(Some(p.measured)),
            pct(p.theory)
        );
        let _ = writeln!(
            csv,
            "{},{:?},{:.3},{},{},{},{},{:.8},{}",
            p.policy,
            args.key_kind,
            p.bits_per_key,
            p.k,
            args.keys,
            args.probes,
            p.false_positives,
            p.measured,
            p.theory.map_or(String::new(), |t| format!("{t:.8}"))
        );
    }

    std::fs::create_dir_all(&args.out_dir)?;
    let csv_path = args.out_dir.join("fpr_chart.csv");
    std::fs::write(&csv_path, csv)?;
    let svg_path = args.out_dir.join("fpr_chart.svg");
    draw(&svg_path, &series, args)?;
    println!("\nwrote {} and {}", svg_path.display(), csv_path.display());
    Ok(())
}

fn draw(
    path: &std::path::Path,
    series: &[Vec<Point>],
    args: &Args,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    // A log axis cannot show 0: the floor is one false positive in all the probes.
    let floor = (1.0 / args.probes as f64).min(1e-4) / 2.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "siftdb filter policies: false positive rate ({} {:?} keys, {} absent)",
                args.keys, args.key_kind, args.probes
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(1.5f64..20.5f64, (floor..1.0f64).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("bits per key")
        .y_desc("false positive rate")
        .x_labels(20)
        .y_label_formatter(&|y| format!("{:.0e}", y))
        .draw()?;

    let colors = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
    ];
    for (points, color) in series.iter().zip(colors) {
        let Some(name) = points.first().map(|p| p.policy.clone()) else {
            continue;
        };
        let measured: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.false_positives > 0)
            .map(|p| (p.bits_per_key, p.measured))
            .collect();
        // A family with only a few fixed settings (the fuse widths) gets markers, not a line that
        // would suggest settings in between.
        let line = if points.len() > 2 {
            measured.clone()
        } else {
            Vec::new()
        };
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))?
            .label(format!("{name} measured"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(
            measured
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
        )?;
        let theory: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| p.theory.map(|t| (p.bits_per_key, t.max(floor))))
            .collect();
        // Theory of a few fixed settings: short ticks at each, no joining line.
        if points.len() <= 2 {
            for &(x, y) in &theory {
                chart.draw_series(LineSeries::new(
                    vec![(x - 0.3, y), (x + 0.3, y)],
                    color.mix(0.45).stroke_width(1),
                ))?;
            }
        }
        let theory = if points.len() > 2 { theory } else { Vec::new() };
        let light = color.mix(0.45);
        chart
            .draw_series(LineSeries::new(theory, light.stroke_width(1)))?
            .label(format!("{name} theory"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], light.stroke_width(1))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

//! `make bench`'s driver: runs sqsafe's charge-payment, a naive Rust consumer and Powertools for AWS Lambda
//! (Python) on the same events against the same local AWS, and writes the figures as JSON for `bench/render.py`.
//!
//! See `bench/README.md` for what is measured and how.
#![forbid(unsafe_code)]

mod api;
mod bed;
mod bench;
mod bill;
mod capacity;
mod compare;
mod events;
mod figures;
mod instructions;
mod measure;
mod pipeline;
mod plan;
mod procfs;
mod profile;
mod proxy;
mod report;
mod stream;
mod table;
mod trace;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;

use crate::bed::{Bed, Peer, Programs};
use crate::bench::Bench;
use crate::plan::Plan;
use crate::report::{Meta, Report};

/// Benchmarks sqsafe against its peers on the local AWS (moto server, started here).
#[derive(Debug, Parser)]
struct Args {
    /// A few batches of everything: checks that the harness works and asserts request counts, no timings.
    #[arg(long)]
    smoke: bool,
    /// Where the figures are written (JSON).
    #[arg(long, default_value = "target/bench/results.json")]
    out: PathBuf,
    /// Folder of the Rust peers' binaries (charge-payment, charge-payment-cached, naive-rust).
    #[arg(long, default_value = "target/release")]
    bins: PathBuf,
    /// The bench venv's Python, with Powertools and awslambdaric (scripts/bench-venv.sh).
    #[arg(long, default_value = ".venv-bench/bin/python")]
    python: PathBuf,
    /// Largest idempotency table for the table-size figure, in records.
    #[arg(long, default_value_t = 100_000)]
    max_table: usize,
    /// Skip the perf profiles of sqsafe (taken in a full run when `perf` is installed).
    #[arg(long)]
    no_profile: bool,
    /// Skip counting sqsafe's instructions per message with callgrind (done in a full run when valgrind is
    /// installed; about a minute).
    #[arg(long)]
    no_instructions: bool,
    /// Only the bill (figure 1b) and its checks: the claim mode, the keyed mode and Powertools, each a batch of 10
    /// fresh payments and the same batch again on moto, and the timed run the bill uses. For regenerating that
    /// section of bench/RESULTS.md alone (`make bench-bill`).
    #[arg(long, conflicts_with = "smoke")]
    bill_only: bool,
    /// Only figure 8, the idempotent HTTP layer (`sqsafe::api`) beside the same axum handler without it: moto and
    /// the proxy, no peer (`make bench-api`). With `--smoke`, a few requests of each kind.
    #[arg(long, conflicts_with = "bill_only")]
    api_only: bool,
    /// Only figure 9, Kinesis batches: sqsafe's claim and keyed modes and Powertools' BatchProcessor for Kinesis,
    /// requests, CPU and latency per record, and the order of a batch whose 4th record fails once (`make
    /// bench-kinesis`). With `--smoke`, a few batches.
    #[arg(long, conflicts_with_all = ["bill_only", "api_only"])]
    kinesis_only: bool,
    /// One side of `scripts/bench-compare.sh`: only charge-payment's claim and keyed modes from `--bins`, each
    /// `--cold-starts` cold starts (first answer) then `--batches` fresh batches of 10 on the warm process, under
    /// `--network`. With `--count`, their instructions per message under callgrind instead (module `compare`).
    #[arg(long, conflicts_with_all = ["smoke", "bill_only", "api_only"])]
    compare: bool,
    /// With `--compare`: count instructions under callgrind (under `--network` and on the canned backend with no
    /// added latency) instead of timing.
    #[arg(long, requires = "compare")]
    count: bool,
    /// With `--compare` or `--compare-base`: fresh batches of 10 per mode and run.
    #[arg(long, default_value_t = 80)]
    batches: usize,
    /// With `--compare` or `--compare-base`: cold starts per mode and run (the first answer is their median).
    #[arg(long, default_value_t = 3)]
    cold_starts: usize,
    /// With `--compare` or `--compare-base`: the network, BACKEND-MS: moto or canned, and the proxy's added latency
    /// per request in ms.
    #[arg(long, default_value = "moto-5", value_parser = compare::parse_network)]
    network: measure::Network,
    /// The comparison (what `scripts/bench-compare.sh` runs): this program run as `--compare` with the base's
    /// `--bins` (this folder) and the head's (`--compare-head`), interleaved `--pairs` times, then each counted
    /// under callgrind; the summary printed and appended to `--md`. The runs' JSON go beside `--out`.
    #[arg(long, requires = "compare_head", conflicts_with_all = ["smoke", "bill_only", "api_only", "compare"])]
    compare_base: Option<PathBuf>,
    /// The head's folder of binaries (see `--compare-base`).
    #[arg(long, requires = "compare_base")]
    compare_head: Option<PathBuf>,
    /// With `--compare-base`: what the summary calls the base and the head (commits).
    #[arg(long, default_value = "base")]
    base_label: String,
    /// See `--base-label`.
    #[arg(long, default_value = "head")]
    head_label: String,
    /// With `--compare-base`: pairs of runs (base first in odd pairs, head first in even ones).
    #[arg(long, default_value_t = 4)]
    pairs: usize,
    /// With `--compare-base`: base then head in every pair (kept for comparing with runs made so; a load that rises
    /// through the run then lands on the head).
    #[arg(long)]
    base_first: bool,
    /// With `--compare-base`: no run, only the summary of the runs already beside `--out` (as many pairs as there
    /// are), printed and appended to `--md`.
    #[arg(long)]
    summary_only: bool,
    /// With `--compare-base`: the results file the summary is appended to.
    #[arg(long, default_value = "bench/COMPARE.md")]
    md: PathBuf,
    /// With `--compare-base`: no results file (the summary is printed, and kept beside `--out`).
    #[arg(long)]
    no_md: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("sqsafe-bench: some checks failed (see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("sqsafe-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs every figure; `Ok(false)` when a check failed (the figures are written all the same).
async fn run(args: Args) -> Result<bool, String> {
    let started = Instant::now();
    if let (Some(base), Some(head)) = (&args.compare_base, &args.compare_head) {
        return compare_builds(&args, base, head).await;
    }
    let plan = if args.smoke {
        Plan::smoke()
    } else {
        Plan::full(args.max_table)
    };
    let root = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let absolute = |p: &PathBuf| {
        if p.is_absolute() {
            p.clone()
        } else {
            root.join(p)
        }
    };
    let out = absolute(&args.out);
    let logs = out.with_extension("logs");
    // The functions' logs are appended to: start each run with none, and with no old profile.
    let _ = std::fs::remove_dir_all(&logs);
    let _ = std::fs::remove_dir_all(out.with_extension("profiles"));
    let programs = Programs {
        bins: absolute(&args.bins),
        python: absolute(&args.python),
        powertools: bed::powertools_dir(&root),
        logs,
    };
    let peers = if args.api_only {
        Vec::new()
    } else if args.compare {
        vec![programs.bins.join("charge-payment")]
    } else if args.kinesis_only {
        vec![
            programs.bins.join("charge-payment"),
            programs.python.clone(),
        ]
    } else {
        vec![
            programs.bins.join("charge-payment"),
            programs.bins.join("charge-payment-cached"),
            programs.bins.join("naive-rust"),
            programs.python.clone(),
        ]
    };
    for program in peers {
        if !program.exists() {
            return Err(format!(
                "{} is missing: run scripts/bench.sh",
                program.display()
            ));
        }
    }
    let tick = procfs::clock_tick();
    let report = Report {
        meta: Meta {
            mode: if plan.smoke {
                "smoke"
            } else if args.bill_only {
                "bill"
            } else if args.api_only {
                "api"
            } else if args.kinesis_only {
                "kinesis"
            } else if args.count {
                "compare-count"
            } else if args.compare {
                "compare"
            } else {
                "full"
            },
            // `--api-only` measures the layer in this process: the driver's own build counts.
            profile: if args.api_only {
                if cfg!(debug_assertions) {
                    "debug".to_owned()
                } else {
                    "release".to_owned()
                }
            } else {
                programs
                    .bins
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            },
            started_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            load_start: report::loadavg(),
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            clock_tick_ms: tick.as_secs_f64() * 1e3,
            ..Meta::default()
        },
        ..Report::default()
    };

    let bed = Bed::start(programs).await?;
    let mut bench = Bench::new(&bed, &plan, report, tick);
    if !plan.smoke && !args.bill_only && !args.api_only && !args.no_profile {
        if profile::available() {
            bench.profiles = Some(out.with_extension("profiles"));
        } else {
            eprintln!("perf is not installed: no CPU profile (apt-get install linux-perf for one)");
        }
    }
    let mut outcome = if args.count {
        bench
            .compare_count(args.network, &out.with_extension("callgrind"))
            .await
    } else if args.compare {
        bench
            .compare(compare::SideRun {
                batches: args.batches,
                cold_starts: args.cold_starts,
                network: args.network,
            })
            .await
    } else if args.bill_only {
        bench.bill_only().await
    } else if args.api_only {
        bench.api().await
    } else if args.kinesis_only {
        bench.kinesis().await
    } else {
        figures(&mut bench).await
    };
    if outcome.is_ok()
        && !plan.smoke
        && !args.bill_only
        && !args.api_only
        && !args.kinesis_only
        && !args.compare
        && !args.no_instructions
    {
        if instructions::available() {
            outcome = bench.instructions(out.with_extension("callgrind")).await;
        } else {
            eprintln!(
                "valgrind is not installed: no instruction counts (apt-get install valgrind for them)"
            );
        }
    }
    bench.check_ledger();
    let mut report = bench.report;
    bed.shutdown().await;

    report.meta.load_end = report::loadavg();
    report.meta.seconds = started.elapsed().as_secs_f64();
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let json = serde_json::to_string_pretty(&report).map_err(|e| format!("JSON: {e}"))?;
    std::fs::write(&out, json).map_err(|e| format!("{}: {e}", out.display()))?;
    eprintln!(
        "figures written to {} in {:.0} s; {} checks, {} failed",
        out.display(),
        report.meta.seconds,
        report.checks.len(),
        report.checks.iter().filter(|c| !c.ok).count()
    );
    outcome?;
    Ok(report.checks.iter().all(|c| c.ok))
}

/// `--compare-base DIR --compare-head DIR` (module `compare`).
async fn compare_builds(args: &Args, base: &Path, head: &Path) -> Result<bool, String> {
    let root = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let absolute = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            root.join(p)
        }
    };
    let out = absolute(&args.out);
    let dir = out.parent().map_or_else(|| root.clone(), Path::to_path_buf);
    let side = |role, label: &str, bins: &Path| compare::Side {
        role,
        label: label.to_owned(),
        bins: absolute(bins),
    };
    let comparison = compare::Comparison {
        base: side("base", &args.base_label, base),
        head: side("head", &args.head_label, head),
        pairs: args.pairs.max(1),
        base_first: args.base_first,
        summary_only: args.summary_only,
        side: compare::SideRun {
            batches: args.batches,
            cold_starts: args.cold_starts,
            network: args.network,
        },
        network_arg: format!("{:?}-{}", args.network.backend, args.network.latency_ms)
            .to_lowercase(),
        instructions: !args.no_instructions,
        dir,
        out,
        md: (!args.no_md).then(|| absolute(&args.md)),
    };
    for s in [&comparison.base, &comparison.head] {
        let program = s.bins.join("charge-payment");
        if !program.exists() {
            return Err(format!(
                "{} is missing: run scripts/bench-compare.sh",
                program.display()
            ));
        }
    }
    compare::run(&comparison).await
}

async fn figures(bench: &mut Bench<'_>) -> Result<(), String> {
    for peer in [
        Peer::Naive,
        Peer::Sqsafe,
        Peer::SqsafeKeyed,
        Peer::Powertools,
        Peer::SqsafeCached,
        Peer::PowertoolsCached,
        Peer::SqsafeQuiet,
        Peer::SqsafeMultiThread,
    ] {
        bench.peer(peer).await?;
    }
    bench.bill();
    bench.table_sizes().await?;
    bench.moto_ceiling().await?;
    bench.pipeline().await?;
    bench.api().await?;
    bench.kinesis().await
}

//! `make model`: the deeper check (release build). Prints, for each configuration, the states explored, the depth
//! reached and the time; each mutant with the length of the trace that caught it; the skew at which property 2
//! fails for each margin; and the shortest trace of a second application without a downstream key.
//!
//! `cargo run --release -p sqsafe-model -p sqsafe-workspace-hack -- [--threads N] [--traces] [--http]`
//! (`--http`: the idempotent HTTP layer's part alone).

use std::time::Instant;

use sqsafe_model::{
    Config, HttpConfig, HttpMutation, Mutation, OutboxConfig, P2_SECOND_ONLY_NAMED, Report, Stop,
    StreamConfig, check, check_http, check_outbox, check_stream,
};

fn deep() -> Vec<(&'static str, Config)> {
    let bounded = Config::bounded();
    vec![
        (
            "2 instances, a message and 2 duplicates, crash + lost answer",
            Config {
                messages: vec![0, 0, 0],
                ..bounded.clone()
            },
        ),
        (
            "3 instances, a message and its duplicate, crash + lost answer",
            Config {
                instances: 3,
                ..bounded.clone()
            },
        ),
        (
            "2 instances, 2 crashes, 2 lost answers, a failing effect, cache",
            Config {
                crashes: 2,
                lost_writes: 2,
                effect_failures: 1,
                cache: true,
                ..bounded.clone()
            },
        ),
        (
            "downstream key, 3 instances",
            Config {
                instances: 3,
                downstream_key: true,
                ..bounded.clone()
            },
        ),
        (
            "payload mismatch: contents 0, 0, 1",
            Config {
                messages: vec![0, 0, 1],
                ..bounded.clone()
            },
        ),
        (
            "heartbeat, receives until t=2",
            Config {
                last_receive: 2,
                ..Config::heartbeat()
            },
        ),
        ("short window", Config::short_window()),
        (
            "keyed mode: 3 instances, a message and its duplicate, crash + lost answer",
            Config {
                instances: 3,
                ..Config::keyed()
            },
        ),
        (
            "keyed mode: contents 0, 0, 1, 2 crashes, 2 lost answers, a failing effect, cache",
            Config {
                messages: vec![0, 0, 1],
                crashes: 2,
                lost_writes: 2,
                effect_failures: 1,
                cache: true,
                ..Config::keyed()
            },
        ),
        (
            "keyed mode over a crashed claim-mode attempt: contents 0, 0, 1, a crash, a lost answer, cache",
            Config {
                messages: vec![0, 0, 1],
                crashes: 1,
                cache: true,
                ..Config::keyed_over_leftover_claim()
            },
        ),
    ]
}

fn print_report(name: &str, report: &Report, traces: bool) {
    println!("- {name}: {}", report.summary());
    for v in &report.violations {
        println!("  VIOLATION of \"{}\" ({} steps):", v.property, v.steps);
        println!("{}", v.trace);
    }
    if traces && let Some(e) = &report.example {
        println!(
            "  shortest second application without a downstream key ({} steps):",
            e.steps
        );
        println!("{}", e.trace);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads = args
        .iter()
        .position(|a| a == "--threads")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let traces = args.iter().any(|a| a == "--traces");
    // `--only N`: the N-th deeper configuration alone (0-based), then stop.
    let only: Option<usize> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok());
    // `--http`: the HTTP layer's configurations and mutants alone.
    if args.iter().any(|a| a == "--http") {
        let failures = http_layer(threads, traces);
        if failures > 0 {
            std::process::exit(1);
        }
        return;
    }
    if let Some(n) = only {
        if let Some((name, config)) = deep().into_iter().nth(n) {
            let report = check(config, Stop::Exhaustive, threads);
            print_report(name, &report, traces);
        }
        return;
    }
    let started = Instant::now();
    let mut failures = 0;

    println!("sqsafe-model: the claim protocol, checked exhaustively ({threads} threads)\n");
    println!("Bounded (as `make test`):");
    let bounded = check(Config::bounded(), Stop::Exhaustive, threads);
    print_report("2 instances, a message and its duplicate", &bounded, true);
    failures += bounded.violations.len();

    println!("\nDeeper:");
    for (name, config) in deep() {
        let report = check(config, Stop::Exhaustive, threads);
        print_report(name, &report, traces);
        failures += report.violations.len();
    }

    println!("\nMutants (each guard reverted alone; the shortest trace that catches it):");
    for mutation in Mutation::ALL {
        let report = check(Config::for_mutant(mutation), Stop::FirstFailure, threads);
        match report.violations.iter().min_by_key(|v| v.steps) {
            Some(v) => {
                println!(
                    "- {}: caught by \"{}\" in {} steps ({})",
                    mutation.describe(),
                    v.property,
                    v.steps,
                    report.summary()
                );
                if traces {
                    println!("{}", v.trace);
                }
            }
            None => {
                failures += 1;
                println!(
                    "- {}: NOT CAUGHT ({})",
                    mutation.describe(),
                    report.summary()
                );
            }
        }
    }

    println!("\nClock skew (no crash, no lost answer): property 2 without a downstream key");
    for margin in 1..=2u8 {
        let base = Config {
            margin,
            crashes: 0,
            lost_writes: 0,
            ..Config::bounded()
        };
        let smallest = (0..=margin + 2).find(|&skew| {
            let report = check(
                Config {
                    skew,
                    ..base.clone()
                },
                Stop::FirstFailure,
                threads,
            );
            let broken = report
                .violations
                .iter()
                .find(|v| v.property == P2_SECOND_ONLY_NAMED);
            if let Some(v) = broken
                && traces
            {
                println!("{}", v.trace);
            }
            broken.is_some()
        });
        match smallest {
            Some(skew) => println!(
                "- margin {margin} s: holds up to a skew of {} s, fails from {skew} s (margin + {} s)",
                skew - 1,
                skew - margin
            ),
            None => println!("- margin {margin} s: holds for every skew tried"),
        }
    }

    println!(
        "\nOutbox relay (publish, then mark SENT; the stream mapping retries, then gives up):"
    );
    for (name, config, expect_stranded) in [
        (
            "3 events, 3 retries, 3 failures",
            OutboxConfig {
                events: 3,
                max_retries: 3,
                failures: 3,
                sweeper: false,
            },
            false,
        ),
        (
            "3 events, 3 retries, 4 failures, no sweeper (sqsafe today)",
            OutboxConfig {
                events: 3,
                max_retries: 3,
                failures: 4,
                sweeper: false,
            },
            true,
        ),
        (
            "3 events, 3 retries, 4 failures, with a sweeper",
            OutboxConfig {
                events: 3,
                max_retries: 3,
                failures: 4,
                sweeper: true,
            },
            false,
        ),
    ] {
        let report = check_outbox(config);
        println!(
            "- {name}: {} states ({} distinct), depth {}, {:.1?}",
            report.states, report.unique_states, report.max_depth, report.elapsed
        );
        for (property, steps, trace) in &report.violations {
            println!(
                "  \"{property}\" fails in {steps} steps{}",
                if expect_stranded {
                    " (expected: no sweeper)"
                } else {
                    ""
                }
            );
            if traces {
                println!("{trace}");
            }
        }
        if report.violations.is_empty() == expect_stranded {
            failures += 1;
        }
    }

    println!(
        "\nStream consumer (Lambda's checkpoint and retries; records of keys A, A, B, A; batches of 3; 2 retries):"
    );
    for (name, config, expect_out_of_order) in [
        (
            "the stop rule, 3 failures, 1 crash",
            StreamConfig {
                failures: 3,
                ..StreamConfig::bounded()
            },
            false,
        ),
        (
            "the stop rule, 1 retry, 3 failures (records given up on)",
            StreamConfig {
                max_retries: 1,
                failures: 3,
                ..StreamConfig::bounded()
            },
            false,
        ),
        (
            "no stop rule (every record of the batch runs), 3 failures, 1 crash",
            StreamConfig {
                failures: 3,
                stop_rule: false,
                ..StreamConfig::bounded()
            },
            true,
        ),
    ] {
        let report = check_stream(config);
        let found = &report.found;
        println!(
            "- {name}: {} states ({} distinct), depth {}, {:.1?}",
            found.states, found.unique_states, found.max_depth, found.elapsed
        );
        for (property, steps, trace) in &found.violations {
            println!(
                "  \"{property}\" fails in {steps} steps{}",
                if expect_out_of_order {
                    " (expected: no stop rule)"
                } else {
                    ""
                }
            );
            if traces {
                println!("{trace}");
            }
        }
        if found.violations.is_empty() == expect_out_of_order {
            failures += 1;
        }
    }

    failures += http_layer(threads, traces);

    println!(
        "\n{failures} unexpected result(s); total {:.1?}",
        started.elapsed()
    );
    if failures > 0 {
        std::process::exit(1);
    }
}

/// The idempotent HTTP layer (`sqsafe::api`): deeper configurations than `make test`'s, then its mutants. Returns the
/// unexpected results.
fn http_layer(threads: usize, traces: bool) -> usize {
    println!(
        "\nIdempotent HTTP layer (sqsafe::api: clients that retry, callers that share a key):"
    );
    let mut failures = 0;
    for (name, config) in [
        (
            "one request, 4 attempts, 2 crashes, 2 lost answers, 2 handler 5xx, handlers up to 4 ticks (lease 2), \
             sends until tick 5",
            HttpConfig {
                attempts: 4,
                crashes: 2,
                lost_answers: 2,
                handler_failures: 2,
                handler_ticks: 4,
                last_send: 5,
                ..HttpConfig::bounded()
            },
        ),
        (
            "two callers, one key, skew 1, 3 attempts each, handlers up to 4 ticks, sends until tick 4",
            HttpConfig {
                attempts: 3,
                skew: 1,
                handler_ticks: 4,
                last_send: 4,
                ..HttpConfig::two((0, 0), (1, 0))
            },
        ),
        (
            "one caller, contents 0 and 1, skew 1, 3 attempts each, a handler 5xx, handlers up to 4 ticks, sends \
             until tick 4",
            HttpConfig {
                attempts: 3,
                skew: 1,
                handler_failures: 1,
                handler_ticks: 4,
                last_send: 4,
                ..HttpConfig::two((0, 0), (0, 1))
            },
        ),
    ] {
        let report = check_http(config, false, threads);
        println!("- {name}: {}", report.summary());
        for (property, steps, trace) in &report.violations {
            failures += 1;
            println!("  VIOLATION of \"{property}\" ({steps} steps):\n{trace}");
        }
    }
    println!(
        "\nHTTP layer mutants (each guard reverted alone; the shortest trace that catches it):"
    );
    for mutation in HttpMutation::ALL {
        let report = check_http(HttpConfig::for_mutant(mutation), true, threads);
        match report.violations.iter().min_by_key(|v| v.1) {
            Some((property, steps, trace)) => {
                println!(
                    "- {}: caught by \"{property}\" in {steps} steps ({})",
                    mutation.describe(),
                    report.summary()
                );
                if traces {
                    println!("{trace}");
                }
            }
            None => {
                failures += 1;
                println!(
                    "- {}: NOT CAUGHT ({})",
                    mutation.describe(),
                    report.summary()
                );
            }
        }
    }
    failures
}

//! The bounded check `make test` runs (debug build): 2 instances, a message and its duplicate, one crash and one
//! lost answer, every interleaving up to the horizon; then each mutant, and the skew at which property 2 fails. Then
//! the idempotent HTTP layer's model (property 9): retries of one key, other content, two callers, and its mutants.

use sqsafe_model::{
    Config, Mutation, P1_AT_MOST_ONCE_WITH_KEY, P2_SECOND_ONLY_NAMED, P4_NOT_STUCK, P7_NONE_LOST,
    Report, Stop, check,
};

fn clean(name: &str, config: Config) -> Report {
    let report = check(config, Stop::Exhaustive, 1);
    eprintln!("{name}: {}", report.summary());
    for v in &report.violations {
        eprintln!(
            "VIOLATION of {} ({} steps):\n{}",
            v.property, v.steps, v.trace
        );
    }
    assert!(
        report.violations.is_empty(),
        "{name}: {} properties fail",
        report.violations.len()
    );
    report
}

#[test]
fn duplicates_without_a_downstream_key() {
    let report = clean("duplicates, no downstream key", Config::bounded());
    // Property 2's named case exists, and here is its shortest trace.
    let example = report
        .example
        .expect("a second application on a named trace");
    eprintln!(
        "shortest second application ({} steps):\n{}",
        example.steps, example.trace
    );
}

#[test]
fn duplicates_with_a_downstream_key() {
    let config = Config {
        downstream_key: true,
        ..Config::bounded()
    };
    let report = clean("duplicates, downstream key", config);
    assert!(report.example.is_none());
}

#[test]
fn other_content_for_the_same_key() {
    let config = Config {
        messages: vec![0, 1],
        ..Config::bounded()
    };
    clean("payload mismatch", config);
}

#[test]
fn local_cache_and_failing_effects() {
    let config = Config {
        cache: true,
        effect_failures: 1,
        crashes: 0,
        ..Config::bounded()
    };
    clean("cache + effect failure", config);
}

#[test]
fn heartbeat_running_past_the_window() {
    // The window is the shortest the builder accepts for the beat's lease and the margin, and the effect runs longer:
    // each extension must carry the record's expiry past the new lease and the margin.
    clean("heartbeat", Config::heartbeat());
}

#[test]
fn window_shorter_than_a_deadline_lease() {
    clean("short window", Config::short_window());
}

#[test]
fn every_message_ends_when_sqs_keeps_redelivering() {
    clean("settling", Config::settling());
}

/// The keyed mode (no claim: read, effect under the downstream key, one conditional put) under the bounded check's
/// faults: a crash, a lost answer, clock skew, a delivery that read before the other's completion.
#[test]
fn keyed_mode_duplicates() {
    clean("keyed mode, duplicates", Config::keyed());
}

#[test]
fn keyed_mode_other_content_for_the_same_key() {
    let config = Config {
        messages: vec![0, 1],
        ..Config::keyed()
    };
    clean("keyed mode, payload mismatch", config);
}

#[test]
fn keyed_mode_local_cache_and_failing_effects() {
    let config = Config {
        cache: true,
        effect_failures: 1,
        crashes: 0,
        ..Config::keyed()
    };
    clean("keyed mode, cache + effect failure", config);
}

/// The keyed mode over what the claim mode left: a crashed attempt's `IN_PROGRESS` record of content 0 (its call
/// applied downstream, or never sent), its message and another content under the key.
#[test]
fn keyed_mode_over_a_crashed_claim_mode_attempt() {
    clean(
        "keyed mode, leftover claim",
        Config::keyed_over_leftover_claim(),
    );
}

#[test]
fn keyed_mode_every_message_ends_when_sqs_keeps_redelivering() {
    let config = Config {
        keyed: true,
        downstream_key: true,
        ..Config::settling()
    };
    clean("keyed mode, settling", config);
}

#[test]
fn every_mutant_is_caught() {
    for mutation in Mutation::ALL {
        let report = check(Config::for_mutant(mutation), Stop::FirstFailure, 1);
        let caught = report
            .violations
            .iter()
            .min_by_key(|v| v.steps)
            .unwrap_or_else(|| panic!("mutant not caught: {}", mutation.describe()));
        eprintln!(
            "mutant `{}` caught by \"{}\" in {} steps ({}):\n{}",
            mutation.describe(),
            caught.property,
            caught.steps,
            report.summary(),
            caught.trace
        );
        if mutation == Mutation::LeaseNeverEnds {
            // Property 4's liveness check is not vacuous: a key whose lease never ends is caught by it.
            assert_eq!(caught.property, P4_NOT_STUCK);
        }
        if mutation == Mutation::NoRedelivery {
            // Property 7's "every message ends" is not vacuous: a message never redelivered is caught by it.
            assert_eq!(caught.property, P7_NONE_LOST);
        }
        if mutation == Mutation::KeyedIgnoresFingerprint {
            // Other content replayed as the completed one: a message ends "replayed" though its content never applied.
            assert_eq!(caught.property, P7_NONE_LOST);
        }
        if mutation == Mutation::KeyedWithoutDownstreamKey {
            // Two deliveries that read before either completed both apply: the mode's assumption is needed.
            assert_eq!(caught.property, P1_AT_MOST_ONCE_WITH_KEY);
        }
    }
}

#[test]
fn skew_beyond_the_margin_breaks_property_2() {
    let base = Config {
        crashes: 0,
        lost_writes: 0,
        ..Config::bounded()
    };
    let margin = base.margin;
    for skew in 0..=margin + 1 {
        let report = check(
            Config {
                skew,
                ..base.clone()
            },
            Stop::FirstFailure,
            1,
        );
        let broken = report
            .violations
            .iter()
            .find(|v| v.property == P2_SECOND_ONLY_NAMED);
        eprintln!(
            "skew {skew} tick(s), margin {margin}: property 2 {} ({})",
            if broken.is_some() { "FAILS" } else { "holds" },
            report.summary()
        );
        if let Some(v) = broken {
            eprintln!("{}", v.trace);
        }
        assert_eq!(
            broken.is_some(),
            skew > margin,
            "skew {skew}, margin {margin}"
        );
    }
}

#[test]
fn outbox_publishes_every_event_while_failures_stay_within_the_retries() {
    let report = sqsafe_model::check_outbox(sqsafe_model::OutboxConfig::bounded());
    eprintln!(
        "outbox: {} states ({} distinct), depth {}, {:.1?}",
        report.states, report.unique_states, report.max_depth, report.elapsed
    );
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

#[test]
fn outbox_without_a_sweeper_strands_an_event_past_the_retries() {
    // One failure more than the stream mapping retries: the record goes to the on-failure queue and its event stays
    // PENDING, unpublished, until someone acts on the alarm. A sweeper would publish it.
    let stranded = sqsafe_model::OutboxConfig {
        failures: 3,
        ..sqsafe_model::OutboxConfig::bounded()
    };
    let report = sqsafe_model::check_outbox(stranded.clone());
    let (name, steps, trace) = report
        .violations
        .iter()
        .find(|v| v.0 == sqsafe_model::P8_PUBLISHED)
        .expect("an event stranded past the retries");
    eprintln!("{name}: fails without a sweeper in {steps} steps:\n{trace}");
    let swept = sqsafe_model::check_outbox(sqsafe_model::OutboxConfig {
        sweeper: true,
        ..stranded
    });
    assert!(swept.violations.is_empty(), "{:?}", swept.violations);
}

#[test]
fn a_stream_consumer_with_the_stop_rule_applies_each_record_once_in_order() {
    let report = sqsafe_model::check_stream(sqsafe_model::StreamConfig::bounded());
    let found = &report.found;
    eprintln!(
        "streams: {} states ({} distinct), depth {}, {:.1?}",
        found.states, found.unique_states, found.max_depth, found.elapsed
    );
    assert!(found.violations.is_empty(), "{:?}", found.violations);
}

#[test]
fn without_the_stop_rule_a_later_record_of_a_key_is_applied_before_the_failed_one() {
    let report = sqsafe_model::check_stream(sqsafe_model::StreamConfig {
        stop_rule: false,
        ..sqsafe_model::StreamConfig::bounded()
    });
    let names: Vec<&str> = report.found.violations.iter().map(|v| v.0).collect();
    assert_eq!(
        names,
        [sqsafe_model::P10_IN_ORDER],
        "{:?}",
        report.found.violations
    );
    let (_, steps, trace) = &report.found.violations[0];
    eprintln!("without the stop rule, out of order in {steps} steps:\n{trace}");
    // At the least: a batch handed over, its first record failing, the next of the same key applied.
    assert!(*steps >= 3 && trace.contains("Fail"), "{trace}");
}

#[test]
fn records_past_the_retries_are_given_up_never_applied_twice() {
    // More failures than the mapping retries: a record is given up on (its metadata to the on-failure destination);
    // what is applied is still applied once, in order.
    let report = sqsafe_model::check_stream(sqsafe_model::StreamConfig {
        max_retries: 1,
        failures: 3,
        ..sqsafe_model::StreamConfig::bounded()
    });
    assert!(
        report.found.violations.is_empty(),
        "{:?}",
        report.found.violations
    );
}

fn clean_http(name: &str, config: sqsafe_model::HttpConfig) -> sqsafe_model::HttpReport {
    let report = sqsafe_model::check_http(config, false, 1);
    eprintln!("{name}: {}", report.summary());
    for (property, steps, trace) in &report.violations {
        eprintln!("VIOLATION of {property} ({steps} steps):\n{trace}");
    }
    assert!(
        report.violations.is_empty(),
        "{name}: {} properties fail",
        report.violations.len()
    );
    report
}

/// The HTTP layer: one request and its retries, concurrent or after a `5xx`, a `504` (the handler running on past its
/// first lease), a crash mid-handler or a lost answer.
#[test]
fn api_retries_of_one_key() {
    let report = clean_http(
        "api, retries of one key",
        sqsafe_model::HttpConfig::bounded(),
    );
    // Each scenario is reached, not vacuously absent: the lost answer replayed, the answer of a handler that outlived
    // its lease replayed to the retry, the retry after a crash mid-handler (its lease ended) and after a release ran
    // the handler, and the named case of a second run exists.
    for example in [
        sqsafe_model::EXAMPLE_LOST_ANSWER_REPLAYED,
        sqsafe_model::EXAMPLE_OUTLIVED_LEASE_REPLAYED,
        sqsafe_model::EXAMPLE_RETRY_AFTER_CRASH,
        sqsafe_model::EXAMPLE_RETRY_AFTER_RELEASE,
        sqsafe_model::EXAMPLE_HTTP_SECOND_RUN,
    ] {
        assert!(report.examples.contains(&example), "not reached: {example}");
    }
}

#[test]
fn api_other_content_under_one_key() {
    let config = sqsafe_model::HttpConfig {
        skew: 1,
        ..sqsafe_model::HttpConfig::two((0, 0), (0, 1))
    };
    clean_http("api, other content", config);
}

#[test]
fn api_two_callers_with_one_key() {
    for other in [0, 1] {
        let report = clean_http(
            "api, two callers",
            sqsafe_model::HttpConfig::two((0, 0), (1, other)),
        );
        assert!(
            report
                .examples
                .contains(&sqsafe_model::EXAMPLE_LOST_ANSWER_REPLAYED)
        );
    }
}

#[test]
fn every_api_mutant_is_caught() {
    for mutation in sqsafe_model::HttpMutation::ALL {
        let report =
            sqsafe_model::check_http(sqsafe_model::HttpConfig::for_mutant(mutation), true, 1);
        let (property, steps, trace) = report
            .violations
            .iter()
            .min_by_key(|v| v.1)
            .unwrap_or_else(|| panic!("mutant not caught: {}", mutation.describe()));
        eprintln!(
            "mutant `{}` caught by \"{property}\" in {steps} steps ({}):\n{trace}",
            mutation.describe(),
            report.summary()
        );
        let expected = match mutation {
            // A request handed an answer that is not its own: another caller's, or another content's.
            sqsafe_model::HttpMutation::NoCallerScope
            | sqsafe_model::HttpMutation::ReplayIgnoresFingerprint => {
                sqsafe_model::P9_REPLAY_IS_STORED
            }
            // The old layer's timeout: the handler stopped at its lease after it may have taken its effect, its key
            // released, and the retry runs it again. Without the heartbeat, a retry takes the running handler's key
            // over and both run. Neither crashed.
            sqsafe_model::HttpMutation::ReleaseAtLease
            | sqsafe_model::HttpMutation::NoLeaseExtension => sqsafe_model::P9_HANDLER_AT_MOST_ONCE,
            sqsafe_model::HttpMutation::MismatchTakesOverPassedLease => {
                sqsafe_model::P9_OTHER_CONTENT_NEVER_RUNS
            }
            // A crashed attempt's key still in progress at the end: the liveness check is not vacuous.
            sqsafe_model::HttpMutation::ClaimWithoutDeadline => sqsafe_model::P9_RETRY_RUNS,
        };
        assert_eq!(*property, expected, "{}", mutation.describe());
    }
}

/// The claim-held property is not vacuous: without the heartbeat, the handler that ran past its lease finds its claim
/// taken over when it stores its answer.
#[test]
fn api_claim_lost_without_the_heartbeat() {
    let config = sqsafe_model::HttpConfig::for_mutant(sqsafe_model::HttpMutation::NoLeaseExtension);
    let report = sqsafe_model::check_http(config, false, 1);
    eprintln!("api, no heartbeat: {}", report.summary());
    for property in [
        sqsafe_model::P9_HANDLER_AT_MOST_ONCE,
        sqsafe_model::P9_CLAIM_HELD,
    ] {
        assert!(
            report.violations.iter().any(|v| v.0 == property),
            "not broken: {property}"
        );
    }
}

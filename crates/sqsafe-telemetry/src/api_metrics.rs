//! One CloudWatch Embedded Metric Format line per HTTP request that `sqsafe::api`'s idempotency layer guards, the
//! counterpart of a consumer's per-batch line ([`crate::metrics`]).
//!
//! ```
//! use std::time::Duration;
//! use sqsafe_telemetry::api_metrics::{RequestOutcome, request_emf};
//!
//! let doc = request_emf("sqsafe", "orders-api", 1_714_564_800_000, RequestOutcome::Replayed, Duration::from_millis(3));
//! assert_eq!(doc["api"], "orders-api");
//! assert_eq!(doc["RequestsReplayed"], 1);
//! assert_eq!(doc["RequestsExecuted"], 0); // every counter, every request
//! assert_eq!(doc["RequestDuration"], 3.0);
//! ```
//!
//! One metric directive, dimension set `[["api"]]` (the layer's record name), one counter per outcome
//! ([`RequestOutcome::ALL`], unit `Count`, exactly one of them 1) and `RequestDuration` in milliseconds. Every counter
//! is written every time, zeros included, so an alarm on `RequestsStoreFailed` or `RequestsReleased` sees a
//! continuous series.

use std::io;
use std::time::Duration;

use serde_json::{Value, json};

/// The dimension that names the API (the idempotency layer's record name).
pub const API_DIMENSION: &str = "api";

/// The metric name of a request's duration, in milliseconds.
pub const REQUEST_DURATION: &str = "RequestDuration";

/// How a request the layer guarded ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestOutcome {
    /// The handler ran and its answer was stored: `RequestsExecuted`.
    Executed,
    /// A repeat answered with the stored answer: `RequestsReplayed`.
    Replayed,
    /// A repeat while the first was in flight, answered `409`: `RequestsInProgress`.
    InProgress,
    /// The key used with other content, answered `422`: `RequestsMismatched`.
    Mismatched,
    /// Refused before any claim (no key or a bad one, no caller, a body too large): `RequestsRefused`.
    Refused,
    /// The handler answered a status its client retries (`408`, `409`, `425`, `429`, `5xx`) or panicked, and the key
    /// was released: `RequestsReleased`.
    Released,
    /// The idempotency table failed: the request was not handled, or its answer not stored (`RequestsStoreFailed`,
    /// the one outcome that can let a handler run twice).
    StoreFailed,
    /// No key, and none required: the handler ran unguarded (`RequestsPassed`).
    Passed,
    /// The handler still ran at the end of its time (the layer's `max_handler_time`, or under Lambda the invocation's
    /// deadline less the completion's reserve): stopped, its claim kept until its lease ends (it may have taken
    /// effect): `RequestsTimedOut`.
    TimedOut,
}

impl RequestOutcome {
    /// Every outcome, in the order they appear in the EMF document.
    pub const ALL: [RequestOutcome; 9] = [
        RequestOutcome::Executed,
        RequestOutcome::Replayed,
        RequestOutcome::InProgress,
        RequestOutcome::Mismatched,
        RequestOutcome::Refused,
        RequestOutcome::Released,
        RequestOutcome::StoreFailed,
        RequestOutcome::Passed,
        RequestOutcome::TimedOut,
    ];

    /// The CloudWatch metric name.
    pub const fn metric_name(self) -> &'static str {
        match self {
            RequestOutcome::Executed => "RequestsExecuted",
            RequestOutcome::Replayed => "RequestsReplayed",
            RequestOutcome::InProgress => "RequestsInProgress",
            RequestOutcome::Mismatched => "RequestsMismatched",
            RequestOutcome::Refused => "RequestsRefused",
            RequestOutcome::Released => "RequestsReleased",
            RequestOutcome::StoreFailed => "RequestsStoreFailed",
            RequestOutcome::Passed => "RequestsPassed",
            RequestOutcome::TimedOut => "RequestsTimedOut",
        }
    }

    /// The value of the `outcome` key of the layer's log line.
    pub const fn label(self) -> &'static str {
        match self {
            RequestOutcome::Executed => "executed",
            RequestOutcome::Replayed => "replayed",
            RequestOutcome::InProgress => "in_progress",
            RequestOutcome::Mismatched => "payload_mismatch",
            RequestOutcome::Refused => "refused",
            RequestOutcome::Released => "released",
            RequestOutcome::StoreFailed => "idempotency_store",
            RequestOutcome::Passed => "passed",
            RequestOutcome::TimedOut => "timed_out",
        }
    }
}

/// One request's EMF document: `timestamp_ms` in milliseconds since the Unix epoch, `api` the value of the `api`
/// dimension, `duration` written as `RequestDuration` in milliseconds.
pub fn request_emf(
    namespace: &str,
    api: &str,
    timestamp_ms: u64,
    outcome: RequestOutcome,
    duration: Duration,
) -> Value {
    let mut definitions: Vec<Value> = RequestOutcome::ALL
        .iter()
        .map(|o| json!({ "Name": o.metric_name(), "Unit": "Count" }))
        .collect();
    definitions.push(json!({ "Name": REQUEST_DURATION, "Unit": "Milliseconds" }));
    let mut doc = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [[API_DIMENSION]],
                "Metrics": definitions,
            }],
        },
        API_DIMENSION: api,
        REQUEST_DURATION: duration.as_nanos() as f64 / 1e6,
    });
    for o in RequestOutcome::ALL {
        doc[o.metric_name()] = u64::from(o == outcome).into();
    }
    doc
}

/// Writes [`request_emf`] as one line (with its newline) to `out`.
///
/// # Errors
///
/// When writing to `out` fails.
pub fn write_request_emf(
    out: &mut impl io::Write,
    namespace: &str,
    api: &str,
    timestamp_ms: u64,
    outcome: RequestOutcome,
    duration: Duration,
) -> io::Result<()> {
    let mut line = serde_json::to_vec(&request_emf(
        namespace,
        api,
        timestamp_ms,
        outcome,
        duration,
    ))?;
    line.push(b'\n');
    out.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_outcome_sets_its_own_counter_and_only_it() {
        for outcome in RequestOutcome::ALL {
            let doc = request_emf("ns", "a", 1, outcome, Duration::from_micros(1_500));
            for o in RequestOutcome::ALL {
                assert_eq!(doc[o.metric_name()], u64::from(o == outcome), "{outcome:?}");
            }
            assert_eq!(doc[REQUEST_DURATION], 1.5);
        }
    }

    #[test]
    fn every_value_is_declared_under_the_api_dimension() {
        let doc = request_emf("ns", "orders", 7, RequestOutcome::Executed, Duration::ZERO);
        let directive = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "ns");
        assert_eq!(directive["Dimensions"], json!([["api"]]));
        let declared: Vec<&str> = directive["Metrics"]
            .as_array()
            .expect("metrics")
            .iter()
            .map(|m| m["Name"].as_str().expect("name"))
            .collect();
        for name in &declared {
            assert!(doc.get(*name).is_some(), "{name} declared without a value");
        }
        assert_eq!(declared.len(), RequestOutcome::ALL.len() + 1);
        assert_eq!(doc["_aws"]["Timestamp"], 7);
    }

    #[test]
    fn the_line_is_one_json_document_and_a_newline() {
        let mut out = Vec::new();
        write_request_emf(
            &mut out,
            "ns",
            "a\"b",
            1,
            RequestOutcome::Refused,
            Duration::ZERO,
        )
        .expect("written");
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(text.matches('\n').count(), 1);
        assert!(text.ends_with('\n'));
        let doc: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(doc["api"], "a\"b");
        assert_eq!(doc["RequestsRefused"], 1);
    }
}

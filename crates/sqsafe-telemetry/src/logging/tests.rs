use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;

use super::*;
use crate::spans::invocation_span_with;
use crate::{RecordFields, record_span};

/// Lines written by the layer under test.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    fn text(&self) -> String {
        let bytes = self.0.lock().expect("capture lock").clone();
        String::from_utf8(bytes).expect("log lines are UTF-8")
    }

    fn json_lines(&self) -> Vec<Value> {
        self.text()
            .lines()
            .map(|line| serde_json::from_str(line).expect("each line is one JSON object"))
            .collect()
    }
}

impl io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("capture lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Capture {
    type Writer = Capture;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// 2024-05-01T12:00:00.250Z
fn fixed_clock() -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(1_714_564_800_250)
}

fn config(level: &str, format: LogFormat) -> LogConfig {
    LogConfig {
        level: level.to_owned(),
        format,
        function_name: None,
        ..Default::default()
    }
}

/// Runs `f` under a local subscriber made of the layer alone, and returns what it wrote.
fn capture(config: &LogConfig, f: impl FnOnce()) -> Capture {
    let out = Capture::default();
    let subscriber =
        tracing_subscriber::registry().with(layer_with_clock(config, out.clone(), fixed_clock));
    tracing::subscriber::with_default(subscriber, f);
    out
}

fn context() -> lambda_runtime::Context {
    let mut ctx = lambda_runtime::Context::default();
    ctx.request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678".to_owned();
    ctx
}

const RECORD: RecordFields<'static> = RecordFields {
    message_id: "059f36b4-87a3-44ab-83d2-661975830a7d",
    correlation_id: "checkout-7",
    receive_count: 2,
    queue: "payments",
    group_id: None,
    producer_trace_id: None,
};

/// The scenario of the example line in the README.
fn readme_scenario() {
    let _invocation =
        invocation_span_with(&context(), &AtomicBool::new(true), Some("charge-payment")).entered();
    let record = record_span(&RECORD);
    let _record = record.enter();
    record.record("idempotency_key", "charge-payment#v1#acme#payment:p-42");
    let body = r#"{"payment_id":"p-42","card":"4242 4242 4242 4242"}"#;
    let _ = body; // handled, never passed to a log macro
    tracing::info!(target: "charge_payment", payment_id = "p-42", "charged");
}

#[test]
fn json_line_has_timestamp_level_message_and_flat_span_fields() {
    let out = capture(&LogConfig::default(), readme_scenario);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 1, "{}", out.text());
    let line = &lines[0];

    assert_eq!(line["timestamp"], "2024-05-01T12:00:00.250Z");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["message"], "charged");
    assert_eq!(line["payment_id"], "p-42");
    assert_eq!(line["target"], "charge_payment");

    // The invocation's keys and the record's, all at the top level.
    assert_eq!(line["request_id"], "c6af9ac6-7b61-11e6-9a41-93e812345678");
    assert_eq!(line["cold_start"], true);
    assert_eq!(line["function_name"], "charge-payment");
    assert!(line.get("xray_trace_id").is_none());
    assert_eq!(line["message_id"], RECORD.message_id);
    assert_eq!(line["correlation_id"], "checkout-7");
    assert_eq!(line["receive_count"], 2);
    assert_eq!(line["queue"], "payments");
    assert!(line.get("group_id").is_none());
    assert_eq!(
        line["idempotency_key"],
        "charge-payment#v1#acme#payment:p-42"
    );
    assert!(line.get("spans").is_none(), "{line}");

    let text = out.text();
    assert!(!text.contains("4242"), "the body leaked: {text}");
}

#[test]
fn the_lambda_runtime_span_adds_no_second_request_id() {
    let mut ctx = context();
    ctx.xray_trace_id = Some("Root=1-5759e988-bd862e3fe1be46a994272793".to_owned());
    let out = capture(&LogConfig::default(), || {
        // What lambda_runtime::run opens around every invocation (lambda_runtime::layers::TracingLayer).
        let _runtime = tracing::info_span!(
            target: "lambda_runtime::layers::trace",
            "Lambda runtime invoke",
            requestId = ctx.request_id.as_str(),
            xrayTraceId = ctx.xray_trace_id.as_deref()
        )
        .entered();
        let _invocation = invocation_span_with(&ctx, &AtomicBool::new(false), None).entered();
        tracing::info!("handled");
    });
    let text = out.text();
    assert_eq!(
        text.matches(ctx.request_id.as_str()).count(),
        1,
        "the request id is written once: {text}"
    );
    let line = &out.json_lines()[0];
    assert_eq!(line["request_id"], ctx.request_id);
    assert_eq!(
        line["xray_trace_id"],
        "Root=1-5759e988-bd862e3fe1be46a994272793"
    );
    assert!(
        line.get("requestId").is_none() && line.get("xrayTraceId").is_none(),
        "{text}"
    );
}

#[test]
fn an_event_field_named_like_a_record_key_does_not_repeat_the_key() {
    let out = capture(&LogConfig::default(), || {
        let _record = record_span(&RECORD).entered();
        tracing::info!(message_id = "other", "forwarded");
    });
    let text = out.text();
    assert_eq!(text.matches("\"message_id\"").count(), 1, "{text}");
    let line = &out.json_lines()[0];
    assert_eq!(line["message_id"], RECORD.message_id);
    assert_eq!(line["event.message_id"], "other");
}

#[test]
fn record_keys_stay_flat_inside_the_handlers_own_spans() {
    let out = capture(&LogConfig::default(), || {
        let _invocation = invocation_span_with(&context(), &AtomicBool::new(false), None).entered();
        let record = record_span(&RECORD);
        let _record = record.enter();
        record.record("idempotency_key", "k-1");
        let _handler = tracing::info_span!("charge", amount_cents = 1250).entered();
        tracing::warn!("declined");
    });
    let line = &out.json_lines()[0];
    assert_eq!(line["request_id"], context().request_id);
    assert_eq!(line["correlation_id"], "checkout-7");
    assert_eq!(line["idempotency_key"], "k-1");
    assert_eq!(line["amount_cents"], 1250);
}

#[test]
fn readme_shows_a_real_line() {
    let out = capture(&LogConfig::default(), readme_scenario);
    let line = out.text();
    let line = line.trim_end();
    assert!(
        include_str!("../../README.md").contains(line),
        "README's example line is stale; the scenario now writes:\n{line}"
    );
}

#[test]
fn idempotency_key_appears_once_recorded() {
    let out = capture(&LogConfig::default(), || {
        let record = record_span(&RecordFields {
            group_id: Some("acme"),
            ..RECORD
        });
        let _entered = record.enter();
        tracing::info!("claiming");
        record.record("idempotency_key", "k-1");
        tracing::info!("claimed");
    });
    let lines = out.json_lines();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].get("idempotency_key").is_none());
    assert_eq!(lines[0]["group_id"], "acme");
    assert_eq!(lines[1]["idempotency_key"], "k-1");
    assert_eq!(lines[1]["message_id"], RECORD.message_id);
}

#[test]
fn cold_start_is_true_only_for_the_first_invocation() {
    let cold = AtomicBool::new(true);
    let out = capture(&LogConfig::default(), || {
        for _ in 0..3 {
            let _entered = invocation_span_with(&context(), &cold, None).entered();
            tracing::info!("handled");
        }
    });
    let cold_starts: Vec<Value> = out
        .json_lines()
        .iter()
        .map(|l| l["cold_start"].clone())
        .collect();
    assert_eq!(cold_starts, [true, false, false]);
}

#[test]
fn cold_start_flips_even_without_a_subscriber() {
    let cold = AtomicBool::new(true);
    drop(invocation_span_with(&context(), &cold, None));
    let out = capture(&LogConfig::default(), || {
        let _entered = invocation_span_with(&context(), &cold, None).entered();
        tracing::info!("handled");
    });
    assert_eq!(out.json_lines()[0]["cold_start"], false);
}

#[test]
fn function_name_falls_back_to_the_context_and_is_absent_without_one() {
    let mut named = context();
    named.env_config = Arc::new(lambda_runtime::Config {
        function_name: "from-context".to_owned(),
        ..Default::default()
    });
    named.xray_trace_id = Some("Root=1-5759e988-bd862e3fe1be46a994272793".to_owned());
    let out = capture(&LogConfig::default(), || {
        for ctx in [&named, &context()] {
            let _entered = invocation_span_with(ctx, &AtomicBool::new(false), None).entered();
            tracing::info!("handled");
        }
    });
    let lines = out.json_lines();
    assert_eq!(lines[0]["function_name"], "from-context");
    assert_eq!(
        lines[0]["xray_trace_id"],
        "Root=1-5759e988-bd862e3fe1be46a994272793"
    );
    assert!(lines[1].get("function_name").is_none());
    assert!(lines[1].get("xray_trace_id").is_none());
}

#[test]
fn warn_level_drops_info_but_keeps_span_fields_on_warnings() {
    let out = capture(&config("warn", LogFormat::Json), || {
        let _invocation = invocation_span_with(&context(), &AtomicBool::new(true), None).entered();
        let _record = record_span(&RECORD).entered();
        tracing::info!("dropped");
        tracing::warn!("kept");
    });
    let lines = out.json_lines();
    assert_eq!(lines.len(), 1, "{}", out.text());
    assert_eq!(lines[0]["level"], "WARN");
    assert_eq!(lines[0]["message"], "kept");
    assert_eq!(lines[0]["request_id"], context().request_id);
    assert_eq!(lines[0]["correlation_id"], "checkout-7");
}

#[test]
fn events_outside_spans_carry_no_record_keys() {
    let out = capture(&LogConfig::default(), || tracing::info!("starting"));
    let line = &out.json_lines()[0];
    assert_eq!(line["message"], "starting");
    assert!(line.get("message_id").is_none() && line.get("request_id").is_none());
}

#[test]
fn text_format_is_compact_without_colours() {
    let out = capture(&config("info", LogFormat::Text), readme_scenario);
    let text = out.text();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(!text.contains('\u{1b}'), "ANSI escape in {text:?}");
    assert!(text.starts_with("2024-05-01T12:00:00.250Z"), "{text}");
    for expected in [
        "INFO",
        "charged",
        "payment_id",
        "checkout-7",
        "c6af9ac6-7b61",
    ] {
        assert!(text.contains(expected), "{expected} missing from {text}");
    }
}

#[test]
fn invalid_level_is_refused_by_init_and_falls_back_to_info_in_the_layer() {
    let bad = config("info,=[", LogFormat::Json);
    let err = init_with(bad.clone()).expect_err("an invalid directive is refused");
    assert!(
        matches!(&err, Error::InvalidLevel { directive, .. } if directive == "info,=["),
        "{err:?}"
    );

    let out = capture(&bad, || {
        tracing::debug!("dropped");
        tracing::info!("kept");
    });
    let lines = out.json_lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["message"], "kept");
}

#[test]
fn blank_level_means_info() {
    let out = capture(&config(" ", LogFormat::Json), || {
        tracing::debug!("dropped");
        tracing::info!("kept");
    });
    assert_eq!(out.json_lines().len(), 1);
}

#[test]
fn the_sdks_wire_targets_stay_at_info_whatever_the_level_unless_named() {
    let emit = || {
        tracing::trace!(target: "aws_smithy_runtime::client::orchestrator::http", "response body");
        tracing::debug!(target: "hyper_util::client::legacy::pool", "pooled");
        tracing::info!(target: "aws_config::meta::region", "region");
        tracing::trace!(target: "sqsafe_batch::processor", "ours");
    };
    let targets = |level: &str| -> Vec<String> {
        capture(&config(level, LogFormat::Json), emit)
            .json_lines()
            .iter()
            .map(|l| l["target"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(
        targets("trace"),
        ["aws_config::meta::region", "sqsafe_batch::processor"]
    );
    assert_eq!(targets("DEBUG"), ["aws_config::meta::region"]);
    // A user who names a target gets its lines: the opt-in.
    assert_eq!(
        targets("trace,aws_smithy_runtime=trace"),
        [
            "aws_smithy_runtime::client::orchestrator::http",
            "aws_config::meta::region",
            "sqsafe_batch::processor"
        ]
    );
    // Quieter levels are left as they are: the caps never make a target louder.
    assert!(targets("warn").is_empty());
    assert_eq!(targets("sqsafe_batch=trace"), ["sqsafe_batch::processor"]);
}

/// lambda_runtime logs each whole event it receives ("raw JSON event received from Lambda", with every SQS body) at
/// TRACE under its own target: held at INFO like the SDK's, its other lines (the invoke loop's) left as they are.
#[test]
fn the_runtimes_raw_event_line_stays_out_at_trace_unless_named() {
    let emit = || {
        tracing::trace!(
            target: "lambda_runtime::layers::api_response",
            body = r#"{"Records":[{"body":"card-4111"}]}"#,
            "raw JSON event received from Lambda"
        );
        tracing::trace!(target: "lambda_runtime::runtime", "New event arrived (run loop)");
    };
    let messages = |level: &str| -> Vec<String> {
        capture(&config(level, LogFormat::Json), emit)
            .json_lines()
            .iter()
            .map(|l| l["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(messages("trace"), ["New event arrived (run loop)"]);
    assert_eq!(messages("TRACE"), ["New event arrived (run loop)"]);
    // Named, by itself or by the crate that holds it: the user's opt-in.
    for opt_in in [
        "trace,lambda_runtime=trace",
        "trace,lambda_runtime::layers::api_response=trace",
    ] {
        assert_eq!(
            messages(opt_in),
            [
                "raw JSON event received from Lambda",
                "New event arrived (run loop)"
            ],
            "{opt_in}"
        );
    }
}

#[test]
fn target_directives_are_honoured() {
    let out = capture(&config("warn,chatty=debug", LogFormat::Json), || {
        tracing::debug!(target: "chatty", "kept");
        tracing::debug!(target: "quiet", "dropped");
    });
    let lines = out.json_lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["target"], "chatty");
}

#[test]
fn strings_are_escaped_and_come_back_unchanged() {
    let nasty =
        "quote \" backslash \\ newline \n tab \t nul \u{0} bell \u{7} unicode é 🦀 \u{2028}";
    let out = capture(&LogConfig::default(), || {
        let _span = tracing::info_span!("handler", note = nasty).entered();
        tracing::info!(detail = nasty, debugged = ?nasty, "msg {nasty}");
    });
    let text = out.text();
    assert_eq!(
        text.lines().count(),
        1,
        "one line, newlines escaped: {text:?}"
    );
    let line = &out.json_lines()[0];
    assert_eq!(line["note"], nasty);
    assert_eq!(line["detail"], nasty);
    assert_eq!(line["debugged"], format!("{nasty:?}"));
    assert_eq!(line["message"], format!("msg {nasty}"));
}

#[test]
fn values_keep_their_json_types() {
    let error = std::io::Error::other("disk \"full\"");
    let out = capture(&LogConfig::default(), || {
        tracing::info!(
            unsigned = u64::MAX,
            signed = -7_i64,
            big = u128::MAX,
            ratio = 0.25_f64,
            nan = f64::NAN,
            flag = false,
            shown = %"display",
            error = &error as &(dyn std::error::Error + 'static),
            "typed"
        );
    });
    let line = &out.json_lines()[0];
    assert_eq!(line["unsigned"], u64::MAX);
    assert_eq!(line["signed"], -7);
    assert!(
        out.text().contains(&format!("\"big\":{}", u128::MAX)),
        "{}",
        out.text()
    );
    assert_eq!(line["ratio"], 0.25);
    assert_eq!(line["nan"], "NaN");
    assert_eq!(line["flag"], false);
    assert_eq!(line["shown"], "display");
    assert_eq!(line["error"], "disk \"full\"");
}

#[test]
fn no_key_is_written_twice_whatever_the_fields_are_called() {
    let out = capture(&LogConfig::default(), || {
        let _record = record_span(&RECORD).entered();
        // A handler span with a field of its own and one named like a line key.
        let _handler = tracing::info_span!("charge", attempt = 1, level = "gold").entered();
        tracing::info!(attempt = 2, target_queue = "q", "retrying");
    });
    let text = out.text();
    for key in ["\"attempt\"", "\"level\"", "\"message_id\"", "\"name\""] {
        assert_eq!(text.matches(key).count(), 1, "{key} in {text}");
    }
    let line = &out.json_lines()[0];
    assert_eq!(line["attempt"], 1, "the span's value keeps the key");
    assert_eq!(line["event.attempt"], 2);
    assert_eq!(line["span.level"], "gold");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["name"], "charge");
    assert_eq!(line["target_queue"], "q");
}

#[test]
fn a_field_recorded_twice_keeps_its_latest_value_once() {
    let out = capture(&LogConfig::default(), || {
        let record = record_span(&RECORD);
        let _entered = record.enter();
        record.record("idempotency_key", "k-1");
        record.record("idempotency_key", "k-2");
        tracing::info!("claimed");
    });
    let text = out.text();
    assert_eq!(text.matches("idempotency_key").count(), 1, "{text}");
    let line = &out.json_lines()[0];
    assert_eq!(line["idempotency_key"], "k-2");
    assert_eq!(line["message_id"], RECORD.message_id);
    assert_eq!(line["queue"], "payments");
}

/// The producer's trace id is on every line of its record, as `producer_trace_id`; absent when the message had none.
#[test]
fn the_producers_trace_id_is_on_every_line_of_the_record() {
    let out = capture(&LogConfig::default(), || {
        let traced = record_span(&RecordFields {
            producer_trace_id: Some("5759e988bd862e3fe1be46a994272793"),
            ..RECORD
        });
        traced.in_scope(|| {
            tracing::info!("one");
            tracing::warn!("two");
        });
        record_span(&RECORD).in_scope(|| tracing::info!("untraced"));
    });
    let lines = out.json_lines();
    assert_eq!(lines.len(), 3);
    for line in &lines[..2] {
        assert_eq!(
            line["producer_trace_id"], "5759e988bd862e3fe1be46a994272793",
            "{line}"
        );
    }
    assert!(lines[2].get("producer_trace_id").is_none(), "{}", lines[2]);
}

#[test]
fn a_traces_setting_that_cannot_be_honoured_is_refused_and_nothing_is_installed() {
    let invalid = LogConfig {
        traces: crate::Traces::Invalid("xray".into()),
        ..LogConfig::default()
    };
    let err = crate::init_with(invalid).expect_err("an unknown SQSAFE_TRACES");
    assert!(
        matches!(&err, Error::InvalidTraces { value } if value == "xray"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("`off` (the default) or `otlp`"),
        "{err}"
    );
    let tls = LogConfig {
        traces: crate::Traces::Otlp {
            endpoint: "https://otlp.eu-west-1.amazonaws.com/v1/traces".into(),
            service_name: None,
        },
        ..LogConfig::default()
    };
    let err = crate::init_with(tls).expect_err("spans are not sent over TLS");
    assert!(matches!(err, Error::TracesUnavailable { .. }), "{err:?}");
    let why = if cfg!(feature = "otel") {
        "must be an http:// URL"
    } else {
        "feature `otel`"
    };
    assert!(err.to_string().contains(why), "{err}");
    assert!(!crate::traces::exporting(), "nothing installed");
}

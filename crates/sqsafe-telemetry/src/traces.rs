//! Spans to OpenTelemetry, and the trace context each record carries on.
//!
//! Off unless `SQSAFE_TRACES=otlp` ([`Traces::from_vars`]). On, sqsafe's own spans (the invocation, each record, each
//! HTTP call of `sqsafe::http`, each outbox publish) are collected in memory as they end, and [`flush`] sends them
//! to the OTLP/HTTP endpoint (protobuf) at the end of every invocation, before the function answers: Lambda freezes
//! the process between invocations, so an exporter working in the background would be frozen mid-send. The ADOT
//! collector (the Lambda layer, at `http://localhost:4318`) takes them on to X-Ray or another backend.
//!
//! Each record's span is a child of its producer's span when the message carried a context (its `traceparent`
//! attribute, else its `AWSTraceHeader`), and also linked to it; without one it is a child of the invocation, whose
//! parent is Lambda's own X-Ray trace when there is one. Off, nothing is collected, and [`flush`] returns at once.

use std::time::{Duration, SystemTime};

use tracing::Span;

use crate::trace::TraceContext;

/// Whether spans are exported, read from the environment by [`LogConfig::from_vars`](crate::LogConfig::from_vars).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Traces {
    /// No spans leave the process (the default). Logs still carry the producer's trace id.
    #[default]
    Off,
    /// Spans sent to an OTLP/HTTP endpoint (protobuf), `http://` only: the ADOT collector beside the function.
    Otlp {
        /// Where spans are POSTed: the full URL, `…/v1/traces`.
        endpoint: String,
        /// The resource's `service.name`.
        service_name: Option<String>,
    },
    /// A `SQSAFE_TRACES` value that is neither `off` nor `otlp`: refused by [`init_with`](crate::init_with).
    Invalid(String),
}

/// The OTLP endpoint used when neither `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` nor `OTEL_EXPORTER_OTLP_ENDPOINT` is
/// set: the ADOT collector's, beside the function.
pub const DEFAULT_OTLP_ENDPOINT: &str = "http://localhost:4318/v1/traces";

impl Traces {
    /// Reads the setting through `get` (an environment variable's value; blank counts as unset):
    ///
    /// - `SQSAFE_TRACES`: unset, `off` or `none` (any case): [`Traces::Off`]; `otlp`: [`Traces::Otlp`]; anything
    ///   else: [`Traces::Invalid`].
    /// - the endpoint: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as written, else `OTEL_EXPORTER_OTLP_ENDPOINT` with
    ///   `/v1/traces` appended (as OpenTelemetry's SDKs do), else [`DEFAULT_OTLP_ENDPOINT`].
    /// - the service name: `OTEL_SERVICE_NAME`, else `AWS_LAMBDA_FUNCTION_NAME`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| {
            get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        match var("SQSAFE_TRACES") {
            None => Self::Off,
            Some(v) if v.eq_ignore_ascii_case("off") || v.eq_ignore_ascii_case("none") => Self::Off,
            Some(v) if v.eq_ignore_ascii_case("otlp") => Self::Otlp {
                endpoint: var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                    .or_else(|| {
                        var("OTEL_EXPORTER_OTLP_ENDPOINT")
                            .map(|base| format!("{}/v1/traces", base.trim_end_matches('/')))
                    })
                    .unwrap_or_else(|| DEFAULT_OTLP_ENDPOINT.to_owned()),
                service_name: var("OTEL_SERVICE_NAME").or_else(|| var("AWS_LAMBDA_FUNCTION_NAME")),
            },
            Some(v) => Self::Invalid(v),
        }
    }
}

/// The context a record carries on (to its HTTP calls and the messages it publishes): a child of `span`, the
/// record's span, continuing `producer`'s trace.
///
/// With spans exported, `span` is made a child of `producer`'s span and linked to it, and the context is the
/// span's own. Otherwise it is `producer`'s trace (else a new one) with a new span id standing for the record.
pub fn record_context(span: &Span, producer: Option<&TraceContext>) -> TraceContext {
    if let Some(producer) = producer {
        imp::follow(span, producer, true);
    }
    imp::span_context(span).unwrap_or_else(|| {
        producer
            .map(TraceContext::child)
            .unwrap_or_else(|| TraceContext::new_root().child())
    })
}

/// The context to send on from inside `span` (a publish, a call) whose parent's context is `parent`: with spans
/// exported, `span` is made a child of `parent` and the context is its own; otherwise `parent` itself.
pub fn continue_from(span: &Span, parent: &TraceContext) -> TraceContext {
    imp::follow(span, parent, false);
    imp::span_context(span).unwrap_or_else(|| parent.clone())
}

/// With spans exported, `span`'s own context (its trace id and span id); otherwise `None`.
pub fn span_context(span: &Span) -> Option<TraceContext> {
    imp::span_context(span)
}

/// Sends the spans that ended since the last flush, when spans are exported; returns at once otherwise. Called at
/// the end of each invocation, before its answer (sqsafe's consumers, the outbox relay and the sweeper do), with the
/// invocation's `deadline` (`None` when unknown) and the time `now`.
///
/// The send never delays the answer past the deadline: it is cut at [`ANSWER_MARGIN`] before `deadline` (and after
/// [`SEND_LIMIT`] in any case), and not made at all when that moment has passed. A slow or silent collector costs
/// this invocation's spans, never its records. A send that failed, was cut or was not made is logged (WARN, with
/// the count of spans dropped) and never fails the invocation.
pub async fn flush(deadline: Option<SystemTime>, now: SystemTime) {
    imp::flush(send_budget(deadline, now)).await;
}

/// The longest one [`flush`] may take: the collector is beside the function (the ADOT layer), so an answer it has
/// not given by then is not coming soon.
pub const SEND_LIMIT: Duration = Duration::from_secs(2);

/// Time kept between the end of a [`flush`] and the invocation's deadline, for the function to post its answer
/// (the same margin the batch processor keeps after its last DLQ send or visibility change).
pub const ANSWER_MARGIN: Duration = Duration::from_millis(250);

/// How long a flush at `now` may take before `deadline`: until [`ANSWER_MARGIN`] before it, at most [`SEND_LIMIT`];
/// [`Duration::ZERO`] when that moment has passed (nothing is sent); [`SEND_LIMIT`] when the deadline is unknown.
pub fn send_budget(deadline: Option<SystemTime>, now: SystemTime) -> Duration {
    let Some(deadline) = deadline else {
        return SEND_LIMIT;
    };
    deadline
        .checked_sub(ANSWER_MARGIN)
        .and_then(|end| end.duration_since(now).ok())
        .unwrap_or(Duration::ZERO)
        .min(SEND_LIMIT)
}

/// Whether spans are being exported (a subscriber with [`Traces::Otlp`] was installed by [`init_with`](crate::init_with)).
pub fn exporting() -> bool {
    imp::exporting()
}

/// Parents the invocation span on Lambda's X-Ray trace (`Root=…;Parent=…;Sampled=…`), with spans exported.
pub(crate) fn follow_lambda(span: &Span, xray_trace_id: Option<&str>) {
    if let Some(lambda) = xray_trace_id.and_then(TraceContext::from_xray_header) {
        imp::follow(span, &lambda, false);
    }
}

#[cfg(feature = "otel")]
pub(crate) use imp::{activate, install};

#[cfg(feature = "otel")]
mod imp {
    use std::sync::{Arc, Mutex, OnceLock, PoisonError};
    use std::time::Duration;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider,
    };
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
    use prost::Message;
    use tracing::{Metadata, Span, Subscriber};
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::filter_fn;
    use tracing_subscriber::registry::LookupSpan;

    use crate::trace::TraceContext;

    /// The exporting state, set once by [`install`].
    static EXPORT: OnceLock<Export> = OnceLock::new();

    pub(crate) struct Export {
        spans: Arc<Mutex<Vec<SpanData>>>,
        resource: ResourceAttributesWithSchema,
        endpoint: hyper::Uri,
        client: Client<HttpConnector, Full<Bytes>>,
        /// Kept so the tracer's processor lives as long as the process.
        _provider: SdkTracerProvider,
    }

    /// Holds the spans that ended until [`flush`] takes them: the SDK's simple processor hands each span here as it
    /// ends, and this costs a push.
    #[derive(Debug)]
    struct Collect(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Collect {
        fn export(
            &self,
            batch: Vec<SpanData>,
        ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(batch);
            std::future::ready(Ok(()))
        }
    }

    /// sqsafe's spans only (the invocation, records, HTTP calls, outbox publishes: targets under `sqsafe`), and no
    /// events: log lines are CloudWatch's, not span events.
    fn sqsafe_span(meta: &Metadata<'_>) -> bool {
        meta.is_span() && meta.target().starts_with("sqsafe")
    }

    /// The OpenTelemetry layer exporting to `endpoint`, and the exporter to [`activate`] once the subscriber with
    /// the layer is installed. `Err` with the reason when the endpoint is not an `http://` URL.
    pub(crate) fn install<S>(
        endpoint: &str,
        service_name: Option<&str>,
    ) -> Result<(impl Layer<S>, Export), String>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + 'static,
    {
        let uri: hyper::Uri = endpoint
            .parse()
            .map_err(|e| format!("{endpoint:?} is not a URL ({e})"))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err(format!(
                "{endpoint:?}: the OTLP endpoint must be an http:// URL (the ADOT collector beside the function, \
                 http://localhost:4318/v1/traces); sqsafe sends no spans over TLS"
            ));
        }
        let spans = Arc::new(Mutex::new(Vec::new()));
        let mut resource = Resource::builder();
        if let Some(name) = service_name {
            resource = resource.with_service_name(name.to_owned());
        }
        let resource = resource.build();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(Collect(Arc::clone(&spans)))
            .with_resource(resource.clone())
            .build();
        let tracer = provider.tracer("sqsafe");
        let export = Export {
            spans,
            resource: ResourceAttributesWithSchema::from(&resource),
            endpoint: uri,
            client: Client::builder(TokioExecutor::new()).build_http(),
            _provider: provider,
        };
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_threads(false)
            .with_location(false)
            .with_filter(filter_fn(sqsafe_span));
        Ok((layer, export))
    }

    /// Makes `export` the process's: [`flush`] sends what it collects. Only the call that installed the global
    /// subscriber gets here, so the cell is empty.
    pub(crate) fn activate(export: Export) {
        let _ = EXPORT.set(export);
    }

    pub(super) fn exporting() -> bool {
        EXPORT.get().is_some()
    }

    fn remote(context: &TraceContext) -> Option<SpanContext> {
        let trace_id = TraceId::from_hex(context.trace_id()).ok()?;
        let span_id = SpanId::from_hex(context.parent_id()?).ok()?;
        let flags = if context.sampled() == Some(false) {
            TraceFlags::default()
        } else {
            TraceFlags::SAMPLED
        };
        Some(SpanContext::new(
            trace_id,
            span_id,
            flags,
            true,
            TraceState::default(),
        ))
    }

    pub(super) fn follow(span: &Span, parent: &TraceContext, link: bool) {
        if !exporting() {
            return;
        }
        let Some(remote) = remote(parent) else {
            return;
        };
        if link {
            span.add_link(remote.clone());
        }
        // Refused only when the span has started already (a caller's mistake, not the message's): it then stays
        // the child of the span it was opened in.
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }

    pub(super) fn span_context(span: &Span) -> Option<TraceContext> {
        if !exporting() {
            return None;
        }
        let context = span.context();
        let own = context.span().span_context().clone();
        if !own.is_valid() {
            return None;
        }
        Some(TraceContext::of_local_span(
            own.trace_id().to_string(),
            own.span_id().to_string(),
            own.is_sampled(),
        ))
    }

    pub(super) async fn flush(budget: Duration) {
        let Some(export) = EXPORT.get() else {
            return;
        };
        let spans =
            std::mem::take(&mut *export.spans.lock().unwrap_or_else(PoisonError::into_inner));
        if spans.is_empty() {
            return;
        }
        let count = spans.len();
        if budget.is_zero() {
            return dropped(
                count,
                &export.endpoint,
                "not sent: the invocation's deadline is too near (its answer goes first)",
            );
        }
        let body = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(spans, &export.resource),
        }
        .encode_to_vec();
        let request = hyper::Request::post(export.endpoint.clone())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(Bytes::from(body)));
        let request = match request {
            Ok(request) => request,
            Err(e) => return dropped(count, &export.endpoint, &e.to_string()),
        };
        let sent = tokio::time::timeout(budget, async {
            let response = export
                .client
                .request(request)
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status();
            // Read to the end, so the connection is reused.
            let _ = response.into_body().collect().await;
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("the collector answered {status}"))
            }
        })
        .await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(why)) => dropped(count, &export.endpoint, &why),
            Err(_) => dropped(
                count,
                &export.endpoint,
                &format!(
                    "no answer within {} ms{}",
                    budget.as_millis(),
                    if budget < super::SEND_LIMIT {
                        ", cut to answer before the invocation's deadline"
                    } else {
                        ""
                    }
                ),
            ),
        }
    }

    fn dropped(count: usize, endpoint: &hyper::Uri, why: &str) {
        tracing::warn!(
            target: "sqsafe_telemetry::traces",
            spans = count,
            endpoint = %endpoint,
            "spans not exported, dropped: {why}"
        );
    }
}

#[cfg(not(feature = "otel"))]
mod imp {
    use tracing::Span;

    use crate::trace::TraceContext;

    pub(super) fn follow(_: &Span, _: &TraceContext, _: bool) {}

    pub(super) fn span_context(_: &Span) -> Option<TraceContext> {
        None
    }

    pub(super) fn exporting() -> bool {
        false
    }

    pub(super) async fn flush(_: std::time::Duration) {}
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn traces(vars: &[(&str, &str)]) -> Traces {
        let vars: HashMap<&str, &str> = vars.iter().copied().collect();
        Traces::from_vars(|name| vars.get(name).map(|v| (*v).to_owned()))
    }

    #[test]
    fn a_flush_ends_before_the_answers_margin_and_is_not_made_past_it() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let at = |ms: u64| now + Duration::from_millis(ms);
        // The case: 1.2 s before the deadline, a collector that takes 1.5 s must be cut at 0.95 s.
        assert_eq!(
            send_budget(Some(at(1_200)), now),
            Duration::from_millis(950)
        );
        assert_eq!(send_budget(Some(at(60_000)), now), SEND_LIMIT);
        assert_eq!(send_budget(None, now), SEND_LIMIT, "deadline unknown");
        assert_eq!(send_budget(Some(at(250)), now), Duration::ZERO);
        assert_eq!(send_budget(Some(at(100)), now), Duration::ZERO);
        assert_eq!(
            send_budget(Some(now - Duration::from_secs(1)), now),
            Duration::ZERO
        );
        assert_eq!(
            send_budget(Some(SystemTime::UNIX_EPOCH), now),
            Duration::ZERO
        );
    }

    #[test]
    fn off_unless_set_to_otlp_and_anything_else_is_invalid() {
        assert_eq!(traces(&[]), Traces::Off);
        assert_eq!(traces(&[("SQSAFE_TRACES", " ")]), Traces::Off);
        assert_eq!(traces(&[("SQSAFE_TRACES", "OFF")]), Traces::Off);
        assert_eq!(traces(&[("SQSAFE_TRACES", "none")]), Traces::Off);
        assert_eq!(
            traces(&[("SQSAFE_TRACES", "xray")]),
            Traces::Invalid("xray".into())
        );
        assert_eq!(
            traces(&[
                ("SQSAFE_TRACES", "otlp"),
                ("AWS_LAMBDA_FUNCTION_NAME", "charge-payment")
            ]),
            Traces::Otlp {
                endpoint: DEFAULT_OTLP_ENDPOINT.into(),
                service_name: Some("charge-payment".into()),
            }
        );
    }

    #[test]
    fn the_endpoint_and_service_name_follow_opentelemetrys_variables() {
        let base = traces(&[
            ("SQSAFE_TRACES", "Otlp"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            ("OTEL_SERVICE_NAME", "payments"),
            ("AWS_LAMBDA_FUNCTION_NAME", "charge-payment"),
        ]);
        assert_eq!(
            base,
            Traces::Otlp {
                endpoint: "http://collector:4318/v1/traces".into(),
                service_name: Some("payments".into()),
            }
        );
        let exact = traces(&[
            ("SQSAFE_TRACES", "otlp"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://127.0.0.1:9/spans",
            ),
        ]);
        assert!(
            matches!(&exact, Traces::Otlp { endpoint, service_name: None } if endpoint == "http://127.0.0.1:9/spans"),
            "{exact:?}"
        );
    }

    #[test]
    fn off_a_record_carries_its_producers_trace_on_from_a_span_of_its_own() {
        let producer = TraceContext::from_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .expect("valid");
        let span = tracing::Span::none();
        let own = record_context(&span, Some(&producer));
        assert_eq!(own.trace_id(), producer.trace_id());
        assert_ne!(own.parent_id(), producer.parent_id());
        assert!(own.traceparent().is_some());
        let started = record_context(&span, None);
        assert_ne!(started.trace_id(), producer.trace_id());
        assert!(
            started.traceparent().is_some(),
            "a new trace, with the record's span as parent"
        );
        assert_eq!(
            continue_from(&span, &own),
            own,
            "no span of its own when off"
        );
        assert!(!exporting());
    }
}

//! A local OTLP/HTTP receiver: what the ADOT collector is to a function, on loopback. It takes the protobuf
//! `ExportTraceServiceRequest`s that sqsafe's exporter POSTs to `/v1/traces` and keeps each span's ids, parent and
//! links, so a test asserts how a trace hangs together.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;
use tokio::net::TcpListener;

use crate::server::{ServerSettings, ServerTask};

/// One span as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedSpan {
    /// The span's name (`record`, `invocation`, `http call`, `outbox publish`).
    pub name: String,
    /// 32 lower-case hex digits.
    pub trace_id: String,
    /// 16 lower-case hex digits.
    pub span_id: String,
    /// The parent span's id; `None` for a root.
    pub parent_span_id: Option<String>,
    /// Each link's `(trace id, span id)`.
    pub links: Vec<(String, String)>,
    /// Its string attributes (the span's fields: `message_id`, `queue`, …).
    pub attributes: BTreeMap<String, String>,
    /// The resource's `service.name`.
    pub service_name: Option<String>,
}

/// The receiver; it stops when dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    _server: ServerTask,
}

impl OtlpReceiver {
    /// Starts on `127.0.0.1`, on a free port. Must be called within a Tokio runtime.
    ///
    /// # Panics
    /// When no port can be bound.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("OtlpReceiver: cannot bind 127.0.0.1:0: {e}"));
        let addr = listener.local_addr().expect("bound address");
        let spans = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::clone(&spans);
        let router = Router::new().route(
            "/v1/traces",
            post(move |body: Bytes| {
                let spans = Arc::clone(&shared);
                async move {
                    match ExportTraceServiceRequest::decode(body) {
                        Ok(request) => {
                            spans
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .extend(received(request));
                            // An empty ExportTraceServiceResponse.
                            (StatusCode::OK, Vec::new())
                        }
                        Err(e) => (StatusCode::BAD_REQUEST, e.to_string().into_bytes()),
                    }
                }
            }),
        );
        let settings = ServerSettings {
            nodelay: true,
            header_read_timeout: true,
            log_prefix: "OTLP receiver ",
        };
        let server = ServerTask::spawn(listener, settings, move || router.clone());
        Self {
            addr,
            spans,
            _server: server,
        }
    }

    /// The traces endpoint: `http://127.0.0.1:PORT/v1/traces`.
    pub fn traces_endpoint(&self) -> String {
        format!("http://{}/v1/traces", self.addr)
    }

    /// Every span received so far, in the order they arrived.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn received(request: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let service_name = resource_spans.resource.as_ref().and_then(|r| {
            r.attributes
                .iter()
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                    Value::StringValue(s) => Some(s.clone()),
                    _ => None,
                })
        });
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                let attributes = span
                    .attributes
                    .iter()
                    .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
                        Value::StringValue(s) => Some((kv.key.clone(), s.clone())),
                        Value::IntValue(i) => Some((kv.key.clone(), i.to_string())),
                        Value::BoolValue(b) => Some((kv.key.clone(), b.to_string())),
                        _ => None,
                    })
                    .collect();
                out.push(ReceivedSpan {
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty())
                        .then(|| hex(&span.parent_span_id)),
                    links: span
                        .links
                        .iter()
                        .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
                        .collect(),
                    attributes,
                    service_name: service_name.clone(),
                });
            }
        }
    }
    out
}

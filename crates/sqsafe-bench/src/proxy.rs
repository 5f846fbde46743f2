//! The bench's network: one proxy with two ports, in front of DynamoDB (moto server, or canned answers) and the
//! payments API. It adds the same delay to every request (a round trip to a region), records each exchange (which
//! service, which operation, when it arrived, when it was answered) and answers the client with keep-alive even
//! though moto closes every connection.
//!
//! sqsafe-test-servers' fault proxy injects faults; this one measures. The two are kept apart because the figures need
//! the timeline of each request (for the critical path, see `trace`) and a backend that is not the bottleneck.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::capacity::{self, Shadow, Units};
use crate::trace::{Exchange, Service};

/// Where DynamoDB requests go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Backend {
    /// moto server: a real (if slow) implementation.
    Moto,
    /// `200 {}` for every operation, after the delay only: the network floor.
    Canned,
}

type Upstream = Client<HttpConnector, Full<Bytes>>;

struct Shared {
    latency_us: AtomicU64,
    canned: AtomicBool,
    log: Mutex<Vec<Exchange>>,
    client: Upstream,
    /// The item sizes written so far, for the capacity units of the next write (module `capacity`).
    shadow: Mutex<Shadow>,
}

/// The running proxy; dropping it stops both ports and cuts their connections.
pub(crate) struct BenchProxy {
    shared: Arc<Shared>,
    dynamodb: SocketAddr,
    payments: SocketAddr,
    _servers: JoinSet<()>,
}

impl BenchProxy {
    /// Listens on two free loopback ports: one forwarding to `moto`, one to `payments` (both `http://host:port`).
    /// `keys`: each table's partition key attribute, to size its items.
    pub(crate) async fn start(
        moto: &str,
        payments: &str,
        keys: std::collections::HashMap<String, String>,
    ) -> std::io::Result<Self> {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let shared = Arc::new(Shared {
            latency_us: AtomicU64::new(0),
            canned: AtomicBool::new(false),
            log: Mutex::new(Vec::new()),
            client: Client::builder(TokioExecutor::new()).build(connector),
            shadow: Mutex::new(Shadow::new(keys)),
        });
        let mut servers = JoinSet::new();
        let dynamodb = listen(&mut servers, &shared, Service::DynamoDb, moto).await?;
        let payments = listen(&mut servers, &shared, Service::Payments, payments).await?;
        Ok(Self {
            shared,
            dynamodb,
            payments,
            _servers: servers,
        })
    }

    /// `AWS_ENDPOINT_URL_DYNAMODB` for the peers.
    pub(crate) fn dynamodb_endpoint(&self) -> String {
        format!("http://{}", self.dynamodb)
    }

    /// `PAYMENTS_API_URL` for the peers.
    pub(crate) fn payments_url(&self) -> String {
        format!("http://{}", self.payments)
    }

    /// The delay added to every request from now on.
    pub(crate) fn set_latency(&self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.shared.latency_us.store(us, Ordering::SeqCst);
    }

    pub(crate) fn set_backend(&self, backend: Backend) {
        self.shared
            .canned
            .store(backend == Backend::Canned, Ordering::SeqCst);
    }

    /// The exchanges recorded since the last call, in the order they were answered.
    pub(crate) fn take(&self) -> Vec<Exchange> {
        std::mem::take(
            &mut *self
                .shared
                .log
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }
}

async fn listen(
    servers: &mut JoinSet<()>,
    shared: &Arc<Shared>,
    service: Service,
    upstream: &str,
) -> std::io::Result<SocketAddr> {
    let upstream: Uri = upstream
        .parse()
        .map_err(|e| std::io::Error::other(format!("upstream {upstream}: {e}")))?;
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let addr = listener.local_addr()?;
    let shared = Arc::clone(shared);
    servers.spawn(async move {
        let mut connections = JoinSet::new();
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let (shared, upstream) = (Arc::clone(&shared), upstream.clone());
            let service = service_fn(move |request| {
                handle(Arc::clone(&shared), service, upstream.clone(), request)
            });
            connections.spawn(async move {
                let _ = http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
            while connections.try_join_next().is_some() {}
        }
    });
    Ok(addr)
}

async fn handle(
    shared: Arc<Shared>,
    service: Service,
    upstream: Uri,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let start = Instant::now();
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return Ok(text(
                StatusCode::BAD_REQUEST,
                format!("unreadable body: {e}"),
            ));
        }
    };
    let operation = match service {
        Service::DynamoDb => parts
            .headers
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("DynamoDB_20120810."))
            .unwrap_or("other")
            .to_owned(),
        Service::Payments => format!("{} {}", parts.method, parts.uri.path()),
    };
    let latency = Duration::from_micros(shared.latency_us.load(Ordering::SeqCst));
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let canned_answer = service == Service::DynamoDb && shared.canned.load(Ordering::SeqCst);
    let measured =
        service == Service::DynamoDb && !canned_answer && capacity::is_measured(&operation);
    let (response, units, reported) = if canned_answer {
        (canned(), None, None)
    } else if measured {
        measure(&shared, &upstream, parts, body, &operation).await
    } else {
        (
            forward(&shared.client, &upstream, parts, body).await,
            None,
            None,
        )
    };
    let exchange = Exchange {
        service,
        operation,
        start,
        end: Instant::now(),
        units,
        reported,
    };
    shared
        .log
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(exchange);
    Ok(response)
}

/// Forwards a DynamoDB request asking for moto's consumed capacity, and counts its units by the sizing rules (an
/// `UpdateItem`'s item is read back from moto first, out of band). The client gets moto's answer as it was.
async fn measure(
    shared: &Shared,
    upstream: &Uri,
    parts: hyper::http::request::Parts,
    body: Bytes,
    operation: &str,
) -> (Response<Full<Bytes>>, Option<Units>, Option<Units>) {
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let sent = capacity::asking_for_capacity(operation, &body).map_or(body, Bytes::from);
    let headers = parts.headers.clone();
    let response = forward(&shared.client, upstream, parts, sent).await;
    let ok = response.status() == StatusCode::OK;
    let answer_bytes = response
        .body()
        .clone()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let answer: serde_json::Value = serde_json::from_slice(&answer_bytes).unwrap_or_default();
    let after_update = match (operation, ok, Shadow::updated(&request)) {
        ("UpdateItem", true, Some((table, key))) => {
            read_back(&shared.client, upstream, headers, &table, key).await
        }
        _ => None,
    };
    let units = shared
        .shadow
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .units(operation, &request, ok, &answer, after_update);
    (response, units, capacity::reported(operation, &answer))
}

/// The size of an item as moto holds it now (0: none), read with a `GetItem` the client never sees.
async fn read_back(
    client: &Upstream,
    upstream: &Uri,
    mut headers: HeaderMap,
    table: &str,
    key: serde_json::Value,
) -> Option<usize> {
    let body = serde_json::json!({"TableName": table, "Key": key, "ConsistentRead": true});
    headers.insert(
        HeaderName::from_static("x-amz-target"),
        HeaderValue::from_static("DynamoDB_20120810.GetItem"),
    );
    let mut request = Request::new(Full::new(Bytes::from(body.to_string())));
    *request.method_mut() = hyper::Method::POST;
    *request.uri_mut() = Uri::builder()
        .scheme("http")
        .authority(upstream.authority()?.as_str())
        .path_and_query("/")
        .build()
        .ok()?;
    *request.headers_mut() = end_to_end(headers);
    let answer = client.request(request).await.ok()?;
    let bytes = answer.into_body().collect().await.ok()?.to_bytes();
    let answer: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some(answer.get("Item").map_or(0, capacity::item_bytes))
}

/// What DynamoDB answers a successful unconditional-looking write: an empty object. Enough for the fresh path of
/// every peer (claim, complete); reads would find nothing.
fn canned() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"{}")));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    response.headers_mut().insert(
        HeaderName::from_static("x-amzn-requestid"),
        HeaderValue::from_static("sqsafe-bench-canned"),
    );
    response
}

async fn forward(
    client: &Upstream,
    upstream: &Uri,
    parts: hyper::http::request::Parts,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let uri = match Uri::builder()
        .scheme("http")
        .authority(upstream.authority().map_or("127.0.0.1", |a| a.as_str()))
        .path_and_query(path)
        .build()
    {
        Ok(uri) => uri,
        Err(e) => return text(StatusCode::BAD_GATEWAY, format!("upstream URL: {e}")),
    };
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = parts.method;
    *request.uri_mut() = uri;
    *request.headers_mut() = end_to_end(parts.headers);
    let answer = match client.request(request).await {
        Ok(answer) => answer,
        Err(e) => return text(StatusCode::BAD_GATEWAY, format!("upstream: {e}")),
    };
    let (parts, body) = answer.into_parts();
    match body.collect().await {
        Ok(collected) => {
            let mut response = Response::new(Full::new(collected.to_bytes()));
            *response.status_mut() = parts.status;
            *response.headers_mut() = end_to_end(parts.headers);
            response
        }
        Err(e) => text(StatusCode::BAD_GATEWAY, format!("upstream body: {e}")),
    }
}

/// Drops hop-by-hop headers, moto's `Connection: close` among them, so the client's connection stays open.
fn end_to_end(mut headers: HeaderMap) -> HeaderMap {
    for name in [
        header::CONNECTION,
        HeaderName::from_static("keep-alive"),
        header::TRANSFER_ENCODING,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
        header::CONTENT_LENGTH,
    ] {
        headers.remove(name);
    }
    headers
}

fn text(status: StatusCode, message: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(message)));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moto_cannot_close_the_clients_connection() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("2"));
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("a/b"));
        let kept = end_to_end(headers);
        assert_eq!(kept.len(), 1);
        assert!(kept.contains_key(header::CONTENT_TYPE));
    }
}

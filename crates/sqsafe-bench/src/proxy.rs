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
    /// Whether DynamoDB requests to moto are measured (capacity units): only in the runs that count requests, so
    /// the timed runs go through the proxy as they did before it counted units.
    measuring: AtomicBool,
    /// Each exchange as it was answered, with what its capacity units will be counted from.
    log: Mutex<Vec<(Exchange, Option<ToMeasure>)>>,
    client: Upstream,
    /// The item sizes written so far, for the capacity units of the next write (module `capacity`).
    shadow: tokio::sync::Mutex<Shadow>,
}

/// A DynamoDB request forwarded to moto, kept until `take` counts its capacity units: after the batch, when the
/// client waits for nothing, so neither the parsing nor an `UpdateItem`'s read-back is in its timing or competes with
/// its requests at moto.
struct ToMeasure {
    /// The body as the client sent it.
    request: Bytes,
    ok: bool,
    answer: Bytes,
    /// moto, and the request's headers (for the read-back's).
    upstream: Uri,
    headers: HeaderMap,
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
            measuring: AtomicBool::new(false),
            log: Mutex::new(Vec::new()),
            client: Client::builder(TokioExecutor::new()).build(connector),
            shadow: tokio::sync::Mutex::new(Shadow::new(keys)),
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

    /// From now on, whether each DynamoDB request forwarded to moto asks for moto's consumed capacity and is kept
    /// for `take` to count its capacity units.
    pub(crate) fn set_measuring(&self, on: bool) {
        self.shared.measuring.store(on, Ordering::SeqCst);
    }

    /// The exchanges recorded since the last call, in the order they were answered, with the capacity units of
    /// each DynamoDB request measured (counted now, in that order: module `capacity`). Call it when the client is
    /// idle (between batches): an `UpdateItem`'s item is read back from moto here.
    pub(crate) async fn take(&self) -> Vec<Exchange> {
        let entries = std::mem::take(
            &mut *self
                .shared
                .log
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let mut shadow = self.shared.shadow.lock().await;
        let mut exchanges = Vec::with_capacity(entries.len());
        for (mut exchange, to_measure) in entries {
            if let Some(m) = to_measure {
                let (units, reported) =
                    units_of(&self.shared.client, &mut shadow, &exchange.operation, m).await;
                exchange.units = units;
                exchange.reported = reported;
            }
            exchanges.push(exchange);
        }
        exchanges
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
    let measured = service == Service::DynamoDb
        && !canned_answer
        && shared.measuring.load(Ordering::SeqCst)
        && capacity::is_measured(&operation);
    let (response, to_measure) = if canned_answer {
        (canned(), None)
    } else if measured {
        // moto's figure is asked for on the way; the rest is counted by `take`.
        let headers = parts.headers.clone();
        let sent = capacity::asking_for_capacity(&operation, &body)
            .map_or_else(|| body.clone(), Bytes::from);
        let response = forward(&shared.client, &upstream, parts, sent).await;
        let to_measure = ToMeasure {
            request: body,
            ok: response.status() == StatusCode::OK,
            answer: response_body(&response).await,
            upstream: upstream.clone(),
            headers,
        };
        (response, Some(to_measure))
    } else {
        (forward(&shared.client, &upstream, parts, body).await, None)
    };
    let exchange = Exchange {
        service,
        operation,
        start,
        end: Instant::now(),
        units: None,
        reported: None,
    };
    shared
        .log
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((exchange, to_measure));
    Ok(response)
}

/// The bytes of an answer the proxy built (a `Full` body: cloning it copies a reference).
async fn response_body(response: &Response<Full<Bytes>>) -> Bytes {
    response
        .body()
        .clone()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default()
}

/// The units of one request forwarded to moto: by the sizing rules (an `UpdateItem`'s item read back from moto
/// first, for its size after the update), and as moto reported them (a refused write: none).
async fn units_of(
    client: &Upstream,
    shadow: &mut Shadow,
    operation: &str,
    m: ToMeasure,
) -> (Option<Units>, Option<Units>) {
    let request: serde_json::Value = serde_json::from_slice(&m.request).unwrap_or_default();
    let answer: serde_json::Value = serde_json::from_slice(&m.answer).unwrap_or_default();
    let after_update = match (operation, m.ok, Shadow::updated(&request)) {
        ("UpdateItem", true, Some((table, key))) => {
            read_back(client, &m.upstream, m.headers, &table, key).await
        }
        _ => None,
    };
    let units = shadow.units(operation, &request, m.ok, &answer, after_update);
    (units, capacity::reported(operation, &answer))
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

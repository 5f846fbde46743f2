use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{
    CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, EXPECT, HeaderMap, HeaderName, HeaderValue,
    PROXY_AUTHENTICATE, PROXY_AUTHORIZATION, TE, TRAILER, TRANSFER_ENCODING, UPGRADE,
};
use axum::http::request::Parts;
use axum::http::response::Parts as ResponseParts;
use axum::http::uri::PathAndQuery;
use axum::http::{StatusCode, Uri, Version};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};

use super::fault::Fault;
use super::ownership;
use super::shared::Shared;

/// Largest request or response body the proxy buffers.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// The DynamoDB JSON protocol's target prefix; the operation name follows it.
const DYNAMODB_TARGET_PREFIX: &str = "DynamoDB_20120810.";

const X_AMZ_TARGET: HeaderName = HeaderName::from_static("x-amz-target");
const X_AMZN_ERROR_TYPE: HeaderName = HeaderName::from_static("x-amzn-errortype");
const X_AMZN_REQUEST_ID: HeaderName = HeaderName::from_static("x-amzn-requestid");
const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");
const AMZ_JSON: HeaderValue = HeaderValue::from_static("application/x-amz-json-1.0");

const THROTTLING_BODY: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}"#;
const INTERNAL_ERROR_BODY: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}"#;

/// The proxy's only route: the fallback, so every method and path comes here.
pub(crate) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    // The body is read before anything else, faults included, so that the connection stays usable for the next
    // request (keep-alive) whatever the answer.
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<LengthLimitError>() => {
            shared.admit(None);
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("fault proxy: request body over {MAX_BODY_BYTES} bytes"),
            );
        }
        Err(e) => {
            shared.admit(None);
            return plain(
                StatusCode::BAD_REQUEST,
                format!("fault proxy: request body unreadable: {e}"),
            );
        }
    };
    let operation = dynamodb_operation(&parts.headers).map(str::to_owned);
    let fault = shared.admit(operation.as_deref());
    // A transaction alone, other DynamoDB requests together (see `Shared::isolation`); other traffic never waits.
    let _isolation = match operation.as_deref() {
        Some("TransactWriteItems") => Isolation::Alone(shared.isolation.write().await),
        Some(_) => Isolation::Shared(shared.isolation.read().await),
        None => Isolation::None,
    };
    // A fenced write to remember (its answer will be a 500 after the write), or the retry of one (its answer is read).
    let fenced = match (fault, operation.as_deref()) {
        (Fault::AfterWrite500, Some(op)) => ownership::write_id(op, &body),
        (Fault::None, Some(op)) if shared.any_ambiguous() => {
            ownership::write_id(op, &body).filter(|id| shared.is_ambiguous(id))
        }
        _ => None,
    };
    match fault {
        Fault::None => match forward(&shared, parts, body).await {
            Ok((parts, body)) => {
                if let Some(id) = &fenced {
                    let met = ownership::met_own_write(id, parts.status.as_u16(), &body);
                    tracing::debug!(operation, key = %id.key, met, "retry of a write answered 500 after it landed");
                    shared.settle_ambiguous(id, met);
                }
                respond(parts, body)
            }
            Err(message) => bad_gateway(&shared, message),
        },
        Fault::Throttle => {
            tracing::debug!(operation, "injected ThrottlingException");
            dynamodb_error(
                StatusCode::BAD_REQUEST,
                "ThrottlingException",
                THROTTLING_BODY,
            )
        }
        Fault::Error500 => {
            tracing::debug!(operation, "injected InternalServerError before forwarding");
            internal_error()
        }
        Fault::UnprocessedKeys => match unprocessed_keys_answer(&body) {
            Some(answer) => {
                shared.count_unprocessed_keys();
                tracing::debug!(
                    operation,
                    "injected: every key of the BatchGetItem unprocessed"
                );
                answer
            }
            // Not a request DynamoDB would take: its answer is the upstream's to give.
            None => match forward(&shared, parts, body).await {
                Ok((parts, body)) => respond(parts, body),
                Err(message) => bad_gateway(&shared, message),
            },
        },
        Fault::AfterWrite500 => match forward(&shared, parts, body).await {
            Ok((applied, _)) => {
                shared.count_after_write_500();
                if let Some(id) = fenced {
                    shared.remember_ambiguous(id);
                }
                tracing::debug!(
                    operation,
                    upstream_status = applied.status.as_u16(),
                    "forwarded, injected InternalServerError after it"
                );
                internal_error()
            }
            Err(message) => bad_gateway(&shared, message),
        },
    }
}

/// The answer DynamoDB gives a `BatchGetItem` it read nothing of: status 200, an empty item list per table, and the
/// request's `RequestItems` back as `UnprocessedKeys`. `None` when the body has no `RequestItems` object.
fn unprocessed_keys_answer(body: &[u8]) -> Option<Response> {
    let request: serde_json::Value = serde_json::from_slice(body).ok()?;
    let items = request.get("RequestItems")?.as_object()?;
    let responses: serde_json::Map<String, serde_json::Value> = items
        .keys()
        .map(|table| (table.clone(), serde_json::Value::Array(Vec::new())))
        .collect();
    let answer = serde_json::json!({"Responses": responses, "UnprocessedKeys": items});
    let mut response = Response::new(Body::from(answer.to_string()));
    response.headers_mut().insert(CONTENT_TYPE, AMZ_JSON);
    response.headers_mut().insert(
        X_AMZN_REQUEST_ID,
        HeaderValue::from_static("sqsafe-fault-proxy"),
    );
    Some(response)
}

/// A held isolation lock, released when dropped (once the answer is ready): held for that, never read.
#[allow(dead_code)]
enum Isolation<'a> {
    Alone(tokio::sync::RwLockWriteGuard<'a, ()>),
    Shared(tokio::sync::RwLockReadGuard<'a, ()>),
    None,
}

/// The operation of a DynamoDB JSON-protocol request (`PutItem` for `X-Amz-Target: DynamoDB_20120810.PutItem`);
/// `None` for everything else (SQS's `AmazonSQS.*`, query-protocol requests, moto's own API).
fn dynamodb_operation(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(X_AMZ_TARGET)?
        .to_str()
        .ok()?
        .strip_prefix(DYNAMODB_TARGET_PREFIX)
}

/// Sends the request upstream as it came (method, path and query, headers but the hop-by-hop ones, body) and
/// returns the upstream's answer, read whole ([`respond`] turns it into the client's response). `Host` is kept, so
/// the upstream sees the address the client used (moto builds SQS queue URLs from it, which then point back at the
/// proxy).
async fn forward(
    shared: &Shared,
    parts: Parts,
    body: Bytes,
) -> Result<(ResponseParts, Bytes), String> {
    let uri = upstream_uri(&shared.upstream, parts.uri.path_and_query())?;
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = parts.method;
    *request.uri_mut() = uri;
    *request.version_mut() = Version::HTTP_11;
    *request.headers_mut() = end_to_end(parts.headers);
    // The body was read whole: nothing is left to wait for.
    request.headers_mut().remove(EXPECT);

    let response = shared
        .client
        .request(request)
        .await
        .map_err(|e| format!("upstream request failed: {e}"))?;
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|e| format!("upstream response body unreadable: {e}"))?
        .to_bytes();
    Ok((parts, body))
}

/// The upstream's answer as the client gets it: status, end-to-end headers, body.
fn respond(parts: ResponseParts, body: Bytes) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = parts.status;
    *response.headers_mut() = end_to_end(parts.headers);
    response
}

fn upstream_uri(upstream: &Uri, path_and_query: Option<&PathAndQuery>) -> Result<Uri, String> {
    let mut builder =
        Uri::builder().path_and_query(path_and_query.map_or("/", PathAndQuery::as_str));
    if let Some(scheme) = upstream.scheme() {
        builder = builder.scheme(scheme.clone());
    }
    if let Some(authority) = upstream.authority() {
        builder = builder.authority(authority.clone());
    }
    builder
        .build()
        .map_err(|e| format!("cannot build the upstream URL: {e}"))
}

/// `headers` without the hop-by-hop ones (RFC 9110 section 7.6.1), those the `Connection` header names, and
/// `Content-Length`, which hyper sets again from the buffered body.
fn end_to_end(mut headers: HeaderMap) -> HeaderMap {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        CONNECTION,
        KEEP_ALIVE,
        PROXY_CONNECTION,
        PROXY_AUTHENTICATE,
        PROXY_AUTHORIZATION,
        TE,
        TRAILER,
        TRANSFER_ENCODING,
        UPGRADE,
        CONTENT_LENGTH,
    ] {
        headers.remove(name);
    }
    headers
}

/// A DynamoDB JSON-protocol error, as AWS sends it: the type in `__type` and in `x-amzn-ErrorType`.
fn dynamodb_error(status: StatusCode, error_type: &'static str, body: &'static str) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, AMZ_JSON);
    headers.insert(X_AMZN_ERROR_TYPE, HeaderValue::from_static(error_type));
    headers.insert(
        X_AMZN_REQUEST_ID,
        HeaderValue::from_static("sqsafe-fault-proxy"),
    );
    response
}

fn internal_error() -> Response {
    dynamodb_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalServerError",
        INTERNAL_ERROR_BODY,
    )
}

fn bad_gateway(shared: &Shared, message: String) -> Response {
    shared.count_upstream_error();
    tracing::warn!(error = %message, "fault proxy: upstream failed");
    plain(StatusCode::BAD_GATEWAY, format!("fault proxy: {message}"))
}

fn plain(status: StatusCode, message: String) -> Response {
    let mut response = Response::new(Body::from(message));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (HeaderName::from_static(k), HeaderValue::from_static(v)))
            .collect()
    }

    #[test]
    fn only_the_dynamodb_json_protocol_has_an_operation() {
        let op =
            |target| dynamodb_operation(&headers(&[("x-amz-target", target)])).map(str::to_owned);
        assert_eq!(op("DynamoDB_20120810.PutItem").as_deref(), Some("PutItem"));
        assert_eq!(op("AmazonSQS.SendMessage"), None);
        assert_eq!(op("DynamoDBStreams_20120810.GetRecords"), None);
        assert_eq!(dynamodb_operation(&HeaderMap::new()), None);
    }

    #[tokio::test]
    async fn an_unprocessed_keys_answer_gives_the_request_items_back() {
        let request = serde_json::json!({"RequestItems": {"idem": {
            "Keys": [{"pk": {"S": "a"}}, {"pk": {"S": "b"}}], "ConsistentRead": true}}});
        let response = unprocessed_keys_answer(request.to_string().as_bytes()).expect("an answer");
        assert_eq!(response.status(), StatusCode::OK);
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let answer: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(
            answer,
            serde_json::json!({"Responses": {"idem": []},
                "UnprocessedKeys": request["RequestItems"]})
        );
        assert!(unprocessed_keys_answer(b"not json").is_none());
        assert!(unprocessed_keys_answer(b"{}").is_none());
    }

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let kept = end_to_end(headers(&[
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("content-length", "12"),
            ("host", "127.0.0.1:1234"),
            ("x-amz-target", "DynamoDB_20120810.PutItem"),
            ("authorization", "AWS4-HMAC-SHA256 ..."),
        ]));
        let mut names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["authorization", "host", "x-amz-target"]);
    }

    #[test]
    fn the_upstream_url_keeps_path_and_query() {
        let upstream: Uri = "http://127.0.0.1:5000".parse().expect("uri");
        let pq = PathAndQuery::from_static("/123456789012/q?Action=SendMessage");
        assert_eq!(
            upstream_uri(&upstream, Some(&pq)).expect("uri").to_string(),
            "http://127.0.0.1:5000/123456789012/q?Action=SendMessage"
        );
        assert_eq!(
            upstream_uri(&upstream, None).expect("uri").to_string(),
            "http://127.0.0.1:5000/"
        );
    }
}

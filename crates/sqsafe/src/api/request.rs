//! What the layer reads of a request: its key, the route it matched, and what a repeat must match.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Request};
use serde_json::{Value, json};

use super::headers::MAX_KEY_CHARS;

/// 1 to [`MAX_KEY_CHARS`] visible ASCII characters.
pub(super) fn valid_key(value: &HeaderValue) -> Option<&str> {
    let key = value.to_str().ok()?;
    let ok =
        !key.is_empty() && key.len() <= MAX_KEY_CHARS && key.bytes().all(|b| b.is_ascii_graphic());
    ok.then_some(key)
}

/// The route the request matched: axum's `MatchedPath` when the layer runs inside a router, else the URI's path.
pub(super) fn route_of<B>(request: &Request<B>) -> String {
    request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(
            || request.uri().path().to_owned(),
            |m| m.as_str().to_owned(),
        )
}

/// What a repeat must match: the method, the matched route, the body (its JSON when it is JSON, so that key order and
/// spacing do not count, else its text, else its bytes in hex), and the named headers. The engine fingerprints it
/// as it fingerprints a consumer's payload.
pub(super) fn fingerprint_of(
    parts: &http::request::Parts,
    route: &str,
    body: &Bytes,
    headers: &[HeaderName],
) -> Value {
    let body =
        serde_json::from_slice::<Value>(body).unwrap_or_else(|_| match std::str::from_utf8(body) {
            Ok(text) => json!({ "text": text }),
            Err(_) => json!({ "hex": hex::encode(body) }),
        });
    let named: serde_json::Map<String, Value> = headers
        .iter()
        .map(|name| {
            let value = header_values(&parts.headers, name);
            (name.as_str().to_owned(), Value::from(value))
        })
        .collect();
    json!({
        "method": parts.method.as_str(),
        "route": route,
        "body": body,
        "headers": named,
    })
}

fn header_values(headers: &HeaderMap, name: &HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect()
}

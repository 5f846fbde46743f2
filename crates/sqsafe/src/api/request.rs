//! What the layer reads of a request: its key, the route it matched (for the logs), and what a repeat must match.

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use http::{Request, Uri};
use sqsafe_idempotency::Fingerprint;

use super::headers::MAX_KEY_CHARS;
use super::json;

/// 1 to [`MAX_KEY_CHARS`] visible ASCII characters.
pub(super) fn valid_key(value: &HeaderValue) -> Option<&str> {
    let key = value.to_str().ok()?;
    let ok =
        !key.is_empty() && key.len() <= MAX_KEY_CHARS && key.bytes().all(|b| b.is_ascii_graphic());
    ok.then_some(key)
}

/// The route the request matched, for the logs: axum's `MatchedPath` when the layer runs inside a router, else the
/// URI's path.
pub(super) fn route_of<B>(request: &Request<B>) -> String {
    request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(
            || request.uri().path().to_owned(),
            |m| m.as_str().to_owned(),
        )
}

/// What a repeat must match: what the request means.
///
/// - the method;
/// - the path as sent (so its parameters: `/orders/1/cancel` is not `/orders/2/cancel`), before a nested router
///   stripped its prefix (axum's `OriginalUri`);
/// - the query string's pairs, percent-decoded, in the order sent (`?currency=usd` is not `?currency=eur`);
/// - the content type (its media type and parameters, case and order aside), or its absence;
/// - the body as its type says: under a JSON media type (`application/json`, `*/*+json`) a JSON document compared
///   as JSON with exact numbers ([`json`]); anything else, a JSON type whose body is no JSON included, byte for byte.
///   The two are never equal, whatever their bytes;
/// - the headers named in `headers` (sorted), each with its values in order.
///
/// Each part goes into the digest with its tag and length, so no two different requests write the same bytes.
/// The engine's fingerprint fields (for consumers' payloads) never apply.
pub(super) fn fingerprint_of(
    parts: &http::request::Parts,
    body: &Bytes,
    headers: &[HeaderName],
) -> Fingerprint {
    let mut canonical = Vec::with_capacity(body.len() + 256);
    let mut field = |tag: &[u8], bytes: &[u8]| {
        canonical.extend_from_slice(tag);
        canonical.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
        canonical.extend_from_slice(bytes);
    };
    field(b"method", parts.method.as_str().as_bytes());
    let uri: &Uri = parts
        .extensions
        .get::<axum::extract::OriginalUri>()
        .map_or(&parts.uri, |original| &original.0);
    field(b"path", uri.path().as_bytes());
    for (name, value) in form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()) {
        field(b"query-name", name.as_bytes());
        field(b"query-value", value.as_bytes());
    }
    let content_types: Vec<&HeaderValue> = parts.headers.get_all(CONTENT_TYPE).iter().collect();
    let media = match content_types.as_slice() {
        [] => {
            field(b"no-content-type", b"");
            None
        }
        [one] => match one.to_str().ok().and_then(|v| v.parse::<mime::Mime>().ok()) {
            Some(media) => {
                field(b"content-type", canonical_media(&media).as_bytes());
                Some(media)
            }
            None => {
                field(b"content-type-raw", one.as_bytes());
                None
            }
        },
        several => {
            for value in several {
                field(b"content-type-raw", value.as_bytes());
            }
            None
        }
    };
    let json = media.filter(is_json).and_then(|_| json::canonical(body));
    match json {
        Some(json) => field(b"body-json", &json),
        None => field(b"body-bytes", body),
    }
    for name in headers {
        field(b"header", name.as_str().as_bytes());
        for value in parts.headers.get_all(name) {
            field(b"header-value", value.as_bytes());
        }
    }
    Fingerprint::of_canonical_bytes(&canonical)
}

/// `type/subtype` lower-cased, then its parameters sorted by name (names lower-cased; `charset`'s value too, as
/// RFC 9110 makes it case-insensitive; other values as sent, unquoted).
fn canonical_media(media: &mime::Mime) -> String {
    let mut params: Vec<(String, String)> = media
        .params()
        .map(|(name, value)| {
            let name = name.as_str().to_ascii_lowercase();
            let value = if name == "charset" {
                value.as_str().to_ascii_lowercase()
            } else {
                value.as_str().to_owned()
            };
            (name, value)
        })
        .collect();
    params.sort();
    let mut out = media.essence_str().to_ascii_lowercase();
    for (name, value) in params {
        out.push(';');
        out.push_str(&name);
        out.push('=');
        out.push_str(&value);
    }
    out
}

fn is_json(media: &mime::Mime) -> bool {
    let subtype = media.subtype().as_str().to_ascii_lowercase();
    media.type_() == mime::APPLICATION
        && (subtype == "json" || media.suffix().is_some_and(|s| s == mime::JSON))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(method: &str, uri: &str, content_type: Option<&str>, body: &str) -> Fingerprint {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(content_type) = content_type {
            request = request.header(CONTENT_TYPE, content_type);
        }
        let (parts, ()) = request.body(()).expect("request").into_parts();
        fingerprint_of(&parts, &Bytes::from(body.to_owned()), &[])
    }

    const JSON: Option<&str> = Some("application/json");

    #[test]
    fn the_path_and_the_query_as_sent_count() {
        let cancel = |uri| fp("POST", uri, JSON, "{}");
        assert_ne!(cancel("/orders/1/cancel"), cancel("/orders/2/cancel"));
        assert_ne!(
            cancel("/charges?currency=usd"),
            cancel("/charges?currency=eur")
        );
        assert_ne!(
            cancel("/charges?a=1&b=2"),
            cancel("/charges?b=2&a=1"),
            "in order"
        );
        assert_ne!(cancel("/charges"), cancel("/charges?a=1"));
        assert_eq!(cancel("/charges?a=%41"), cancel("/charges?a=A"), "decoded");
        assert_ne!(fp("POST", "/x", JSON, "{}"), fp("PATCH", "/x", JSON, "{}"));
    }

    #[test]
    fn a_json_body_is_compared_as_json_with_exact_numbers_and_nothing_else_is() {
        let json = |body| fp("POST", "/x", JSON, body);
        assert_eq!(json(r#"{"a": 1, "b": 2}"#), json(r#"{"b":2,"a":1.0}"#));
        assert_ne!(
            json(r#"{"amount": 12345678901234567890123}"#),
            json(r#"{"amount": 12345678901234567890124}"#)
        );
        let problem = Some("application/problem+json; charset=UTF-8");
        assert_eq!(
            fp("POST", "/x", problem, r#"{"a":1}"#),
            fp(
                "POST",
                "/x",
                Some("Application/Problem+JSON;charset=utf-8"),
                r#"{ "a" : 1 }"#
            )
        );
        // A text body that happens to parse as JSON is text: byte for byte.
        let text = |body| fp("POST", "/x", Some("text/plain"), body);
        assert_ne!(text("1.0"), text("1"));
        assert_ne!(text(r#"{"a":1}"#), text(r#"{ "a":1}"#));
        // Kinds never meet: the JSON {"text":"abc"} is not the text abc, nor the same bytes under another type.
        assert_ne!(json(r#"{"text":"abc"}"#), text("abc"));
        assert_ne!(json(r#"{"a":1}"#), text(r#"{"a":1}"#));
        assert_ne!(json(r#"{"a":1}"#), fp("POST", "/x", None, r#"{"a":1}"#));
        // A JSON type whose body is no JSON is compared byte for byte.
        assert_ne!(json("not json"), json("not  json"));
    }

    #[test]
    fn named_headers_count_with_their_values() {
        let with = |value: &str| {
            let (parts, ()) = Request::post("/x")
                .header("x-account", value)
                .body(())
                .expect("request")
                .into_parts();
            fingerprint_of(
                &parts,
                &Bytes::new(),
                &[HeaderName::from_static("x-account")],
            )
        };
        assert_ne!(with("a"), with("b"));
        assert_eq!(with("a"), with("a"));
    }
}

//! An HTTP answer as the idempotency record keeps it, and as a repeat gets it back.

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, HeaderName, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use serde::{Deserialize, Serialize};

use super::body::ApiBody;
use super::headers::{REPLAY_BODY, REPLAYED};

/// The stored answer: its status, the headers the layer keeps ([`DEFAULT_STORED_HEADERS`](super::DEFAULT_STORED_HEADERS)
/// and the ones a team adds), and its body (as text when it is UTF-8, else in hex), or none when it did not fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    /// The status code.
    pub status: u16,
    /// Header names and values (values as sent, lossy only where they were not UTF-8).
    pub headers: Vec<(String, String)>,
    /// The body as text, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The body in hex, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
    /// The body's size in bytes, when the whole body was read (an answer over the cap streams past it unread).
    #[serde(default)]
    pub body_bytes: Option<u64>,
    /// The body is not stored: it did not fit in the stored record, it was encoded (`content-encoding`, negotiated
    /// for one request), or it failed to arrive.
    #[serde(default)]
    pub body_omitted: bool,
}

/// What the handler's answer body turned out to be, as far as the layer read it.
pub(super) enum Read<'a> {
    /// All of it, at most the cap.
    Whole(&'a Bytes),
    /// Not stored: over the cap, or cut by an error.
    Omitted,
}

impl StoredResponse {
    /// The answer to store, at most `max` bytes of JSON: with its body when it fits and is not encoded, else
    /// without it; then without its last headers while it still does not fit (their values are the team's).
    pub(super) fn of(
        status: StatusCode,
        headers: &HeaderMap,
        body: Read<'_>,
        kept: &[HeaderName],
        max: usize,
    ) -> Self {
        let encoded = headers
            .get_all(CONTENT_ENCODING)
            .iter()
            .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
        let mut stored = Self {
            status: status.as_u16(),
            headers: kept
                .iter()
                .flat_map(|name| {
                    headers.get_all(name).iter().map(move |value| {
                        (
                            name.as_str().to_owned(),
                            String::from_utf8_lossy(value.as_bytes()).into_owned(),
                        )
                    })
                })
                .collect(),
            text: None,
            hex: None,
            body_bytes: None,
            body_omitted: false,
        };
        match body {
            Read::Whole(body) => {
                stored.body_bytes = Some(body.len() as u64);
                // JSON escaping only grows a body: one over the cap before it is over after.
                let fits = match std::str::from_utf8(body) {
                    Ok(text) => text.len() <= max,
                    Err(_) => body.len().saturating_mul(2) <= max,
                };
                if encoded || !fits {
                    stored.body_omitted = !body.is_empty();
                } else {
                    match std::str::from_utf8(body) {
                        Ok(text) => stored.text = Some(text.to_owned()),
                        Err(_) => stored.hex = Some(hex::encode(body)),
                    }
                }
            }
            Read::Omitted => stored.body_omitted = true,
        }
        if stored.size() > max && (stored.text.is_some() || stored.hex.is_some()) {
            stored.text = None;
            stored.hex = None;
            stored.body_omitted = true;
        }
        while stored.size() > max && stored.headers.pop().is_some() {}
        stored
    }

    /// Its size as the record keeps it: its JSON.
    pub(super) fn size(&self) -> usize {
        serde_json::to_vec(self).map_or(usize::MAX, |json| json.len())
    }

    /// The body as it was sent (empty when it was omitted).
    pub fn body(&self) -> Bytes {
        if let Some(text) = &self.text {
            return Bytes::from(text.clone());
        }
        self.hex
            .as_deref()
            .and_then(|hex| hex::decode(hex).ok())
            .map(Bytes::from)
            .unwrap_or_default()
    }

    /// The replayed answer: the stored status, headers and body, with `Idempotent-Replayed: true` (and
    /// `Idempotent-Replay-Body: omitted` when the body was not stored).
    pub fn into_response<B>(self) -> Response<ApiBody<B>> {
        let mut answer = Response::new(ApiBody::full(self.body()));
        *answer.status_mut() = StatusCode::from_u16(self.status).unwrap_or(StatusCode::OK);
        let headers = answer.headers_mut();
        for (name, value) in &self.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.append(name, value);
            }
        }
        headers.insert(REPLAYED, HeaderValue::from_static("true"));
        if self.body_omitted {
            headers.insert(REPLAY_BODY, HeaderValue::from_static("omitted"));
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::super::settings::DEFAULT_STORED_HEADERS;
    use super::*;

    type Replay = Response<ApiBody<http_body_util::Empty<Bytes>>>;

    async fn body_of(replay: Replay) -> Bytes {
        replay.into_body().collect().await.expect("body").to_bytes()
    }

    #[tokio::test]
    async fn a_stored_answer_replays_byte_for_byte_text_or_binary() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("location", HeaderValue::from_static("/charges/ch_1"));
        headers.insert(
            "date",
            HeaderValue::from_static("Fri, 04 Dec 2026 10:00:00 GMT"),
        );
        let text = Bytes::from_static(b"{\"id\": \"ch_1\",  \"amount\":1250}");
        let stored = StoredResponse::of(
            StatusCode::CREATED,
            &headers,
            Read::Whole(&text),
            &DEFAULT_STORED_HEADERS,
            1024,
        );
        let json = serde_json::to_string(&stored).expect("json");
        let back: StoredResponse = serde_json::from_str(&json).expect("decode");
        let replay: Replay = back.into_response();
        assert_eq!(replay.status(), StatusCode::CREATED);
        assert_eq!(replay.headers()["location"], "/charges/ch_1");
        assert_eq!(replay.headers()[REPLAYED], "true");
        assert!(replay.headers().get("date").is_none(), "not stored");
        assert_eq!(body_of(replay).await, text);

        let binary = Bytes::from_static(&[0, 159, 146, 150, 255]);
        let stored = StoredResponse::of(
            StatusCode::OK,
            &HeaderMap::new(),
            Read::Whole(&binary),
            &[],
            1024,
        );
        assert_eq!(stored.text, None);
        assert_eq!(stored.body(), binary);
    }

    /// Only the allow-list is stored: never a cookie, a challenge, a hop-by-hop or per-answer header.
    #[test]
    fn only_the_allowed_headers_are_stored() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("content-type", "application/json"),
            ("etag", "\"v1\""),
            ("link", "</orders/1>; rel=self"),
            ("cache-control", "no-store"),
            ("set-cookie", "session=abc"),
            ("www-authenticate", "Bearer"),
            ("upgrade", "h2c"),
            ("trailer", "x-checksum"),
            ("age", "3"),
            ("expires", "0"),
            ("retry-after", "5"),
            ("x-token", "secret"),
            ("x-request-id", "r-1"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        let body = Bytes::from_static(b"{}");
        let stored = StoredResponse::of(
            StatusCode::OK,
            &headers,
            Read::Whole(&body),
            &DEFAULT_STORED_HEADERS,
            4096,
        );
        let names: Vec<&str> = stored.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["content-type", "etag", "link", "cache-control"]);
        let with_team = [
            DEFAULT_STORED_HEADERS.as_slice(),
            &[HeaderName::from_static("x-request-id")],
        ]
        .concat();
        let stored = StoredResponse::of(
            StatusCode::OK,
            &headers,
            Read::Whole(&body),
            &with_team,
            4096,
        );
        assert!(
            stored
                .headers
                .contains(&("x-request-id".to_owned(), "r-1".to_owned()))
        );
    }

    /// The cap is on the record's JSON, not the raw body: a body of short JSON strings grows when stored as text
    /// (each `"` becomes `\"`), and such a body under the cap raw but over it stored is kept without its body, so
    /// the engine never has to keep a digest only.
    #[test]
    fn the_cap_is_on_what_is_stored() {
        let body = Bytes::from(format!("[{}\"a\"]", "\"a\",".repeat(47 * 1024 / 4)));
        assert!(body.len() < 48 * 1024);
        let stored = StoredResponse::of(
            StatusCode::OK,
            &HeaderMap::new(),
            Read::Whole(&body),
            &DEFAULT_STORED_HEADERS,
            48 * 1024,
        );
        assert!(stored.body_omitted);
        assert!(stored.size() <= 48 * 1024);
        assert_eq!(stored.body_bytes, Some(body.len() as u64));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_or_encoded_is_omitted_and_said_so() {
        let big = Bytes::from(vec![b'x'; 2048]);
        let stored = StoredResponse::of(
            StatusCode::OK,
            &HeaderMap::new(),
            Read::Whole(&big),
            &[],
            1024,
        );
        assert!(stored.body_omitted);
        assert_eq!(stored.body_bytes, Some(2048));
        let replay: Replay = stored.into_response();
        assert_eq!(replay.headers()[REPLAY_BODY], "omitted");
        assert_eq!(replay.status(), StatusCode::OK);
        assert!(body_of(replay).await.is_empty());

        let mut gzip = HeaderMap::new();
        gzip.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        let small = Bytes::from_static(b"\x1f\x8b...");
        let stored = StoredResponse::of(StatusCode::OK, &gzip, Read::Whole(&small), &[], 1024);
        assert!(
            stored.body_omitted,
            "an encoding negotiated for one request is not replayed"
        );
    }
}

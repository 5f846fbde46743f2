//! An HTTP answer as the idempotency record keeps it, and as a repeat gets it back.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use http_body_util::Full;
use serde::{Deserialize, Serialize};

use super::headers::{REPLAY_BODY, REPLAYED};

/// Headers never stored: about the connection or this one answer, not about the resource (`content-length` is set
/// again from the body).
const NOT_STORED: [&str; 9] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "date",
    "set-cookie",
    "x-correlation-id",
    "traceparent",
    "tracestate",
];

/// The stored answer: its status, the headers worth replaying, and its body (as text when it is UTF-8, else in hex),
/// or none when it was over the layer's [`max_stored_body`](super::ApiSettings::max_stored_body).
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
    /// The body's size in bytes.
    pub body_bytes: u64,
    /// The body was too large to store.
    #[serde(default)]
    pub body_omitted: bool,
}

impl StoredResponse {
    /// The answer to store: its body kept when at most `max_body` bytes (as stored).
    pub fn of(status: StatusCode, headers: &HeaderMap, body: &Bytes, max_body: usize) -> Self {
        let headers = headers
            .iter()
            .filter(|(name, _)| !NOT_STORED.contains(&name.as_str()))
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect();
        let (text, hex) = match std::str::from_utf8(body) {
            Ok(text) if text.len() <= max_body => (Some(text.to_owned()), None),
            Err(_) if body.len() * 2 <= max_body => (None, Some(hex::encode(body))),
            _ => (None, None),
        };
        let body_omitted = text.is_none() && hex.is_none() && !body.is_empty();
        Self {
            status: status.as_u16(),
            headers,
            text,
            hex,
            body_bytes: body.len() as u64,
            body_omitted,
        }
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
    pub fn into_response(self) -> Response<Full<Bytes>> {
        let mut answer = Response::new(Full::new(self.body()));
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
    use super::*;

    #[test]
    fn a_stored_answer_replays_byte_for_byte_text_or_binary() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("location", HeaderValue::from_static("/charges/ch_1"));
        headers.insert(
            "date",
            HeaderValue::from_static("Fri, 04 Dec 2026 10:00:00 GMT"),
        );
        let text = Bytes::from_static(b"{\"id\": \"ch_1\",  \"amount\":1250}");
        let stored = StoredResponse::of(StatusCode::CREATED, &headers, &text, 1024);
        let json = serde_json::to_string(&stored).expect("json");
        let back: StoredResponse = serde_json::from_str(&json).expect("decode");
        let replay = back.into_response();
        assert_eq!(replay.status(), StatusCode::CREATED);
        assert_eq!(replay.headers()["location"], "/charges/ch_1");
        assert_eq!(replay.headers()[REPLAYED], "true");
        assert!(replay.headers().get("date").is_none(), "not stored");
        assert_eq!(stored.body(), text);

        let binary = Bytes::from_static(&[0, 159, 146, 150, 255]);
        let stored = StoredResponse::of(StatusCode::OK, &HeaderMap::new(), &binary, 1024);
        assert_eq!(stored.text, None);
        assert_eq!(stored.body(), binary);
    }

    #[test]
    fn a_body_over_the_limit_is_omitted_and_said_so() {
        let big = Bytes::from(vec![b'x'; 2048]);
        let stored = StoredResponse::of(StatusCode::OK, &HeaderMap::new(), &big, 1024);
        assert!(stored.body_omitted);
        assert_eq!(stored.body_bytes, 2048);
        let replay = stored.into_response();
        assert_eq!(replay.headers()[REPLAY_BODY], "omitted");
        assert_eq!(replay.status(), StatusCode::OK);
    }
}

//! A 2xx answer, read in full (up to the client's cap).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use sqsafe_batch::RecordError;

/// A successful (2xx) answer: its status, headers and body. Other answers are [`RecordError`]s (see the
/// [module docs](super)).
#[derive(Clone)]
pub struct HttpResponse {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    api: Arc<str>,
}

impl HttpResponse {
    pub(super) fn new(status: StatusCode, headers: HeaderMap, body: Bytes, api: Arc<str>) -> Self {
        Self {
            status,
            headers,
            body,
            api,
        }
    }

    /// The status code (200 to 299).
    pub fn status(&self) -> u16 {
        self.status.as_u16()
    }

    /// A header's value, when present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as received.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body read as JSON into `T`. A body that does not read is a transient `downstream_bad_response`: the
    /// effect may have happened, and the retry, carrying the same `Idempotency-Key`, gets the API's replay. The
    /// message gives the parser's category and position only, never the body.
    ///
    /// A replay whose body the API did not keep (`Idempotent-Replay-Body: omitted`, as `sqsafe::api` says of an
    /// answer too large to store) is a permanent `downstream_replay_without_body`: the API handled the key and will
    /// answer every retry the same way, so only an operator can recover the body (the message goes to the DLQ).
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, RecordError> {
        if self.body.is_empty()
            && self
                .header("idempotent-replay-body")
                .is_some_and(|v| v.eq_ignore_ascii_case("omitted"))
        {
            return Err(RecordError::permanent(
                "downstream_replay_without_body",
                format!(
                    "{} answered {} to a repeat of this key without the body it kept (too large to store): every \
                     retry gets the same",
                    self.api, self.status
                ),
            ));
        }
        serde_json::from_slice(&self.body).map_err(|e| {
            RecordError::transient(
                "downstream_bad_response",
                format!(
                    "{} answered {} with an unreadable body ({:?} error at line {} column {})",
                    self.api,
                    self.status,
                    e.classify(),
                    e.line(),
                    e.column()
                ),
            )
        })
    }
}

/// The body's length, not its text: a response may echo what was sent.
impl fmt::Debug for HttpResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpResponse")
            .field("api", &self.api)
            .field("status", &self.status)
            .field("body_bytes", &self.body.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use sqsafe_batch::ErrorClass;

    use super::*;

    fn response(body: &'static str) -> HttpResponse {
        HttpResponse::new(
            StatusCode::CREATED,
            HeaderMap::new(),
            Bytes::from_static(body.as_bytes()),
            "payments API".into(),
        )
    }

    #[derive(Debug, serde::Deserialize)]
    struct Charge {
        id: String,
    }

    #[test]
    fn a_readable_body_reads_and_an_unreadable_one_is_transient_and_unquoted() {
        let ok: Charge = response(r#"{"id":"ch_1"}"#).json().expect("charge");
        assert_eq!(ok.id, "ch_1");
        let err = response("card 4111111111111111")
            .json::<Charge>()
            .expect_err("unreadable");
        assert_eq!(
            (err.kind(), err.class()),
            ("downstream_bad_response", ErrorClass::Transient)
        );
        assert!(!err.message().contains("4111"), "{}", err.message());
        assert!(
            err.message()
                .starts_with("payments API answered 201 Created"),
            "{}",
            err.message()
        );
        let missing = response(r#"{"charge":"4111"}"#)
            .json::<Charge>()
            .expect_err("no id");
        assert!(!missing.message().contains("4111"), "{}", missing.message());
        assert!(!format!("{:?}", response("4111")).contains("4111"));
    }

    /// A replay without its body is final: no retry gets the body back. An empty body without the header is still
    /// the transient unreadable answer.
    #[test]
    fn a_replay_without_its_body_is_permanent() {
        let mut headers = HeaderMap::new();
        headers.insert("idempotent-replayed", "true".parse().expect("value"));
        headers.insert("idempotent-replay-body", "omitted".parse().expect("value"));
        let replay = HttpResponse::new(StatusCode::OK, headers, Bytes::new(), "reports API".into());
        assert_eq!(replay.status(), 200);
        let err = replay.json::<Charge>().expect_err("no body");
        assert_eq!(
            (err.kind(), err.class()),
            ("downstream_replay_without_body", ErrorClass::Permanent)
        );
        let err = response("").json::<Charge>().expect_err("empty");
        assert_eq!(err.class(), ErrorClass::Transient);
    }
}

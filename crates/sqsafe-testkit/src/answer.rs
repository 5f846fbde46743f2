use std::fmt;

use axum::body::{Bytes, HttpBody};
use axum::http::{HeaderMap, Request, StatusCode};
use tower::ServiceExt;

/// An HTTP answer read whole: what a test of an HTTP API asserts on ([`send`]).
#[derive(Clone, PartialEq, Eq)]
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body's bytes.
    pub body: Vec<u8>,
}

impl Answer {
    /// Whether it is a stored answer replayed by `sqsafe::api` (`Idempotent-Replayed: true`).
    pub fn replayed(&self) -> bool {
        self.headers
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true")
    }

    /// The body as JSON.
    ///
    /// # Panics
    /// When it is not JSON (the message shows it).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

impl fmt::Debug for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Answer")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}

/// Sends `request` to `app` (an axum `Router`, as a Lambda function serves it) and reads the answer whole. The
/// request's body is any that axum takes: a `lambda_http::Request`'s, an `axum::body::Body`.
///
/// # Panics
/// When the answer's body cannot be read.
pub async fn send<B>(app: &axum::Router, request: Request<B>) -> Answer
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let answer = match app.clone().oneshot(request).await {
        Ok(answer) => answer,
        Err(never) => match never {},
    };
    let (parts, body) = answer.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .expect("the answer's body");
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: body.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::post;

    #[tokio::test]
    async fn send_reads_status_headers_and_body() {
        let app = axum::Router::new().route(
            "/echo",
            post(|body: String| async move {
                (
                    StatusCode::CREATED,
                    [("idempotent-replayed", "true")],
                    format!("{{\"got\":{body:?}}}"),
                )
            }),
        );
        let request = Request::post("/echo")
            .body(Body::from("hi"))
            .expect("request");
        let answer = send(&app, request).await;
        assert_eq!(answer.status, StatusCode::CREATED);
        assert!(answer.replayed(), "{answer:?}");
        assert_eq!(answer.json()["got"], "hi");
        let request = Request::post("/nowhere")
            .body(Body::empty())
            .expect("request");
        let missing = send(&app, request).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
        assert!(!missing.replayed());
    }
}

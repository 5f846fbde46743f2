//! [`FakeDownstream`] behind sqsafe's own idempotency layer (`sqsafe::api`, feature `honoured-keys`): a downstream
//! that honours the `Idempotency-Key` by construction, its keys in a DynamoDB table, as a team's API on the layer does.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State as With};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use sqsafe::api::{ApiSettings, IdempotencyLayer};
use sqsafe::layers::idempotency::{DynamoDbStore, Idempotency};
use tower::Layer;

use crate::downstream::{FakeDownstream, MAX_REQUEST_BYTES, State, record, run};

/// The records' name and version (their keys' consumer part): `fake-downstream`, 1.
pub const HONOURED_RECORD_NAME: &str = "fake-downstream";

/// The one caller every request is scoped to: the fake serves one client account.
const CALLER: &str = "caller";

/// A call as the recorder in front of the layer kept it (its number from 1, its key), handed to the handler behind it.
#[derive(Debug, Clone)]
struct Recorded(usize, Option<String>);

impl FakeDownstream {
    /// Starts the fake API behind [`sqsafe::api::IdempotencyLayer`], its keys in `table` (a table with the string
    /// partition key `pk`, e.g. made by [`create_table`](crate::create_table); the records are named
    /// [`HONOURED_RECORD_NAME`]). Must be called within a Tokio runtime.
    ///
    /// What changes from [`start`](Self::start):
    /// - A `POST`, `PUT`, `PATCH` or `DELETE` with an `Idempotency-Key` runs the fake's handler (the next scripted
    ///   reply, else the default) once per key and content: a repeat gets the stored answer byte for byte with
    ///   `Idempotent-Replayed: true`, a repeat with another body `422`, a repeat while the first is in flight `409`.
    /// - A scripted status a client retries (`408`, `409`, `425`, `429`, `5xx`: `sqsafe::status`) releases the key:
    ///   the next call with it runs again and takes the next reply. Any other status is stored. A delay past the 30 s
    ///   lease does not release it: the claim is extended while the reply waits.
    /// - [`calls`](Self::calls) still lists every call received (replays and refusals too); scripted replies and
    ///   [`effects`](Self::effects) count only the calls that reached the handler.
    /// - Calls without a key, and other methods, pass through to the handler as before.
    ///
    /// # Panics
    /// When no port can be bound or the layer cannot be built on `table` (the message says which);
    /// [`try_start_honouring_keys`](Self::try_start_honouring_keys) returns the error instead.
    pub async fn start_honouring_keys(
        client: aws_sdk_dynamodb::Client,
        table: impl Into<String>,
    ) -> Self {
        Self::try_start_honouring_keys(client, table)
            .await
            .unwrap_or_else(|e| panic!("FakeDownstream::start_honouring_keys: {e}"))
    }

    /// [`start_honouring_keys`](Self::start_honouring_keys), returning the error.
    ///
    /// # Errors
    /// The table name is refused by the store (`InvalidInput`); binding `127.0.0.1:0` failed.
    pub async fn try_start_honouring_keys(
        client: aws_sdk_dynamodb::Client,
        table: impl Into<String>,
    ) -> std::io::Result<Self> {
        let invalid = |e: &dyn std::fmt::Display| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
        };
        let store = DynamoDbStore::builder(client, table)
            .build()
            .map_err(|e| invalid(&e))?;
        let idem = Idempotency::builder(store, HONOURED_RECORD_NAME, 1)
            .build()
            .map_err(|e| invalid(&e))?;
        let settings = ApiSettings {
            methods: vec![Method::POST, Method::PUT, Method::PATCH, Method::DELETE],
            key_required: false,
            max_request_body: MAX_REQUEST_BYTES,
            // A test's stdout is its own: no metric lines there.
            metrics_namespace: None,
            ..ApiSettings::default()
        };
        let keys = IdempotencyLayer::with_settings(idem, |_: &_| Some(CALLER.to_owned()), settings)
            .map_err(|e| invalid(&e))?;
        Self::serve(move |state| {
            let inner = Arc::clone(&state);
            let handler = tower::service_fn(move |request: Request| {
                let state = Arc::clone(&inner);
                async move { Ok::<_, Infallible>(handle(&state, request).await) }
            });
            let recorded = axum::middleware::from_fn_with_state(state, record_then);
            Router::new().fallback_service(recorded.layer(keys.layer(handler)))
        })
        .await
    }
}

/// In front of the layer: every call received is kept, then handed on with its number.
async fn record_then(
    With(state): With<Arc<Mutex<State>>>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, MAX_REQUEST_BYTES)
        .await
        .unwrap_or_default();
    let (n, key) = record(&state, &parts, &body);
    parts.extensions.insert(Recorded(n, key));
    next.run(Request::from_parts(parts, body.into())).await
}

/// Behind the layer: the call's reply, its effect counted.
async fn handle(state: &Mutex<State>, request: Request) -> Response {
    let Recorded(n, key) = request
        .extensions()
        .get::<Recorded>()
        .cloned()
        .unwrap_or(Recorded(0, None));
    run(state, n, key).await
}

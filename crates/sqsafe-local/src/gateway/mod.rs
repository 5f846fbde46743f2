//! `sqsafe local up`'s stand-in for API Gateway: each function behind an HTTP API (a SAM event of type `HttpApi`)
//! served on a loopback port. A request becomes the event API Gateway sends (payload format 2.0), the function runs
//! in the local Lambda emulator ([`FunctionInstance`](crate::lambda::FunctionInstance)) or under `cargo lambda watch`
//! (any [`Invoker`]), and its answer becomes the HTTP response.
//!
//! | API Gateway | here |
//! |---|---|
//! | IAM authorization (SigV4) | not checked: each request is the caller's named in [`CALLER_HEADER`], else [`LOCAL_CALLER`]'s (`requestContext.authorizer.iam.userArn`) |
//! | routes (`POST /orders`, `ANY /{proxy+}`, `$default`) | the function's, from the template; another path or method: `404 {"message":"Not Found"}` |
//! | an execution environment per concurrent request | one per API: requests take turns |
//! | the function failed (an error, a crash, a timeout) | `500 {"message":"Internal Server Error"}`, the reason on stderr |
//! | a request body over 10 MB | `413` |
//!
//! Each request prints one line: the API, the method and path, the status, `replayed` when the answer carries
//! `Idempotent-Replayed: true`, and the time it took.

mod event;
mod route;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Limited};
use sqsafe_testkit::{ServerSettings, ServerTask};
use tokio::net::TcpListener;
use tokio::sync::Mutex;

use crate::esm::Invoker;

pub use event::{CALLER_HEADER, LOCAL_CALLER, RequestParts, answer_of, event_of};
pub use route::RouteKey;

/// The largest request body API Gateway takes (10 MB).
const MAX_BODY: usize = 10 * 1024 * 1024;

/// One function behind its HTTP API, served on `127.0.0.1`.
pub struct Gateway<I> {
    addr: SocketAddr,
    server: ServerTask,
    invoker: Arc<Mutex<I>>,
}

struct Shared<I> {
    name: String,
    routes: Vec<RouteKey>,
    invoker: Arc<Mutex<I>>,
    /// Printed before each request's line (the API's name, padded like the consumers' lines).
    width: usize,
}

impl<I: Invoker + 'static> Gateway<I> {
    /// Serves `invoker` under `routes` (API Gateway route keys, as [`crate::stack::ApiFunctionSpec::routes`]) on a
    /// free loopback port.
    ///
    /// # Errors
    ///
    /// A route key that does not parse, or no port to listen on.
    pub async fn start(name: &str, routes: &[String], invoker: I) -> Result<Self, String> {
        let routes = routes
            .iter()
            .map(|r| RouteKey::parse(r).map_err(|e| format!("{name}: route {r:?}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|e| format!("{name}: no loopback port to serve its API on: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("{name}: {e}"))?;
        let invoker = Arc::new(Mutex::new(invoker));
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            routes,
            invoker: Arc::clone(&invoker),
            width: 16,
        });
        let settings = ServerSettings {
            nodelay: true,
            header_read_timeout: true,
            log_prefix: "local API ",
        };
        let server = ServerTask::spawn(listener, settings, move || {
            Router::new()
                .fallback(serve)
                .with_state(Arc::clone(&shared))
        });
        Ok(Self {
            addr,
            server,
            invoker,
        })
    }

    /// Where it listens: `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops listening; the invoker, once no request holds it (`None` if one still does after 10 s).
    pub async fn shutdown(self) -> Option<I> {
        self.server.shutdown().await;
        let mut invoker = self.invoker;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match Arc::try_unwrap(invoker) {
                Ok(invoker) => return Some(invoker.into_inner()),
                Err(_) if tokio::time::Instant::now() >= deadline => return None,
                // A request still runs: its connection ended with the server, so it lets go soon.
                Err(shared) => {
                    invoker = shared;
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
        }
    }
}

async fn serve<I: Invoker>(State(shared): State<Arc<Shared<I>>>, request: Request) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let answer = answer(&shared, request).await;
    let replayed = answer
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    println!(
        "{:<width$} {method} {path} {}{} ({:.2} s)",
        shared.name,
        answer.status().as_u16(),
        if replayed { " replayed" } else { "" },
        started.elapsed().as_secs_f64(),
        width = shared.width,
    );
    answer
}

async fn answer<I: Invoker>(shared: &Shared<I>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Some((route, path_parameters)) = shared
        .routes
        .iter()
        .find_map(|r| Some((r, r.matches(parts.method.as_str(), parts.uri.path())?)))
    else {
        return gateway_error(StatusCode::NOT_FOUND, "Not Found");
    };
    let Ok(body) = Limited::new(body, MAX_BODY).collect().await else {
        return gateway_error(StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large");
    };
    let event = event_of(&RequestParts {
        parts: &parts,
        body: &body.to_bytes(),
        route_key: route.as_str(),
        path_parameters: &path_parameters,
        request_id: &uuid::Uuid::new_v4().to_string(),
        now: std::time::SystemTime::now(),
    });
    let answered = shared.invoker.lock().await.invoke(event).await;
    match answered {
        Ok(value) => answer_of(value).unwrap_or_else(|e| {
            eprintln!(
                "{}: its answer is not an API Gateway response: {e}",
                shared.name
            );
            gateway_error(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error")
        }),
        Err(e) => {
            eprintln!("{}: {e}", shared.name);
            gateway_error(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error")
        }
    }
}

/// API Gateway's own answers: `{"message": ...}`.
fn gateway_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        [("content-type", "application/json")],
        Body::from(serde_json::json!({ "message": message }).to_string()),
    )
        .into_response()
}

//! Figure 8: the idempotent HTTP layer (`sqsafe::api::IdempotencyLayer`) in front of an axum handler, its records in
//! moto behind the bench proxy: DynamoDB requests per fresh, repeated and other-content request, counted at the
//! proxy, and the latency of each beside the same handler without the layer.
//!
//! Both run in this process, called as tower services one request after the other (`ServiceExt::oneshot`), so the
//! difference between them is the layer: its DynamoDB round trips through the proxy, and its own work (the body read,
//! the fingerprint, the answer stored).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use http_body_util::BodyExt;
use sqsafe::api::{IdempotencyLayer, REPLAYED};
use sqsafe::layers::idempotency::{DynamoDbStore, Idempotency};
use tower::ServiceExt;

use crate::bench::Bench;
use crate::figures::{ApiRun, Summary};
use crate::plan::SLOW_MS;
use crate::proxy::Backend;
use crate::trace::Counts;

/// The layer's table (partition key `pk`, as template.yaml's idempotency table).
pub(crate) const API_TABLE: &str = "bench-api-idempotency";

/// Requests sent before each measured series and not counted: the SDK's connection, the router's first call.
const WARM_UP: usize = 5;

/// The handler: a small order created, `201` with a JSON body, a `location` and a content type.
async fn create_order(State(runs): State<Arc<AtomicU64>>, body: Bytes) -> impl IntoResponse {
    let n = runs.fetch_add(1, Ordering::Relaxed) + 1;
    (
        StatusCode::CREATED,
        [
            ("content-type", "application/json"),
            ("location", "/orders/x"),
        ],
        format!("{{\"id\":\"ord_{n}\",\"bytes\":{}}}", body.len()),
    )
}

fn router() -> Router<Arc<AtomicU64>> {
    Router::new().route("/orders", post(create_order))
}

fn order(key: &str, body: &str) -> Request<Body> {
    Request::post("/orders")
        .header("content-type", "application/json")
        .header("x-caller", "bench-client")
        .header("idempotency-key", key)
        .body(Body::from(body.to_owned()))
        .unwrap_or_default()
}

/// An answer as the client reads it: status, whether it is a replay, body.
struct Answer {
    status: u16,
    replayed: bool,
    body: Bytes,
}

async fn call(app: &Router, request: Request<Body>) -> Result<(Answer, Duration), String> {
    let started = Instant::now();
    let answer = app
        .clone()
        .oneshot(request)
        .await
        .map_err(|e| format!("router: {e}"))?;
    let status = answer.status().as_u16();
    let replayed = answer.headers().get(REPLAYED).is_some_and(|v| v == "true");
    let body = answer
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("answer body: {e}"))?
        .to_bytes();
    Ok((
        Answer {
            status,
            replayed,
            body,
        },
        started.elapsed(),
    ))
}

impl Bench<'_> {
    /// Figure 8: the layer's requests and latency, beside the plain handler; its checks (request counts, answers,
    /// handler runs) are asserted, never its timings.
    pub(crate) async fn api(&mut self) -> Result<(), String> {
        eprintln!("==> the idempotent HTTP layer (sqsafe::api)");
        let bed = self.bed;
        let proxy = &bed.proxy;
        sqsafe_testkit::create_table(&bed.dynamodb, API_TABLE, "pk", None).await;
        let config = sqsafe_testkit::sdk_config_at(&proxy.dynamodb_endpoint()).await;
        let store = DynamoDbStore::builder(aws_sdk_dynamodb::Client::new(&config), API_TABLE)
            .build()
            .map_err(|e| format!("store: {e}"))?;
        let idem = Idempotency::builder(store, "orders-api", 1)
            .build()
            .map_err(|e| format!("idempotency: {e}"))?;
        let caller = |parts: &axum::http::request::Parts| {
            parts
                .headers
                .get("x-caller")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let runs = Arc::new(AtomicU64::new(0));
        let plain = router().with_state(Arc::clone(&runs));
        let layered = router()
            .layer(IdempotencyLayer::new(idem, caller).map_err(|e| format!("api layer: {e}"))?)
            .with_state(Arc::clone(&runs));
        proxy.set_measuring(false);
        let n = self.plan.api_requests;
        let body = |i: usize| format!("{{\"item\":\"book\",\"quantity\":{}}}", i % 7 + 1);

        // The plain handler makes no DynamoDB request: one series, at the same proxy setting.
        proxy.set_backend(Backend::Moto);
        proxy.set_latency(Duration::from_millis(SLOW_MS));
        let keys = fresh_keys("warm-plain", WARM_UP);
        for key in &keys {
            call(&plain, order(key, &body(0))).await?;
        }
        let keys = fresh_keys("plain", n);
        let requests: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), body(i)))
            .collect();
        let (run, _) = self
            .api_series(&plain, &runs, "plain", "fresh", Backend::Moto, &requests)
            .await?;
        self.api_check(&run, 201, &[], 1.0);
        self.report.api.push(run);

        for backend in [Backend::Moto, Backend::Canned] {
            proxy.set_backend(backend);
            for key in fresh_keys(&format!("warm-{backend:?}"), WARM_UP) {
                call(&layered, order(&key, &body(0))).await?;
            }
            let keys = fresh_keys(&format!("layer-{backend:?}"), n);
            let requests: Vec<_> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| (k.clone(), body(i)))
                .collect();
            let (fresh, answers) = self
                .api_series(&layered, &runs, "layer", "fresh", backend, &requests)
                .await?;
            self.api_check(&fresh, 201, &[("PutItem", 1.0), ("UpdateItem", 1.0)], 1.0);
            self.report.api.push(fresh);
            // canned answers `{}` to every write: a repeat would be claimed again. Repeats are measured on moto.
            if backend == Backend::Canned {
                continue;
            }
            let (repeat, replays) = self
                .api_series(&layered, &runs, "layer", "repeat", backend, &requests)
                .await?;
            self.api_check(&repeat, 201, &[("PutItem", 1.0)], 0.0);
            let same = answers.iter().zip(&replays).filter(|(a, b)| a == b).count();
            self.check(
                "api: each repeat replays the first answer byte for byte".to_owned(),
                same == n && replays.len() == n,
                format!("{same} of {n} equal"),
            );
            self.report.api.push(repeat);
            let others: Vec<_> = keys
                .iter()
                .map(|k| (k.clone(), "{\"item\":\"lamp\",\"quantity\":99}".to_owned()))
                .collect();
            let (other, _) = self
                .api_series(&layered, &runs, "layer", "other_content", backend, &others)
                .await?;
            self.api_check(&other, 422, &[("PutItem", 1.0)], 0.0);
            self.report.api.push(other);
        }
        proxy.set_backend(Backend::Moto);
        proxy.set_latency(Duration::ZERO);
        Ok(())
    }

    /// Sends `requests` (key, body) one after the other; returns the series and each answer's body, and checks the
    /// replay marker: on every answer of a repeat, on none of the others.
    async fn api_series(
        &mut self,
        app: &Router,
        runs: &AtomicU64,
        handler: &'static str,
        kind: &'static str,
        backend: Backend,
        requests: &[(String, String)],
    ) -> Result<(ApiRun, Vec<Bytes>), String> {
        let proxy = &self.bed.proxy;
        proxy.take().await;
        let runs_before = runs.load(Ordering::Relaxed);
        let mut durations = Vec::with_capacity(requests.len());
        let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
        let mut bodies = Vec::with_capacity(requests.len());
        let mut replayed = 0usize;
        for (key, body) in requests {
            let (answer, took) = call(app, order(key, body)).await?;
            durations.push(took);
            *statuses.entry(answer.status).or_default() += 1;
            replayed += usize::from(answer.replayed);
            bodies.push(answer.body);
        }
        let counts = Counts::of(&proxy.take().await);
        let per = |x: u64| x as f64 / requests.len().max(1) as f64;
        let run = ApiRun {
            handler,
            kind,
            backend,
            latency_ms: SLOW_MS,
            requests: requests.len(),
            duration: Summary::of(&durations),
            dynamodb_per_request: counts
                .dynamodb
                .iter()
                .map(|(op, n)| (op.clone(), per(*n)))
                .collect(),
            dynamodb_total_per_request: per(counts.dynamodb_total()),
            handler_runs_per_request: per(runs.load(Ordering::Relaxed) - runs_before),
            statuses,
        };
        eprintln!(
            "api: {handler} {kind} ({backend:?}, {SLOW_MS} ms): p50 {:.3} ms, p99 {:.3} ms, DynamoDB per request \
             {:?}, handler runs per request {}, answers {:?}",
            run.duration.p50_ms,
            run.duration.p99_ms,
            run.dynamodb_per_request,
            run.handler_runs_per_request,
            run.statuses
        );
        if kind == "repeat" {
            self.check(
                format!("api: {handler} {kind} on {backend:?}: every answer marked replayed"),
                replayed == requests.len(),
                format!("{replayed} of {}", requests.len()),
            );
        } else {
            self.check(
                format!("api: {handler} {kind} on {backend:?}: no answer marked replayed"),
                replayed == 0,
                format!("{replayed} of {}", requests.len()),
            );
        }
        Ok((run, bodies))
    }

    /// Every answer of `run` had `status`; its DynamoDB requests per request were `expected`, and its handler runs
    /// per request `runs`.
    fn api_check(&mut self, run: &ApiRun, status: u16, expected: &[(&str, f64)], runs: f64) {
        let what = format!("api: {} {} on {:?}", run.handler, run.kind, run.backend);
        self.check(
            format!("{what}: every answer {status}"),
            run.statuses.get(&status) == Some(&run.requests),
            format!("{:?}", run.statuses),
        );
        let want: BTreeMap<String, f64> = expected
            .iter()
            .map(|(op, n)| ((*op).to_owned(), *n))
            .collect();
        self.check(
            format!("{what}: DynamoDB requests per request"),
            run.dynamodb_per_request == want,
            format!("{:?}, expected {want:?}", run.dynamodb_per_request),
        );
        self.check(
            format!("{what}: handler runs per request"),
            (run.handler_runs_per_request - runs).abs() < f64::EPSILON,
            format!("{}, expected {runs}", run.handler_runs_per_request),
        );
    }
}

/// `n` keys never used before.
fn fresh_keys(label: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("{label}-{i}-{}", uuid::Uuid::new_v4()))
        .collect()
}

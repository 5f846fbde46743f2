//! A guarded request from its key to its answer: the body read, the claim, the handler under its held (and
//! extended) claim, and what is stored of its answer. It runs in a task of its own (see `mod.rs`), so a client that
//! hangs up cuts none of it.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use sqsafe_idempotency::{Claim, Error as IdempotencyError, Guard, IdempotencyStore, KeyBuilder};
use sqsafe_telemetry::api_metrics::RequestOutcome as Outcome;

use super::answer::{Answer, problem, refused, replay, retry_after, store_failed, until_claimable};
use super::body::ApiBody;
use super::request::fingerprint_of;
use super::stored::{Read, StoredResponse};
use super::{Shared, oneshot};
use crate::BoxError;
use crate::status::StatusClass;

/// The guarded request whose key header was valid (`key`).
pub(super) async fn guarded<S, Svc, ReqBody, ResBody>(
    shared: &Shared<S>,
    inner: Svc,
    request: Request<ReqBody>,
    key: String,
    lambda_deadline: Option<SystemTime>,
) -> Answer<ResBody>
where
    S: IdempotencyStore + 'static,
    Svc: tower::Service<
            Request<ReqBody>,
            Response = Response<ResBody>,
            Error = std::convert::Infallible,
        >,
    ReqBody: http_body::Body<Data = Bytes> + From<Bytes>,
    ReqBody::Error: Into<BoxError>,
    ResBody: http_body::Body<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    let settings = &shared.settings;
    let (parts, body) = request.into_parts();
    let Some(caller) = (shared.caller)(&parts).filter(|c| !c.is_empty()) else {
        return refused(
            StatusCode::UNAUTHORIZED,
            "unknown-caller",
            "the caller of this request could not be told, so its key cannot be kept for it",
        );
    };
    let body = match Limited::new(body, settings.max_request_body)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request-too-large",
                "the request body is larger than this API reads",
            );
        }
        Err(_) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "request-body-unreadable",
                "the request body could not be read (the client went away?)",
            );
        }
    };
    let key = match KeyBuilder::new(settings.name.0.clone(), settings.name.1)
        .tenant(caller)
        .intent("http", key)
        .build()
    {
        Ok(key) => key,
        Err(_) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "invalid-idempotency-key",
                "the Idempotency-Key cannot be used",
            );
        }
    };
    let fingerprint = fingerprint_of(&parts, &body, &settings.fingerprint_headers);
    let now = SystemTime::now();
    // Under Lambda, too little left to run the handler: nothing is claimed (a claim then could not be released in
    // time, and would hold the key until its lease ends).
    if lambda_deadline.is_some_and(|deadline| handler_time(shared, deadline).is_zero()) {
        return (no_time_left(), Outcome::Refused);
    }
    // The first lease: the setting's, ending no later than the invocation's deadline under Lambda.
    let lease_end = match lambda_deadline {
        Some(deadline) => deadline.min(now + settings.lease),
        None => now + settings.lease,
    };
    let idem_request = shared
        .idem
        .request_with_fingerprint(key, fingerprint)
        .deadline(lease_end);
    let guard = match shared.idem.claim::<StoredResponse>(&idem_request).await {
        Ok(Claim::Acquired(guard)) => guard,
        Ok(Claim::Replay { result, .. }) => return (replay(result), Outcome::Replayed),
        Err(e) if e.is_payload_mismatch() => {
            let answer = problem(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency-key-reused",
                "this Idempotency-Key was used with another request",
            );
            return (answer, Outcome::Mismatched);
        }
        Err(IdempotencyError::InProgress {
            lease_expires_at, ..
        }) => {
            let answer = problem(
                StatusCode::CONFLICT,
                "request-in-progress",
                "a request with this Idempotency-Key is still being handled; retry later",
            );
            let wait = lease_expires_at
                .duration_since(SystemTime::now())
                .unwrap_or_default();
            return (retry_after(answer, wait), Outcome::InProgress);
        }
        Err(e) => return store_failed(&e),
    };
    let request = Request::from_parts(parts, ReqBody::from(body));
    held(shared, guard, inner, request, lambda_deadline).await
}

/// The handler under the held claim. The claim is extended while the handler runs and its answer is read (a
/// third of the lease at a time), so a handler longer than its lease still runs once. It must end within
/// `max_handler_time`, and under Lambda by the invocation's deadline less the completion's reserve: past that it is
/// stopped and its claim kept (it may have taken effect), as a crash would leave it. Then the answer: a status the client retries releases the key and
/// passes through; a final one is stored (its body when it fits) and the record completed, fenced by the claim.
async fn held<S, Svc, ReqBody, ResBody>(
    shared: &Shared<S>,
    guard: Guard<S>,
    inner: Svc,
    request: Request<ReqBody>,
    lambda_deadline: Option<SystemTime>,
) -> Answer<ResBody>
where
    S: IdempotencyStore + 'static,
    Svc: tower::Service<
            Request<ReqBody>,
            Response = Response<ResBody>,
            Error = std::convert::Infallible,
        >,
    ResBody: http_body::Body<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    let settings = &shared.settings;
    let work = AssertUnwindSafe(run(inner, request, settings.max_stored)).catch_unwind();
    let extended = guard.with_heartbeat(settings.heartbeat, work);
    // The handler's time: `max_handler_time`, and under Lambda no later than the deadline less the reserve.
    let left = match lambda_deadline {
        None => settings.max_handler_time,
        Some(deadline) => {
            // The claim itself may have taken the time that was left.
            let left = handler_time(shared, deadline);
            if left.is_zero() {
                drop(extended);
                release(guard).await;
                return (no_time_left(), Outcome::Released);
            }
            left.min(settings.max_handler_time)
        }
    };
    let ran = match tokio::time::timeout(left, extended).await {
        Ok(ran) => ran,
        Err(_elapsed) => return timed_out(shared, guard),
    };
    match ran {
        Err(e) => {
            // Another attempt holds the key (the extensions failed for a whole lease): the handler was stopped,
            // perhaps after its effect. Counted as a store failure, the one outcome that can run a handler twice.
            tracing::error!(error = %e, kind = e.kind(), "the claim was lost while the handler ran: it was stopped");
            let answer = problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "claim-lost",
                "the request's claim was lost while it ran; retry it with the same Idempotency-Key",
            );
            (
                retry_after(answer, Duration::from_secs(1)),
                Outcome::StoreFailed,
            )
        }
        Ok(Err(_panic)) => {
            release(guard).await;
            let answer = problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "handler-failed",
                "the request failed; it may be retried with the same Idempotency-Key",
            );
            (answer, Outcome::Released)
        }
        Ok(Ok(Ran::Retried(parts, body))) => {
            // Released before the client sees the answer, so its retry finds the key free.
            release(guard).await;
            (
                Response::from_parts(parts, ApiBody::streamed(Bytes::new(), body)),
                Outcome::Released,
            )
        }
        Ok(Ok(Ran::Final(parts, kept))) => {
            let stored_of = |read| {
                StoredResponse::of(
                    parts.status,
                    &parts.headers,
                    read,
                    &settings.stored_headers,
                    settings.max_stored,
                )
            };
            let (stored, body) = match kept {
                Kept::Whole(data, trailers) => (
                    stored_of(Read::Whole(&data)),
                    Ok(ApiBody::held(data, trailers)),
                ),
                Kept::Over(prefix, rest) => (
                    stored_of(Read::Omitted),
                    Ok(ApiBody::streamed(prefix, rest)),
                ),
                Kept::Failed(e) => {
                    // The status is final, so the effect may have happened: the record keeps the status without
                    // the body, and a retry gets that, never a second run.
                    tracing::warn!(error = %e, "the handler's answer body failed: its status stored without it");
                    (stored_of(Read::Omitted), Err(()))
                }
            };
            let answer = match body {
                Ok(body) => Response::from_parts(parts, body),
                Err(()) => problem(
                    StatusCode::BAD_GATEWAY,
                    "answer-failed",
                    "the answer failed after the request was handled; a retry with the same Idempotency-Key gets \
                     its status",
                ),
            };
            match guard.complete(&stored).await {
                Ok(()) => (answer, Outcome::Executed),
                Err(e) => {
                    // The handler ran and its answer goes to the client; a repeat finds the claim (409, then a run
                    // again once its lease ended). Said loudly: it is the one way a handler can run twice.
                    tracing::error!(error = %e, kind = e.kind(), "the answer could not be stored: a repeat may run the handler again");
                    (answer, Outcome::StoreFailed)
                }
            }
        }
    }
}

/// The handler still ran at the end of its time (`max_handler_time`, or under Lambda the invocation's deadline less
/// the completion's reserve): it was stopped (its future dropped, so it does not resume in a later invocation), and
/// its claim is kept until its lease ends, since it may have taken effect.
fn timed_out<S: IdempotencyStore, B>(shared: &Shared<S>, guard: Guard<S>) -> Answer<B> {
    let wait = until_claimable(guard.lease_until(), shared.idem.takeover_margin());
    tracing::warn!(
        claimable_in_ms = wait.as_millis() as u64,
        "the handler ran out of its time: stopped, its claim kept until its lease ends"
    );
    drop(guard);
    let answer = problem(
        StatusCode::GATEWAY_TIMEOUT,
        "handler-timed-out",
        "the request ran out of time and may have taken effect; a retry with the same Idempotency-Key is answered \
         409 until its claim's lease ends, then runs",
    );
    (retry_after(answer, wait), Outcome::TimedOut)
}

/// What the handler answered.
enum Ran<B> {
    /// A status the client retries: never stored.
    Retried(http::response::Parts, Pin<Box<B>>),
    /// A final status, with what was read of its body.
    Final(http::response::Parts, Kept<B>),
}

/// A final answer's body, read up to the cap.
enum Kept<B> {
    /// All of it (and its trailers).
    Whole(Bytes, Option<HeaderMap>),
    /// Over the cap: what was read, and the rest unread.
    Over(Bytes, Pin<Box<B>>),
    /// It failed.
    Failed(BoxError),
}

async fn run<Svc, ReqBody, ResBody>(
    inner: Svc,
    request: Request<ReqBody>,
    cap: usize,
) -> Ran<ResBody>
where
    Svc: tower::Service<
            Request<ReqBody>,
            Response = Response<ResBody>,
            Error = std::convert::Infallible,
        >,
    ResBody: http_body::Body<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    let (parts, body) = oneshot(inner, request).await.into_parts();
    let mut body = Box::pin(body);
    if StatusClass::of(parts.status.as_u16()).is_retried() {
        return Ran::Retried(parts, body);
    }
    let mut read = BytesMut::new();
    loop {
        match body.frame().await {
            None => return Ran::Final(parts, Kept::Whole(read.freeze(), None)),
            Some(Err(e)) => return Ran::Final(parts, Kept::Failed(e.into())),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => {
                    read.extend_from_slice(&data);
                    if read.len() > cap {
                        return Ran::Final(parts, Kept::Over(read.freeze(), body));
                    }
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        return Ran::Final(parts, Kept::Whole(read.freeze(), Some(trailers)));
                    }
                }
            },
        }
    }
}

async fn release<S: IdempotencyStore>(guard: Guard<S>) {
    if let Err(e) = guard.release().await {
        // Its lease ends by itself: a retry waits (409) until then.
        tracing::warn!(error = %e, kind = e.kind(), "the key could not be released; its lease will end");
    }
}

/// The time left to run the handler under Lambda: until the invocation's `deadline` less the completion's reserve.
fn handler_time<S: IdempotencyStore>(shared: &Shared<S>, deadline: SystemTime) -> Duration {
    deadline
        .checked_sub(shared.idem.completion_retry().reserve)
        .and_then(|until| until.duration_since(SystemTime::now()).ok())
        .unwrap_or_default()
}

/// `503` (`no-time-left`) with `Retry-After: 1`: the handler was not started.
fn no_time_left<B>() -> Response<ApiBody<B>> {
    let answer = problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "no-time-left",
        "too little of the invocation was left to handle the request; retry it with the same Idempotency-Key",
    );
    retry_after(answer, Duration::from_secs(1))
}

//! The event source mapping's side of a function under `cargo lambda watch`: POST the SQS event to watch's invoke
//! endpoint and return the answer, minding what watch does meanwhile (builds, reloads, an exited process).

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use super::saves::Save;
use super::status::{AfterSave, Phase, Status};
use super::tally::Tally;
use crate::esm::Invoker;
use crate::lambda::BatchOutcomes;

/// How long after a partial-batch answer the function's batch metrics line may take to come through watch.
const TALLY_WAIT: Duration = Duration::from_millis(250);

/// Keeps a batch's messages invisible while the function cannot take it yet (watch is building, or the process
/// exited and waits for a saved change), so build time does not use up the visibility timeout: every third of
/// `visibility` (at least 1 s) each message's visibility is set to `visibility` from then, the queue's own timeout,
/// so a message never comes back sooner than the queue would bring it. The hold ends when the function runs: from
/// then on the function's own visibility changes (backoff, heartbeat) apply as they would in Lambda.
#[derive(Debug, Clone)]
pub struct VisibilityHold {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    visibility: Duration,
}

impl VisibilityHold {
    /// Holds messages of `queue_url`, whose visibility timeout is `visibility`.
    pub fn new(
        sqs: aws_sdk_sqs::Client,
        queue_url: impl Into<String>,
        visibility: Duration,
    ) -> Self {
        Self {
            sqs,
            queue_url: queue_url.into(),
            visibility,
        }
    }

    fn every(&self) -> Duration {
        (self.visibility / 3).max(Duration::from_secs(1))
    }

    async fn extend(&self, receipts: &[String]) {
        let seconds = i32::try_from(self.visibility.as_secs()).unwrap_or(i32::MAX);
        for chunk in receipts.chunks(10) {
            let entries: Vec<_> = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, receipt)| {
                    ChangeMessageVisibilityBatchRequestEntry::builder()
                        .id(format!("m{i}"))
                        .receipt_handle(receipt)
                        .visibility_timeout(seconds)
                        .build()
                        .ok()
                })
                .collect();
            let sent = self
                .sqs
                .change_message_visibility_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await;
            if let Err(e) = sent {
                tracing::warn!(error = ?e, "cannot hold the batch; it may come back while watch builds");
            }
        }
    }
}

/// Invokes one function under `cargo lambda watch` (made by
/// [`WatchFunction::invoker`](super::WatchFunction::invoker)).
///
/// With [`with_saves`](Self::with_saves), a batch received after a save of a source file waits first, held, until
/// watch has built what was saved and started it (or the build failed): watch notices a save seconds after it, and
/// would meanwhile hand the batch to the process that runs the previous code. If no build begins within
/// [`NOTICE_LIMIT`](Self::NOTICE_LIMIT) of the save (watch ignores that file), the batch goes on to the running
/// process.
///
/// The request is then sent: watch queues it and hands it to the function's process when one runs (it starts one
/// on the first invocation, and after each saved change). What it waits for, by the function's [`Phase`]:
///
/// | phase | waits | the batch's messages |
/// |---|---|---|
/// | `Idle`, `Building`, `Exited` | without limit: the answer comes once a process runs | held ([`VisibilityHold`], if set) |
/// | `Running` | the timeout, counted from the process's start or from the send, whichever is later | the function's own visibility changes |
/// | `Stopped` | not at all: an error | left to their visibility timeout |
///
/// A process stopped by a reload while it ran the batch never answers: its successor starts the clock again and the
/// timeout ends the wait. Watch cannot stop a running invocation as Lambda would, so after a timeout the function may
/// still finish the batch; the mapping deletes nothing and the messages come back after their visibility timeout,
/// where sqsafe's idempotency makes the second run a replay.
///
/// # Default
///
/// A 30 s timeout, like the local Runtime API's; no visibility hold; saves not followed.
#[derive(Debug, Clone)]
pub struct WatchInvoker {
    binary: String,
    url: String,
    status: watch::Receiver<Status>,
    stop: watch::Receiver<bool>,
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
    hold: Option<VisibilityHold>,
    saves: Option<watch::Receiver<Option<Save>>>,
    tally: Arc<Tally>,
    /// What the last invocation's batch metrics line counted, until taken.
    outcomes: Option<BatchOutcomes>,
}

impl WatchInvoker {
    /// The default timeout while the function runs.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// How long after a save a batch waits for watch to begin building it. Watch noticed saves 3 s after them on a
    /// quiet 2-core machine; past this, it is taken to ignore the file (a folder in its ignore files).
    pub const NOTICE_LIMIT: Duration = Duration::from_secs(20);

    pub(crate) fn new(
        binary: String,
        url: String,
        status: watch::Receiver<Status>,
        stop: watch::Receiver<bool>,
        tally: Arc<Tally>,
    ) -> Self {
        Self {
            binary,
            url,
            status,
            stop,
            client: Client::builder(TokioExecutor::new()).build_http(),
            timeout: Self::DEFAULT_TIMEOUT,
            hold: None,
            saves: None,
            tally,
            outcomes: None,
        }
    }

    /// Holds each batch received after a save until watch runs what was saved (`saves`: [`Saves::latest`](
    /// super::Saves::latest) of the workspace watch builds).
    pub fn with_saves(mut self, saves: watch::Receiver<Option<Save>>) -> Self {
        self.saves = Some(saves);
        self
    }

    /// Sets how long an invocation may run.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Holds each batch's messages while the function is not running.
    pub fn with_hold(mut self, hold: VisibilityHold) -> Self {
        self.hold = Some(hold);
        self
    }

    async fn call(&mut self, event: &Value) -> Result<Value, String> {
        if *self.stop.borrow() {
            return Err("stopping".into());
        }
        let receipts = receipt_handles(event);
        self.until_saved_code_runs(&receipts).await?;
        let body = serde_json::to_vec(event).map_err(|e| e.to_string())?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(&self.url)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let response = self.client.request(request);
        tokio::pin!(response);
        // (process start count, when the clock started) while the function runs.
        let mut clock: Option<(u64, Instant)> = None;
        let mut next_hold: Option<Instant> = None;
        loop {
            let status = self.status.borrow_and_update().clone();
            let deadline = match status.phase {
                Phase::Stopped => {
                    return Err(format!(
                        "{}: {}",
                        self.binary,
                        status.exit.unwrap_or_default()
                    ));
                }
                Phase::Running => {
                    next_hold = None;
                    let started = match clock {
                        Some((starts, at)) if starts == status.starts => at,
                        _ => {
                            let now = Instant::now();
                            clock = Some((status.starts, now));
                            now
                        }
                    };
                    Some(started + self.timeout)
                }
                Phase::Idle | Phase::Building | Phase::Exited => {
                    clock = None;
                    if let Some(hold) = self.hold.as_ref().filter(|_| !receipts.is_empty()) {
                        next_hold.get_or_insert_with(|| Instant::now() + hold.every());
                    }
                    None
                }
            };
            let far = Instant::now() + Duration::from_secs(86_400);
            tokio::select! {
                answer = &mut response => return answer_of(answer).await,
                _ = tokio::time::sleep_until(deadline.unwrap_or(far)), if deadline.is_some() => {
                    return Err(format!(
                        "{}: no answer within {:?} of running (watch cannot stop the invocation; \
                         its messages come back after their visibility timeout)",
                        self.binary, self.timeout
                    ));
                }
                _ = tokio::time::sleep_until(next_hold.unwrap_or(far)), if next_hold.is_some() => {
                    if let Some(hold) = &self.hold {
                        hold.extend(&receipts).await;
                        next_hold = Some(Instant::now() + hold.every());
                    }
                }
                changed = self.status.changed() => {
                    if changed.is_err() {
                        return Err(format!("{}: cargo lambda watch is gone", self.binary));
                    }
                }
                () = until_stopped(&mut self.stop) => return Err("stopping".into()),
            }
        }
    }

    /// Waits, holding the batch, while a save is not yet built and started ([`AfterSave`]).
    async fn until_saved_code_runs(&mut self, receipts: &[String]) -> Result<(), String> {
        let Some(saves) = self.saves.as_mut() else {
            return Ok(());
        };
        let hold = self.hold.as_ref().filter(|_| !receipts.is_empty());
        let mut next_hold: Option<Instant> = None;
        loop {
            let Some(save) = saves.borrow_and_update().clone() else {
                return Ok(());
            };
            let status = self.status.borrow_and_update().clone();
            let notice_by = match status.after_save(save.at) {
                AfterSave::Ready => return Ok(()),
                AfterSave::Building => None,
                AfterSave::Unnoticed => {
                    let by = Instant::from_std(save.at) + Self::NOTICE_LIMIT;
                    if Instant::now() >= by {
                        tracing::warn!(
                            function = %self.binary,
                            file = %save.path.display(),
                            "watch began no build within {:?} of the save: the batch goes to the running process",
                            Self::NOTICE_LIMIT
                        );
                        return Ok(());
                    }
                    Some(by)
                }
            };
            if let Some(hold) = hold {
                next_hold.get_or_insert_with(|| Instant::now() + hold.every());
            }
            let far = Instant::now() + Duration::from_secs(86_400);
            tokio::select! {
                changed = saves.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                }
                changed = self.status.changed() => {
                    if changed.is_err() {
                        return Err(format!("{}: cargo lambda watch is gone", self.binary));
                    }
                }
                () = tokio::time::sleep_until(notice_by.unwrap_or(far)), if notice_by.is_some() => {}
                () = tokio::time::sleep_until(next_hold.unwrap_or(far)), if next_hold.is_some() => {
                    if let Some(hold) = hold {
                        hold.extend(receipts).await;
                        next_hold = Some(Instant::now() + hold.every());
                    }
                }
                () = until_stopped(&mut self.stop) => return Err("stopping".into()),
            }
        }
    }
}

impl Invoker for WatchInvoker {
    async fn invoke(&mut self, event: Value) -> Result<Value, String> {
        // Lines printed before this invocation (an earlier one's, come late) are not its own.
        let _ = self.tally.take();
        self.outcomes = None;
        let answer = self.call(&event).await?;
        // A partial-batch answer: sqsafe's consumers print their batch metrics line before it.
        if answer.get("batchItemFailures").is_some() {
            self.outcomes = self.tally.take_within(TALLY_WAIT).await;
        }
        Ok(answer)
    }

    fn take_outcomes(&mut self) -> Option<BatchOutcomes> {
        self.outcomes.take()
    }
}

/// 200 with a JSON body is the function's answer; any other status is a failed invocation (500: the function
/// returned an error; 404: watch knows no such function), with the body as the reason.
async fn answer_of(
    answer: Result<hyper::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error>,
) -> Result<Value, String> {
    let response = answer.map_err(|e| format!("invoke request failed: {e}"))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
        .to_bytes();
    if status != StatusCode::OK {
        return Err(format!(
            "function error ({status}): {}",
            String::from_utf8_lossy(&body)
        ));
    }
    serde_json::from_slice(&body).map_err(|e| {
        format!(
            "the answer is not JSON ({e}): {}",
            String::from_utf8_lossy(&body)
        )
    })
}

/// Returns once `stop` is true; never if its sender is gone without saying so.
async fn until_stopped(stop: &mut watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The receipt handles of an `SqsEvent`'s records.
fn receipt_handles(event: &Value) -> Vec<String> {
    event["Records"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["receiptHandle"].as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn receipts_come_from_every_record() {
        let event = json!({"Records": [
            {"messageId": "a", "receiptHandle": "r-a"},
            {"messageId": "b"},
            {"messageId": "c", "receiptHandle": "r-c"},
        ]});
        assert_eq!(receipt_handles(&event), ["r-a", "r-c"]);
        assert!(receipt_handles(&json!({})).is_empty());
    }
}

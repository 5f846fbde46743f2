//! One record: its span, its handler, its outcome.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::SystemTime;

use aws_lambda_events::sqs::SqsMessage;
use futures::FutureExt;
use futures::future::FusedFuture;
use sqsafe_idempotency::BoxError;
use sqsafe_telemetry::{BatchMetrics, CorrelationId, Metric, RecordFields, TraceContext};
use tracing::{Instrument, Span};

use super::config::{BatchProcessor, RecordHandler};
use super::report::{Disposition, RecordReport};
use crate::envelope::{BadEnvelope, Opened};
use crate::error::RecordError;
use crate::record::{Processed, Record, group_id, receive_count};

impl BatchProcessor {
    pub(super) async fn run_record<H: RecordHandler>(
        &self,
        message: Arc<SqsMessage>,
        message_id: String,
        deadline: Option<SystemTime>,
        handler: &H,
        metrics: &BatchMetrics,
    ) -> RecordReport {
        let receive_count = receive_count(&message);
        // The envelope is opened once, here: its correlation id goes on the span, its payload to the handler.
        let opened = match message.body.as_deref() {
            Some(body) => self.envelope.open(body, self.correlation.attribute_name()),
            None => Ok(None),
        };
        let carried = match &opened {
            Ok(Some(Opened::Payload { correlation_id, .. })) => correlation_id.as_deref(),
            _ => None,
        };
        let (span, correlation, trace) =
            self.record_span(&message, &message_id, receive_count, carried);
        let (payload, mut not_run) = match opened {
            Ok(None) => (None, None),
            Ok(Some(Opened::Payload { payload, .. })) => (Some(Arc::new(payload)), None),
            Ok(Some(Opened::NotAnEvent(what))) => (None, Some(Ok(what))),
            Err(BadEnvelope(why)) => (
                None,
                Some(Err(RecordError::permanent(RecordError::BAD_ENVELOPE, why))),
            ),
        };
        if message.attributes.contains_key(crate::stream::KPL) {
            not_run = Some(Err(RecordError::permanent(
                RecordError::KPL_AGGREGATED,
                "a Kinesis Producer Library aggregate: sqsafe does not take aggregates apart (send records \
                 without aggregation, or de-aggregate before the consumer)",
            )));
        }
        let record = Record::new(
            Arc::clone(&message),
            message_id.clone(),
            correlation,
            receive_count,
            deadline,
            span.clone(),
            trace,
        )
        .with_payload(payload);
        async move {
            let correlation_id = record.correlation_id().as_str().to_owned();
            // Checked when the record starts (not when the batch does): earlier records may have used the time up.
            let outcome = match (not_run, self.too_late(deadline)) {
                (Some(Ok(what)), _) => {
                    tracing::info!(
                        event = what,
                        "not an event: acknowledged, the handler not run"
                    );
                    Ok(Processed::Ignored)
                }
                (Some(Err(bad)), _) => Err(bad),
                (None, Some(late)) => {
                    metrics.incr(Metric::Deferred);
                    Err(late)
                }
                // Boxed, here and for `dispose`: the record's future stays small, so it is cheap to move into
                // the batch's set of running records (the handler's future and a DLQ send are kilobytes).
                (None, None) => Box::pin(self.run_handler(&message, record, handler)).await,
            };
            let disposition = match outcome {
                Ok(processed) => {
                    metrics.incr(match processed {
                        Processed::Applied => Metric::Processed,
                        Processed::Replayed => Metric::Replayed,
                        Processed::SkippedByCache => Metric::SkippedByCache,
                        Processed::Ignored => Metric::Ignored,
                    });
                    Disposition::Succeeded(processed)
                }
                Err(error) => {
                    Box::pin(self.dispose(
                        &message,
                        &message_id,
                        &correlation_id,
                        error,
                        deadline,
                        metrics,
                    ))
                    .await
                }
            };
            RecordReport {
                message_id,
                disposition,
            }
        }
        .instrument(span)
        .await
    }

    /// Runs the handler; a panic becomes a transient `panic` failure of this record only.
    pub(super) async fn run_handler<H: RecordHandler>(
        &self,
        message: &SqsMessage,
        record: Record,
        handler: &H,
    ) -> Result<Processed, RecordError> {
        let work = AssertUnwindSafe(handler.handle(record)).catch_unwind();
        let caught = match (
            self.heartbeat,
            &self.visibility,
            message.receipt_handle.as_deref(),
        ) {
            (Some(heartbeat), Some(control), Some(receipt)) => {
                // A beat's call runs beside the work, not instead of it: the work is polled while the call is in
                // flight, and work that finishes meanwhile is reported at once. The next beat is timed from the end
                // of the last one.
                let mut work = std::pin::pin!(work);
                let mut beat = std::pin::pin!(futures::future::Fuse::terminated());
                let mut wait = std::pin::pin!(tokio::time::sleep(heartbeat.every));
                loop {
                    tokio::select! {
                        biased;
                        out = &mut work => break out,
                        changed = &mut beat, if !beat.is_terminated() => {
                            let changed: Result<(), BoxError> = changed;
                            if let Err(e) = changed {
                                tracing::warn!(error = %e, "visibility heartbeat failed");
                            }
                            wait.as_mut().reset(tokio::time::Instant::now() + heartbeat.every);
                        }
                        () = &mut wait, if beat.is_terminated() => {
                            beat.set(control.set_visibility_boxed(receipt, heartbeat.extend_to).fuse());
                        }
                    }
                }
            }
            _ => work.await,
        };
        caught.unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            Err(RecordError::transient(
                RecordError::PANIC,
                format!("handler panicked: {what}"),
            ))
        })
    }

    /// The record's span, with its correlation id (`carried`: the one the envelope carried) and its producer's trace
    /// context, when the message carried one.
    pub(super) fn record_span(
        &self,
        message: &SqsMessage,
        message_id: &str,
        receive_count: u32,
        carried: Option<&str>,
    ) -> (Span, CorrelationId, Option<TraceContext>) {
        let correlation = self.correlation.extract_with(message, carried);
        let arn = message.event_source_arn.as_deref().unwrap_or_default();
        let trace = TraceContext::of_message(message);
        let span = sqsafe_telemetry::record_span(&RecordFields {
            message_id,
            correlation_id: correlation.as_str(),
            receive_count,
            queue: sqsafe_telemetry::queue_name(arn).unwrap_or_default(),
            group_id: group_id(message),
            producer_trace_id: trace.as_ref().map(TraceContext::trace_id),
        });
        (span, correlation, trace)
    }
}

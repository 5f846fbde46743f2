use std::sync::atomic::{AtomicBool, Ordering};

use tracing::Span;
use tracing::field::Empty;

use crate::config::SPAN_TARGET;

/// Set by the first invocation in this process; Lambda runs one invocation at a time per process, so "first" is
/// the cold start.
static COLD_START: AtomicBool = AtomicBool::new(true);

/// The span for one Lambda invocation: `info_span!("invocation")` with
///
/// | field | value |
/// |---|---|
/// | `request_id` | `ctx.request_id` |
/// | `cold_start` | `true` for the first call in this process only |
/// | `function_name` | the name given to [`init_with`](crate::init_with) (by default `AWS_LAMBDA_FUNCTION_NAME`), else `ctx.env_config.function_name`; absent when neither is set |
/// | `xray_trace_id` | `ctx.xray_trace_id`, when present (Lambda sets it when X-Ray tracing is on) |
/// | `tenant_id` | `ctx.tenant_id`, when present (tenant-isolated functions) |
///
/// Enter it around the whole handler (`handler(event).instrument(invocation_span(&event.context))`) so every line
/// of the invocation carries these fields.
pub fn invocation_span(ctx: &lambda_runtime::Context) -> Span {
    invocation_span_with(ctx, &COLD_START, crate::logging::configured_function_name())
}

/// [`invocation_span`] with its process-wide state passed in, so tests own their cold-start flag.
pub(crate) fn invocation_span_with(
    ctx: &lambda_runtime::Context,
    cold_start: &AtomicBool,
    configured_function_name: Option<&str>,
) -> Span {
    let function_name = configured_function_name
        .or(Some(ctx.env_config.function_name.as_str()))
        .filter(|name| !name.is_empty());
    // Outside the macro: span field values are only evaluated when a subscriber wants the span, and the flag must
    // flip on the first invocation either way.
    let cold_start = cold_start.swap(false, Ordering::Relaxed);
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "invocation",
        request_id = ctx.request_id.as_str(),
        cold_start,
        function_name,
        xray_trace_id = ctx.xray_trace_id.as_deref(),
        tenant_id = ctx.tenant_id.as_deref(),
    );
    crate::traces::follow_lambda(&span, ctx.xray_trace_id.as_deref());
    span
}

/// The fields of one SQS record that [`record_span`] puts on every line logged while handling it.
///
/// Identifiers only: nothing in this crate takes or logs a message body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordFields<'a> {
    /// SQS `messageId`.
    pub message_id: &'a str,
    /// The correlation id, usually [`CorrelationSource::extract`](crate::CorrelationSource::extract)'s.
    pub correlation_id: &'a str,
    /// `ApproximateReceiveCount`: 1 on the first delivery, more on redeliveries.
    pub receive_count: u32,
    /// The queue's name, see [`queue_name`].
    pub queue: &'a str,
    /// `MessageGroupId` on FIFO queues.
    pub group_id: Option<&'a str>,
    /// The producer's trace id (32 lower-case hex digits), from the message's `traceparent` attribute or its
    /// `AWSTraceHeader` ([`TraceContext::of_message`](crate::TraceContext::of_message)).
    pub producer_trace_id: Option<&'a str>,
}

/// The span for one SQS record: `info_span!("record")` with `message_id`, `correlation_id`, `receive_count`,
/// `queue`, `group_id` and `producer_trace_id` (when present), and `idempotency_key`, empty until the caller knows
/// it:
///
/// ```
/// # let span = sqsafe_telemetry::record_span(&sqsafe_telemetry::RecordFields {
/// #     message_id: "m-1", correlation_id: "c-1", receive_count: 1, queue: "payments", group_id: None,
/// #     producer_trace_id: None });
/// span.record("idempotency_key", "charge-payment#v1#acme#payment:p-42");
/// ```
pub fn record_span(fields: &RecordFields<'_>) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        "record",
        message_id = fields.message_id,
        correlation_id = fields.correlation_id,
        receive_count = fields.receive_count,
        queue = fields.queue,
        group_id = fields.group_id,
        producer_trace_id = fields.producer_trace_id,
        idempotency_key = Empty,
    )
}

/// The queue name in an SQS event source ARN (`arn:aws:sqs:eu-west-1:123456789012:payments` gives `payments`).
///
/// `None` when the ARN has no `:` or ends with one.
pub fn queue_name(event_source_arn: &str) -> Option<&str> {
    event_source_arn
        .rsplit_once(':')
        .map(|(_, name)| name)
        .filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_name_is_the_last_arn_part() {
        assert_eq!(
            queue_name("arn:aws:sqs:eu-west-1:123456789012:payments"),
            Some("payments")
        );
        assert_eq!(
            queue_name("arn:aws:sqs:eu-west-1:123456789012:orders.fifo"),
            Some("orders.fifo")
        );
        assert_eq!(queue_name("arn:aws:sqs:eu-west-1:123456789012:"), None);
        assert_eq!(queue_name("payments"), None);
        assert_eq!(queue_name(""), None);
    }
}

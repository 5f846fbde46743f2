use std::collections::HashMap;

use aws_lambda_events::sqs::SqsMessage;
use aws_sdk_sqs::types::MessageAttributeValue;
use futures::future::BoxFuture;
use sqsafe_idempotency::{BoxError, ErrorClass};

use crate::error::class_name;

/// Message attribute names the dead-letter copy carries (besides the correlation id attribute).
pub mod attributes {
    /// Error label, e.g. `payload_mismatch`.
    pub const ERROR_KIND: &str = "sqsafe.error_kind";
    /// `transient` or `permanent`.
    pub const ERROR_CLASS: &str = "sqsafe.error_class";
    /// The error message (at most 1,024 characters).
    pub const ERROR_MESSAGE: &str = "sqsafe.error";
    /// Delivery attempts made (`ApproximateReceiveCount` of the last one).
    pub const ATTEMPTS: &str = "sqsafe.attempts";
    /// Consumer name.
    pub const CONSUMER: &str = "sqsafe.consumer";
    /// Consumer (effect) version.
    pub const CONSUMER_VERSION: &str = "sqsafe.consumer_version";
    /// Message id of the original message, to find it by.
    pub const ORIGINAL_MESSAGE_ID: &str = "sqsafe.original_message_id";
}

/// SQS allows at most 10 message attributes per message.
const MAX_ATTRIBUTES: usize = 10;
const MAX_ERROR_CHARS: usize = 1024;

/// Everything an operator needs to understand a dead-lettered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureContext {
    /// Original message id.
    pub message_id: String,
    /// Error label.
    pub error_kind: String,
    /// Transient (attempts exhausted) or permanent.
    pub error_class: ErrorClass,
    /// Error message.
    pub error_message: String,
    /// Delivery attempts made.
    pub attempts: u32,
    /// Consumer name.
    pub consumer: String,
    /// Consumer version.
    pub consumer_version: u32,
    /// Correlation id.
    pub correlation_id: String,
}

/// Where records that must not come back go, with their context. Implemented for SQS by [`SqsDeadLetterQueue`].
pub trait DeadLetterQueue: Send + Sync + 'static {
    /// Sends a copy of `message` with `failure` attached. An error keeps the record in the batch's failures, so the
    /// message comes back instead of being lost.
    fn send<'a>(
        &'a self,
        message: &'a SqsMessage,
        failure: &'a FailureContext,
    ) -> BoxFuture<'a, Result<(), BoxError>>;
}

/// A dead-letter queue in SQS: the body unchanged, the context as message attributes.
///
/// The copy carries [`attributes`]' seven context attributes plus the correlation id attribute, then as many of the
/// original attributes as SQS's limit of 10 leaves room for (sorted by name). For a FIFO DLQ (URL ending in `.fifo`)
/// the original group id is kept and the original message id is the deduplication id.
#[derive(Debug, Clone)]
pub struct SqsDeadLetterQueue {
    client: aws_sdk_sqs::Client,
    queue_url: String,
    correlation_attribute: String,
}

impl SqsDeadLetterQueue {
    /// Sends to the queue at `queue_url`.
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
            correlation_attribute: sqsafe_telemetry::correlation::DEFAULT_ATTRIBUTE.to_owned(),
        }
    }

    /// The attribute name that carries the correlation id (default `correlationId`).
    pub fn correlation_attribute(mut self, name: impl Into<String>) -> Self {
        self.correlation_attribute = name.into();
        self
    }

    /// The DLQ's URL.
    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }
}

fn string_attr(value: impl Into<String>) -> Result<MessageAttributeValue, BoxError> {
    Ok(MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()?)
}

fn number_attr(value: impl ToString) -> Result<MessageAttributeValue, BoxError> {
    Ok(MessageAttributeValue::builder()
        .data_type("Number")
        .string_value(value.to_string())
        .build()?)
}

/// The attributes of the dead-letter copy, in the order they are given room.
pub(crate) fn dead_letter_attributes(
    message: &SqsMessage,
    failure: &FailureContext,
    correlation_attribute: &str,
) -> Result<HashMap<String, MessageAttributeValue>, BoxError> {
    let error: String = failure
        .error_message
        .chars()
        .take(MAX_ERROR_CHARS)
        .collect();
    let mut out = HashMap::with_capacity(MAX_ATTRIBUTES);
    out.insert(
        attributes::ERROR_KIND.to_owned(),
        string_attr(&failure.error_kind)?,
    );
    out.insert(
        attributes::ERROR_CLASS.to_owned(),
        string_attr(class_name(failure.error_class))?,
    );
    out.insert(
        attributes::ERROR_MESSAGE.to_owned(),
        string_attr(if error.is_empty() {
            "-".to_owned()
        } else {
            error
        })?,
    );
    out.insert(
        attributes::ATTEMPTS.to_owned(),
        number_attr(failure.attempts)?,
    );
    out.insert(
        attributes::CONSUMER.to_owned(),
        string_attr(&failure.consumer)?,
    );
    out.insert(
        attributes::CONSUMER_VERSION.to_owned(),
        number_attr(failure.consumer_version)?,
    );
    out.insert(
        attributes::ORIGINAL_MESSAGE_ID.to_owned(),
        string_attr(&failure.message_id)?,
    );
    out.insert(
        correlation_attribute.to_owned(),
        string_attr(&failure.correlation_id)?,
    );
    let mut originals: Vec<_> = message.message_attributes.iter().collect();
    originals.sort_by(|a, b| a.0.cmp(b.0));
    for (name, attr) in originals {
        if out.len() >= MAX_ATTRIBUTES {
            break;
        }
        if out.contains_key(name) {
            continue;
        }
        let (Some(data_type), Some(value)) =
            (attr.data_type.as_deref(), attr.string_value.as_deref())
        else {
            continue; // binary and list values are not copied
        };
        let copy = MessageAttributeValue::builder()
            .data_type(data_type)
            .string_value(value)
            .build()?;
        out.insert(name.clone(), copy);
    }
    Ok(out)
}

impl DeadLetterQueue for SqsDeadLetterQueue {
    fn send<'a>(
        &'a self,
        message: &'a SqsMessage,
        failure: &'a FailureContext,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let mut send = self
                .client
                .send_message()
                .queue_url(&self.queue_url)
                .message_body(message.body.clone().unwrap_or_default())
                .set_message_attributes(Some(dead_letter_attributes(
                    message,
                    failure,
                    &self.correlation_attribute,
                )?));
            if self.queue_url.ends_with(".fifo") {
                let group = crate::record::group_id(message).unwrap_or("sqsafe-dead-letters");
                send = send
                    .message_group_id(group)
                    .message_deduplication_id(&failure.message_id);
            }
            send.send().await?;
            Ok(())
        })
    }
}

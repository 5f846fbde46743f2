//! Event builders and recording test doubles for the batch processor's pure logic.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lambda_events::sqs::{SqsEvent, SqsMessage, SqsMessageAttribute};
use futures::future::BoxFuture;
use sqsafe_batch::{DeadLetterQueue, FailureContext, VisibilityControl};
use sqsafe_idempotency::BoxError;

pub const STANDARD_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:payments";
pub const FIFO_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:ledger.fifo";

pub fn message(id: &str, body: &str) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = Some(id.to_owned());
    m.receipt_handle = Some(format!("rh-{id}"));
    m.body = Some(body.to_owned());
    m.event_source_arn = Some(STANDARD_ARN.to_owned());
    m.attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    m
}

pub fn with_receive_count(mut m: SqsMessage, n: u32) -> SqsMessage {
    m.attributes
        .insert("ApproximateReceiveCount".into(), n.to_string());
    m
}

pub fn in_group(mut m: SqsMessage, group: &str) -> SqsMessage {
    m.attributes
        .insert("MessageGroupId".into(), group.to_owned());
    m.event_source_arn = Some(FIFO_ARN.to_owned());
    m
}

pub fn with_attribute(mut m: SqsMessage, name: &str, value: &str) -> SqsMessage {
    let mut a = SqsMessageAttribute::default();
    a.string_value = Some(value.to_owned());
    a.data_type = Some("String".to_owned());
    m.message_attributes.insert(name.to_owned(), a);
    m
}

pub fn event(records: Vec<SqsMessage>) -> SqsEvent {
    let mut e = SqsEvent::default();
    e.records = records;
    e
}

/// Records what would have been dead-lettered; can be told to fail.
#[derive(Clone, Default)]
pub struct RecordingDlq {
    pub sent: Arc<Mutex<Vec<(String, FailureContext)>>>,
    pub fail: bool,
}

impl DeadLetterQueue for RecordingDlq {
    fn send<'a>(
        &'a self,
        message: &'a SqsMessage,
        failure: &'a FailureContext,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            if self.fail {
                return Err("DLQ unavailable".into());
            }
            let body = message.body.clone().unwrap_or_default();
            self.sent
                .lock()
                .expect("lock")
                .push((body, failure.clone()));
            Ok(())
        })
    }
}

/// Records visibility changes.
#[derive(Clone, Default)]
pub struct RecordingVisibility {
    pub changes: Arc<Mutex<Vec<(String, Duration)>>>,
}

impl VisibilityControl for RecordingVisibility {
    fn set_visibility<'a>(
        &'a self,
        receipt_handle: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            self.changes
                .lock()
                .expect("lock")
                .push((receipt_handle.to_owned(), timeout));
            Ok(())
        })
    }
}

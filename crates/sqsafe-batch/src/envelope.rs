//! What an SQS message body wraps: the payload itself, or an SNS notification, an EventBridge event or an S3 event
//! notification around it.
//!
//! A queue subscribed to an SNS topic (without raw delivery) receives each publish as a notification whose `Message`
//! is the payload as a JSON *string*; a queue an EventBridge rule targets receives the whole event, its payload in
//! `detail`; a queue S3 notifies receives one `Records` document per object change. [`Envelope::open`] takes the
//! payload out, once per record, so that a consumer's intent fields and fingerprint read the payload as its producer
//! wrote it, and the correlation id the envelope carries is found.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How the payload sits in the SQS message body. Set it with
/// [`BatchProcessorBuilder::envelope`](crate::BatchProcessorBuilder::envelope) (sqsafe's `Consumer::ENVELOPE`).
///
/// | envelope | the body | the payload | correlation id (after the SQS `correlationId` attribute) |
/// |---|---|---|---|
/// | `Sqs` (default) | the payload | the body | |
/// | `Sns` | an SNS notification (`"Type": "Notification"`) | its `Message`, parsed as JSON | the notification's `MessageAttributes`, same name |
/// | `EventBridge` | an EventBridge event (`detail-type`, `source`, `detail`) | its `detail` | the event's `id` |
/// | `S3` | an S3 event notification with one record | an [`S3Object`] | none |
///
/// An SNS subscription with raw message delivery delivers the payload itself: that queue's consumer is `Sqs`.
/// A body that is not the declared envelope is a permanent `bad_envelope` error, raised before the handler runs
/// (and dead-lettered with its context, as any permanent error); the message says what was missing, never a value.
/// S3's `s3:TestEvent` (sent once when a bucket's notifications are set up) is no object change: it is acknowledged
/// without running the handler (`Processed::Ignored`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Envelope {
    /// The body is the payload.
    #[default]
    Sqs,
    /// An SNS notification: the payload is its `Message`.
    Sns,
    /// An EventBridge event: the payload is its `detail`.
    EventBridge,
    /// An S3 event notification: the payload is an [`S3Object`].
    S3,
}

/// The payload of an [`Envelope::S3`] record: which object changed, and how. A consumer's `Payload` type for S3
/// notifications (or a struct of its own with the fields it needs).
///
/// Intent fields, as JSON pointers: `/bucket`, `/key`, `/version_id` (versioned buckets), `/sequencer` (orders the
/// changes of one key), `/etag` (the content: two puts of the same bytes have the same one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Object {
    /// The bucket's name.
    pub bucket: String,
    /// The object's key, decoded (S3 sends it URL-encoded, `+` for a space).
    pub key: String,
    /// The version id, on a versioned bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    /// Orders the events of one key: a later change of the key has a greater sequencer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequencer: Option<String>,
    /// The object's size in bytes (absent for deletions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The object's ETag (absent for deletions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The event: `ObjectCreated:Put`, `ObjectRemoved:Delete`, ...
    pub event_name: String,
    /// When it happened (ISO 8601), as S3 says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_time: Option<String>,
}

/// A body taken out of its envelope.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Opened {
    /// The payload, with the correlation id the envelope carried, if any.
    Payload {
        payload: OpenedPayload,
        correlation_id: Option<String>,
    },
    /// Not an event for the handler (S3's `s3:TestEvent`).
    NotAnEvent(&'static str),
}

/// The payload, as text to parse or as JSON already parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OpenedPayload {
    Text(String),
    Json(Value),
}

/// Why a body is not the declared envelope: what was missing or of the wrong type, never a value from the body (in
/// the payload errors' own words: `crate::parse`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadEnvelope(pub(crate) String);

impl Envelope {
    /// The envelope's name, as the `bad_envelope` errors say it.
    pub fn name(self) -> &'static str {
        match self {
            Envelope::Sqs => "SQS",
            Envelope::Sns => "SNS",
            Envelope::EventBridge => "EventBridge",
            Envelope::S3 => "S3",
        }
    }

    /// Takes the payload out of `body`; `attribute` is the correlation id's message attribute name (SNS carries
    /// the publisher's attributes inside the notification). `Ok(None)` for [`Envelope::Sqs`]: the body is the payload.
    pub(crate) fn open(self, body: &str, attribute: &str) -> Result<Option<Opened>, BadEnvelope> {
        let bad = |what: String| BadEnvelope(format!("not an {} envelope: {what}", self.name()));
        match self {
            Envelope::Sqs => Ok(None),
            Envelope::Sns => {
                let note: SnsNotification =
                    crate::parse::from_json(body, "an SNS notification").map_err(bad)?;
                if note.kind != "Notification" {
                    // (Which value it is, is not said: it comes from the body.)
                    return Err(bad("its `Type` is not `Notification`".to_owned()));
                }
                let correlation_id = note
                    .message_attributes
                    .get(attribute)
                    .filter(|a| a.kind == "String")
                    .map(|a| a.value.clone());
                Ok(Some(Opened::Payload {
                    payload: OpenedPayload::Text(note.message),
                    correlation_id,
                }))
            }
            Envelope::EventBridge => {
                let mut event: EventBridgeEvent =
                    crate::parse::from_json(body, "an EventBridge event").map_err(bad)?;
                let detail = event
                    .detail
                    .take()
                    .ok_or_else(|| bad("no `detail`".to_owned()))?;
                Ok(Some(Opened::Payload {
                    payload: OpenedPayload::Json(detail),
                    correlation_id: Some(event.id),
                }))
            }
            Envelope::S3 => {
                let raw: Value =
                    crate::parse::from_json(body, "an S3 notification").map_err(bad)?;
                if raw.get("Event").and_then(Value::as_str) == Some("s3:TestEvent") {
                    return Ok(Some(Opened::NotAnEvent("s3:TestEvent")));
                }
                let note: S3Notification =
                    crate::parse::from_value(&raw, "an S3 notification").map_err(bad)?;
                let [record] = <[S3Record; 1]>::try_from(note.records).map_err(|records| {
                    bad(format!(
                        "{} records, expected one (S3 sends one per message)",
                        records.len()
                    ))
                })?;
                if record.event_source != "aws:s3" {
                    return Err(bad("`eventSource` is not `aws:s3`".to_owned()));
                }
                let object = S3Object {
                    bucket: record.s3.bucket.name,
                    key: decode_key(&record.s3.object.key),
                    version_id: record.s3.object.version_id,
                    sequencer: record.s3.object.sequencer,
                    size: record.s3.object.size,
                    etag: record.s3.object.e_tag,
                    event_name: record.event_name,
                    event_time: record.event_time,
                };
                let payload = serde_json::to_value(&object).map_err(|e| bad(e.to_string()))?;
                Ok(Some(Opened::Payload {
                    payload: OpenedPayload::Json(payload),
                    correlation_id: None,
                }))
            }
        }
    }
}

/// An S3 key as S3 puts it in a notification: URL-encoded, with `+` for a space.
fn decode_key(key: &str) -> String {
    let spaced = key.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8()
        .map_or_else(|_| spaced.clone(), |decoded| decoded.into_owned())
}

#[derive(Deserialize)]
struct SnsNotification {
    #[serde(rename = "Type")]
    kind: String,
    #[serde(rename = "Message")]
    message: String,
    #[serde(rename = "MessageAttributes", default)]
    message_attributes: HashMap<String, SnsAttribute>,
}

#[derive(Deserialize)]
struct SnsAttribute {
    #[serde(rename = "Type")]
    kind: String,
    #[serde(rename = "Value")]
    value: String,
}

#[derive(Deserialize)]
struct EventBridgeEvent {
    id: String,
    #[serde(rename = "detail-type")]
    _detail_type: String,
    #[serde(rename = "source")]
    _source: String,
    detail: Option<Value>,
}

#[derive(Deserialize)]
struct S3Notification {
    #[serde(rename = "Records")]
    records: Vec<S3Record>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct S3Record {
    event_source: String,
    event_name: String,
    #[serde(default)]
    event_time: Option<String>,
    s3: S3Entity,
}

#[derive(Deserialize)]
struct S3Entity {
    bucket: S3Bucket,
    object: S3ObjectEntity,
}

#[derive(Deserialize)]
struct S3Bucket {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct S3ObjectEntity {
    key: String,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    e_tag: Option<String>,
    #[serde(default)]
    version_id: Option<String>,
    #[serde(default)]
    sequencer: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "card-4111";

    fn payload(opened: Option<Opened>) -> (OpenedPayload, Option<String>) {
        match opened {
            Some(Opened::Payload {
                payload,
                correlation_id,
            }) => (payload, correlation_id),
            other => panic!("not a payload: {other:?}"),
        }
    }

    #[test]
    fn sqs_is_the_body_itself() {
        assert_eq!(Envelope::Sqs.open("{}", "correlationId"), Ok(None));
        assert_eq!(Envelope::default(), Envelope::Sqs);
    }

    #[test]
    fn sns_takes_the_message_and_the_publishers_correlation_attribute() {
        let body = serde_json::json!({
            "Type": "Notification",
            "MessageId": "n-1",
            "TopicArn": "arn:aws:sns:us-east-1:123456789012:orders",
            "Message": "{\"id\":\"o-1\",\"card\":\"card-4111\"}",
            "MessageAttributes": {
                "correlationId": {"Type": "String", "Value": "corr-7"},
                "other": {"Type": "Number", "Value": "3"}
            }
        })
        .to_string();
        let (p, correlation) = payload(Envelope::Sns.open(&body, "correlationId").expect("sns"));
        assert_eq!(
            p,
            OpenedPayload::Text(r#"{"id":"o-1","card":"card-4111"}"#.to_owned())
        );
        assert_eq!(correlation.as_deref(), Some("corr-7"));
        let (_, none) = payload(Envelope::Sns.open(&body, "traceId").expect("sns"));
        assert_eq!(none, None, "another attribute name finds nothing");
        let (_, number) = payload(Envelope::Sns.open(&body, "other").expect("sns"));
        assert_eq!(number, None, "only String attributes are ids");
    }

    #[test]
    fn eventbridge_takes_the_detail_and_the_event_id() {
        let body = serde_json::json!({
            "version": "0", "id": "ev-1", "detail-type": "OrderPlaced", "source": "shop",
            "time": "2026-12-03T18:08:29Z", "region": "us-east-1", "resources": [],
            "detail": {"id": "o-2"}
        })
        .to_string();
        let (p, correlation) = payload(
            Envelope::EventBridge
                .open(&body, "correlationId")
                .expect("eb"),
        );
        assert_eq!(p, OpenedPayload::Json(serde_json::json!({"id": "o-2"})));
        assert_eq!(correlation.as_deref(), Some("ev-1"));
    }

    #[test]
    fn s3_takes_the_one_object_and_decodes_its_key() {
        let body = serde_json::json!({"Records": [{
            "eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
            "eventTime": "2026-12-03T18:08:29.777Z",
            "s3": {"bucket": {"name": "uploads", "arn": "arn:aws:s3:::uploads"},
                   "object": {"key": "in%2Fmy+file.csv", "size": 5, "eTag": "5d41", "sequencer": "0A1B"}}
        }]})
        .to_string();
        let (p, correlation) = payload(Envelope::S3.open(&body, "correlationId").expect("s3"));
        let OpenedPayload::Json(value) = p else {
            panic!("json")
        };
        let object: S3Object = serde_json::from_value(value).expect("S3Object");
        assert_eq!(object.bucket, "uploads");
        assert_eq!(object.key, "in/my file.csv");
        assert_eq!(object.sequencer.as_deref(), Some("0A1B"));
        assert_eq!(object.etag.as_deref(), Some("5d41"));
        assert_eq!(object.event_name, "ObjectCreated:Put");
        assert_eq!(correlation, None);
    }

    #[test]
    fn s3s_test_event_is_not_an_event() {
        let body = r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-12-03T18:08:29.765Z","Bucket":"b"}"#;
        assert_eq!(
            Envelope::S3.open(body, "correlationId"),
            Ok(Some(Opened::NotAnEvent("s3:TestEvent")))
        );
    }

    #[test]
    fn a_body_of_another_shape_is_a_bad_envelope_that_quotes_no_value() {
        let plain = format!(r#"{{"id":"o-1","card":"{SECRET}"}}"#);
        let sns_typed = serde_json::json!({"Type": SECRET, "Message": "{}"}).to_string();
        let two = serde_json::json!({"Records": [
            {"eventSource": "aws:s3", "eventName": "x", "s3": {"bucket": {"name": SECRET}, "object": {"key": "k"}}},
            {"eventSource": "aws:s3", "eventName": "x", "s3": {"bucket": {"name": SECRET}, "object": {"key": "k"}}}
        ]})
        .to_string();
        let cases = [
            (Envelope::Sns, plain.as_str(), "missing field `Type`"),
            (
                Envelope::Sns,
                sns_typed.as_str(),
                "`Type` is not `Notification`",
            ),
            (Envelope::EventBridge, plain.as_str(), "missing field"),
            (Envelope::S3, plain.as_str(), "missing field `Records`"),
            (Envelope::S3, two.as_str(), "2 records, expected one"),
            (Envelope::Sns, "not json at all", "not valid JSON"),
        ];
        for (envelope, body, says) in cases {
            let BadEnvelope(message) = envelope.open(body, "correlationId").expect_err("bad");
            assert!(message.contains(says), "{envelope:?}: {message}");
            assert!(message.contains(envelope.name()), "{message}");
            assert!(!message.contains(SECRET), "{message}");
        }
    }
}

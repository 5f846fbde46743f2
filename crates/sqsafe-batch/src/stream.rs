//! Stream sources: a Kinesis Data Streams or DynamoDB Streams event, as records of the same processor.
//!
//! Each stream record becomes a message-shaped record ([`StreamBatch`]), so that a consumer written for SQS runs on
//! it unchanged (the same handler, idempotency, deadline rule, correlation, traces and metrics):
//!
//! - its **body** is the record's content: a Kinesis record's data (as text when it is UTF-8, else base64, said by
//!   [`StreamOrigin::data_encoding`]), a DynamoDB change as the JSON of a [`Change`];
//! - its **message id** is the record's sequence number, which is what Lambda's `batchItemFailures` names for a
//!   stream;
//! - its **origin** ([`StreamOrigin`]: stream, shard, sequence number, event id, partition key) is on the
//!   [`Record`](crate::Record) and on a dead letter's context.
//!
//! The processor runs a stream batch in order per shard and stops a shard at its first record that must come back
//! ([`BatchProcessor::handle_stream_report`](crate::BatchProcessor::handle_stream_report)).

use std::collections::HashMap;

use aws_lambda_events::dynamodb::{Event as DynamoDbEvent, EventRecord as DynamoDbRecord};
use aws_lambda_events::kinesis::{KinesisEvent, KinesisEventRecord};
use aws_lambda_events::sqs::SqsMessage;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::BatchError;

/// Where a stream record's [`StreamOrigin`] is kept on its message-shaped record (a system attribute: never copied
/// to a dead letter's attributes, whose context carries it instead).
pub(crate) const ORIGIN: &str = "sqsafe.stream";
/// The record's identity ([`record_identity`]), beside the origin so that it is read without parsing.
const IDENTITY: &str = "sqsafe.identity";
/// Set on a record whose data is a KPL aggregate (the processor refuses it before the handler).
pub(crate) const KPL: &str = "sqsafe.kpl";

/// The first four bytes of a record aggregated by the Kinesis Producer Library.
const KPL_MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];

/// Which stream a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamSource {
    /// Kinesis Data Streams (`aws:kinesis`).
    Kinesis,
    /// DynamoDB Streams (`aws:dynamodb`).
    Dynamodb,
}

/// Where a stream record came from: what an operator needs to find it (the stream, its shard, its sequence number)
/// and what its dead letter carries (as the context's `stream`, compact JSON).
///
/// ```
/// use sqsafe_batch::{StreamOrigin, StreamSource};
///
/// let origin = StreamOrigin {
///     source: StreamSource::Kinesis,
///     stream_arn: Some("arn:aws:kinesis:eu-west-1:123456789012:stream/orders".into()),
///     shard_id: Some("shardId-000000000000".into()),
///     sequence_number: "4954".into(),
///     event_id: "shardId-000000000000:4954".into(),
///     partition_key: Some("order-7".into()),
///     data_encoding: None,
/// };
/// assert_eq!(
///     serde_json::to_string(&origin).unwrap(),
///     r#"{"source":"kinesis","stream_arn":"arn:aws:kinesis:eu-west-1:123456789012:stream/orders","shard_id":"shardId-000000000000","sequence_number":"4954","event_id":"shardId-000000000000:4954","partition_key":"order-7"}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamOrigin {
    /// Kinesis or DynamoDB Streams.
    pub source: StreamSource,
    /// The stream's ARN (the event's `eventSourceARN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_arn: Option<String>,
    /// The shard (Kinesis: from the event id; a DynamoDB Streams event does not name it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_id: Option<String>,
    /// The record's sequence number in its shard.
    pub sequence_number: String,
    /// The event id: Kinesis `shardId-…:sequence`, DynamoDB `eventID`. The record's identity
    /// ([`record_identity`]).
    pub event_id: String,
    /// Kinesis: the record's partition key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_key: Option<String>,
    /// `base64` when a Kinesis record's data is not UTF-8 text: the body holds it base64-encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_encoding: Option<String>,
}

impl StreamOrigin {
    /// The origin of a message-shaped stream record; `None` for an SQS message.
    pub fn of(message: &SqsMessage) -> Option<Self> {
        message
            .attributes
            .get(ORIGIN)
            .and_then(|json| serde_json::from_str(json).ok())
    }
}

/// True when `message` came from a stream ([`StreamBatch`]).
pub(crate) fn is_stream(message: &SqsMessage) -> bool {
    message.attributes.contains_key(ORIGIN)
}

/// A record's identity, for an idempotency key when its payload names no intent: a stream record's event id
/// (Kinesis `shardId-…:sequence`, DynamoDB `eventID`: the same on every redelivery, bisect and replay of the
/// record), else the SQS message id (the same on a redelivery, not on a second send of the same content).
pub fn record_identity(message: &SqsMessage) -> &str {
    message
        .attributes
        .get(IDENTITY)
        .or(message.message_id.as_ref())
        .map_or("", String::as_str)
}

/// What a DynamoDB item change is, as DynamoDB Streams names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChangeKind {
    /// A new item.
    Insert,
    /// An item changed.
    Modify,
    /// An item deleted (by a request, or by TTL: [`Change::removed_by_ttl`]).
    Remove,
}

/// A DynamoDB Streams record as a consumer reads it: the payload of a DynamoDB-stream consumer is `Change<T>`, with
/// `T` the item's own type (read from the item's attributes as plain JSON: numbers, strings, lists, maps).
///
/// Its JSON, which fingerprints and intent fields read (`/newImage/amount`):
///
/// ```
/// use serde::Deserialize;
/// use sqsafe_batch::{Change, ChangeKind};
///
/// #[derive(Deserialize)]
/// struct Order { id: String, amount: u64 }
///
/// let change: Change<Order> = serde_json::from_str(
///     r#"{"eventName":"INSERT","eventId":"c81e728d9d4c2f636f067f89cc14862c","keys":{"id":"o-1"},
///         "newImage":{"id":"o-1","amount":1250}}"#,
/// ).unwrap();
/// assert_eq!(change.event_name, ChangeKind::Insert);
/// assert_eq!(change.new_image.as_ref().map(|o| o.amount), Some(1250));
/// assert!(change.old_image.is_none() && !change.removed_by_ttl);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Change<T> {
    /// Insert, modify or remove.
    pub event_name: ChangeKind,
    /// The record's `eventID`: the same on every delivery of this change.
    pub event_id: String,
    /// The item's key attributes.
    pub keys: serde_json::Map<String, serde_json::Value>,
    /// The item after the change (stream view `NEW_IMAGE` or `NEW_AND_OLD_IMAGES`; none for a removal).
    #[serde(default = "none", skip_serializing_if = "Option::is_none")]
    pub new_image: Option<T>,
    /// The item before the change (stream view `OLD_IMAGE` or `NEW_AND_OLD_IMAGES`; none for an insert).
    #[serde(default = "none", skip_serializing_if = "Option::is_none")]
    pub old_image: Option<T>,
    /// A removal made by DynamoDB's TTL, not by a request.
    #[serde(default)]
    pub removed_by_ttl: bool,
}

fn none<T>() -> Option<T> {
    None
}

/// A stream event's records, message-shaped, in the event's order. Built from a Kinesis or a DynamoDB Streams event;
/// handed to [`BatchProcessor::handle_stream_report`](crate::BatchProcessor::handle_stream_report).
#[derive(Debug, Clone)]
pub struct StreamBatch {
    source: StreamSource,
    messages: Vec<SqsMessage>,
}

impl StreamBatch {
    /// A Kinesis event's records.
    ///
    /// # Errors
    ///
    /// [`BatchError::MalformedEvent`] for an event without records or a record without a sequence number (no
    /// answer could name it: Lambda would fail the whole batch).
    pub fn kinesis(event: KinesisEvent) -> Result<Self, BatchError> {
        if event.records.is_empty() {
            return Err(BatchError::MalformedEvent(
                "the Kinesis event has no records".into(),
            ));
        }
        let messages = event
            .records
            .into_iter()
            .enumerate()
            .map(|(i, r)| kinesis_message(i, r))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            source: StreamSource::Kinesis,
            messages,
        })
    }

    /// A DynamoDB Streams event's records; each body is the JSON of a [`Change`].
    ///
    /// # Errors
    ///
    /// [`BatchError::MalformedEvent`] for an event without records, a record without a sequence number, or an image
    /// that is not a DynamoDB item.
    pub fn dynamodb(event: DynamoDbEvent) -> Result<Self, BatchError> {
        if event.records.is_empty() {
            return Err(BatchError::MalformedEvent(
                "the DynamoDB Streams event has no records".into(),
            ));
        }
        let messages = event
            .records
            .into_iter()
            .enumerate()
            .map(|(i, r)| dynamodb_message(i, r))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            source: StreamSource::Dynamodb,
            messages,
        })
    }

    /// Which stream the records came from.
    pub fn source(&self) -> StreamSource {
        self.source
    }

    /// The records, message-shaped.
    pub fn messages(&self) -> &[SqsMessage] {
        &self.messages
    }

    pub(crate) fn into_messages(self) -> Vec<SqsMessage> {
        self.messages
    }
}

fn blank(value: Option<&str>) -> bool {
    value.is_none_or(|v| v.trim().is_empty())
}

fn message(
    origin: &StreamOrigin,
    body: String,
    group: String,
    sent_ms: Option<i64>,
) -> Result<SqsMessage, BatchError> {
    let mut m = SqsMessage::default();
    m.message_id = Some(origin.sequence_number.clone());
    m.body = Some(body);
    m.event_source_arn.clone_from(&origin.stream_arn);
    let mut attributes = HashMap::with_capacity(5);
    // The processor's ordered path runs each group one record at a time and stops it at its first reported record.
    attributes.insert("MessageGroupId".to_owned(), group);
    if let Some(ms) = sent_ms {
        // Where a dead letter's `first_sent` (and so its `expires`) is read from.
        attributes.insert("SentTimestamp".to_owned(), ms.to_string());
    }
    attributes.insert(IDENTITY.to_owned(), origin.event_id.clone());
    attributes.insert(
        ORIGIN.to_owned(),
        serde_json::to_string(origin)
            .map_err(|e| BatchError::MalformedEvent(format!("stream origin: {e}")))?,
    );
    m.attributes = attributes;
    Ok(m)
}

fn kinesis_message(i: usize, record: KinesisEventRecord) -> Result<SqsMessage, BatchError> {
    let sequence_number = record.kinesis.sequence_number;
    if blank(Some(&sequence_number)) {
        return Err(BatchError::MalformedEvent(format!(
            "Kinesis record {i} has no sequenceNumber"
        )));
    }
    // `shardId-000000000000:49545115243490985018280067714973144582180062593244200961`.
    let shard_id = record
        .event_id
        .as_deref()
        .and_then(|id| id.split_once(':'))
        .map(|(shard, _)| shard.to_owned())
        .filter(|shard| !shard.is_empty());
    let event_id = match (&record.event_id, &shard_id) {
        (Some(id), _) if !blank(Some(id)) => id.clone(),
        (_, Some(shard)) => format!("{shard}:{sequence_number}"),
        _ => sequence_number.clone(),
    };
    let data = record.kinesis.data.0;
    let kpl = data.starts_with(&KPL_MAGIC);
    let (body, data_encoding) = match (kpl, String::from_utf8(data)) {
        (false, Ok(text)) => (text, None),
        (_, Ok(text)) => (
            base64::engine::general_purpose::STANDARD.encode(text.as_bytes()),
            Some("base64".to_owned()),
        ),
        (_, Err(e)) => (
            base64::engine::general_purpose::STANDARD.encode(e.as_bytes()),
            Some("base64".to_owned()),
        ),
    };
    let stream_arn = record.event_source_arn.filter(|a| !a.trim().is_empty());
    // One shard's records keep their order; an event without shard ids is one group.
    let group = shard_id
        .clone()
        .or_else(|| stream_arn.clone())
        .unwrap_or_else(|| "stream".to_owned());
    let origin = StreamOrigin {
        source: StreamSource::Kinesis,
        stream_arn,
        shard_id,
        sequence_number,
        event_id,
        partition_key: Some(record.kinesis.partition_key).filter(|k| !k.is_empty()),
        data_encoding,
    };
    let sent_ms = record
        .kinesis
        .approximate_arrival_timestamp
        .0
        .timestamp_millis();
    let mut m = message(&origin, body, group, (sent_ms > 0).then_some(sent_ms))?;
    if kpl {
        m.attributes.insert(KPL.to_owned(), "true".to_owned());
    }
    Ok(m)
}

fn dynamodb_message(i: usize, record: DynamoDbRecord) -> Result<SqsMessage, BatchError> {
    let change = record.change;
    let Some(sequence_number) = change.sequence_number.filter(|s| !blank(Some(s.as_str()))) else {
        return Err(BatchError::MalformedEvent(format!(
            "DynamoDB Streams record {i} has no SequenceNumber"
        )));
    };
    let event_name = match record.event_name.as_str() {
        "INSERT" => ChangeKind::Insert,
        "MODIFY" => ChangeKind::Modify,
        "REMOVE" => ChangeKind::Remove,
        other => {
            return Err(BatchError::MalformedEvent(format!(
                "DynamoDB Streams record {i} has eventName {other:?} (INSERT, MODIFY or REMOVE)"
            )));
        }
    };
    let image = |item: serde_dynamo::Item,
                 what: &str|
     -> Result<Option<serde_json::Map<String, serde_json::Value>>, BatchError> {
        if item.is_empty() {
            return Ok(None);
        }
        serde_dynamo::from_item(item).map(Some).map_err(|e| {
            BatchError::MalformedEvent(format!(
                "DynamoDB Streams record {i}: its {what} is not a DynamoDB item: {e}"
            ))
        })
    };
    let removed_by_ttl = record
        .user_identity
        .as_ref()
        .is_some_and(|u| u.type_ == "Service" && u.principal_id == "dynamodb.amazonaws.com");
    let event_id = if blank(Some(&record.event_id)) {
        sequence_number.clone()
    } else {
        record.event_id
    };
    let body = Change {
        event_name,
        event_id: event_id.clone(),
        keys: image(change.keys, "Keys")?.unwrap_or_default(),
        new_image: image(change.new_image, "NewImage")?,
        old_image: image(change.old_image, "OldImage")?,
        removed_by_ttl,
    };
    let body = serde_json::to_string(&body)
        .map_err(|e| BatchError::MalformedEvent(format!("DynamoDB Streams record {i}: {e}")))?;
    let stream_arn = record.event_source_arn.filter(|a| !a.trim().is_empty());
    // A DynamoDB Streams event comes from one shard and does not name it: the batch is one group.
    let group = stream_arn.clone().unwrap_or_else(|| "stream".to_owned());
    let origin = StreamOrigin {
        source: StreamSource::Dynamodb,
        stream_arn,
        shard_id: None,
        sequence_number,
        event_id,
        partition_key: None,
        data_encoding: None,
    };
    let sent_ms = change.approximate_creation_date_time.timestamp_millis();
    message(&origin, body, group, (sent_ms > 0).then_some(sent_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINESIS: &str = r#"{"Records":[
      {"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"order-7",
        "sequenceNumber":"49590338271490256608559692538361571095921575989136588898",
        "data":"eyJpZCI6Im8tMSJ9","approximateArrivalTimestamp":1545084650.987},
       "eventSource":"aws:kinesis","eventVersion":"1.0",
       "eventID":"shardId-000000000006:49590338271490256608559692538361571095921575989136588898",
       "eventName":"aws:kinesis:record","invokeIdentityArn":"arn:aws:iam::123456789012:role/lambda-role",
       "awsRegion":"us-east-2","eventSourceARN":"arn:aws:kinesis:us-east-2:123456789012:stream/orders"},
      {"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"order-8",
        "sequenceNumber":"49590338271490256608559692540925702759324208523137515618",
        "data":"/w==","approximateArrivalTimestamp":1545084711.166},
       "eventSource":"aws:kinesis","eventVersion":"1.0",
       "eventID":"shardId-000000000006:49590338271490256608559692540925702759324208523137515618",
       "eventName":"aws:kinesis:record","invokeIdentityArn":"arn:aws:iam::123456789012:role/lambda-role",
       "awsRegion":"us-east-2","eventSourceARN":"arn:aws:kinesis:us-east-2:123456789012:stream/orders"}]}"#;

    #[test]
    fn a_kinesis_record_is_its_data_named_by_its_sequence_number() {
        let event: KinesisEvent = serde_json::from_str(KINESIS).expect("event");
        let batch = StreamBatch::kinesis(event).expect("batch");
        assert_eq!(batch.source(), StreamSource::Kinesis);
        let [text, binary] = batch.messages() else {
            panic!("two records");
        };
        assert_eq!(text.body.as_deref(), Some(r#"{"id":"o-1"}"#));
        assert_eq!(
            text.message_id.as_deref(),
            Some("49590338271490256608559692538361571095921575989136588898")
        );
        assert_eq!(
            record_identity(text),
            "shardId-000000000006:49590338271490256608559692538361571095921575989136588898"
        );
        assert_eq!(
            text.attributes.get("MessageGroupId").map(String::as_str),
            Some("shardId-000000000006")
        );
        assert_eq!(
            text.attributes.get("SentTimestamp").map(String::as_str),
            Some("1545084650987")
        );
        let origin = StreamOrigin::of(text).expect("origin");
        assert_eq!(origin.partition_key.as_deref(), Some("order-7"));
        assert_eq!(origin.shard_id.as_deref(), Some("shardId-000000000006"));
        assert_eq!(origin.data_encoding, None);
        assert!(is_stream(text));
        // Not UTF-8: kept whole, base64, and said so.
        assert_eq!(binary.body.as_deref(), Some("/w=="));
        assert_eq!(
            StreamOrigin::of(binary)
                .expect("origin")
                .data_encoding
                .as_deref(),
            Some("base64")
        );
        assert!(!binary.attributes.contains_key(KPL));
    }

    #[test]
    fn a_kpl_aggregate_is_marked_and_kept_whole() {
        let aggregate = base64::engine::general_purpose::STANDARD
            .encode([0xF3, 0x89, 0x9A, 0xC2, 0x0A, 0x01, 0x61]);
        let json = KINESIS.replacen("eyJpZCI6Im8tMSJ9", &aggregate, 1);
        let batch =
            StreamBatch::kinesis(serde_json::from_str(&json).expect("event")).expect("batch");
        let m = &batch.messages()[0];
        assert!(m.attributes.contains_key(KPL));
        assert_eq!(m.body.as_deref(), Some(aggregate.as_str()));
    }

    #[test]
    fn a_kinesis_event_without_a_sequence_number_or_records_is_refused() {
        let json = KINESIS.replacen(
            r#""sequenceNumber":"49590338271490256608559692538361571095921575989136588898""#,
            r#""sequenceNumber":" ""#,
            1,
        );
        let err = StreamBatch::kinesis(serde_json::from_str(&json).expect("event"))
            .expect_err("no sequence number");
        assert_eq!(
            err.to_string(),
            "malformed event: Kinesis record 0 has no sequenceNumber"
        );
        let err = StreamBatch::kinesis(KinesisEvent::default()).expect_err("empty");
        assert!(err.to_string().contains("no records"), "{err}");
    }

    const DYNAMODB: &str = r#"{"Records":[
      {"eventID":"c4ca4238a0b923820dcc509a6f75849b","eventName":"MODIFY","eventVersion":"1.1",
       "eventSource":"aws:dynamodb","awsRegion":"us-east-1",
       "dynamodb":{"ApproximateCreationDateTime":1479499740,"Keys":{"id":{"S":"o-1"}},
         "NewImage":{"id":{"S":"o-1"},"amount":{"N":"1250"},"tags":{"SS":["a"]},"paid":{"BOOL":true}},
         "OldImage":{"id":{"S":"o-1"},"amount":{"N":"1000"}},
         "SequenceNumber":"4421584500000000017450439091","SizeBytes":59,"StreamViewType":"NEW_AND_OLD_IMAGES"},
       "eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2015-06-27T00:48:05.899"},
      {"eventID":"c81e728d9d4c2f636f067f89cc14862c","eventName":"REMOVE","eventVersion":"1.1",
       "eventSource":"aws:dynamodb","awsRegion":"us-east-1",
       "userIdentity":{"type":"Service","principalId":"dynamodb.amazonaws.com"},
       "dynamodb":{"ApproximateCreationDateTime":1479499741,"Keys":{"id":{"S":"o-2"}},
         "OldImage":{"id":{"S":"o-2"},"amount":{"N":"5"}},
         "SequenceNumber":"4421584500000000017450439092","SizeBytes":38,"StreamViewType":"NEW_AND_OLD_IMAGES"},
       "eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2015-06-27T00:48:05.899"}]}"#;

    #[test]
    fn a_dynamodb_change_is_plain_json_images_named_by_its_sequence_number() {
        let event: DynamoDbEvent = serde_json::from_str(DYNAMODB).expect("event");
        let batch = StreamBatch::dynamodb(event).expect("batch");
        let [modify, removed] = batch.messages() else {
            panic!("two records");
        };
        assert_eq!(
            modify.message_id.as_deref(),
            Some("4421584500000000017450439091")
        );
        assert_eq!(record_identity(modify), "c4ca4238a0b923820dcc509a6f75849b");
        let change: serde_json::Value =
            serde_json::from_str(modify.body.as_deref().expect("body")).expect("json");
        assert_eq!(
            change,
            serde_json::json!({"eventName":"MODIFY","eventId":"c4ca4238a0b923820dcc509a6f75849b",
                "keys":{"id":"o-1"},"newImage":{"id":"o-1","amount":1250,"tags":["a"],"paid":true},
                "oldImage":{"id":"o-1","amount":1000},"removedByTtl":false})
        );
        #[derive(Deserialize)]
        struct Order {
            amount: u64,
        }
        let removal: Change<Order> =
            serde_json::from_str(removed.body.as_deref().expect("body")).expect("typed");
        assert_eq!(removal.event_name, ChangeKind::Remove);
        assert!(removal.removed_by_ttl);
        assert!(removal.new_image.is_none());
        assert_eq!(removal.old_image.map(|o| o.amount), Some(5));
        // One group: the event does not name its shard.
        assert_eq!(
            modify.attributes.get("MessageGroupId"),
            removed.attributes.get("MessageGroupId")
        );
        assert_eq!(
            StreamOrigin::of(removed).map(|o| o.source),
            Some(StreamSource::Dynamodb)
        );
    }

    #[test]
    fn a_dynamodb_event_with_an_unknown_change_or_no_sequence_number_is_refused() {
        let json = DYNAMODB.replacen(r#""MODIFY""#, r#""UPSERT""#, 1);
        let err = StreamBatch::dynamodb(serde_json::from_str(&json).expect("event"))
            .expect_err("unknown");
        assert!(err.to_string().contains("\"UPSERT\""), "{err}");
        let json = DYNAMODB.replacen(r#""SequenceNumber":"4421584500000000017450439092","#, "", 1);
        let err = StreamBatch::dynamodb(serde_json::from_str(&json).expect("event"))
            .expect_err("no sequence number");
        assert!(
            err.to_string().contains("record 1 has no SequenceNumber"),
            "{err}"
        );
    }

    #[test]
    fn an_sqs_message_is_identified_by_its_message_id() {
        let mut m = SqsMessage::default();
        m.message_id = Some("m-1".into());
        assert_eq!(record_identity(&m), "m-1");
        assert!(StreamOrigin::of(&m).is_none());
        assert!(!is_stream(&m));
    }
}

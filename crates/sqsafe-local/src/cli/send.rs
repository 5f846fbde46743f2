//! `sqsafe local send CONSUMER [FILE] [--times N]`: a consumer's sample event into its local queue, one SQS message
//! per record, as a producer would send them (body, message attributes, on a FIFO queue the group and deduplication
//! id), to the pipeline `sqsafe local up` runs (found through its state file, see [`super::state`]).

use std::collections::HashMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use serde_json::Value;

use super::SendArgs;
use super::send_stream;
use super::state::{self, ConsumerQueue, PipelineState, StreamTarget};
use crate::send_error::SendError;

/// How long the endpoint in the state file is given to accept a connection (moto on loopback: at once).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// SendMessageBatch's limit.
const BATCH: usize = 10;

/// The sample event of `consumer` in `events`: `CONSUMER.json`, else the first `CONSUMER-*.json` by name that is
/// not the sample of another of the pipeline's `consumers` whose name extends this one's (`send-receipt.json` is
/// not `send`'s).
pub(crate) fn sample_file(events: &Path, consumer: &str, consumers: &[&str]) -> Option<PathBuf> {
    let exact = events.join(format!("{consumer}.json"));
    if exact.is_file() {
        return Some(exact);
    }
    let prefix = format!("{consumer}-");
    let longer: Vec<&str> = consumers
        .iter()
        .copied()
        .filter(|other| other.starts_with(&prefix))
        .collect();
    let mut samples: Vec<PathBuf> = std::fs::read_dir(events)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with(&prefix)
                        && !longer.iter().any(|other| {
                            n.strip_prefix(other)
                                .is_some_and(|rest| rest.starts_with(['.', '-']))
                        })
                })
        })
        .collect();
    samples.sort();
    samples.into_iter().next()
}

/// One SQS message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outgoing {
    pub(crate) body: String,
    /// `(name, data type, value)` of each message attribute.
    pub(crate) attributes: Vec<(String, String, String)>,
    /// FIFO only.
    pub(crate) group: Option<String>,
    /// FIFO only.
    pub(crate) deduplication: Option<String>,
}

/// The messages of an SQS event's records, for `queue`: `Err` says which record cannot be sent and why.
pub(crate) fn messages(event: &Value, queue: &ConsumerQueue) -> Result<Vec<Outgoing>, String> {
    let records = event
        .get("Records")
        .and_then(Value::as_array)
        .ok_or("no \"Records\" array")?;
    if records.is_empty() {
        return Err("\"Records\" is empty".into());
    }
    records
        .iter()
        .enumerate()
        .map(|(i, record)| message(record, queue).map_err(|e| format!("record {}: {e}", i + 1)))
        .collect()
}

fn message(record: &Value, queue: &ConsumerQueue) -> Result<Outgoing, String> {
    if let Some(source) = record.get("eventSource").and_then(Value::as_str)
        && source != "aws:sqs"
    {
        return Err(format!("its eventSource is {source:?}, not \"aws:sqs\""));
    }
    let body = record
        .get("body")
        .and_then(Value::as_str)
        .ok_or("no \"body\" string")?
        .to_owned();
    let mut attributes = Vec::new();
    if let Some(map) = record.get("messageAttributes").and_then(Value::as_object) {
        for (name, attribute) in map {
            let data_type = attribute
                .get("dataType")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("message attribute {name} has no dataType"))?;
            let value = attribute
                .get("stringValue")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    format!("message attribute {name} has no stringValue (binary attributes are not sent)")
                })?;
            attributes.push((name.clone(), data_type.to_owned(), value.to_owned()));
        }
    }
    let attribute = |name: &str| {
        record
            .get("attributes")
            .and_then(|a| a.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let (group, deduplication) = if queue.fifo {
        let group = attribute("MessageGroupId")
            .ok_or("no attributes.MessageGroupId, which a FIFO queue needs")?;
        let deduplication = attribute("MessageDeduplicationId");
        if deduplication.is_none() && !queue.content_based_deduplication {
            return Err(
                "no attributes.MessageDeduplicationId, which a FIFO queue without content-based deduplication needs"
                    .into(),
            );
        }
        (Some(group), deduplication)
    } else {
        (None, None)
    };
    Ok(Outgoing {
        body,
        attributes,
        group,
        deduplication,
    })
}

/// Sends the consumer's sample; prints what was sent.
pub(super) async fn send(args: &SendArgs) -> Result<(), SendError> {
    let state_file = state::state_path();
    let pipeline = match state::read(&state_file) {
        Ok(pipeline) => pipeline,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SendError::NotRunning { state: state_file });
        }
        Err(source) => {
            return Err(SendError::File {
                path: state_file,
                source,
            });
        }
    };
    // A consumer of a queue, or of a stream; an unknown name is answered with both kinds.
    let stream = pipeline.streams.get(&args.consumer);
    let queue = pipeline.consumers.get(&args.consumer);
    let names: Vec<&str> = pipeline
        .consumers
        .keys()
        .chain(pipeline.streams.keys())
        .map(String::as_str)
        .collect();
    let unknown = || SendError::UnknownConsumer {
        name: args.consumer.clone(),
        known: names.iter().map(|n| (*n).to_owned()).collect(),
    };
    if stream.is_none() && queue.is_none() {
        return Err(unknown());
    }
    let file = match &args.file {
        Some(file) => file.clone(),
        None => sample_file(&pipeline.events, &args.consumer, &names).ok_or_else(|| {
            SendError::NoSample {
                consumer: args.consumer.clone(),
                events: pipeline.events.clone(),
            }
        })?,
    };
    let text = std::fs::read_to_string(&file).map_err(|source| SendError::File {
        path: file.clone(),
        source,
    })?;
    let queue = match (stream, queue) {
        (Some(target), _) => {
            return send_to_stream(args, &pipeline, &state_file, &file, &text, target).await;
        }
        (None, Some(queue)) => queue,
        (None, None) => return Err(unknown()),
    };
    let not_an_event = |reason: String| SendError::NotAnSqsEvent {
        path: file.clone(),
        reason,
    };
    let event: Value = serde_json::from_str(&text).map_err(|e| not_an_event(e.to_string()))?;
    let outgoing = messages(&event, queue).map_err(not_an_event)?;
    if !answers(&pipeline.endpoint) {
        return Err(SendError::NotAnswering {
            endpoint: pipeline.endpoint,
            state: state_file,
        });
    }
    let config = sqsafe_aws::local_config_loader(&pipeline.endpoint)
        .load()
        .await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    for _ in 0..args.times {
        send_batches(&sqs, &queue.url, &outgoing).await?;
    }
    let copies = if args.times > 1 {
        format!(" ×{}", args.times)
    } else {
        String::new()
    };
    println!(
        "sent {} record(s){copies} of {} to {} ({})",
        outgoing.len(),
        file.display(),
        args.consumer,
        queue.url
    );
    if args.times > 1 && queue.fifo {
        println!(
            "  a FIFO queue delivers one of the copies with the same deduplication id sent within 5 minutes (as in \
             AWS): a producer's retry, not a redelivery"
        );
    }
    Ok(())
}

/// The stream consumer's part of [`send`]: the event's records written where its stream reads them.
async fn send_to_stream(
    args: &SendArgs,
    pipeline: &PipelineState,
    state_file: &Path,
    file: &Path,
    text: &str,
    target: &StreamTarget,
) -> Result<(), SendError> {
    let not_an_event = |reason: String| SendError::NotAStreamEvent {
        path: file.to_path_buf(),
        reason,
    };
    let event: Value = serde_json::from_str(text).map_err(|e| not_an_event(e.to_string()))?;
    let writes = send_stream::writes(&event, target).map_err(not_an_event)?;
    if !answers(&pipeline.endpoint) {
        return Err(SendError::NotAnswering {
            endpoint: pipeline.endpoint.clone(),
            state: state_file.to_path_buf(),
        });
    }
    let config = sqsafe_aws::local_config_loader(&pipeline.endpoint)
        .load()
        .await;
    let kinesis = aws_sdk_kinesis::Client::new(&config);
    let dynamodb = aws_sdk_dynamodb::Client::new(&config);
    let (what, place) = match target {
        StreamTarget::Kinesis { stream } => ("record(s)", format!("Kinesis stream {stream}")),
        StreamTarget::DynamodbTable { table } => (
            "item change(s)",
            format!("table {table}, whose stream it reads"),
        ),
    };
    for _ in 0..args.times {
        send_stream::send(&kinesis, &dynamodb, target, &writes)
            .await
            .map_err(|message| SendError::Stream {
                target: place.clone(),
                message,
            })?;
    }
    let copies = if args.times > 1 {
        format!(" ×{}", args.times)
    } else {
        String::new()
    };
    println!(
        "wrote {} {what}{copies} of {} for {} ({place})",
        writes.len(),
        file.display(),
        args.consumer
    );
    Ok(())
}

/// Whether something accepts connections at `endpoint` (`http://HOST:PORT`).
fn answers(endpoint: &str) -> bool {
    let authority = endpoint
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default();
    authority
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .is_some_and(|addr| TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).is_ok())
}

/// Sends `messages` in order, ten per call.
async fn send_batches(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    messages: &[Outgoing],
) -> Result<(), SendError> {
    let failed = |message: String| SendError::Sqs {
        queue: queue_url.to_owned(),
        message,
    };
    for chunk in messages.chunks(BATCH) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, m)| entry(i, m))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| failed(e.to_string()))?;
        let sent = sqs
            .send_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| failed(format!("{}", aws_sdk_sqs::error::DisplayErrorContext(&e))))?;
        if let Some(refused) = sent.failed().first() {
            return Err(failed(format!(
                "{} of {} refused: {} {}",
                sent.failed().len(),
                chunk.len(),
                refused.code(),
                refused.message().unwrap_or_default()
            )));
        }
    }
    Ok(())
}

fn entry(
    i: usize,
    m: &Outgoing,
) -> Result<SendMessageBatchRequestEntry, aws_sdk_sqs::error::BuildError> {
    let attributes = m
        .attributes
        .iter()
        .map(|(name, data_type, value)| {
            MessageAttributeValue::builder()
                .data_type(data_type)
                .string_value(value)
                .build()
                .map(|v| (name.clone(), v))
        })
        .collect::<Result<HashMap<_, _>, _>>()?;
    SendMessageBatchRequestEntry::builder()
        .id(format!("m{i}"))
        .message_body(&m.body)
        .set_message_attributes((!attributes.is_empty()).then_some(attributes))
        .set_message_group_id(m.group.clone())
        .set_message_deduplication_id(m.deduplication.clone())
        .build()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn queue(fifo: bool, content_based_deduplication: bool) -> ConsumerQueue {
        ConsumerQueue {
            url: "http://127.0.0.1:9/123456789012/q".to_owned(),
            fifo,
            content_based_deduplication,
        }
    }

    fn record(body: &str, group: Option<&str>, dedup: Option<&str>) -> Value {
        let mut attributes = json!({"ApproximateReceiveCount": "1"});
        if let Some(g) = group {
            attributes["MessageGroupId"] = json!(g);
        }
        if let Some(d) = dedup {
            attributes["MessageDeduplicationId"] = json!(d);
        }
        json!({
            "messageId": "m", "body": body, "attributes": attributes, "eventSource": "aws:sqs",
            "messageAttributes": {"correlationId": {"stringValue": "corr-1", "dataType": "String",
                                                    "stringListValues": [], "binaryListValues": []}},
        })
    }

    #[test]
    fn every_record_becomes_a_message_with_its_attributes() {
        let event = json!({"Records": [record("{\"a\":1}", Some("g1"), Some("d1")), record("b", Some("g2"), None)]});
        let sent = messages(&event, &queue(true, true)).expect("messages");
        assert_eq!(
            sent,
            [
                Outgoing {
                    body: "{\"a\":1}".into(),
                    attributes: vec![("correlationId".into(), "String".into(), "corr-1".into())],
                    group: Some("g1".into()),
                    deduplication: Some("d1".into()),
                },
                Outgoing {
                    body: "b".into(),
                    attributes: vec![("correlationId".into(), "String".into(), "corr-1".into())],
                    group: Some("g2".into()),
                    deduplication: None,
                },
            ]
        );
        let standard = messages(&event, &queue(false, false)).expect("messages");
        assert!(
            standard
                .iter()
                .all(|m| m.group.is_none() && m.deduplication.is_none()),
            "a standard queue takes neither group nor deduplication id: {standard:?}"
        );
    }

    #[test]
    fn what_cannot_be_sent_is_named() {
        let cases = [
            (json!({}), "no \"Records\" array"),
            (json!({"Records": []}), "\"Records\" is empty"),
            (
                json!({"Records": [{"eventSource": "aws:dynamodb", "body": "x"}]}),
                "record 1: its eventSource is \"aws:dynamodb\", not \"aws:sqs\"",
            ),
            (
                json!({"Records": [{"messageId": "m"}]}),
                "record 1: no \"body\" string",
            ),
            (
                json!({"Records": [record("a", Some("g"), None), record("b", None, None)]}),
                "record 2: no attributes.MessageGroupId, which a FIFO queue needs",
            ),
        ];
        for (event, expected) in cases {
            assert_eq!(
                messages(&event, &queue(true, true)).expect_err("refused"),
                expected
            );
        }
        assert_eq!(
            messages(
                &json!({"Records": [record("a", Some("g"), None)]}),
                &queue(true, false)
            )
            .expect_err("refused"),
            "record 1: no attributes.MessageDeduplicationId, which a FIFO queue without content-based deduplication needs"
        );
    }

    #[test]
    fn the_sample_is_the_consumer_own_file_not_a_longer_name_sharing_its_prefix() {
        let dir = std::env::temp_dir().join(sqsafe_testkit::unique_name("samples"));
        std::fs::create_dir_all(&dir).expect("folder");
        for name in [
            "send-receipt.json",
            "send-receipt-fifo.json",
            "send-b.json",
            "send-a.txt",
        ] {
            std::fs::write(dir.join(name), "{}").expect("sample");
        }
        let consumers = ["send", "send-receipt", "ship"];
        assert_eq!(
            sample_file(&dir, "send", &consumers),
            Some(dir.join("send-b.json"))
        );
        std::fs::remove_file(dir.join("send-b.json")).expect("remove");
        assert_eq!(
            sample_file(&dir, "send", &consumers),
            None,
            "send-receipt's samples are not send's"
        );
        assert_eq!(
            sample_file(&dir, "send-receipt", &consumers),
            Some(dir.join("send-receipt.json"))
        );
        assert_eq!(sample_file(&dir, "ship", &consumers), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

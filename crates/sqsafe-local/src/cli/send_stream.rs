//! `sqsafe local send` for a stream consumer: a Kinesis event's records put on the consumer's stream (each record's
//! decoded `data` under its `partitionKey`, in order), or a DynamoDB stream event's changes written to the table whose
//! stream feeds it (`INSERT` and `MODIFY` put the record's `NewImage`, `REMOVE` deletes its `Keys`): the stream then
//! hands them to the consumer as AWS would.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine as _;
use serde_json::Value;

use super::state::StreamTarget;

/// One write to a stream's source.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StreamWrite {
    /// A Kinesis record: its data and partition key.
    Record {
        data: Vec<u8>,
        partition_key: String,
    },
    /// An item put into the table (`INSERT`, `MODIFY`).
    Put(HashMap<String, AttributeValue>),
    /// An item deleted from the table (`REMOVE`), by its key.
    Delete(HashMap<String, AttributeValue>),
}

/// The writes of a stream event's records for `target`: `Err` says which record cannot be written and why.
pub(crate) fn writes(event: &Value, target: &StreamTarget) -> Result<Vec<StreamWrite>, String> {
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
        .map(|(i, record)| write(record, target).map_err(|e| format!("record {}: {e}", i + 1)))
        .collect()
}

fn write(record: &Value, target: &StreamTarget) -> Result<StreamWrite, String> {
    let expected = match target {
        StreamTarget::Kinesis { .. } => "aws:kinesis",
        StreamTarget::DynamodbTable { .. } => "aws:dynamodb",
    };
    if let Some(source) = record.get("eventSource").and_then(Value::as_str)
        && source != expected
    {
        return Err(format!("its eventSource is {source:?}, not {expected:?}"));
    }
    match target {
        StreamTarget::Kinesis { .. } => {
            let kinesis = record.get("kinesis").ok_or("no \"kinesis\" object")?;
            let data = kinesis
                .get("data")
                .and_then(Value::as_str)
                .ok_or("no kinesis.data string")?;
            let data = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|e| format!("kinesis.data is not base64: {e}"))?;
            let partition_key = kinesis
                .get("partitionKey")
                .and_then(Value::as_str)
                .filter(|k| !k.is_empty())
                .ok_or("no kinesis.partitionKey string")?
                .to_owned();
            Ok(StreamWrite::Record {
                data,
                partition_key,
            })
        }
        StreamTarget::DynamodbTable { .. } => {
            let change = record.get("dynamodb").ok_or("no \"dynamodb\" object")?;
            let image = |name: &str| {
                change
                    .get(name)
                    .ok_or_else(|| format!("no dynamodb.{name}"))
                    .and_then(|v| item(v).map_err(|e| format!("dynamodb.{name}: {e}")))
            };
            match record.get("eventName").and_then(Value::as_str) {
                Some("INSERT" | "MODIFY") => Ok(StreamWrite::Put(image("NewImage")?)),
                Some("REMOVE") => Ok(StreamWrite::Delete(image("Keys")?)),
                Some(other) => Err(format!(
                    "eventName {other:?} is none of INSERT, MODIFY, REMOVE"
                )),
                None => Err("no eventName".into()),
            }
        }
    }
}

/// An item in DynamoDB's JSON (`{"pk": {"S": "a"}, "n": {"N": "1"}}`).
fn item(v: &Value) -> Result<HashMap<String, AttributeValue>, String> {
    v.as_object()
        .ok_or("not an object")?
        .iter()
        .map(|(name, value)| {
            Ok((
                name.clone(),
                attribute(value).map_err(|e| format!("{name}: {e}"))?,
            ))
        })
        .collect()
}

/// One value in DynamoDB's JSON: `{"S": ...}`, `{"N": ...}`, `{"B": base64}`, `{"BOOL": ...}`, `{"NULL": true}`,
/// `{"M": {...}}`, `{"L": [...]}`, `{"SS"|"NS"|"BS": [...]}`.
fn attribute(v: &Value) -> Result<AttributeValue, String> {
    let map = v
        .as_object()
        .filter(|m| m.len() == 1)
        .ok_or("not a one-key object such as {\"S\": \"...\"}")?;
    let (kind, inner) = map.iter().next().ok_or("empty")?;
    let text = || {
        inner
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{kind} is not a string"))
    };
    let texts = || {
        inner
            .as_array()
            .ok_or_else(|| format!("{kind} is not an array"))?
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{kind} holds a value that is not a string"))
            })
            .collect::<Result<Vec<_>, String>>()
    };
    let bytes = |b64: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map(Blob::new)
            .map_err(|e| format!("{kind} is not base64: {e}"))
    };
    Ok(match kind.as_str() {
        "S" => AttributeValue::S(text()?),
        "N" => AttributeValue::N(text()?),
        "B" => AttributeValue::B(bytes(&text()?)?),
        "BOOL" => AttributeValue::Bool(inner.as_bool().ok_or("BOOL is not a boolean")?),
        "NULL" => AttributeValue::Null(true),
        "M" => AttributeValue::M(item(inner)?),
        "L" => AttributeValue::L(
            inner
                .as_array()
                .ok_or("L is not an array")?
                .iter()
                .map(attribute)
                .collect::<Result<_, _>>()?,
        ),
        "SS" => AttributeValue::Ss(texts()?),
        "NS" => AttributeValue::Ns(texts()?),
        "BS" => AttributeValue::Bs(
            texts()?
                .iter()
                .map(|b| bytes(b))
                .collect::<Result<_, _>>()?,
        ),
        other => return Err(format!("unknown type {other:?}")),
    })
}

/// Records per `PutRecords` call at most (Kinesis's limit).
const PUT_RECORDS_LIMIT: usize = 500;

/// Makes the writes, in order: a Kinesis event's records in one `PutRecords` call (per 500), so the shard gets them as
/// one unit and the local mapping hands a sample over as the batch it is, not split by when it polled; a DynamoDB
/// event's changes one call each, so the table's stream keeps their order.
pub(crate) async fn send(
    kinesis: &aws_sdk_kinesis::Client,
    dynamodb: &aws_sdk_dynamodb::Client,
    target: &StreamTarget,
    writes: &[StreamWrite],
) -> Result<(), String> {
    match target {
        StreamTarget::Kinesis { stream } => {
            let records: Vec<aws_sdk_kinesis::types::PutRecordsRequestEntry> = writes
                .iter()
                .filter_map(|w| match w {
                    StreamWrite::Record {
                        data,
                        partition_key,
                    } => Some(
                        aws_sdk_kinesis::types::PutRecordsRequestEntry::builder()
                            .partition_key(partition_key)
                            .data(aws_sdk_kinesis::primitives::Blob::new(data.clone()))
                            .build()
                            .map_err(|e| e.to_string()),
                    ),
                    _ => None,
                })
                .collect::<Result<_, _>>()?;
            let mut written = 0;
            for chunk in records.chunks(PUT_RECORDS_LIMIT) {
                let put = kinesis
                    .put_records()
                    .stream_name(stream)
                    .set_records(Some(chunk.to_vec()))
                    .send()
                    .await
                    .map_err(|e| format!("{}", aws_sdk_kinesis::error::DisplayErrorContext(&e)))?;
                if put.failed_record_count().unwrap_or(0) > 0 {
                    let (index, failed) = put
                        .records()
                        .iter()
                        .enumerate()
                        .find(|(_, r)| r.error_code().is_some())
                        .map(|(i, r)| {
                            (
                                written + i,
                                format!(
                                    "{}: {}",
                                    r.error_code().unwrap_or_default(),
                                    r.error_message().unwrap_or_default()
                                ),
                            )
                        })
                        .unwrap_or_default();
                    return Err(format!(
                        "PutRecords wrote {} of {} records; record {} and others failed ({failed}): the ones \
                         written are on the stream",
                        written + chunk.len() - put.failed_record_count().unwrap_or(0) as usize,
                        records.len(),
                        index + 1
                    ));
                }
                written += chunk.len();
            }
        }
        StreamTarget::DynamodbTable { table } => {
            for w in writes {
                match w {
                    StreamWrite::Put(item) => {
                        dynamodb
                            .put_item()
                            .table_name(table)
                            .set_item(Some(item.clone()))
                            .send()
                            .await
                            .map_err(|e| {
                                format!("{}", aws_sdk_dynamodb::error::DisplayErrorContext(&e))
                            })?;
                    }
                    StreamWrite::Delete(key) => {
                        dynamodb
                            .delete_item()
                            .table_name(table)
                            .set_key(Some(key.clone()))
                            .send()
                            .await
                            .map_err(|e| {
                                format!("{}", aws_sdk_dynamodb::error::DisplayErrorContext(&e))
                            })?;
                    }
                    StreamWrite::Record { .. } => {}
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A sample's records go to the shard in one request, in order: a mapping polling meanwhile sees none of them or
    /// all of them (as far as moto's own handling of one request goes), and hands the sample over as the batch it is.
    /// Put one call each, a mapping polling between two calls split the sample across invocations: make test once
    /// failed so (local_up_streams, on a loaded machine).
    #[tokio::test]
    async fn a_kinesis_events_records_go_to_the_shard_in_one_request_in_order() {
        let config = sqsafe_testkit::sdk_config().await;
        let counter = sqsafe_testkit::RequestCounter::default();
        let kinesis = aws_sdk_kinesis::Client::from_conf(
            aws_sdk_kinesis::config::Builder::from(&config)
                .interceptor(counter.clone())
                .build(),
        );
        let dynamodb = aws_sdk_dynamodb::Client::new(&config);
        let stream = sqsafe_testkit::unique_name("send-unit");
        kinesis
            .create_stream()
            .stream_name(&stream)
            .shard_count(1)
            .send()
            .await
            .expect("the stream");
        let sent: Vec<String> = (0..10).map(|i| format!("record {i}")).collect();
        let writes: Vec<StreamWrite> = sent
            .iter()
            .map(|data| StreamWrite::Record {
                data: data.clone().into_bytes(),
                partition_key: "one-key".into(),
            })
            .collect();
        counter.take();
        let target = StreamTarget::Kinesis {
            stream: stream.clone(),
        };
        send(&kinesis, &dynamodb, &target, &writes)
            .await
            .expect("sent");
        assert_eq!(counter.take(), ["PutRecords"], "one request");
        let iterator = kinesis
            .get_shard_iterator()
            .stream_name(&stream)
            .shard_id("shardId-000000000000")
            .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
            .send()
            .await
            .expect("an iterator")
            .shard_iterator
            .expect("an iterator");
        let read: Vec<String> = kinesis
            .get_records()
            .shard_iterator(iterator)
            .send()
            .await
            .expect("records")
            .records
            .iter()
            .map(|r| String::from_utf8_lossy(r.data().as_ref()).into_owned())
            .collect();
        assert_eq!(read, sent, "every record, in order");
    }

    fn kinesis() -> StreamTarget {
        StreamTarget::Kinesis {
            stream: "orders".into(),
        }
    }

    fn table() -> StreamTarget {
        StreamTarget::DynamodbTable {
            table: "audit".into(),
        }
    }

    #[test]
    fn a_kinesis_event_becomes_its_records_decoded_under_their_partition_keys() {
        let event = json!({"Records": [
            {"eventSource": "aws:kinesis", "kinesis": {"data": "eyJuIjoxfQ==", "partitionKey": "order-7"}},
            {"kinesis": {"data": "", "partitionKey": "order-8"}},
        ]});
        assert_eq!(
            writes(&event, &kinesis()).expect("writes"),
            vec![
                StreamWrite::Record {
                    data: br#"{"n":1}"#.to_vec(),
                    partition_key: "order-7".into()
                },
                StreamWrite::Record {
                    data: Vec::new(),
                    partition_key: "order-8".into()
                },
            ]
        );
    }

    #[test]
    fn a_dynamodb_stream_event_becomes_puts_and_deletes_of_its_images() {
        let event = json!({"Records": [
            {"eventSource": "aws:dynamodb", "eventName": "INSERT", "dynamodb": {"NewImage": {
                "pk": {"S": "o#1"}, "n": {"N": "3"}, "paid": {"BOOL": true}, "none": {"NULL": true},
                "raw": {"B": "AAE="}, "tags": {"SS": ["a", "b"]}, "lines": {"L": [{"M": {"sku": {"S": "x"}}}]}
            }}},
            {"eventName": "REMOVE", "dynamodb": {"Keys": {"pk": {"S": "o#1"}}}},
        ]});
        let got = writes(&event, &table()).expect("writes");
        let StreamWrite::Put(item) = &got[0] else {
            panic!("a put: {got:?}");
        };
        assert_eq!(item["pk"], AttributeValue::S("o#1".into()));
        assert_eq!(item["n"], AttributeValue::N("3".into()));
        assert_eq!(item["paid"], AttributeValue::Bool(true));
        assert_eq!(item["none"], AttributeValue::Null(true));
        assert_eq!(item["raw"], AttributeValue::B(Blob::new(vec![0, 1])));
        assert_eq!(
            item["tags"],
            AttributeValue::Ss(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            item["lines"],
            AttributeValue::L(vec![AttributeValue::M(HashMap::from([(
                "sku".to_owned(),
                AttributeValue::S("x".into())
            )]))])
        );
        assert_eq!(
            got[1],
            StreamWrite::Delete(HashMap::from([(
                "pk".to_owned(),
                AttributeValue::S("o#1".into())
            )]))
        );
    }

    #[test]
    fn what_cannot_be_written_is_named_with_its_record() {
        let cases = [
            (json!({}), kinesis(), "no \"Records\" array"),
            (json!({"Records": []}), kinesis(), "\"Records\" is empty"),
            (
                json!({"Records": [{"eventSource": "aws:sqs", "body": "x"}]}),
                kinesis(),
                "record 1: its eventSource is \"aws:sqs\", not \"aws:kinesis\"",
            ),
            (
                json!({"Records": [{"kinesis": {"data": "%%", "partitionKey": "p"}}]}),
                kinesis(),
                "record 1: kinesis.data is not base64",
            ),
            (
                json!({"Records": [{"kinesis": {"data": ""}}]}),
                kinesis(),
                "record 1: no kinesis.partitionKey string",
            ),
            (
                json!({"Records": [{"eventName": "INSERT", "dynamodb": {"NewImage": {"pk": "a"}}}]}),
                table(),
                "record 1: dynamodb.NewImage: pk: not a one-key object",
            ),
            (
                json!({"Records": [{"eventName": "TTL", "dynamodb": {}}]}),
                table(),
                "record 1: eventName \"TTL\" is none of INSERT, MODIFY, REMOVE",
            ),
            (
                json!({"Records": [{"eventName": "MODIFY", "dynamodb": {"NewImage": {"n": {"X": "1"}}}}]}),
                table(),
                "record 1: dynamodb.NewImage: n: unknown type \"X\"",
            ),
        ];
        for (event, target, said) in cases {
            let got = writes(&event, &target).expect_err(said);
            assert!(got.starts_with(said), "{got:?} for {event}");
        }
    }
}

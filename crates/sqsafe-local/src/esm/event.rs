use serde_json::{Map, Value, json};

/// The `SqsEvent` Lambda would build from `messages` received from the queue `queue_arn`.
pub fn sqs_event(messages: &[aws_sdk_sqs::types::Message], queue_arn: &str) -> Value {
    let region = queue_arn.split(':').nth(3).unwrap_or("us-east-1");
    let records: Vec<Value> = messages
        .iter()
        .map(|m| {
            let attributes: Map<String, Value> = m
                .attributes()
                .map(|a| {
                    a.iter()
                        .map(|(k, v)| (k.as_str().to_owned(), Value::String(v.clone())))
                        .collect()
                })
                .unwrap_or_default();
            let message_attributes: Map<String, Value> = m
                .message_attributes()
                .map(|a| {
                    a.iter()
                        .map(|(k, v)| {
                            let mut attr = json!({
                                "stringListValues": [],
                                "binaryListValues": [],
                                "dataType": v.data_type(),
                            });
                            if let Some(s) = v.string_value() {
                                attr["stringValue"] = Value::String(s.to_owned());
                            }
                            (k.clone(), attr)
                        })
                        .collect()
                })
                .unwrap_or_default();
            json!({
                "messageId": m.message_id(),
                "receiptHandle": m.receipt_handle(),
                "body": m.body(),
                "attributes": attributes,
                "messageAttributes": message_attributes,
                "md5OfBody": m.md5_of_body(),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            })
        })
        .collect();
    json!({ "Records": records })
}

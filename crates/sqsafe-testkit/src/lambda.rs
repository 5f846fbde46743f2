use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::encodings::Base64Data;
use aws_lambda_events::sqs::{SqsEvent, SqsMessage, SqsMessageAttribute};
use lambda_runtime::{Context, LambdaEvent};

/// The project's `events/` folder: beside the `template.yaml` found upward from the crate under test (see
/// [`project_root`](crate::project_root)), in this repository or in a team's own.
///
/// # Panics
/// When no `template.yaml` is found (the message says where the search started).
pub fn events_dir() -> PathBuf {
    crate::project_root()
        .unwrap_or_else(|e| panic!("{e}"))
        .join("events")
}

/// Reads `events/<name>` of the project (see [`events_dir`]) as an SQS event.
///
/// # Panics
/// When the file is missing or is not an SQS event (a broken fixture must fail the test).
pub fn event_file(name: &str) -> SqsEvent {
    let path = events_dir().join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not an SQS event: {e}", path.display()))
}

/// An invocation of `event` with a request id and a deadline 30 s from now, as the Lambda runtime would pass it.
pub fn invocation(event: SqsEvent, request_id: &str) -> LambdaEvent<SqsEvent> {
    invocation_of(event, request_id)
}

/// [`invocation`] of any event (a Kinesis or DynamoDB Streams batch).
pub fn invocation_of<T>(event: T, request_id: &str) -> LambdaEvent<T> {
    let mut context = Context::default();
    context.request_id = request_id.to_owned();
    let deadline = SystemTime::now() + Duration::from_secs(30);
    context.deadline = deadline
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    LambdaEvent::new(event, context)
}

/// `message` with `value` as its binary attribute `name` of data type `data_type` (`Binary` or `Binary.<label>`), as
/// Lambda hands it over (decoded).
pub fn with_binary_attribute(
    mut message: SqsMessage,
    name: &str,
    data_type: &str,
    value: &[u8],
) -> SqsMessage {
    let mut bytes = Base64Data::default();
    bytes.extend_from_slice(value);
    let mut attribute = SqsMessageAttribute::default();
    attribute.binary_value = Some(bytes);
    attribute.data_type = Some(data_type.to_owned());
    message
        .message_attributes
        .insert(name.to_owned(), attribute);
    message
}

use std::path::PathBuf;

/// Why `sqsafe local send` sent nothing (or not everything).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// No `sqsafe local up` runs for this project: its state file is missing.
    #[error(
        "no local pipeline is running for this project ({} is missing): start one with `sqsafe local up --watch` \
         (make local-watch) in another terminal",
        state.display()
    )]
    NotRunning {
        /// The state file `up` writes while it runs.
        state: PathBuf,
    },
    /// The state file names a moto server that does not answer: an `up` that was killed before it could clean up.
    #[error(
        "no local pipeline answers at {endpoint} (named by {}, left by a `sqsafe local up` that did not stop \
         cleanly): start `sqsafe local up` again",
        state.display()
    )]
    NotAnswering {
        /// moto's endpoint in the file.
        endpoint: String,
        /// The state file.
        state: PathBuf,
    },
    /// The consumer is not one of the pipeline's functions with an SQS event source.
    #[error("no consumer {name} in the local pipeline; its consumers: {}", known.join(", "))]
    UnknownConsumer {
        /// The name asked for.
        name: String,
        /// The pipeline's consumers (their binaries).
        known: Vec<String>,
    },
    /// No FILE was given and `events/` holds no sample of the consumer.
    #[error("no sample event for {consumer}: neither {}/{consumer}.json nor {}/{consumer}-*.json; give a FILE", events.display(), events.display())]
    NoSample {
        /// The consumer.
        consumer: String,
        /// The sample folder looked in.
        events: PathBuf,
    },
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not an SQS event (`{"Records": [{"body": ...}, ...]}`), or a record cannot be sent as it is.
    #[error("{} is not an SQS event: {reason}", path.display())]
    NotAnSqsEvent {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        reason: String,
    },
    /// The file is not a stream event of the consumer's source (a Kinesis event's `{"Records": [{"kinesis":
    /// {"data", "partitionKey"}}]}`, a DynamoDB stream event's `{"Records": [{"eventName", "dynamodb": {"NewImage" |
    /// "Keys"}}]}`), or a record cannot be written as it is.
    #[error("{} is not a stream event for this consumer: {reason}", path.display())]
    NotAStreamEvent {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        reason: String,
    },
    /// Kinesis or DynamoDB refused a write (or could not be reached).
    #[error("writing to {target}: {message}")]
    Stream {
        /// The stream or table.
        target: String,
        /// The service's answer.
        message: String,
    },
    /// SQS refused a message (or could not be reached).
    #[error("sending to {queue}: {message}")]
    Sqs {
        /// The queue's URL.
        queue: String,
        /// SQS's answer.
        message: String,
    },
}

impl SendError {
    /// `true` when no pipeline runs ([`SendError::NotRunning`], [`SendError::NotAnswering`]).
    pub fn is_not_running(&self) -> bool {
        matches!(self, Self::NotRunning { .. } | Self::NotAnswering { .. })
    }
}

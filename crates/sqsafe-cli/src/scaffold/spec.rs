//! What to generate: a consumer's names, its queue kind, its envelope, its source.

use super::error::{ScaffoldError, fail};
use crate::consumer_templates::{self, CHILD_FIFO, CHILD_STANDARD, ConsumerVars, WorkspaceVars};

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// `send-invoice`
    pub name: String,
    /// `SendInvoice`
    pub pascal: String,
    /// `send_invoice`
    pub snake: String,
    /// A FIFO queue (records of one MessageGroupId in order).
    pub fifo: bool,
    /// The effect is DynamoDB writes committed with the record in one transaction.
    pub transact: bool,
    /// What the queue's bodies wrap (see [`Spec::envelope`]).
    pub envelope: ConsumerEnvelope,
    /// What feeds the consumer (see [`Spec::source`]).
    pub source: ConsumerSource,
}

/// What feeds a new consumer: an SQS queue (the default), a Kinesis data stream, or a DynamoDB table's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ConsumerSource {
    /// An SQS queue (standard, or FIFO with `--fifo`), with its DLQ, in a nested application.
    #[default]
    Sqs,
    /// A Kinesis data stream of its own: each shard's records in order, stopped at the first that must come back; a
    /// failure queue for poison records (with their content) and the mapping's on-failure queue.
    Kinesis,
    /// The changes of a DynamoDB table of its own, through the table's stream: in order, stopped at the first that
    /// must come back, each keyed by its record; the same failure queues.
    #[value(name = "dynamodb-stream")]
    DynamodbStream,
}

impl ConsumerSource {
    /// As the templates name it: `sqs`, `kinesis`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerSource::Sqs => "sqs",
            ConsumerSource::Kinesis => "kinesis",
            ConsumerSource::DynamodbStream => "dynamodb-stream",
        }
    }

    /// A stream (Kinesis, DynamoDB Streams) rather than a queue.
    pub fn is_stream(self) -> bool {
        self != ConsumerSource::Sqs
    }
}

/// What a new consumer's queue is fed by: its `Consumer::ENVELOPE`, and how its sample event wraps the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ConsumerEnvelope {
    /// Producers send to the queue (or an SNS subscription with raw delivery): the body is the payload.
    #[default]
    Sqs,
    /// An SNS topic's subscription: each body is a notification, its `Message` the payload.
    Sns,
    /// An EventBridge rule targeting the queue: each body is an event, its `detail` the payload.
    #[value(name = "eventbridge")]
    EventBridge,
    /// A bucket's event notifications: each body is one object's notification, its `sqsafe::S3Object` the payload.
    S3,
}

impl ConsumerEnvelope {
    /// As the templates name it: `sqs`, `sns`, `eventbridge`, `s3`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerEnvelope::Sqs => "sqs",
            ConsumerEnvelope::Sns => "sns",
            ConsumerEnvelope::EventBridge => "eventbridge",
            ConsumerEnvelope::S3 => "s3",
        }
    }
}

impl Spec {
    /// Checks `name` and derives the other spellings.
    ///
    /// # Errors
    /// A name that cannot name a crate, a binary, queues and a log group, or a reserved one.
    pub fn new(name: &str, fifo: bool, transact: bool) -> Result<Self, ScaffoldError> {
        let valid = name.len() >= 2
            && name.len() <= 40
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.ends_with('-')
            && !name.contains("--");
        if !valid {
            return fail(format!(
                "consumer name `{name}`: use 2-40 lower-case letters, digits and single `-`, starting with a letter \
                 (it names the crate, the binary, the queues and the log group)"
            ));
        }
        if name.starts_with("sqsafe") || name == "xtask" {
            return fail(format!("consumer name `{name}` is reserved"));
        }
        let pascal = name
            .split('-')
            .map(|part| {
                let mut chars = part.chars();
                chars
                    .next()
                    .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                    .unwrap_or_default()
            })
            .collect();
        Ok(Self {
            name: name.to_owned(),
            pascal,
            snake: name.replace('-', "_"),
            fifo,
            transact,
            envelope: ConsumerEnvelope::Sqs,
            source: ConsumerSource::Sqs,
        })
    }

    /// The consumer reads `source` (default: an SQS queue).
    ///
    /// # Errors
    /// A stream consumer with what only a queue has (`--fifo`, an `--envelope` other than `sqs`), or with
    /// `--transact` (not made for streams yet).
    pub fn source(mut self, source: ConsumerSource) -> Result<Self, ScaffoldError> {
        if source.is_stream() {
            let refused = if self.fifo {
                Some("--fifo is a queue's: a stream keeps each shard's order already")
            } else if self.envelope != ConsumerEnvelope::Sqs {
                Some("--envelope is a queue's: a stream's record is the payload")
            } else if self.transact {
                Some(
                    "--transact is not made for stream consumers yet: make the consumer without it (its effect is \
                     an HTTP call), or write its writes as an SQS consumer's",
                )
            } else {
                None
            };
            if let Some(why) = refused {
                return fail(format!("--source {} with {why}", source.as_str()));
            }
        }
        self.source = source;
        Ok(self)
    }

    /// The consumer reads its payload out of `envelope` (default: the body is the payload).
    #[must_use]
    pub fn envelope(mut self, envelope: ConsumerEnvelope) -> Self {
        self.envelope = envelope;
        self
    }

    /// What the templates read of the consumer.
    pub(crate) fn vars(&self) -> ConsumerVars {
        ConsumerVars {
            name: self.name.clone(),
            pascal: self.pascal.clone(),
            snake: self.snake.clone(),
            queue: self.queue_name(),
            dlq: self.dlq_name(),
            fifo: self.fifo,
            transact: self.transact,
            envelope: self.envelope.as_str(),
            source: self.source.as_str(),
            child: child_template(self).0.to_owned(),
        }
    }

    /// Renders the consumer's template `name` (in `templates/project/templates/`) other than its Cargo.toml.
    pub(crate) fn render(&self, name: &str) -> Result<String, ScaffoldError> {
        consumer_templates::render(name, &self.vars(), &WorkspaceVars::default())
    }

    pub(crate) fn queue_name(&self) -> String {
        if self.fifo {
            format!("{}.fifo", self.name)
        } else {
            self.name.clone()
        }
    }

    pub(crate) fn dlq_name(&self) -> String {
        if self.fifo {
            format!("{}-dlq.fifo", self.name)
        } else {
            format!("{}-dlq", self.name)
        }
    }
}

/// The child template of a consumer's nested application: its file name in the project's `sqsafe/` folder and its
/// text as sqsafe ships it.
pub(crate) fn child_template(spec: &Spec) -> (&'static str, &'static str) {
    let (path, text) = if spec.fifo {
        CHILD_FIFO
    } else {
        CHILD_STANDARD
    };
    (path.trim_start_matches("child/"), text)
}

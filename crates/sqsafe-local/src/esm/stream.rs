//! A local stream event source mapping (Kinesis, DynamoDB Streams): what Lambda's stream poller does between a
//! shard and a function, on moto (whose own invoke path hands a function one record at a time and ignores its
//! answer).
//!
//! Reads the shard from a checkpoint (`GetShardIterator`, `GetRecords`), invokes with up to `batch_size` records in
//! the Lambda event's shape, and moves the checkpoint as Lambda does with `ReportBatchItemFailures`:
//!
//! - an answer naming no record: the whole batch is done;
//! - an answer naming sequence numbers of the batch: the checkpoint stops before the lowest one named, and the next
//!   batch starts from it (records after it in the batch come again);
//! - a failed invocation, or an answer naming an identifier that is blank or not in the batch: nothing is done, and
//!   with `BisectBatchOnFunctionError` the batch is split in two (a split does not spend a retry);
//! - after `MaximumRetryAttempts` retries of the same records, the mapping gives up on them: the `OnFailure` queue
//!   gets Lambda's metadata (shard, sequence range, condition; never the records) and the checkpoint moves past
//!   them. Unset: retried for as long as the stream keeps them.

use std::collections::HashSet;

use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use aws_sdk_kinesis::types::ShardIteratorType as KinesisIteratorType;
use base64::Engine as _;
use serde_json::{Value, json};

use super::{Invoker, reported};

/// Settings of one stream mapping (the event source mapping's properties).
#[derive(Debug, Clone)]
pub struct StreamMappingConfig {
    /// `BatchSize`: records per invocation at most (Lambda's default for streams: 100).
    pub batch_size: usize,
    /// `MaximumRetryAttempts`: retries of a failing batch before its records are given up on (`None`: -1, for as
    /// long as the stream keeps them).
    pub maximum_retry_attempts: Option<u32>,
    /// `BisectBatchOnFunctionError`: split a failing batch in two and retry each half.
    pub bisect_on_function_error: bool,
    /// `DestinationConfig.OnFailure`: the queue (URL) that receives a given-up batch's metadata.
    pub on_failure_queue: Option<String>,
}

impl Default for StreamMappingConfig {
    fn default() -> Self {
        Self {
            batch_size: 100,
            maximum_retry_attempts: None,
            bisect_on_function_error: false,
            on_failure_queue: None,
        }
    }
}

/// How one invocation of the mapping ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// The answer named no record: the checkpoint moved past the batch.
    Done,
    /// The answer named records: the checkpoint stopped before this sequence number (the lowest named).
    RetryFrom(String),
    /// The invocation failed, or its answer could not be used: nothing moved.
    Failed(String),
}

/// One invocation: the sequence numbers handed over, in order, how it ended, and whether its records were then given
/// up on (retries exhausted: their metadata went to the on-failure queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The batch's sequence numbers, in the shard's order.
    pub sequence_numbers: Vec<String>,
    /// How the invocation ended.
    pub delivered: Delivered,
    /// The sequence numbers given up on after this invocation (empty unless retries ran out).
    pub given_up: Vec<String>,
}

/// Where the records come from.
enum Source {
    Dynamodb(aws_sdk_dynamodbstreams::Client),
    Kinesis(aws_sdk_kinesis::Client),
}

/// A record read and not yet done: its sequence number, its Lambda event shape, when it reached the stream.
#[derive(Debug, Clone)]
struct Pending {
    sequence_number: String,
    record: Value,
    arrival: Option<String>,
}

/// Lambda's stream poller for one shard (a Kinesis stream's, or a DynamoDB table's stream's: moto keeps one), bound
/// to one function.
pub struct StreamMapping<I> {
    source: Source,
    sqs: aws_sdk_sqs::Client,
    config: StreamMappingConfig,
    stream_arn: String,
    shard_id: String,
    /// The last sequence number done (`None`: from the start of the shard).
    checkpoint: Option<String>,
    /// Records read and not yet done, in order: what the next batch is taken from.
    pending: Vec<Pending>,
    /// With bisection, how many of the pending records the next batch holds.
    window: Option<usize>,
    /// Failed invocations of the records at the checkpoint since it last moved.
    retries: u32,
    invoker: I,
}

impl<I: Invoker> StreamMapping<I> {
    /// The mapping of `table`'s stream (its latest) to `invoker`, from the start of the shard (`TRIM_HORIZON`).
    ///
    /// # Errors
    ///
    /// The table has no stream, or moto cannot describe it.
    pub async fn of_table(
        dynamodb: &aws_sdk_dynamodb::Client,
        streams: aws_sdk_dynamodbstreams::Client,
        sqs: aws_sdk_sqs::Client,
        table: &str,
        config: StreamMappingConfig,
        invoker: I,
    ) -> Result<Self, String> {
        let stream_arn = dynamodb
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| format!("table {table}: {e:?}"))?
            .table
            .and_then(|t| t.latest_stream_arn)
            .ok_or_else(|| format!("table {table} has no stream (StreamSpecification)"))?;
        let shard_id = streams
            .describe_stream()
            .stream_arn(&stream_arn)
            .send()
            .await
            .map_err(|e| format!("stream {stream_arn}: {e:?}"))?
            .stream_description
            .and_then(|d| d.shards)
            .and_then(|s| s.into_iter().next())
            .and_then(|s| s.shard_id)
            .ok_or_else(|| format!("stream {stream_arn} has no shard"))?;
        Ok(Self::new(
            Source::Dynamodb(streams),
            sqs,
            config,
            stream_arn,
            shard_id,
            invoker,
        ))
    }

    /// The mapping of a Kinesis stream's shard (`shard_id`, else its first) to `invoker`, from the start of the
    /// shard (`TRIM_HORIZON`).
    ///
    /// # Errors
    ///
    /// The stream or the shard does not exist.
    pub async fn of_kinesis(
        kinesis: aws_sdk_kinesis::Client,
        sqs: aws_sdk_sqs::Client,
        stream_name: &str,
        shard_id: Option<&str>,
        config: StreamMappingConfig,
        invoker: I,
    ) -> Result<Self, String> {
        let description = kinesis
            .describe_stream()
            .stream_name(stream_name)
            .send()
            .await
            .map_err(|e| format!("stream {stream_name}: {e:?}"))?
            .stream_description
            .ok_or_else(|| format!("stream {stream_name}: no description"))?;
        let shard_id = match shard_id {
            Some(wanted) => description
                .shards()
                .iter()
                .find(|s| s.shard_id() == wanted)
                .map(|s| s.shard_id().to_owned())
                .ok_or_else(|| format!("stream {stream_name} has no shard {wanted}"))?,
            None => description
                .shards()
                .first()
                .map(|s| s.shard_id().to_owned())
                .ok_or_else(|| format!("stream {stream_name} has no shard"))?,
        };
        let stream_arn = description.stream_arn().to_owned();
        Ok(Self::new(
            Source::Kinesis(kinesis),
            sqs,
            config,
            stream_arn,
            shard_id,
            invoker,
        ))
    }

    fn new(
        source: Source,
        sqs: aws_sdk_sqs::Client,
        config: StreamMappingConfig,
        stream_arn: String,
        shard_id: String,
        invoker: I,
    ) -> Self {
        Self {
            source,
            sqs,
            config,
            stream_arn,
            shard_id,
            checkpoint: None,
            pending: Vec::new(),
            window: None,
            retries: 0,
            invoker,
        }
    }

    /// The shard read.
    pub fn shard_id(&self) -> &str {
        &self.shard_id
    }

    /// The stream's ARN.
    pub fn stream_arn(&self) -> &str {
        &self.stream_arn
    }

    /// The last sequence number done, if any.
    pub fn checkpoint(&self) -> Option<&str> {
        self.checkpoint.as_deref()
    }

    /// The function the mapping invokes.
    pub fn invoker(&mut self) -> &mut I {
        &mut self.invoker
    }

    /// The function the mapping invoked, the mapping done with.
    pub fn into_invoker(self) -> I {
        self.invoker
    }

    /// One invocation with the records after the checkpoint; `None` when the shard has none.
    ///
    /// # Errors
    ///
    /// Reading the stream or sending to the on-failure queue failed (the checkpoint has not moved).
    pub async fn poll(&mut self) -> Result<Option<Delivery>, String> {
        if self.pending.is_empty() {
            self.pending = self.read().await?;
        }
        if self.pending.is_empty() {
            return Ok(None);
        }
        let size = self
            .window
            .unwrap_or(self.config.batch_size)
            .clamp(1, self.config.batch_size.max(1))
            .min(self.pending.len());
        let batch = &self.pending[..size];
        let sequence_numbers: Vec<String> =
            batch.iter().map(|p| p.sequence_number.clone()).collect();
        let event = json!({
            "Records": batch.iter().map(|p| p.record.clone()).collect::<Vec<_>>()
        });
        let ids: HashSet<&str> = sequence_numbers.iter().map(String::as_str).collect();
        let delivered = match self.invoker.invoke(event).await {
            Ok(answer) => match reported(&answer, &ids) {
                None => Delivered::Failed(format!(
                    "the answer names an identifier that is blank or not in the batch: {answer}"
                )),
                Some(named) if named.is_empty() => Delivered::Done,
                Some(named) => {
                    let lowest = sequence_numbers
                        .iter()
                        .find(|s| named.contains(*s))
                        .cloned()
                        .unwrap_or_default();
                    Delivered::RetryFrom(lowest)
                }
            },
            Err(e) => Delivered::Failed(e),
        };
        let mut given_up = Vec::new();
        match &delivered {
            Delivered::Done => self.advance(size),
            Delivered::RetryFrom(seq) => {
                let done = sequence_numbers.iter().position(|s| s == seq).unwrap_or(0);
                if done > 0 {
                    self.advance(done);
                } else if self.spend_retry() {
                    given_up = self.give_up(size, "RetryAttemptsExhausted").await?;
                }
            }
            Delivered::Failed(_) => {
                if self.config.bisect_on_function_error && size > 1 {
                    // Split: the first half next, then the rest; a split is not a retry.
                    self.window = Some(size.div_ceil(2));
                } else if self.spend_retry() {
                    given_up = self.give_up(size, "RetryAttemptsExhausted").await?;
                }
            }
        }
        Ok(Some(Delivery {
            sequence_numbers,
            delivered,
            given_up,
        }))
    }

    /// Polls until the shard has nothing after the checkpoint, at most `max_invocations` times; every delivery, in
    /// order.
    ///
    /// # Errors
    ///
    /// As [`poll`](Self::poll), or the shard still had records after `max_invocations` (a record retried for ever).
    pub async fn drain(&mut self, max_invocations: usize) -> Result<Vec<Delivery>, String> {
        let mut out = Vec::new();
        for _ in 0..max_invocations {
            match self.poll().await? {
                Some(delivery) => out.push(delivery),
                None => return Ok(out),
            }
        }
        Err(format!(
            "the shard still has records after {max_invocations} invocations: {out:?}"
        ))
    }

    /// Counts a failed invocation of the records at the checkpoint; true when that exhausts the retries.
    fn spend_retry(&mut self) -> bool {
        self.retries += 1;
        self.config
            .maximum_retry_attempts
            .is_some_and(|max| self.retries > max)
    }

    /// `n` records are done: the checkpoint moves past them.
    fn advance(&mut self, n: usize) {
        if let Some(last) = self.pending.get(n.saturating_sub(1)) {
            self.checkpoint = Some(last.sequence_number.clone());
        }
        self.pending.drain(..n.min(self.pending.len()));
        self.retries = 0;
        // After a split's half succeeds, the rest of the original batch goes next, whole.
        self.window = None;
    }

    /// Gives up on the first `n` pending records: their metadata to the on-failure queue, the checkpoint past them.
    async fn give_up(&mut self, n: usize, condition: &str) -> Result<Vec<String>, String> {
        let records = &self.pending[..n];
        let seqs: Vec<String> = records.iter().map(|p| p.sequence_number.clone()).collect();
        if let Some(queue) = &self.config.on_failure_queue {
            // Lambda's shape: the batch's place in the shard, under the source's own name; never the records.
            let info = match self.source {
                Source::Dynamodb(_) => "DDBStreamBatchInfo",
                Source::Kinesis(_) => "KinesisBatchInfo",
            };
            let mut metadata = json!({
                "requestContext": {
                    "condition": condition,
                    "approximateInvokeCount": self.retries + 1,
                },
                "responseContext": { "functionError": "Unhandled" },
                "version": "1.0",
            });
            metadata[info] = json!({
                "shardId": self.shard_id,
                "startSequenceNumber": seqs.first(),
                "endSequenceNumber": seqs.last(),
                "approximateArrivalOfFirstRecord": records.first().and_then(|p| p.arrival.clone()),
                "approximateArrivalOfLastRecord": records.last().and_then(|p| p.arrival.clone()),
                "batchSize": n,
                "streamArn": self.stream_arn,
            });
            self.sqs
                .send_message()
                .queue_url(queue)
                .message_body(metadata.to_string())
                .send()
                .await
                .map_err(|e| format!("on-failure queue {queue}: {e:?}"))?;
        }
        tracing::warn!(records = n, condition, "stream mapping gave up on records");
        self.advance(n);
        Ok(seqs)
    }

    /// The records after the checkpoint (up to a thousand).
    async fn read(&self) -> Result<Vec<Pending>, String> {
        match &self.source {
            Source::Dynamodb(client) => self.read_dynamodb(client).await,
            Source::Kinesis(client) => self.read_kinesis(client).await,
        }
    }

    async fn read_dynamodb(
        &self,
        client: &aws_sdk_dynamodbstreams::Client,
    ) -> Result<Vec<Pending>, String> {
        let request = client
            .get_shard_iterator()
            .stream_arn(&self.stream_arn)
            .shard_id(&self.shard_id);
        let request = match &self.checkpoint {
            None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            Some(seq) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(seq),
        };
        let Some(iterator) = request
            .send()
            .await
            .map_err(|e| format!("shard iterator: {e:?}"))?
            .shard_iterator
        else {
            return Ok(Vec::new());
        };
        let out = client
            .get_records()
            .shard_iterator(iterator)
            .limit(1000)
            .send()
            .await
            .map_err(|e| format!("get records: {e:?}"))?;
        Ok(out
            .records
            .unwrap_or_default()
            .iter()
            .map(|r| Pending {
                sequence_number: r
                    .dynamodb()
                    .and_then(|d| d.sequence_number())
                    .unwrap_or_default()
                    .to_owned(),
                record: dynamodb_stream_record(r, &self.stream_arn),
                arrival: r
                    .dynamodb()
                    .and_then(|d| d.approximate_creation_date_time())
                    .map(|t| t.to_string()),
            })
            .collect())
    }

    async fn read_kinesis(&self, client: &aws_sdk_kinesis::Client) -> Result<Vec<Pending>, String> {
        let request = client
            .get_shard_iterator()
            .stream_arn(&self.stream_arn)
            .shard_id(&self.shard_id);
        let request = match &self.checkpoint {
            None => request.shard_iterator_type(KinesisIteratorType::TrimHorizon),
            Some(seq) => request
                .shard_iterator_type(KinesisIteratorType::AfterSequenceNumber)
                .starting_sequence_number(seq),
        };
        let Some(iterator) = request
            .send()
            .await
            .map_err(|e| format!("shard iterator: {e:?}"))?
            .shard_iterator
        else {
            return Ok(Vec::new());
        };
        // moto reads the stream from the request, not from the iterator.
        let out = client
            .get_records()
            .stream_arn(&self.stream_arn)
            .shard_iterator(iterator)
            .limit(1000)
            .send()
            .await
            .map_err(|e| format!("get records: {e:?}"))?;
        let region = self.stream_arn.split(':').nth(3).unwrap_or("us-east-1");
        Ok(out
            .records()
            .iter()
            .map(|r| {
                let arrival = r.approximate_arrival_timestamp();
                // Seconds with three decimals, as Lambda writes them.
                let seconds = arrival.map_or(0.0, |t| {
                    (t.secs() as f64) + f64::from(t.subsec_nanos() / 1_000_000) / 1000.0
                });
                let sequence_number = r.sequence_number().to_owned();
                Pending {
                    record: json!({
                        "kinesis": {
                            "kinesisSchemaVersion": "1.0",
                            "partitionKey": r.partition_key(),
                            "sequenceNumber": sequence_number,
                            "data": base64::engine::general_purpose::STANDARD
                                .encode(r.data().as_ref()),
                            "approximateArrivalTimestamp": seconds,
                        },
                        "eventSource": "aws:kinesis",
                        "eventVersion": "1.0",
                        "eventID": format!("{}:{sequence_number}", self.shard_id),
                        "eventName": "aws:kinesis:record",
                        "invokeIdentityArn": "arn:aws:iam::123456789012:role/sqsafe-local",
                        "awsRegion": region,
                        "eventSourceARN": self.stream_arn,
                    }),
                    sequence_number,
                    arrival: arrival.map(|t| t.to_string()),
                }
            })
            .collect())
    }
}

/// A DynamoDB Streams `GetRecords` record as it appears in a Lambda event from the stream `stream_arn` (Lambda adds
/// the ARN: `GetRecords` records carry none).
pub fn dynamodb_stream_record(r: &Record, stream_arn: &str) -> Value {
    let change = r.dynamodb();
    let image = |item: Option<&std::collections::HashMap<_, _>>| {
        item.and_then(|i| serde_json::to_value(serde_dynamo::Item::from(i.clone())).ok())
    };
    let mut dynamodb = json!({
        "ApproximateCreationDateTime": change
            .and_then(|c| c.approximate_creation_date_time())
            .map(|t| t.as_secs_f64())
            .unwrap_or_default(),
        "Keys": image(change.and_then(|c| c.keys())).unwrap_or_else(|| json!({})),
        "SequenceNumber": change.and_then(|c| c.sequence_number()),
        "SizeBytes": change.and_then(|c| c.size_bytes()).unwrap_or_default(),
        "StreamViewType": change.and_then(|c| c.stream_view_type()).map(|v| v.as_str()),
    });
    if let Some(new_image) = image(change.and_then(|c| c.new_image())) {
        dynamodb["NewImage"] = new_image;
    }
    if let Some(old_image) = image(change.and_then(|c| c.old_image())) {
        dynamodb["OldImage"] = old_image;
    }
    let mut record = json!({
        "eventID": r.event_id(),
        "eventName": r.event_name().map(|n| n.as_str()),
        "eventVersion": r.event_version(),
        "eventSource": r.event_source().unwrap_or("aws:dynamodb"),
        "awsRegion": r.aws_region(),
        "eventSourceARN": stream_arn,
        "dynamodb": dynamodb,
    });
    if let Some(identity) = r.user_identity() {
        record["userIdentity"] = json!({
            "type": identity.r#type(),
            "principalId": identity.principal_id(),
        });
    }
    record
}

//! The local stack: template.yaml's tables and queues created in moto server, with the same keys, TTL, FIFO and
//! redrive settings (read from the template, so the two cannot drift), and each function's environment resolved
//! against them.
//!
//! A nested application whose template is a local file (`AWS::Serverless::Application` with `Location:
//! sqsafe/consumer.yaml`, or `AWS::CloudFormation::Stack` with such a `TemplateURL`) is read too: [`TemplateSpec`]
//! inlines it first ([`flatten`]), so the queues, DLQ and tables of a child template are created like the parent's,
//! as `<AppId><ChildId>` (`SendInvoiceQueue`), and `!GetAtt SendInvoice.Outputs.QueueUrl` in a function's
//! environment resolves to that queue's URL.

pub mod cfn;
pub mod nested;
mod template;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    StreamSpecification, StreamViewType, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;

pub use nested::flatten;
pub use template::{
    ApiFunctionSpec, EnvSource, FunctionSpec, KinesisStreamSpec, QueueSpec, SEED_METADATA,
    StreamFunctionSpec, StreamSource, TableSpec, TemplateError, TemplateSpec, UnsetParameter,
};

/// The project's template.yaml: the nearest at or above the crate under test, the binary `cargo run` runs, or the
/// current folder (see [`sqsafe_testkit::project_root`]); in this repository or in a team's own. When there is none,
/// `template.yaml` in the folder the search started from (reading it then fails with that path).
pub fn template_path() -> PathBuf {
    project_dir().join(sqsafe_testkit::TEMPLATE_FILE)
}

/// The project's folder ([`sqsafe_testkit::project_root`]), or the folder its search started from when there is
/// none (paths under it then fail with that path when used).
pub fn project_dir() -> PathBuf {
    sqsafe_testkit::project_root().unwrap_or_else(|_| sqsafe_testkit::search_start())
}

/// The project's cargo target folder: `CARGO_TARGET_DIR` when set, else `target` beside the template.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| project_dir().join("target"))
}

/// The functions' backoff and visibility heartbeat settings (environment variables) scaled to a source queue
/// whose visibility timeout was shortened to `visibility` ([`StackOptions::visibility_timeout`]), so that a local
/// run keeps production's proportions: a transient failure comes back after 1 s to `visibility` (production: 30 s
/// to 15 min), and a running record is extended every third of `visibility` to `visibility` (production: every 20 s
/// to 400 s, the template's visibility timeout). Below 2 s the heartbeat keeps its defaults (it needs
/// `every < extend_to` in whole seconds).
pub fn scaled_visibility_env(visibility: Duration) -> Vec<(String, String)> {
    let seconds = visibility.as_secs().max(1);
    let mut env = vec![
        ("BACKOFF_BASE_SECONDS".to_owned(), "1".to_owned()),
        ("BACKOFF_MAX_SECONDS".to_owned(), seconds.to_string()),
    ];
    if seconds >= 2 {
        env.extend([
            (
                "VISIBILITY_HEARTBEAT_SECONDS".to_owned(),
                (seconds / 3).max(1).to_string(),
            ),
            ("VISIBILITY_EXTEND_SECONDS".to_owned(), seconds.to_string()),
        ]);
    }
    env
}

/// A created queue.
#[derive(Debug, Clone)]
pub struct LocalQueue {
    /// Its URL.
    pub url: String,
    /// Its ARN.
    pub arn: String,
    /// Its settings.
    pub spec: QueueSpec,
}

/// A created Kinesis data stream.
#[derive(Debug, Clone)]
pub struct LocalKinesisStream {
    /// Its name.
    pub name: String,
    /// Its ARN.
    pub arn: String,
    /// Its settings.
    pub spec: KinesisStreamSpec,
}

/// Choices that differ from the template on purpose, for tests that wait on real timeouts.
#[derive(Debug, Clone, Default)]
pub struct StackOptions {
    /// Prefix of every name (unique per run): `{prefix}-{LogicalId}`. Ignored with `template_names`.
    pub prefix: String,
    /// Names as the template's, without a stack name, for running functions by hand (`sqsafe local resources`, the
    /// functions' READMEs): a queue's `QueueName` without `${AWS::StackName}-` (`charge-payment`), a table's logical
    /// id in kebab case without `Table` (`IdempotencyTable` is `idempotency`). What exists already under such a name
    /// is kept as it is, so that creating twice is harmless.
    pub template_names: bool,
    /// Replaces every source queue's visibility timeout (the template's is minutes; tests want seconds). The
    /// functions' own visibility settings are not changed by this: add [`scaled_visibility_env`] to their
    /// environment for that.
    pub visibility_timeout: Option<Duration>,
    /// Replaces parameter values (e.g. `PaymentsApiUrl`).
    pub parameters: BTreeMap<String, String>,
    /// Replaces every source queue's maxReceiveCount (a fault-injection suite that fails far more often than
    /// production gives each message more receives).
    pub max_receive_count: Option<u32>,
}

/// Tables and queues of the template, in the local AWS.
#[derive(Debug, Clone)]
pub struct LocalStack {
    /// What was read from the template.
    pub spec: TemplateSpec,
    /// Table names by logical id.
    pub tables: BTreeMap<String, String>,
    /// Queues by logical id.
    pub queues: BTreeMap<String, LocalQueue>,
    /// Kinesis data streams by logical id: empty until [`LocalStack::create_kinesis_streams`].
    pub kinesis_streams: BTreeMap<String, LocalKinesisStream>,
    options: StackOptions,
}

/// Why the stack could not be created.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    /// The template could not be read.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// A table's seed file could not be read, or is not a JSON array of objects.
    #[error("seed file {path} of table {table}: {reason}")]
    Seed {
        /// The table's logical id.
        table: String,
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The local AWS refused a call.
    #[error("creating {what}: {detail}")]
    Aws {
        /// What was being created.
        what: String,
        /// The SDK's error.
        detail: String,
    },
}

fn aws(what: &str, e: impl std::fmt::Debug) -> StackError {
    StackError::Aws {
        what: what.to_owned(),
        detail: format!("{e:?}"),
    }
}

impl LocalStack {
    /// Creates every table and queue of `spec` (DLQs first, then the queues that redrive to them).
    pub async fn create(
        sqs: &aws_sdk_sqs::Client,
        dynamodb: &aws_sdk_dynamodb::Client,
        spec: TemplateSpec,
        options: StackOptions,
    ) -> Result<Self, StackError> {
        let mut tables = BTreeMap::new();
        for table in spec.tables.values() {
            let name = table_name(table, &options);
            create_table(dynamodb, &name, table, options.template_names).await?;
            tables.insert(table.logical_id.clone(), name);
        }
        let mut queues: BTreeMap<String, LocalQueue> = BTreeMap::new();
        let mut pending: Vec<&QueueSpec> = spec.queues.values().collect();
        // Queues whose DLQ exists can be created; repeat until none is left (the template has no cycles).
        while !pending.is_empty() {
            let before = pending.len();
            let mut rest = Vec::new();
            for q in pending {
                match &q.redrive {
                    Some((dlq, _)) if !queues.contains_key(dlq) => rest.push(q),
                    _ => {
                        let created = create_queue(sqs, q, &queues, &options).await?;
                        queues.insert(q.logical_id.clone(), created);
                    }
                }
            }
            if rest.len() == before {
                return Err(StackError::Aws {
                    what: "queues".into(),
                    detail: "redrive target missing".into(),
                });
            }
            pending = rest;
        }
        Ok(Self {
            spec,
            tables,
            queues,
            kinesis_streams: BTreeMap::new(),
            options,
        })
    }

    /// Creates the template's Kinesis data streams, each with its shard count, and waits until each is `ACTIVE`
    /// (moto: at once). Named as the tables and queues are ([`StackOptions`]): with `template_names`, a stream that
    /// exists already under its name is kept as it is.
    ///
    /// # Errors
    /// [`StackError::Aws`] when the local AWS refuses a stream, or one is not `ACTIVE` within 10 s.
    pub async fn create_kinesis_streams(
        &mut self,
        kinesis: &aws_sdk_kinesis::Client,
    ) -> Result<(), StackError> {
        for stream in self.spec.kinesis_streams.values() {
            let name = match (&stream.name, self.options.template_names) {
                (Some(name), true) => name.clone(),
                (None, true) => kebab(&stream.logical_id),
                (_, false) => format!("{}-{}", self.options.prefix, stream.logical_id),
            };
            let created = kinesis
                .create_stream()
                .stream_name(&name)
                .shard_count(i32::try_from(stream.shard_count).unwrap_or(i32::MAX))
                .send()
                .await;
            if let Err(e) = created {
                let exists = e
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_in_use_exception());
                if !(exists && self.options.template_names) {
                    return Err(aws(&format!("Kinesis stream {name}"), e));
                }
            }
            let arn = active_stream_arn(kinesis, &name).await?;
            self.kinesis_streams.insert(
                stream.logical_id.clone(),
                LocalKinesisStream {
                    name,
                    arn,
                    spec: stream.clone(),
                },
            );
        }
        Ok(())
    }

    /// The workspace template's resources for one function ([`TemplateSpec::only_for`]): what its tests need,
    /// created as the template defines them. Its environment is then [`LocalStack::function_env`].
    pub async fn for_function(
        sqs: &aws_sdk_sqs::Client,
        dynamodb: &aws_sdk_dynamodb::Client,
        binary: &str,
        options: StackOptions,
    ) -> Result<Self, StackError> {
        Self::for_function_in(&template_path(), sqs, dynamodb, binary, options).await
    }

    /// [`LocalStack::for_function`] of the template at `template`.
    pub async fn for_function_in(
        template: &std::path::Path,
        sqs: &aws_sdk_sqs::Client,
        dynamodb: &aws_sdk_dynamodb::Client,
        binary: &str,
        options: StackOptions,
    ) -> Result<Self, StackError> {
        let spec = TemplateSpec::read(template)?
            .only_for(binary)
            .ok_or_else(|| TemplateError(format!("no function of the template builds {binary}")))?;
        Self::create(sqs, dynamodb, spec, options).await
    }

    /// The function spec whose binary is `binary`.
    pub fn function(&self, binary: &str) -> Option<&FunctionSpec> {
        self.spec.function_by_binary(binary)
    }

    /// The failure queue of a function: its source queue's DLQ, else (a stream consumer's, which has no queue) the
    /// queue its `DLQ_URL` names.
    pub fn failure_queue(&self, binary: &str) -> Option<&LocalQueue> {
        self.dead_letter_queue(binary).or_else(|| {
            match self.spec.env_of(binary)?.get("DLQ_URL")? {
                EnvSource::Ref(queue) => self.queues.get(queue),
                _ => None,
            }
        })
    }

    /// The source queue of the function whose binary is `binary`.
    pub fn source_queue(&self, binary: &str) -> Option<&LocalQueue> {
        self.queues.get(&self.function(binary)?.queue)
    }

    /// The DLQ of the function whose binary is `binary`.
    pub fn dead_letter_queue(&self, binary: &str) -> Option<&LocalQueue> {
        let (dlq, _) = self.source_queue(binary)?.spec.redrive.as_ref()?;
        self.queues.get(dlq)
    }

    /// The function's environment (an SQS consumer's, an API's or a stream consumer's) with every `!Ref` resolved:
    /// tables to names, queues to URLs (`DLQ_URL`, `QUEUE_URL`), Kinesis streams to names, parameters to their
    /// override or default; and a queue's `!GetAtt` `Arn`, `QueueName` and `QueueUrl`, a Kinesis stream's `Arn`; a
    /// `!Join` of those. A reference that resolves to nothing is left out (the function then names it at start).
    pub fn function_env(&self, binary: &str) -> Vec<(String, String)> {
        let Some(env) = self.spec.env_of(binary) else {
            return Vec::new();
        };
        env.iter()
            .filter_map(|(name, source)| Some((name.clone(), self.resolve(source)?)))
            .collect()
    }

    /// A value of the environment, resolved against what was created (see [`LocalStack::function_env`]).
    fn resolve(&self, source: &EnvSource) -> Option<String> {
        Some(match source {
            EnvSource::Literal(v) => v.clone(),
            EnvSource::Ref(r) => self
                .tables
                .get(r)
                .cloned()
                .or_else(|| self.queues.get(r).map(|q| q.url.clone()))
                .or_else(|| self.kinesis_streams.get(r).map(|k| k.name.clone()))
                .or_else(|| self.options.parameters.get(r).cloned())
                .or_else(|| self.spec.parameters.get(r).cloned())?,
            EnvSource::GetAtt {
                resource,
                attribute,
            } => {
                if let Some(stream) = self.kinesis_streams.get(resource) {
                    return (attribute == "Arn").then(|| stream.arn.clone());
                }
                let queue = self.queues.get(resource)?;
                match attribute.as_str() {
                    "Arn" => queue.arn.clone(),
                    "QueueUrl" => queue.url.clone(),
                    "QueueName" => queue.url.rsplit('/').next()?.to_owned(),
                    _ => return None,
                }
            }
            EnvSource::Join { separator, parts } => parts
                .iter()
                .map(|part| self.resolve(part))
                .collect::<Option<Vec<_>>>()?
                .join(separator),
        })
    }

    /// The batch size of the function's event source mapping.
    pub fn batch_size(&self, binary: &str) -> i32 {
        self.function(binary)
            .and_then(|f| f.batch_size.as_deref())
            .map(|b| self.spec.resolve_parameter(b))
            .and_then(|b| b.parse().ok())
            .unwrap_or(10)
    }
}

/// The ARN of the stream `name` once it is `ACTIVE`, asked every 100 ms for up to 10 s.
async fn active_stream_arn(
    kinesis: &aws_sdk_kinesis::Client,
    name: &str,
) -> Result<String, StackError> {
    use aws_sdk_kinesis::types::StreamStatus;
    let what = format!("Kinesis stream {name}");
    for _ in 0..100 {
        let described = kinesis
            .describe_stream_summary()
            .stream_name(name)
            .send()
            .await
            .map_err(|e| aws(&what, e))?;
        if let Some(summary) = described.stream_description_summary()
            && summary.stream_status() == &StreamStatus::Active
        {
            return Ok(summary.stream_arn().to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(StackError::Aws {
        what,
        detail: "not ACTIVE within 10 s".into(),
    })
}

/// Messages a queue holds: visible, in flight and delayed (SQS's approximate counts).
pub async fn queue_depth(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<u64, StackError> {
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .map_err(|e| aws(queue_url, e))?
        .attributes
        .unwrap_or_default();
    Ok([
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        QueueAttributeName::ApproximateNumberOfMessagesDelayed,
    ]
    .iter()
    .filter_map(|a| attributes.get(a).and_then(|v| v.parse::<u64>().ok()))
    .sum())
}

/// `IdempotencyTable` → `idempotency`, `SendInvoiceTable` → `send-invoice`.
fn kebab(logical_id: &str) -> String {
    use heck::ToKebabCase;
    logical_id
        .strip_suffix("Table")
        .unwrap_or(logical_id)
        .to_kebab_case()
}

fn table_name(table: &TableSpec, options: &StackOptions) -> String {
    if options.template_names {
        kebab(&table.logical_id)
    } else {
        format!("{}-{}", options.prefix, table.logical_id)
    }
}

fn queue_name(q: &QueueSpec, options: &StackOptions) -> String {
    let fifo = if q.fifo { ".fifo" } else { "" };
    match (&q.name, options.template_names) {
        (Some(name), true) => name.clone(),
        (None, true) => format!("{}{fifo}", kebab(&q.logical_id)),
        (_, false) => format!("{}-{}{fifo}", options.prefix, q.logical_id),
    }
}

async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
    table: &TableSpec,
    keep_existing: bool,
) -> Result<(), StackError> {
    let attribute = |n: &str| {
        AttributeDefinition::builder()
            .attribute_name(n)
            .attribute_type(ScalarAttributeType::S)
            .build()
    };
    let key = |n: &str, k: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(n)
            .key_type(k)
            .build()
    };
    let mut create = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute(&table.partition_key).map_err(|e| aws(name, e))?)
        .key_schema(key(&table.partition_key, KeyType::Hash).map_err(|e| aws(name, e))?);
    if let Some(sk) = &table.sort_key {
        create = create
            .attribute_definitions(attribute(sk).map_err(|e| aws(name, e))?)
            .key_schema(key(sk, KeyType::Range).map_err(|e| aws(name, e))?);
    }
    if let Some(view) = &table.stream_view_type {
        let stream = StreamSpecification::builder()
            .stream_enabled(true)
            .stream_view_type(StreamViewType::from(view.as_str()))
            .build()
            .map_err(|e| aws(name, e))?;
        create = create.stream_specification(stream);
    }
    // Read before anything is created: a broken seed file creates nothing.
    let seed = table
        .seed
        .as_deref()
        .map(|path| read_seed(table, path))
        .transpose()?;
    match create.send().await {
        Ok(_) => {}
        Err(e)
            if keep_existing
                && e.as_service_error()
                    .is_some_and(|e| e.is_resource_in_use_exception()) =>
        {
            // What exists is kept, its items too: the seed is for a table created here.
            return Ok(());
        }
        Err(e) => return Err(aws(name, e)),
    }
    if let Some(ttl) = &table.ttl_attribute {
        let spec = TimeToLiveSpecification::builder()
            .attribute_name(ttl)
            .enabled(true)
            .build()
            .map_err(|e| aws(name, e))?;
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(spec)
            .send()
            .await
            .map_err(|e| aws(name, e))?;
    }
    for (index, item) in seed.into_iter().flatten().enumerate() {
        client
            .put_item()
            .table_name(name)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| aws(&format!("{name}: seed item {index}"), e))?;
    }
    Ok(())
}

/// A seed file's items: a JSON array of objects, each converted as serde_dynamo converts JSON (strings to S, numbers
/// to N, booleans to BOOL, arrays to L, objects to M, null to NULL).
fn read_seed(
    table: &TableSpec,
    path: &std::path::Path,
) -> Result<
    Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>>,
    StackError,
> {
    let fail = |reason: String| StackError::Seed {
        table: table.logical_id.clone(),
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let items: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_str(&text)
        .map_err(|e| fail(format!("expected a JSON array of objects: {e}")))?;
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let keys = std::iter::once(&table.partition_key).chain(table.sort_key.as_ref());
            if let Some(key) = keys.into_iter().find(|k| !item.contains_key(*k)) {
                return Err(fail(format!(
                    "item {index} has no `{key}`, a key of the table"
                )));
            }
            serde_dynamo::aws_sdk_dynamodb_1::to_item(item)
                .map_err(|e| fail(format!("item {index}: {e}")))
        })
        .collect()
}

async fn create_queue(
    sqs: &aws_sdk_sqs::Client,
    q: &QueueSpec,
    existing: &BTreeMap<String, LocalQueue>,
    options: &StackOptions,
) -> Result<LocalQueue, StackError> {
    let name = queue_name(q, options);
    let mut visibility = q.visibility_timeout;
    let mut create = sqs.create_queue().queue_name(&name);
    let mut spec = q.clone();
    if let Some((dlq, max)) = &mut spec.redrive {
        if let Some(m) = options.max_receive_count {
            *max = m;
        }
        let target = existing
            .get(dlq.as_str())
            .map(|d| d.arn.clone())
            .unwrap_or_default();
        let policy = serde_json::json!({ "deadLetterTargetArn": target, "maxReceiveCount": max })
            .to_string();
        create = create.attributes(QueueAttributeName::RedrivePolicy, policy);
        if let Some(v) = options.visibility_timeout {
            visibility = u32::try_from(v.as_secs()).unwrap_or(u32::MAX).max(1);
        }
    }
    if q.fifo {
        create = create.attributes(QueueAttributeName::FifoQueue, "true");
        if q.content_based_deduplication {
            create = create.attributes(QueueAttributeName::ContentBasedDeduplication, "true");
        }
    }
    let created = create
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility.to_string(),
        )
        .attributes(
            QueueAttributeName::MessageRetentionPeriod,
            q.retention.to_string(),
        )
        .send()
        .await;
    let url = match created {
        Ok(out) => out.queue_url.ok_or_else(|| aws(&name, "no queue url"))?,
        // Already there with other attributes (an earlier template): kept, as `template_names` promises.
        Err(e)
            if options.template_names
                && e.as_service_error()
                    .is_some_and(|e| e.is_queue_name_exists()) =>
        {
            sqs.get_queue_url()
                .queue_name(&name)
                .send()
                .await
                .map_err(|e| aws(&name, e))?
                .queue_url
                .ok_or_else(|| aws(&name, "no queue url"))?
        }
        Err(e) => return Err(aws(&name, e)),
    };
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| aws(&name, e))?;
    let arn = attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .cloned()
        .ok_or_else(|| aws(&name, "no queue arn"))?;
    spec.visibility_timeout = visibility;
    Ok(LocalQueue { url, arn, spec })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_settings_keep_the_heartbeat_valid() {
        let env = |s| scaled_visibility_env(Duration::from_secs(s));
        let get = |env: &[(String, String)], k: &str| {
            env.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.parse::<u64>().expect("number"))
        };
        let three = env(3);
        assert_eq!(get(&three, "BACKOFF_BASE_SECONDS"), Some(1));
        assert_eq!(get(&three, "BACKOFF_MAX_SECONDS"), Some(3));
        assert_eq!(get(&three, "VISIBILITY_HEARTBEAT_SECONDS"), Some(1));
        assert_eq!(get(&three, "VISIBILITY_EXTEND_SECONDS"), Some(3));
        for s in 2..100 {
            let e = env(s);
            let (every, extend) = (
                get(&e, "VISIBILITY_HEARTBEAT_SECONDS").expect("every"),
                get(&e, "VISIBILITY_EXTEND_SECONDS").expect("extend"),
            );
            assert!(0 < every && every < extend, "{s}: {every} {extend}");
        }
        assert_eq!(get(&env(1), "VISIBILITY_HEARTBEAT_SECONDS"), None);
        assert_eq!(get(&env(0), "BACKOFF_MAX_SECONDS"), Some(1));
    }

    #[test]
    fn parameters_without_a_default_are_named_until_given() {
        let spec = TemplateSpec::parse(
            r#"
Parameters:
  ApiUrl: {Type: String}
  Unused: {Type: String}
  Timeout: {Type: Number, Default: 5}
Resources:
  Queue: {Type: AWS::SQS::Queue}
  Fn:
    Type: AWS::Serverless::Function
    Metadata: {BuildProperties: {Binary: send-invoice}}
    Properties:
      Environment:
        Variables:
          API_URL: !Ref ApiUrl
          TIMEOUT: !Ref Timeout
          QUEUE_URL: !Ref Queue
      Events:
        Sqs: {Type: SQS, Properties: {Queue: !GetAtt Queue.Arn}}
"#,
        )
        .expect("parses");
        assert!(spec.declares_parameter("ApiUrl") && spec.declares_parameter("Timeout"));
        assert!(!spec.declares_parameter("Queue"));
        assert_eq!(
            spec.unset_parameters(&BTreeMap::new()),
            [UnsetParameter {
                binary: "send-invoice".into(),
                variable: "API_URL".into(),
                parameter: "ApiUrl".into(),
            }]
        );
        let given = BTreeMap::from([("ApiUrl".to_owned(), "http://127.0.0.1:9".to_owned())]);
        assert!(spec.unset_parameters(&given).is_empty());
    }
}

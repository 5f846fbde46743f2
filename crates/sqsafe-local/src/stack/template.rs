//! What the local stack needs from template.yaml, read from the template itself so the two cannot drift.
//!
//! The template is read in long form ([`cfn::parse`]) with its local nested applications inlined ([`flatten`]), so a
//! queue or table that a child template defines is read as if the parent held it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_norway::Value;

use super::{cfn, flatten, nested};

/// The `Metadata` key of a table resource that names its local seed file ([`TableSpec::seed`]).
pub const SEED_METADATA: &str = "SqsafeLocalSeed";

/// A DynamoDB table of the template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// Logical id.
    pub logical_id: String,
    /// Partition key attribute.
    pub partition_key: String,
    /// Sort key attribute, if any.
    pub sort_key: Option<String>,
    /// TTL attribute, if enabled.
    pub ttl_attribute: Option<String>,
    /// The stream's view type (`NEW_IMAGE`, ...), if the table has a stream.
    pub stream_view_type: Option<String>,
    /// Items to put into the table when it is created locally: a JSON file (an array of objects) that the resource
    /// names in its `Metadata` as `SqsafeLocalSeed`, relative to the template's folder. Local only: CloudFormation
    /// keeps a resource's Metadata and does nothing with it.
    pub seed: Option<PathBuf>,
}

/// An SQS queue of the template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    /// Logical id.
    pub logical_id: String,
    /// `QueueName` without its `${AWS::StackName}-` prefix (`charge-payment`, `apply-ledger.fifo`), if the template
    /// names the queue.
    pub name: Option<String>,
    /// FIFO.
    pub fifo: bool,
    /// Content-based deduplication (FIFO).
    pub content_based_deduplication: bool,
    /// Visibility timeout, seconds (SQS default 30).
    pub visibility_timeout: u32,
    /// Retention, seconds (SQS default 4 days).
    pub retention: u32,
    /// Its DLQ and maxReceiveCount, from RedrivePolicy.
    pub redrive: Option<(String, u32)>,
}

/// An environment variable's value in the template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvSource {
    /// A literal.
    Literal(String),
    /// `!Ref X` of a resource or parameter.
    Ref(String),
    /// `!GetAtt X.Attribute` of a resource (a nested application's output reads as one once flattened):
    /// locally a queue's `Arn`, `QueueName` and `QueueUrl` resolve.
    GetAtt {
        /// The resource's logical id.
        resource: String,
        /// The attribute.
        attribute: String,
    },
    /// `!Join [separator, [parts]]` of literals, `!Ref`s and `!GetAtt`s (a list of queue URLs, say).
    Join {
        /// The separator.
        separator: String,
        /// The parts, in order.
        parts: Vec<EnvSource>,
    },
}

impl EnvSource {
    /// The resource or parameter it refers to, if any (a `!Join`'s first).
    pub fn reference(&self) -> Option<&String> {
        match self {
            Self::Ref(r) | Self::GetAtt { resource: r, .. } => Some(r),
            Self::Literal(_) => None,
            Self::Join { parts, .. } => parts.iter().find_map(Self::reference),
        }
    }

    /// Every resource or parameter it refers to.
    pub fn references(&self) -> Vec<&String> {
        match self {
            Self::Join { parts, .. } => parts.iter().flat_map(Self::references).collect(),
            other => other.reference().into_iter().collect(),
        }
    }

    /// A value as the template gives it: a literal, `!Ref`, `!GetAtt`, or a `!Join` of those; `None` for anything
    /// else (`!Sub`, `!If`, ...).
    fn of(v: &Value) -> Option<Self> {
        if let Some(r) = function(v, "Ref") {
            Some(Self::Ref(scalar(r)?))
        } else if let Some(g) = function(v, "Fn::GetAtt") {
            let (resource, attribute) = get_att(g)?;
            Some(Self::GetAtt {
                resource,
                attribute,
            })
        } else if let Some(j) = function(v, "Fn::Join") {
            let [separator, parts] = j.as_sequence()?.as_slice() else {
                return None;
            };
            Some(Self::Join {
                separator: scalar(separator)?,
                parts: parts
                    .as_sequence()?
                    .iter()
                    .map(Self::of)
                    .collect::<Option<Vec<_>>>()?,
            })
        } else {
            Some(Self::Literal(scalar(v)?))
        }
    }
}

/// `!GetAtt X.A` or `!GetAtt [X, A]`: the resource and the attribute.
fn get_att(v: &Value) -> Option<(String, String)> {
    match v {
        Value::Sequence(parts) if parts.len() == 2 => {
            Some((scalar(&parts[0])?, scalar(&parts[1])?))
        }
        Value::String(s) => s.split_once('.').map(|(r, a)| (r.to_owned(), a.to_owned())),
        _ => None,
    }
}

/// A function fed by an SQS queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSpec {
    /// Logical id.
    pub logical_id: String,
    /// The cargo binary (Metadata.BuildProperties.Binary).
    pub binary: String,
    /// Its source queue's logical id.
    pub queue: String,
    /// Batch size (a literal or a parameter's default).
    pub batch_size: Option<String>,
    /// Environment variables.
    pub env: BTreeMap<String, EnvSource>,
}

/// A Kinesis data stream of the template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KinesisStreamSpec {
    /// Logical id.
    pub logical_id: String,
    /// `Name` without its `${AWS::StackName}-` prefix, if the template names the stream.
    pub name: Option<String>,
    /// `ShardCount` (a literal or a parameter's default); 1 when the template gives none (on-demand capacity, which
    /// AWS starts with 4 shards: locally one shard keeps a partition key's order just as well).
    pub shard_count: u32,
}

/// Where a stream function's records come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamSource {
    /// A Kinesis data stream of the template (its logical id): an event of type `Kinesis`.
    Kinesis(String),
    /// A DynamoDB table of the template with a stream (its logical id): an event of type `DynamoDB`.
    DynamoDb(String),
}

/// A function fed by a stream of the template (an event of type `Kinesis` or `DynamoDB` whose `Stream` is
/// `!GetAtt X.Arn` of a Kinesis stream or `!GetAtt X.StreamArn` of a table): the event source mapping's settings as
/// the template gives them. A stream of another stack (an ARN parameter) is not read: it cannot run locally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFunctionSpec {
    /// Logical id.
    pub logical_id: String,
    /// The cargo binary (Metadata.BuildProperties.Binary).
    pub binary: String,
    /// The stream.
    pub source: StreamSource,
    /// `StartingPosition`: `TRIM_HORIZON`, `LATEST` or `AT_TIMESTAMP`.
    pub starting_position: String,
    /// `BatchSize` (a literal or a parameter's name).
    pub batch_size: Option<String>,
    /// `MaximumRetryAttempts`; `None` when absent or -1 (Lambda retries for as long as the stream keeps the record).
    pub maximum_retry_attempts: Option<u32>,
    /// `BisectBatchOnFunctionError`.
    pub bisect_on_function_error: bool,
    /// `DestinationConfig.OnFailure.Destination` when it is `!GetAtt Q.Arn` of a queue of the template.
    pub on_failure_queue: Option<String>,
    /// Whether `FunctionResponseTypes` holds `ReportBatchItemFailures`.
    pub reports_batch_item_failures: bool,
    /// Environment variables.
    pub env: BTreeMap<String, EnvSource>,
}

/// A function behind an HTTP API: an event of type `HttpApi` (API Gateway's payload format 2.0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFunctionSpec {
    /// Logical id.
    pub logical_id: String,
    /// The cargo binary (Metadata.BuildProperties.Binary).
    pub binary: String,
    /// Its routes, as API Gateway's route keys (`POST /orders`, `ANY /{proxy+}`), from each `HttpApi` event's
    /// `Method` and `Path` (`$default` when an event names neither).
    pub routes: Vec<String>,
    /// Environment variables.
    pub env: BTreeMap<String, EnvSource>,
}

/// The parts of template.yaml that the local stack reproduces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateSpec {
    /// Tables by logical id.
    pub tables: BTreeMap<String, TableSpec>,
    /// Queues by logical id.
    pub queues: BTreeMap<String, QueueSpec>,
    /// Functions with an SQS event, by logical id.
    pub functions: BTreeMap<String, FunctionSpec>,
    /// Kinesis data streams by logical id.
    pub kinesis_streams: BTreeMap<String, KinesisStreamSpec>,
    /// Functions fed by a stream of the template (Kinesis or DynamoDB Streams), by logical id.
    pub stream_functions: BTreeMap<String, StreamFunctionSpec>,
    /// Functions behind an HTTP API (an event of type `HttpApi`), by logical id: `sqsafe local up` serves each on a
    /// loopback port.
    pub apis: BTreeMap<String, ApiFunctionSpec>,
    /// Parameter defaults.
    pub parameters: BTreeMap<String, String>,
    /// Parameters declared without a `Default`: a deployment gives their value (`sam deploy --parameter-overrides`),
    /// and so does a local run ([`StackOptions::parameters`](super::StackOptions::parameters)).
    pub required_parameters: BTreeSet<String>,
}

/// A function's environment variable whose value is a template parameter without a `Default` that nothing gave
/// ([`TemplateSpec::unset_parameters`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsetParameter {
    /// The function's binary.
    pub binary: String,
    /// The environment variable.
    pub variable: String,
    /// The parameter.
    pub parameter: String,
}

/// Why the template could not be read.
#[derive(Debug, thiserror::Error)]
#[error("template.yaml: {0}")]
pub struct TemplateError(pub String);

/// The argument of an intrinsic function in long form: `function(v, "Ref")` of `{"Ref": X}` is `X`.
fn function<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v.as_mapping().filter(|m| m.len() == 1)?.get(name)
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A function's environment variables, as the template gives them.
fn env_of(props: &Value) -> BTreeMap<String, EnvSource> {
    let Some(vars) = props
        .get("Environment")
        .and_then(|e| e.get("Variables"))
        .and_then(Value::as_mapping)
    else {
        return BTreeMap::new();
    };
    vars.iter()
        .filter_map(|(k, v)| Some((scalar(k)?, EnvSource::of(v)?)))
        .collect()
}

/// A function's cargo binary: its `Metadata.BuildProperties.Binary`.
fn binary_of(resource: &Value) -> Option<String> {
    resource
        .get("Metadata")
        .and_then(|m| m.get("BuildProperties"))
        .and_then(|b| b.get("Binary"))
        .and_then(scalar)
}

/// The function `id` when one of its events is an `HttpApi`: `None` when none is, an error when it has no binary.
fn api_function(
    id: &str,
    resource: &Value,
    props: &Value,
) -> Option<Result<ApiFunctionSpec, String>> {
    let events: Vec<&Value> = props
        .get("Events")
        .and_then(Value::as_mapping)?
        .values()
        .filter(|e| e.get("Type").and_then(Value::as_str) == Some("HttpApi"))
        .collect();
    if events.is_empty() {
        return None;
    }
    let routes = events
        .iter()
        .map(|e| {
            let props = e.get("Properties");
            let method = props.and_then(|p| scalar(p.get("Method")?));
            let path = props.and_then(|p| scalar(p.get("Path")?));
            match (method, path) {
                (None, None) => "$default".to_owned(),
                (method, path) => format!(
                    "{} {}",
                    method.map_or_else(|| "ANY".to_owned(), |m| m.to_uppercase()),
                    path.unwrap_or_else(|| "/".to_owned())
                ),
            }
        })
        .collect();
    Some(match binary_of(resource) {
        None => Err(format!("{id}: no Metadata.BuildProperties.Binary")),
        Some(binary) => Ok(ApiFunctionSpec {
            logical_id: id.to_owned(),
            binary,
            routes,
            env: env_of(props),
        }),
    })
}

/// The function `id` when one of its events is of type `Kinesis` or `DynamoDB` on a stream of this template: `None`
/// when none is (or its stream is one the local stack does not create), an error when it has no binary or its stream
/// names a resource the template does not have.
fn stream_function(
    id: &str,
    resource: &Value,
    props: &Value,
    resources: &serde_norway::Mapping,
) -> Option<Result<StreamFunctionSpec, String>> {
    let (kind, event) = props
        .get("Events")
        .and_then(Value::as_mapping)?
        .values()
        .find_map(|e| {
            let kind = e.get("Type").and_then(Value::as_str)?;
            matches!(kind, "Kinesis" | "DynamoDB").then_some((kind, e))
        })?;
    let event_props = event.get("Properties").cloned().unwrap_or(Value::Null);
    // `!GetAtt X.Arn` (Kinesis) or `!GetAtt X.StreamArn` (DynamoDB); anything else is another stack's stream.
    let (stream, _) = get_att(function(event_props.get("Stream")?, "Fn::GetAtt")?)?;
    let Some(target) = resources.get(stream.as_str()) else {
        return Some(Err(format!(
            "{id}: its {kind} event's stream {stream} is not in the template"
        )));
    };
    let target_kind = target
        .get("Type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let source = match (kind, target_kind) {
        ("Kinesis", "AWS::Kinesis::Stream") => StreamSource::Kinesis(stream),
        ("DynamoDB", "AWS::DynamoDB::Table") => StreamSource::DynamoDb(stream),
        // A Kinesis stream consumer (enhanced fan-out), a nested application that is not a local file: nothing the
        // local stack creates.
        _ => return None,
    };
    let Some(binary) = binary_of(resource) else {
        return Some(Err(format!("{id}: no Metadata.BuildProperties.Binary")));
    };
    let text = |name: &str| {
        event_props
            .get(name)
            .and_then(|v| match function(v, "Ref") {
                Some(r) => scalar(r),
                None => scalar(v),
            })
    };
    Some(Ok(StreamFunctionSpec {
        logical_id: id.to_owned(),
        binary,
        source,
        starting_position: text("StartingPosition").unwrap_or_else(|| "LATEST".to_owned()),
        batch_size: text("BatchSize"),
        maximum_retry_attempts: text("MaximumRetryAttempts").and_then(|n| n.parse().ok()),
        bisect_on_function_error: event_props
            .get("BisectBatchOnFunctionError")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        on_failure_queue: event_props
            .get("DestinationConfig")
            .and_then(|d| d.get("OnFailure")?.get("Destination"))
            .and_then(get_att_target),
        reports_batch_item_failures: event_props
            .get("FunctionResponseTypes")
            .and_then(Value::as_sequence)
            .is_some_and(|types| {
                types
                    .iter()
                    .any(|t| t.as_str() == Some("ReportBatchItemFailures"))
            }),
        env: env_of(props),
    }))
}

/// `!GetAtt X.Arn` → `X` (a `!GetAtt` without an attribute names nothing: CloudFormation refuses it).
fn get_att_target(v: &Value) -> Option<String> {
    get_att(function(v, "Fn::GetAtt")?).map(|(resource, _)| resource)
}

impl TemplateSpec {
    /// Reads a template file. Nested applications' local templates ([`flatten`]) and seed files
    /// ([`TableSpec::seed`]) are found from its folder.
    pub fn read(path: &Path) -> Result<Self, TemplateError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TemplateError(format!("{}: {e}", path.display())))?;
        let folder = path.parent().unwrap_or(Path::new("."));
        let mut spec = Self::parse_in(&text, folder)
            .map_err(|e| TemplateError(format!("{}: {}", path.display(), e.0)))?;
        for table in spec.tables.values_mut() {
            if let Some(seed) = &table.seed {
                table.seed = Some(folder.join(seed));
            }
        }
        Ok(spec)
    }

    /// Parses template text. A nested application's local template is found from the current folder
    /// ([`TemplateSpec::read`] finds it from the template's).
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        Self::parse_in(text, Path::new("."))
    }

    fn parse_in(text: &str, folder: &Path) -> Result<Self, TemplateError> {
        let doc = flatten(cfn::parse(text)?, folder)?;
        let err = |m: String| TemplateError(m);
        let declared = doc.get("Parameters").and_then(Value::as_mapping);
        let parameters = declared
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((scalar(k)?, scalar(v.get("Default")?)?)))
                    .collect()
            })
            .unwrap_or_default();
        let required_parameters = declared
            .map(|m| {
                m.iter()
                    .filter(|(_, v)| v.get("Default").is_none())
                    .filter_map(|(k, _)| scalar(k))
                    .collect()
            })
            .unwrap_or_default();
        let resources = doc
            .get("Resources")
            .and_then(Value::as_mapping)
            .ok_or_else(|| err("no Resources".into()))?;
        let mut spec = TemplateSpec {
            tables: BTreeMap::new(),
            queues: BTreeMap::new(),
            functions: BTreeMap::new(),
            kinesis_streams: BTreeMap::new(),
            stream_functions: BTreeMap::new(),
            apis: BTreeMap::new(),
            parameters,
            required_parameters,
        };
        for (id, resource) in resources {
            let Some(id) = scalar(id) else { continue };
            let kind = resource
                .get("Type")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let props = resource.get("Properties").cloned().unwrap_or(Value::Null);
            match kind {
                "AWS::DynamoDB::Table" => {
                    let key = |kind: &str| {
                        props.get("KeySchema")?.as_sequence()?.iter().find_map(|k| {
                            (k.get("KeyType")?.as_str()? == kind)
                                .then(|| scalar(k.get("AttributeName")?))
                                .flatten()
                        })
                    };
                    let ttl = props
                        .get("TimeToLiveSpecification")
                        .filter(|t| t.get("Enabled").and_then(Value::as_bool).unwrap_or(false));
                    spec.tables.insert(
                        id.clone(),
                        TableSpec {
                            logical_id: id.clone(),
                            partition_key: key("HASH")
                                .ok_or_else(|| err(format!("{id}: no HASH key")))?,
                            sort_key: key("RANGE"),
                            ttl_attribute: ttl.and_then(|t| scalar(t.get("AttributeName")?)),
                            stream_view_type: props
                                .get("StreamSpecification")
                                .and_then(|s| scalar(s.get("StreamViewType")?)),
                            seed: resource
                                .get("Metadata")
                                .and_then(|m| scalar(m.get(SEED_METADATA)?))
                                .map(PathBuf::from),
                        },
                    );
                }
                "AWS::SQS::Queue" => {
                    // A literal, or a parameter's default (what a child's `!Ref VisibilityTimeout` becomes when the
                    // parent passes one of its own parameters).
                    let num = |name: &str, default: u32| {
                        props
                            .get(name)
                            .and_then(|v| match function(v, "Ref").and_then(scalar) {
                                Some(parameter) => spec.parameters.get(&parameter).cloned(),
                                None => scalar(v),
                            })
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(default)
                    };
                    let flag =
                        |name: &str| props.get(name).and_then(Value::as_bool).unwrap_or(false);
                    let redrive = props.get("RedrivePolicy").and_then(|r| {
                        let dlq = get_att_target(r.get("deadLetterTargetArn")?)?;
                        let max = scalar(r.get("maxReceiveCount")?)?.parse().ok()?;
                        Some((dlq, max))
                    });
                    spec.queues.insert(
                        id.clone(),
                        QueueSpec {
                            logical_id: id.clone(),
                            name: props.get("QueueName").and_then(|n| {
                                let text = scalar(function(n, "Fn::Sub").unwrap_or(n))?;
                                Some(text.trim_start_matches("${AWS::StackName}-").to_owned())
                            }),
                            fifo: flag("FifoQueue"),
                            content_based_deduplication: flag("ContentBasedDeduplication"),
                            visibility_timeout: num("VisibilityTimeout", 30),
                            retention: num("MessageRetentionPeriod", 345_600),
                            redrive,
                        },
                    );
                }
                "AWS::Kinesis::Stream" => {
                    let shard_count = props
                        .get("ShardCount")
                        .and_then(|v| match function(v, "Ref").and_then(scalar) {
                            Some(parameter) => spec.parameters.get(&parameter).cloned(),
                            None => scalar(v),
                        })
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(1);
                    spec.kinesis_streams.insert(
                        id.clone(),
                        KinesisStreamSpec {
                            logical_id: id.clone(),
                            name: props.get("Name").and_then(|n| {
                                let text = scalar(function(n, "Fn::Sub").unwrap_or(n))?;
                                Some(text.trim_start_matches("${AWS::StackName}-").to_owned())
                            }),
                            shard_count,
                        },
                    );
                }
                "AWS::Serverless::Function" => {
                    if let Some(api) = api_function(&id, resource, &props) {
                        spec.apis.insert(id.clone(), api.map_err(err)?);
                        continue;
                    }
                    if let Some(stream) = stream_function(&id, resource, &props, resources) {
                        spec.stream_functions
                            .insert(id.clone(), stream.map_err(err)?);
                        continue;
                    }
                    let Some(event) =
                        props
                            .get("Events")
                            .and_then(Value::as_mapping)
                            .and_then(|events| {
                                events
                                    .values()
                                    .find(|e| e.get("Type").and_then(Value::as_str) == Some("SQS"))
                            })
                    else {
                        continue;
                    };
                    let event_props = event.get("Properties").cloned().unwrap_or(Value::Null);
                    let queue = event_props
                        .get("Queue")
                        .and_then(get_att_target)
                        .ok_or_else(|| {
                            err(format!("{id}: SQS event without `Queue: !GetAtt X.Arn`"))
                        })?;
                    let binary = binary_of(resource)
                        .ok_or_else(|| err(format!("{id}: no Metadata.BuildProperties.Binary")))?;
                    let env = env_of(&props);
                    let batch_size =
                        event_props
                            .get("BatchSize")
                            .and_then(|b| match function(b, "Ref") {
                                Some(r) => scalar(r),
                                None => scalar(b),
                            });
                    spec.functions.insert(
                        id.clone(),
                        FunctionSpec {
                            logical_id: id,
                            binary,
                            queue,
                            batch_size,
                            env,
                        },
                    );
                }
                _ => {}
            }
        }
        for f in spec.functions.values() {
            // Still an application after flattening: its template is not a local file.
            let elsewhere = resources
                .get(f.queue.as_str())
                .and_then(nested::location)
                .map(|at| {
                    format!(
                        " but in nested application {} at {}, whose template is not a local file (only those are read)",
                        f.queue,
                        cfn::show(Some(at))
                    )
                });
            if !spec.queues.contains_key(&f.queue) {
                return Err(err(format!(
                    "{}: queue {} is not in the template{}",
                    f.logical_id,
                    f.queue,
                    elsewhere.unwrap_or_default()
                )));
            }
        }
        Ok(spec)
    }

    /// A parameter's default, or the literal itself when `value` is not a parameter name.
    pub fn resolve_parameter(&self, value: &str) -> String {
        self.parameters
            .get(value)
            .cloned()
            .unwrap_or_else(|| value.to_owned())
    }

    /// The function whose binary is `binary`.
    pub fn function_by_binary(&self, binary: &str) -> Option<&FunctionSpec> {
        self.functions.values().find(|f| f.binary == binary)
    }

    /// The stream function whose binary is `binary`.
    pub fn stream_function_by_binary(&self, binary: &str) -> Option<&StreamFunctionSpec> {
        self.stream_functions.values().find(|f| f.binary == binary)
    }

    /// The environment of the function whose binary is `binary`: an SQS consumer's, an API's or a stream consumer's.
    pub fn env_of(&self, binary: &str) -> Option<&BTreeMap<String, EnvSource>> {
        let queues = self.functions.values().map(|f| (&f.binary, &f.env));
        let apis = self.apis.values().map(|a| (&a.binary, &a.env));
        let streams = self.stream_functions.values().map(|f| (&f.binary, &f.env));
        queues
            .chain(apis)
            .chain(streams)
            .find(|(b, _)| *b == binary)
            .map(|(_, env)| env)
    }

    /// Only what the function whose binary is `binary` uses: itself, its source queue and that queue's DLQ (a stream
    /// consumer: its stream, Kinesis or its table's, and its on-failure queue), and the tables and queues its
    /// environment refers to (`None` when the template has no such function). A test of one function creates exactly
    /// the template's resources for it, no more.
    pub fn only_for(&self, binary: &str) -> Option<TemplateSpec> {
        if let Some(stream) = self.stream_function_by_binary(binary) {
            return Some(self.only_for_stream(stream));
        }
        let function = self.function_by_binary(binary)?;
        let refs: Vec<&String> = function
            .env
            .values()
            .flat_map(EnvSource::references)
            .collect();
        let mut queues: Vec<&String> = std::iter::once(&function.queue)
            .chain(refs.iter().copied())
            .filter(|id| self.queues.contains_key(*id))
            .collect();
        // And the DLQ of each (a queue is created after the queue it redrives to).
        let dlqs: Vec<&String> = queues
            .iter()
            .filter_map(|id| self.queues.get(*id)?.redrive.as_ref().map(|(dlq, _)| dlq))
            .collect();
        queues.extend(dlqs);
        Some(TemplateSpec {
            apis: BTreeMap::new(),
            kinesis_streams: BTreeMap::new(),
            stream_functions: BTreeMap::new(),
            tables: self
                .tables
                .iter()
                .filter(|(id, _)| refs.contains(id))
                .map(|(id, t)| (id.clone(), t.clone()))
                .collect(),
            queues: self
                .queues
                .iter()
                .filter(|(id, _)| queues.contains(id))
                .map(|(id, q)| (id.clone(), q.clone()))
                .collect(),
            functions: BTreeMap::from([(function.logical_id.clone(), function.clone())]),
            parameters: self.parameters.clone(),
            required_parameters: self.required_parameters.clone(),
        })
    }

    fn only_for_stream(&self, function: &StreamFunctionSpec) -> TemplateSpec {
        let mut refs: Vec<&String> = function
            .env
            .values()
            .flat_map(EnvSource::references)
            .chain(&function.on_failure_queue)
            .collect();
        match &function.source {
            StreamSource::Kinesis(stream) | StreamSource::DynamoDb(stream) => refs.push(stream),
        }
        let dlqs: Vec<&String> = refs
            .iter()
            .filter_map(|id| self.queues.get(*id)?.redrive.as_ref().map(|(dlq, _)| dlq))
            .collect();
        refs.extend(dlqs);
        let kept = |id: &String| refs.contains(&id);
        TemplateSpec {
            tables: self
                .tables
                .iter()
                .filter(|(id, _)| kept(id))
                .map(|(id, t)| (id.clone(), t.clone()))
                .collect(),
            queues: self
                .queues
                .iter()
                .filter(|(id, _)| kept(id))
                .map(|(id, q)| (id.clone(), q.clone()))
                .collect(),
            functions: BTreeMap::new(),
            kinesis_streams: self
                .kinesis_streams
                .iter()
                .filter(|(id, _)| kept(id))
                .map(|(id, k)| (id.clone(), k.clone()))
                .collect(),
            stream_functions: BTreeMap::from([(function.logical_id.clone(), function.clone())]),
            apis: BTreeMap::new(),
            parameters: self.parameters.clone(),
            required_parameters: self.required_parameters.clone(),
        }
    }

    /// Whether the template declares the parameter `name` (with or without a default).
    pub fn declares_parameter(&self, name: &str) -> bool {
        self.parameters.contains_key(name) || self.required_parameters.contains(name)
    }

    /// The functions' environment variables that refer to a parameter without a `Default` and not in `given`: the
    /// function would start without them. Ordered by function, then variable.
    pub fn unset_parameters(&self, given: &BTreeMap<String, String>) -> Vec<UnsetParameter> {
        let consumers = self.functions.values().map(|f| (&f.binary, &f.env));
        let apis = self.apis.values().map(|a| (&a.binary, &a.env));
        let streams = self.stream_functions.values().map(|f| (&f.binary, &f.env));
        let mut unset: Vec<UnsetParameter> = consumers
            .chain(apis)
            .chain(streams)
            .flat_map(|(binary, env)| {
                env.iter().filter_map(|(variable, source)| match source {
                    EnvSource::Ref(r)
                        if self.required_parameters.contains(r) && !given.contains_key(r) =>
                    {
                        Some(UnsetParameter {
                            binary: binary.clone(),
                            variable: variable.clone(),
                            parameter: r.clone(),
                        })
                    }
                    _ => None,
                })
            })
            .collect();
        unset.sort_by(|a, b| (&a.binary, &a.variable).cmp(&(&b.binary, &b.variable)));
        unset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_behind_an_http_api_is_read_with_its_routes_and_environment() {
        let template = r#"
Resources:
  Keys:
    Type: AWS::DynamoDB::Table
    Properties: { KeySchema: [{ AttributeName: pk, KeyType: HASH }] }
  Orders:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: orders-api } }
    Properties:
      Environment: { Variables: { IDEMPOTENCY_TABLE: !Ref Keys, MODE: strict } }
      Events:
        Create: { Type: HttpApi, Properties: { Path: /orders, Method: post } }
        Rest: { Type: HttpApi }
"#;
        let without_binary = format!(
            "{template}  NoBinary:\n    Type: AWS::Serverless::Function\n    Properties: {{ Events: {{ A: {{ Type: HttpApi }} }} }}\n"
        );
        let error =
            TemplateSpec::parse(&without_binary).expect_err("a function without its binary");
        assert!(
            error
                .to_string()
                .contains("NoBinary: no Metadata.BuildProperties.Binary"),
            "{error}"
        );
        let spec = TemplateSpec::parse(template).expect("template");
        assert!(spec.functions.is_empty(), "not a consumer");
        let api = &spec.apis["Orders"];
        assert_eq!(api.binary, "orders-api");
        assert_eq!(api.routes, ["POST /orders", "$default"]);
        assert_eq!(api.env["IDEMPOTENCY_TABLE"], EnvSource::Ref("Keys".into()));
        assert_eq!(api.env["MODE"], EnvSource::Literal("strict".into()));
    }

    /// A parent whose consumers' queues are in nested applications (sqsafe/consumer.yaml and its FIFO variant).
    fn nested_fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nested/template.yaml")
    }

    #[test]
    fn get_att_reads_both_forms_and_only_with_an_attribute() {
        let yaml = |text: &str| serde_norway::from_str::<Value>(text).expect("yaml");
        assert_eq!(
            get_att_target(&yaml("Fn::GetAtt: Dlq.Arn")),
            Some("Dlq".to_owned())
        );
        assert_eq!(
            get_att_target(&yaml("Fn::GetAtt: [Dlq, Arn]")),
            Some("Dlq".to_owned())
        );
        assert_eq!(
            get_att(&yaml("[Q, Outputs.QueueArn]")),
            Some(("Q".to_owned(), "Outputs.QueueArn".to_owned()))
        );
        assert_eq!(get_att_target(&yaml("Fn::GetAtt: Dlq")), None);
        assert_eq!(get_att_target(&yaml("Ref: Dlq")), None);
    }

    #[test]
    fn the_queues_of_a_nested_application_are_read_as_the_parents() {
        let spec = TemplateSpec::read(&nested_fixture()).expect("the fixture reads");
        let queue = |id: &str| {
            spec.queues
                .get(id)
                .unwrap_or_else(|| panic!("{id}: {spec:#?}"))
        };
        let ids: Vec<&String> = spec.queues.keys().collect();
        assert_eq!(
            ids,
            [
                "ApplyLedgerDeadLetterQueue",
                "ApplyLedgerQueue",
                "SendInvoiceDeadLetterQueue",
                "SendInvoiceQueue"
            ]
        );
        let send = queue("SendInvoiceQueue");
        assert_eq!(send.name.as_deref(), Some("send-invoice"));
        assert!(!send.fifo);
        assert_eq!(send.visibility_timeout, 400, "the value the parent passes");
        assert_eq!(send.redrive, Some(("SendInvoiceDeadLetterQueue".into(), 5)));
        let send_dlq = queue("SendInvoiceDeadLetterQueue");
        assert_eq!(send_dlq.name.as_deref(), Some("send-invoice-dlq"));
        assert_eq!(
            (send_dlq.retention, send_dlq.redrive.clone()),
            (1_209_600, None)
        );

        let ledger = queue("ApplyLedgerQueue");
        assert_eq!(ledger.name.as_deref(), Some("apply-ledger.fifo"));
        assert!(ledger.fifo && ledger.content_based_deduplication);
        assert_eq!(
            ledger.visibility_timeout, 180,
            "the parent parameter's default"
        );
        assert_eq!(
            ledger.redrive,
            Some(("ApplyLedgerDeadLetterQueue".into(), 5))
        );
        let ledger_dlq = queue("ApplyLedgerDeadLetterQueue");
        assert_eq!(ledger_dlq.name.as_deref(), Some("apply-ledger-dlq.fifo"));
        assert!(ledger_dlq.fifo);

        assert_eq!(spec.tables.keys().collect::<Vec<_>>(), ["IdempotencyTable"]);
        assert!(
            !spec.parameters.contains_key("ConsumerName"),
            "a child's parameters are not the parent's: {:?}",
            spec.parameters
        );
    }

    #[test]
    fn a_function_fed_by_a_nested_applications_output_reads_its_queue() {
        let spec = TemplateSpec::read(&nested_fixture()).expect("the fixture reads");
        let send = spec
            .function_by_binary("send-invoice")
            .expect("send-invoice");
        assert_eq!(send.queue, "SendInvoiceQueue");
        assert_eq!(send.batch_size.as_deref(), Some("5"));
        assert_eq!(
            send.env,
            BTreeMap::from([
                (
                    "DLQ_NAME".into(),
                    EnvSource::GetAtt {
                        resource: "SendInvoiceDeadLetterQueue".into(),
                        attribute: "QueueName".into()
                    }
                ),
                (
                    "DLQ_URL".into(),
                    EnvSource::Ref("SendInvoiceDeadLetterQueue".into())
                ),
                (
                    "IDEMPOTENCY_TABLE".into(),
                    EnvSource::Ref("IdempotencyTable".into())
                ),
                (
                    "QUEUE_ARN".into(),
                    EnvSource::GetAtt {
                        resource: "SendInvoiceQueue".into(),
                        attribute: "Arn".into()
                    }
                ),
                (
                    "QUEUE_URL".into(),
                    EnvSource::Ref("SendInvoiceQueue".into())
                ),
            ])
        );
        let ledger = spec
            .function_by_binary("apply-ledger")
            .expect("apply-ledger");
        assert_eq!(ledger.queue, "ApplyLedgerQueue");

        let only = spec.only_for("send-invoice").expect("send-invoice");
        assert_eq!(
            only.queues.keys().collect::<Vec<_>>(),
            ["SendInvoiceDeadLetterQueue", "SendInvoiceQueue"],
            "its queue and DLQ, not the other application's"
        );
        assert_eq!(only.tables.keys().collect::<Vec<_>>(), ["IdempotencyTable"]);
    }

    #[test]
    fn a_queue_in_an_application_elsewhere_is_named_as_such() {
        let said = TemplateSpec::parse(
            r#"
Resources:
  Orders:
    Type: AWS::Serverless::Application
    Properties:
      Location: {ApplicationId: "arn:aws:serverlessrepo:us-east-1:123456789012:applications/x", SemanticVersion: 1.0.0}
  Fn:
    Type: AWS::Serverless::Function
    Metadata: {BuildProperties: {Binary: orders}}
    Properties:
      Events: {Q: {Type: SQS, Properties: {Queue: !GetAtt Orders.Outputs.QueueArn}}}
"#,
        )
        .expect_err("refused")
        .to_string();
        assert!(
            said.contains(
                "Fn: queue Orders is not in the template but in nested application Orders at {"
            ) && said.ends_with("whose template is not a local file (only those are read)"),
            "{said}"
        );
    }

    #[test]
    fn a_nested_application_that_cannot_be_read_is_an_error_naming_the_parent() {
        let folder =
            std::env::temp_dir().join(format!("sqsafe-local-nested-{}", std::process::id()));
        std::fs::create_dir_all(&folder).expect("mkdir");
        let parent = folder.join("template.yaml");
        std::fs::write(
            &parent,
            "Resources:\n  App:\n    Type: AWS::Serverless::Application\n    Properties:\n      Location: gone.yaml\n",
        )
        .expect("write");
        let said = TemplateSpec::read(&parent)
            .expect_err("refused")
            .to_string();
        let _ = std::fs::remove_dir_all(&folder);
        assert!(
            said.contains(&parent.display().to_string())
                && said.contains("nested application App: cannot read its template")
                && said.contains("gone.yaml"),
            "{said}"
        );
    }

    const STREAMS: &str = r#"
Parameters:
  Shards: { Type: Number, Default: 3 }
  Batch: { Type: Number, Default: 50 }
  OtherStream: { Type: String }
Resources:
  Orders:
    Type: AWS::Kinesis::Stream
    Properties: { Name: !Sub "${AWS::StackName}-orders", ShardCount: !Ref Shards }
  Events:
    Type: AWS::Kinesis::Stream
    Properties: { StreamModeDetails: { StreamMode: ON_DEMAND } }
  Audit:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema: [{ AttributeName: pk, KeyType: HASH }]
      StreamSpecification: { StreamViewType: NEW_AND_OLD_IMAGES }
  Failures: { Type: AWS::SQS::Queue }
  ShipOrder:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: ship-order } }
    Properties:
      Environment: { Variables: { DLQ_URL: !Ref Failures } }
      Events:
        Stream:
          Type: Kinesis
          Properties:
            Stream: !GetAtt Orders.Arn
            StartingPosition: TRIM_HORIZON
            BatchSize: !Ref Batch
            FunctionResponseTypes: [ReportBatchItemFailures]
            BisectBatchOnFunctionError: true
            MaximumRetryAttempts: 10
            DestinationConfig: { OnFailure: { Destination: !GetAtt Failures.Arn } }
  AuditOrder:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: audit-order } }
    Properties:
      Events:
        Changes:
          Type: DynamoDB
          Properties: { Stream: !GetAtt Audit.StreamArn, StartingPosition: LATEST, MaximumRetryAttempts: -1 }
  Elsewhere:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: elsewhere } }
    Properties:
      Events: { S: { Type: Kinesis, Properties: { Stream: !Ref OtherStream, StartingPosition: LATEST } } }
"#;

    #[test]
    fn kinesis_streams_and_the_functions_they_feed_are_read_with_their_mapping() {
        let spec = TemplateSpec::parse(STREAMS).expect("parses");
        assert_eq!(
            spec.kinesis_streams.values().cloned().collect::<Vec<_>>(),
            vec![
                KinesisStreamSpec {
                    logical_id: "Events".into(),
                    name: None,
                    shard_count: 1,
                },
                KinesisStreamSpec {
                    logical_id: "Orders".into(),
                    name: Some("orders".into()),
                    shard_count: 3,
                },
            ]
        );
        assert_eq!(
            spec.stream_functions["ShipOrder"],
            StreamFunctionSpec {
                logical_id: "ShipOrder".into(),
                binary: "ship-order".into(),
                source: StreamSource::Kinesis("Orders".into()),
                starting_position: "TRIM_HORIZON".into(),
                batch_size: Some("Batch".into()),
                maximum_retry_attempts: Some(10),
                bisect_on_function_error: true,
                on_failure_queue: Some("Failures".into()),
                reports_batch_item_failures: true,
                env: BTreeMap::from([("DLQ_URL".into(), EnvSource::Ref("Failures".into()))]),
            }
        );
        let audit = &spec.stream_functions["AuditOrder"];
        assert_eq!(audit.source, StreamSource::DynamoDb("Audit".into()));
        assert_eq!(
            (
                audit.maximum_retry_attempts,
                audit.bisect_on_function_error,
                audit.reports_batch_item_failures
            ),
            (None, false, false),
            "-1 retries for as long as the stream keeps the record"
        );
        assert_eq!(audit.on_failure_queue, None);
        // Another stack's stream cannot run here: not read, and no error.
        assert!(!spec.stream_functions.contains_key("Elsewhere"));
        assert!(spec.functions.is_empty(), "no SQS consumer among them");
    }

    #[test]
    fn a_stream_event_on_a_missing_resource_is_an_error_and_on_one_not_created_locally_is_left_out()
    {
        let missing = STREAMS.replace("!GetAtt Orders.Arn", "!GetAtt Order.Arn");
        let said = TemplateSpec::parse(&missing)
            .expect_err("missing")
            .to_string();
        assert!(
            said.contains("ShipOrder: its Kinesis event's stream Order is not in the template"),
            "{said}"
        );
        // One the local stack does not create (an enhanced fan-out consumer, an application elsewhere): not read.
        let fan_out = STREAMS.replace("!GetAtt Orders.Arn", "!GetAtt Reader.ConsumerARN")
            + "  Reader:\n    Type: AWS::Kinesis::StreamConsumer\n    Properties: { ConsumerName: r, StreamARN: !GetAtt Orders.Arn }\n";
        let spec = TemplateSpec::parse(&fan_out).expect("not an error");
        assert!(!spec.stream_functions.contains_key("ShipOrder"));
        let no_binary =
            STREAMS.replace("Metadata: { BuildProperties: { Binary: ship-order } }", "");
        let said = TemplateSpec::parse(&no_binary)
            .expect_err("no binary")
            .to_string();
        assert!(
            said.contains("ShipOrder: no Metadata.BuildProperties.Binary"),
            "{said}"
        );
    }

    /// The repository's outbox relay: a DynamoDB stream consumer of the outbox table, retried as long as the stream
    /// keeps its records.
    #[test]
    fn the_repositorys_outbox_relay_is_read_as_a_stream_function() {
        let spec = TemplateSpec::read(&super::super::template_path()).expect("template.yaml");
        let relay = spec
            .stream_functions
            .values()
            .find(|f| f.binary == "outbox-relay")
            .expect("outbox-relay");
        assert_eq!(relay.source, StreamSource::DynamoDb("OutboxTable".into()));
        assert_eq!(relay.starting_position, "TRIM_HORIZON");
        assert_eq!(relay.maximum_retry_attempts, None);
        assert!(relay.bisect_on_function_error && relay.reports_batch_item_failures);
        assert_eq!(
            relay.on_failure_queue.as_deref(),
            Some("OutboxRelayFailureQueue")
        );
        assert!(spec.tables["OutboxTable"].stream_view_type.is_some());
        let EnvSource::Join { separator, parts } = &relay.env["OUTBOX_DESTINATIONS"] else {
            panic!("a !Join: {:?}", relay.env["OUTBOX_DESTINATIONS"]);
        };
        assert_eq!(separator, ",");
        assert_eq!(
            parts,
            &vec![
                EnvSource::Ref("ChargePaymentQueue".into()),
                EnvSource::Ref("ApplyLedgerQueue".into()),
            ],
            "the nested applications' outputs, read as their queues"
        );
    }
}

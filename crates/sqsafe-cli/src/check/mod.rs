//! `sqsafe check`: the deployment rules a SAM template of sqsafe consumers must keep.
//!
//! Nothing is hard-coded per function: every `AWS::Serverless::Function`, every queue, table and alarm found in the
//! template is checked, so a consumer added later is held to the same rules. Values that are parameters are checked
//! at their bounds, because a deployer may pass any allowed value: a timeout or batching window at its MaxValue, the
//! idempotency window at its MinValue, MAX_ATTEMPTS at its MaxValue. A parameter without the bound a rule needs is
//! itself a violation.
//!
//! This is the one implementation of the rules: `tests/template/test_rules.py` and `test_nested.py` break the
//! repository's template one way at a time and hold this checker to the rule each break names, on its resource.

mod alarms;
mod api;
mod dashboards;
mod functions;
mod iam;
mod nested;
mod policy;
mod queues;
mod rules;
mod run;
mod tables;
mod template;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use serde_norway::Value;

pub use nested::flatten;
pub use rules::RULES;
pub use run::{CheckArgs, run_check};
pub use template::{TemplateError, parse};

use template::{Template, get, refs, stream_refs};

/// One broken rule: which, on which resource (a logical id, `Function.Events.Name`, or a crate folder), and what
/// to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule's name (one of [`RULES`]).
    pub rule: &'static str,
    /// The resource that breaks it.
    pub resource: String,
    /// What is wrong, and what to change.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}: {}", self.rule, self.resource, self.message)
    }
}

/// Every violation of [`RULES`] in the parsed template `doc` (see [`parse`]). `crate_binaries` maps each binary of
/// the crates under the workspace's `functions/` to its crate folder ([`function_crate_binaries`]).
pub fn check(doc: &Value, crate_binaries: &BTreeMap<String, String>) -> Vec<Violation> {
    let t = Template::new(doc);
    let mut c = Checker {
        queues: t.of_type("AWS::SQS::Queue"),
        tables: t.of_type("AWS::DynamoDB::Table"),
        alarms: t.of_type("AWS::CloudWatch::Alarm"),
        t,
        out: Vec::new(),
    };
    c.run(crate_binaries);
    c.out
}

/// Binary name → crate folder (relative to `root`, e.g. `functions/charge-payment`), for every crate under
/// `root/functions/`: its `[[bin]]` names, else its package name.
///
/// # Errors
/// A `functions/*/Cargo.toml` that cannot be read or parsed.
pub fn function_crate_binaries(root: &Path) -> Result<BTreeMap<String, String>, TemplateError> {
    let mut binaries = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(root.join("functions")) else {
        return Ok(binaries);
    };
    let mut manifests: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path().join("Cargo.toml"))
        .filter(|p| p.is_file())
        .collect();
    manifests.sort();
    for manifest in manifests {
        let fail = |e: String| TemplateError(format!("{}: {e}", manifest.display()));
        let text = std::fs::read_to_string(&manifest).map_err(|e| fail(e.to_string()))?;
        let cargo: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| fail(e.to_string()))?;
        let mut bins: Vec<String> = cargo
            .get("bin")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|b| b.get("name")?.as_str().map(str::to_owned))
            .collect();
        if bins.is_empty() {
            let name = cargo
                .get("package")
                .and_then(|p| p.get("name"))
                .and_then(toml::Value::as_str)
                .ok_or_else(|| fail("no [package] name and no [[bin]]".into()))?;
            bins.push(name.to_owned());
        }
        let folder = manifest.parent().unwrap_or(root);
        let folder = folder.strip_prefix(root).unwrap_or(folder);
        let folder = folder.to_string_lossy().replace('\\', "/");
        for name in bins {
            binaries.insert(name, folder.clone());
        }
    }
    Ok(binaries)
}

/// The template and what the rules found so far.
pub(crate) struct Checker<'a> {
    t: Template<'a>,
    queues: Vec<String>,
    tables: Vec<String>,
    alarms: Vec<String>,
    out: Vec<Violation>,
}

/// A function and what it is wired to, as found in the template.
#[derive(Debug, Clone, Default)]
pub(crate) struct Consumer {
    function: String,
    /// Its properties, Globals.Function underneath.
    props: Value,
    event_name: Option<String>,
    /// The SQS or DynamoDB event's Properties (or a raw mapping's).
    event: Value,
    /// The consumed queue.
    queue: Option<String>,
    /// That queue's dead-letter queue.
    dlq: Option<String>,
    /// Its AWS::IAM::Role, if the template has it.
    role: Option<String>,
    /// A stream function: the table whose stream it reads.
    stream_table: Option<String>,
    /// A Kinesis consumer: the stream it reads (an AWS::Kinesis::Stream of the template, or a String parameter
    /// naming another stack's).
    kinesis_stream: Option<String>,
    /// A stream consumer (`App::handle_kinesis`, `handle_dynamodb`: a Kinesis event, or a DynamoDB event without
    /// OUTBOX_TABLE), held to the stream-consumer rule; a DynamoDB function with OUTBOX_TABLE is the outbox relay,
    /// held to stream-mapping.
    stream_consumer: bool,
    /// A scheduled function (the outbox sweeper): its schedule event's Properties.
    schedule: Option<Value>,
    /// A stream function: its mapping's on-failure queue.
    on_failure: Option<String>,
    /// An HTTP API function: its HttpApi event's Properties.
    api: Option<Value>,
}

impl Consumer {
    /// A function that reads a stream (DynamoDB or Kinesis), a consumer or the relay.
    fn reads_stream(&self) -> bool {
        self.stream_table.is_some() || self.kinesis_stream.is_some()
    }

    /// Its environment variables.
    fn env(&self) -> Option<&Value> {
        get(get(Some(&self.props), "Environment"), "Variables")
    }

    fn var(&self, name: &str) -> Option<&Value> {
        get(self.env(), name)
    }

    /// What a message calls it: the function's logical id.
    fn name(&self) -> &str {
        &self.function
    }
}

impl<'a> Checker<'a> {
    fn fail(
        &mut self,
        rule: &'static str,
        resource: impl Into<String>,
        message: impl Into<String>,
    ) {
        debug_assert!(RULES.iter().any(|(name, _)| *name == rule), "{rule}");
        self.out.push(Violation {
            rule,
            resource: resource.into(),
            message: message.into(),
        });
    }

    fn is_queue(&self, id: &str) -> bool {
        self.queues.iter().any(|q| q == id)
    }

    fn is_table(&self, id: &str) -> bool {
        self.tables.iter().any(|q| q == id)
    }

    fn run(&mut self, crate_binaries: &BTreeMap<String, String>) {
        let functions = self.t.of_type("AWS::Serverless::Function");

        // Queue → its DLQ, from RedrivePolicy.
        let mut dlq_of: BTreeMap<String, String> = BTreeMap::new();
        for q in &self.queues {
            let target: Vec<String> =
                refs(get(self.t.prop(q, "RedrivePolicy"), "deadLetterTargetArn"))
                    .into_iter()
                    .filter(|x| self.is_queue(x))
                    .collect();
            if let [dlq] = target.as_slice() {
                dlq_of.insert(q.clone(), dlq.clone());
            }
        }
        let dlqs: BTreeSet<String> = dlq_of.values().cloned().collect();

        let consumers: Vec<Consumer> = functions
            .iter()
            .map(|f| self.consumer(f, &dlq_of))
            .collect();
        let mut consumed: BTreeSet<String> =
            consumers.iter().filter_map(|c| c.queue.clone()).collect();
        let mut on_failure: BTreeSet<String> = consumers
            .iter()
            .filter_map(|c| c.on_failure.clone())
            .collect();
        // A stream consumer's failure queue (DLQ_URL: the records it gives up on, with their content) is no source
        // queue's DLQ: it is held as an on-failure queue is (retention, no redrive into it, an alarm).
        on_failure.extend(
            consumers
                .iter()
                .filter(|c| c.stream_consumer)
                .flat_map(|c| refs(c.var("DLQ_URL")))
                .filter(|x| self.is_queue(x)),
        );
        // Raw event source mappings (outside SAM functions) count as consumers of their queue too.
        let raw_mappings = self.t.of_type("AWS::Lambda::EventSourceMapping");
        for m in &raw_mappings {
            let props = self.t.props(m);
            consumed.extend(
                refs(get(props, "EventSourceArn"))
                    .into_iter()
                    .filter(|x| self.is_queue(x)),
            );
            on_failure.extend(self.on_failure_queue(props));
        }

        self.check_crates(&functions, crate_binaries);
        for c in &consumers {
            self.check_function(c);
            let at = format!(
                "{}.Events.{}",
                c.function,
                c.event_name.as_deref().unwrap_or_default()
            );
            if c.queue.is_some() {
                self.check_mapping(c, &c.event, &at);
                self.check_wiring(c);
                self.check_window(c);
            }
            if c.stream_consumer {
                self.check_stream_consumer_mapping(&c.event, &at, c.on_failure.as_deref());
                self.check_stream_consumer(c);
            } else if c.stream_table.is_some() {
                self.check_stream_mapping(c, &c.event, &at);
            }
            if c.api.is_some() {
                self.check_api(c);
            }
            self.check_privileges(c);
        }
        for m in &raw_mappings {
            let props = self.t.props(m).cloned().unwrap_or_default();
            let source = get(Some(&props), "EventSourceArn");
            let stream = stream_refs(source).into_iter().find(|x| self.is_table(x));
            if refs(source)
                .iter()
                .any(|x| self.t.is_type(x, "AWS::Kinesis::Stream"))
            {
                // A Kinesis mapping outside a SAM function: its own settings (the function's are its own).
                let on_failure = self.on_failure_queue(Some(&props));
                self.check_stream_consumer_mapping(&props, m, on_failure.as_deref());
                continue;
            }
            let mapping = if let Some(table) = stream {
                Consumer {
                    function: m.clone(),
                    stream_table: Some(table),
                    on_failure: self.on_failure_queue(Some(&props)),
                    ..Consumer::default()
                }
            } else {
                Consumer {
                    function: m.clone(),
                    queue: refs(source).into_iter().find(|x| self.is_queue(x)),
                    ..Consumer::default()
                }
            };
            if mapping.stream_table.is_some() {
                self.check_stream_mapping(&mapping, &props, m);
            } else {
                self.check_mapping(&mapping, &props, m);
            }
        }

        self.check_queues(&consumed, &dlq_of, &dlqs, &on_failure);
        self.check_tables(&consumers);
        let watched: BTreeSet<String> = dlqs.union(&on_failure).cloned().collect();
        self.check_queue_alarms(&consumed, &watched);
        for c in &consumers {
            self.check_function_alarms(c);
        }
        let dashboards = self.dashboards();
        for c in consumers.iter().filter(|c| c.queue.is_some()) {
            self.check_dashboard(c, &dashboards);
        }
        self.check_outbox_sweepers(&consumers);
        self.check_metric_names(&dashboards);
        self.check_policy_documents();
        self.check_nested_applications();
    }

    /// Applications still in the template were not flattened ([`flatten`] reads local files only).
    fn check_nested_applications(&mut self) {
        let left: Vec<(String, String)> = self
            .t
            .resources()
            .filter_map(|(id, r)| {
                Some((id.to_owned(), nested::not_checked(id, nested::location(r)?)))
            })
            .collect();
        for (id, message) in left {
            self.fail("nested-application", id, message);
        }
    }

    /// What function `f` consumes, and the sqs-event rule for it.
    fn consumer(&mut self, f: &str, dlq_of: &BTreeMap<String, String>) -> Consumer {
        let props = self.t.function_props(f);
        let mut c = Consumer {
            function: f.to_owned(),
            ..Consumer::default()
        };
        let events: Vec<(String, &Value)> = get(Some(&props), "Events")
            .and_then(Value::as_mapping)
            .into_iter()
            .flatten()
            .map(|(k, v)| (template::text(Some(k)), v))
            .collect();
        let of_type = |kinds: &[&str]| -> Vec<(String, Value)> {
            events
                .iter()
                .filter(|(_, ev)| {
                    ev.is_mapping()
                        && kinds
                            .iter()
                            .any(|k| template::is_str(get(Some(ev), "Type"), k))
                })
                .map(|(name, ev)| {
                    (
                        name.clone(),
                        get(Some(ev), "Properties").cloned().unwrap_or_default(),
                    )
                })
                .collect()
        };
        let sqs = of_type(&["SQS"]);
        let streams = of_type(&["DynamoDB"]);
        let kinesis = of_type(&["Kinesis"]);
        let schedules = of_type(&["Schedule", "ScheduleV2"]);
        let apis = of_type(&["HttpApi"]);
        let no_stream = streams.is_empty() && kinesis.is_empty();
        if sqs.is_empty() && no_stream && !apis.is_empty() {
            // An HTTP API function (sqsafe new api): the api-function rule holds it to one event.
            let (name, ev) = apis[0].clone();
            if apis.len() != 1 || events.len() != 1 {
                self.fail(
                    "api-function",
                    f,
                    format!(
                        "has {} events, {} of them HttpApi; an API function has its one HttpApi event",
                        events.len(),
                        apis.len()
                    ),
                );
            }
            c.event_name = Some(name);
            c.api = Some(ev);
        } else if sqs.is_empty() && no_stream && schedules.len() == 1 && events.len() == 1 {
            // A scheduled function (the outbox sweeper): its one event is a schedule.
            let (name, ev) = schedules[0].clone();
            c.event_name = Some(name);
            c.schedule = Some(ev);
        } else if sqs.is_empty() && streams.len() + kinesis.len() == 1 {
            // A stream function, its one event a stream: a Kinesis consumer, or on a DynamoDB stream the outbox
            // relay (OUTBOX_TABLE) or a consumer.
            let reads_kinesis = streams.is_empty();
            let (name, ev) = if reads_kinesis {
                &kinesis[0]
            } else {
                &streams[0]
            }
            .clone();
            let stream = get(Some(&ev), "Stream");
            let (targets, wanted): (Vec<String>, _) = if reads_kinesis {
                let targets = refs(stream).into_iter().filter(|x| {
                    self.t.is_type(x, "AWS::Kinesis::Stream") || self.t.is_string_parameter(x)
                });
                (
                    targets.collect(),
                    "one Kinesis stream (!GetAtt Stream.Arn of an AWS::Kinesis::Stream of this template, or a \
                     String parameter)",
                )
            } else {
                let targets = stream_refs(stream)
                    .into_iter()
                    .filter(|x| self.t.is_type(x, "AWS::DynamoDB::Table"));
                (
                    targets.collect(),
                    "the stream of a table of this template (!GetAtt Table.StreamArn)",
                )
            };
            match (targets.as_slice(), reads_kinesis) {
                ([one], true) => c.kinesis_stream = Some(one.clone()),
                ([one], false) => c.stream_table = Some(one.clone()),
                _ => self.fail(
                    "sqs-event",
                    f,
                    format!(
                        "event {name} does not name {wanted}: {}",
                        template::show(stream)
                    ),
                ),
            }
            c.on_failure = self.on_failure_queue(Some(&ev));
            c.stream_consumer = reads_kinesis
                || !template::has(
                    get(get(Some(&props), "Environment"), "Variables"),
                    "OUTBOX_TABLE",
                );
            c.event_name = Some(name);
            c.event = ev;
        } else if sqs.len() != 1 || !no_stream {
            self.fail(
                "sqs-event",
                f,
                format!(
                    "has {} SQS, {} DynamoDB, {} Kinesis and {} schedule events; an sqsafe function has exactly one \
                     event source",
                    sqs.len(),
                    streams.len(),
                    kinesis.len(),
                    schedules.len()
                ),
            );
        }
        if let Some((name, ev)) = sqs.first().cloned() {
            let queue = get(Some(&ev), "Queue");
            let targets: Vec<String> = refs(queue)
                .into_iter()
                .filter(|x| self.is_queue(x))
                .collect();
            if let [q] = targets.as_slice() {
                c.queue = Some(q.clone());
                c.dlq = dlq_of.get(q).cloned();
            } else {
                self.fail(
                    "sqs-event",
                    f,
                    format!(
                        "event {name} does not name a queue of this template: {}",
                        template::show(queue)
                    ),
                );
            }
            c.event_name = Some(name);
            c.event = ev;
        }
        if let Some(role) = get(Some(&props), "Role") {
            let roles: Vec<String> = refs(Some(role))
                .into_iter()
                .filter(|x| self.t.is_type(x, "AWS::IAM::Role"))
                .collect();
            if let [r] = roles.as_slice() {
                c.role = Some(r.clone());
            }
        }
        c.props = props;
        c
    }

    /// The queue of the template a stream mapping's DestinationConfig.OnFailure.Destination names, if any.
    fn on_failure_queue(&self, mapping: Option<&Value>) -> Option<String> {
        let destination = get(
            get(get(mapping, "DestinationConfig"), "OnFailure"),
            "Destination",
        );
        refs(destination).into_iter().find(|x| self.is_queue(x))
    }
}

#[cfg(test)]
mod tests;

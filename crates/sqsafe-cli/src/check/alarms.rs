//! Alarms: alarm-dlq, alarm-queue-age, alarm-dead-letters, alarm-function-errors, alarm-stream-age, and the outbox
//! sweeper (outbox-sweeper), whose alarm is what makes it safe.

use std::collections::BTreeSet;

use serde_norway::Value;

use super::template::{as_list, get, get_or, is_only, is_str, refs, show, to_int};
use super::{Checker, Consumer};

/// The outbox sweeper: the index it reads by default, how often it must run at least.
const PENDING_INDEX_DEFAULT: &str = "PendingByAge";
const MAX_SWEEP_INTERVAL_SECONDS: i64 = 300;

/// The value of dimension `name` in a list of `{Name, Value}` (the last one, if named twice).
pub(super) fn dimension<'v>(dimensions: Option<&'v Value>, name: &str) -> Option<&'v Value> {
    let mut found = None;
    for d in as_list(dimensions).into_iter().filter(|d| d.is_mapping()) {
        if is_str(get(Some(d), "Name"), name) {
            found = Some(d.get("Value").unwrap_or(&Value::Null));
        }
    }
    found.filter(|v| !v.is_null())
}

/// Whether dimension value `v` is the string `binary` (both missing counts as equal).
fn is_binary(v: Option<&Value>, binary: Option<&str>) -> bool {
    match (v, binary) {
        (None, None) => true,
        (Some(v), Some(b)) => v.as_str() == Some(b),
        _ => false,
    }
}

/// Seconds between runs of a `rate(N unit)` schedule; None for anything else (cron, an intrinsic).
fn schedule_seconds(expression: Option<&Value>) -> Option<i64> {
    let text = expression?.as_str()?.trim();
    let inner = text.strip_prefix("rate(")?.strip_suffix(')')?;
    let (count, unit) = inner.split_once(' ')?;
    if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let unit = match unit {
        "minute" | "minutes" => 60,
        "hour" | "hours" => 3600,
        "day" | "days" => 86_400,
        _ => return None,
    };
    count.parse::<i64>().ok()?.checked_mul(unit)
}

impl Checker<'_> {
    /// Whether an alarm's AlarmActions notify an SNS topic of the template.
    pub(super) fn notifies(&self, alarm: &str) -> bool {
        as_list(self.t.prop(alarm, "AlarmActions"))
            .into_iter()
            .flat_map(|a| refs(Some(a)))
            .any(|x: String| self.t.is_type(&x, "AWS::SNS::Topic"))
    }

    /// `rule` fails on `alarm` unless its AlarmActions notify an SNS topic of this template.
    pub(super) fn require_notifies(&mut self, rule: &'static str, alarm: &str) {
        if !self.notifies(alarm) {
            self.fail(
                rule,
                alarm,
                "AlarmActions do not notify an SNS topic of this template",
            );
        }
    }

    /// Whether a FunctionName dimension's value names function `f`: `!Ref f`, or the function's own FunctionName
    /// (how a nested application's alarms name the parent's function, which they cannot `!Ref`).
    pub(super) fn names_function(&self, value: Option<&Value>, f: &str) -> bool {
        let own = self.t.prop(f, "FunctionName").filter(|v| !v.is_null());
        is_only(&refs(value), f) || (value.is_some() && value == own)
    }

    /// The alarms on AWS/SQS `metric` of `queue`.
    fn alarms_on(&self, queue: &str, metric: &str) -> Vec<String> {
        self.alarms
            .iter()
            .filter(|a| {
                let ap = self.t.props(a);
                is_str(get(ap, "Namespace"), "AWS/SQS")
                    && is_str(get(ap, "MetricName"), metric)
                    && is_only(&refs(dimension(get(ap, "Dimensions"), "QueueName")), queue)
            })
            .cloned()
            .collect()
    }

    /// alarm-dlq (each DLQ and on-failure queue) and alarm-queue-age (each consumed queue).
    pub(super) fn check_queue_alarms(
        &mut self,
        consumed: &BTreeSet<String>,
        dlqs: &BTreeSet<String>,
    ) {
        for d in dlqs {
            let found = self.alarms_on(d, "ApproximateNumberOfMessagesVisible");
            if found.is_empty() {
                self.fail(
                    "alarm-dlq",
                    d,
                    "no alarm on AWS/SQS ApproximateNumberOfMessagesVisible with QueueName of this DLQ: add one \
                     (> 0, notifying an SNS topic)",
                );
            }
            for a in found {
                let ap = self.t.props(&a);
                if to_int(get(ap, "Threshold")) != Some(0)
                    || !is_str(get(ap, "ComparisonOperator"), "GreaterThanThreshold")
                {
                    self.fail(
                        "alarm-dlq",
                        &a,
                        format!(
                            "must fire on > 0: Threshold {}, ComparisonOperator {} (want 0, GreaterThanThreshold)",
                            show(get(ap, "Threshold")),
                            show(get(ap, "ComparisonOperator"))
                        ),
                    );
                }
                if !is_str(get(ap, "TreatMissingData"), "notBreaching") {
                    self.fail(
                        "alarm-dlq",
                        &a,
                        format!(
                            "TreatMissingData is {}, not notBreaching",
                            show(get(ap, "TreatMissingData"))
                        ),
                    );
                }
                self.require_notifies("alarm-dlq", &a);
            }
        }
        for q in consumed {
            let found = self.alarms_on(q, "ApproximateAgeOfOldestMessage");
            if found.is_empty() {
                self.fail(
                    "alarm-queue-age",
                    q,
                    "no alarm on AWS/SQS ApproximateAgeOfOldestMessage with QueueName of this queue: add one",
                );
            }
            for a in found {
                self.require_notifies("alarm-queue-age", &a);
            }
        }
    }

    /// alarm-dead-letters (SQS consumers), alarm-function-errors, and alarm-stream-age (stream functions) for one
    /// function.
    pub(super) fn check_function_alarms(&mut self, c: &Consumer) {
        let f = c.name();
        let binary = self.t.binary(f);
        let mut dead_letters = Vec::new();
        let mut failures = Vec::new();
        let mut iterator_age = Vec::new();
        for a in &self.alarms {
            let ap = self.t.props(a);
            let dims = get(ap, "Dimensions");
            if is_str(get(ap, "Namespace"), "sqsafe")
                && is_str(get(ap, "MetricName"), "RecordsSentToDlq")
                && is_binary(dimension(dims, "consumer"), binary.as_deref())
            {
                dead_letters.push(a.clone());
            }
            if is_str(get(ap, "Namespace"), "AWS/Lambda")
                && is_str(get(ap, "MetricName"), "IteratorAge")
                && self.names_function(dimension(dims, "FunctionName"), f)
            {
                iterator_age.push(a.clone());
            }
            let watched: BTreeSet<&str> = as_list(get(ap, "Metrics"))
                .into_iter()
                .filter_map(|m| {
                    let metric = get(get(Some(m), "MetricStat"), "Metric");
                    let ours = is_str(get(metric, "Namespace"), "AWS/Lambda")
                        && self.names_function(
                            dimension(get(metric, "Dimensions"), "FunctionName"),
                            f,
                        );
                    ours.then(|| get(metric, "MetricName").and_then(Value::as_str))
                        .flatten()
                })
                .collect();
            if watched.contains("Errors") && watched.contains("Throttles") {
                failures.push(a.clone());
            }
        }
        if c.reads_stream() {
            if iterator_age.is_empty() {
                self.fail(
                    "alarm-stream-age",
                    f,
                    "no alarm on its AWS/Lambda IteratorAge (FunctionName dimension): add one",
                );
            }
            for a in iterator_age {
                self.require_notifies("alarm-stream-age", &a);
            }
        }
        let sends_dead_letters = if c.reads_stream() {
            c.stream_consumer
        } else {
            c.schedule.is_none() && c.api.is_none()
        };
        if sends_dead_letters && dead_letters.is_empty() {
            self.fail(
                "alarm-dead-letters",
                f,
                format!(
                    "no alarm on namespace sqsafe RecordsSentToDlq with consumer = {}: add one (Sum > 0)",
                    binary.as_deref().map_or_else(|| "unset".to_owned(), |b| format!("{b:?}"))
                ),
            );
        }
        for a in dead_letters {
            let ap = self.t.props(&a);
            let sum_over_zero = is_str(get(ap, "Statistic"), "Sum")
                && to_int(get(ap, "Threshold")) == Some(0)
                && is_str(get(ap, "ComparisonOperator"), "GreaterThanThreshold");
            if !sum_over_zero {
                self.fail(
                    "alarm-dead-letters",
                    &a,
                    "must fire on Sum > 0 (Statistic Sum, Threshold 0, GreaterThanThreshold)",
                );
            }
            self.require_notifies("alarm-dead-letters", &a);
        }
        if failures.is_empty() {
            self.fail(
                "alarm-function-errors",
                f,
                "no alarm on its AWS/Lambda Errors and Throttles (metric math over both, FunctionName dimension): add one",
            );
        }
        for a in failures {
            self.require_notifies("alarm-function-errors", &a);
        }
    }

    /// outbox-sweeper: no outbox event may stay PENDING unseen (a stream record the relay gave up on, or lost).
    pub(super) fn check_outbox_sweepers(&mut self, consumers: &[Consumer]) {
        let outbox = |c: &Consumer| refs(c.var("OUTBOX_TABLE"));
        let sweepers: Vec<&Consumer> = consumers
            .iter()
            .filter(|c| c.schedule.is_some() && !outbox(c).is_empty())
            .collect();
        for relay in consumers
            .iter()
            .filter(|c| c.stream_table.is_some() && !outbox(c).is_empty())
        {
            let table = relay.stream_table.clone().unwrap_or_default();
            let mine: Vec<&&Consumer> = sweepers
                .iter()
                .filter(|c| outbox(c).contains(&table))
                .collect();
            if mine.is_empty() {
                self.fail(
                    "outbox-sweeper",
                    &relay.function,
                    format!(
                        "no scheduled function sweeps {table}: an event whose stream record the relay gave up on (or \
                         never received) would stay PENDING for good; add the outbox sweeper"
                    ),
                );
                continue;
            }
            for c in mine {
                let schedule = c.schedule.as_ref();
                let expression = if super::template::has(schedule, "Schedule") {
                    get(schedule, "Schedule")
                } else {
                    get(schedule, "ScheduleExpression")
                };
                let seconds = schedule_seconds(expression);
                if seconds.is_none_or(|s| s > MAX_SWEEP_INTERVAL_SECONDS) {
                    let runs = seconds.map_or_else(
                        || "on no rate(...) schedule".to_owned(),
                        |s| format!("every {s} s"),
                    );
                    self.fail(
                        "outbox-sweeper",
                        format!(
                            "{}.Events.{}",
                            c.function,
                            c.event_name.as_deref().unwrap_or_default()
                        ),
                        format!("runs {runs}: at most every {MAX_SWEEP_INTERVAL_SECONDS} s"),
                    );
                }
                if refs(c.var("OUTBOX_DESTINATIONS")) != refs(relay.var("OUTBOX_DESTINATIONS")) {
                    self.fail(
                        "outbox-sweeper",
                        &c.function,
                        format!(
                            "OUTBOX_DESTINATIONS differ from {}'s: the sweeper would refuse (or be allowed) other \
                             queues than the relay",
                            relay.function
                        ),
                    );
                }
                let index_value = get_or(
                    c.env(),
                    "OUTBOX_PENDING_INDEX",
                    Value::from(PENDING_INDEX_DEFAULT),
                );
                let index_name = self.t.default_of(Some(&index_value)).cloned();
                let tp = self.t.props(&table);
                let index = as_list(get(tp, "GlobalSecondaryIndexes"))
                    .into_iter()
                    .find(|i| {
                        i.is_mapping()
                            && super::template::same(get(Some(i), "IndexName"), index_name.as_ref())
                    });
                let attribute_type = |name: &str| {
                    as_list(get(tp, "AttributeDefinitions"))
                        .into_iter()
                        .rfind(|a| a.is_mapping() && is_str(get(Some(a), "AttributeName"), name))
                        .and_then(|a| get(Some(a), "AttributeType"))
                };
                let shown_name = show(index_name.as_ref());
                match index {
                    None => self.fail(
                        "outbox-sweeper",
                        &table,
                        format!(
                            "no global secondary index {shown_name} (OUTBOX_PENDING_INDEX of {}): add it, keyed by \
                             pending (S, HASH) and created_at (N, RANGE), projecting ALL",
                            c.function
                        ),
                    ),
                    Some(index) => {
                        let keys: Vec<&Value> = as_list(get(Some(index), "KeySchema"))
                            .into_iter()
                            .filter(|k| k.is_mapping())
                            .collect();
                        let key = |k: &Value, name: &str, kind: &str| {
                            is_str(get(Some(k), "AttributeName"), name) && is_str(get(Some(k), "KeyType"), kind)
                        };
                        let keyed = matches!(keys.as_slice(), [hash, range]
                            if key(hash, "pending", "HASH") && key(range, "created_at", "RANGE"));
                        let projection = get(Some(index), "Projection");
                        let right = keyed
                            && is_str(attribute_type("pending"), "S")
                            && is_str(attribute_type("created_at"), "N")
                            && is_str(get(projection, "ProjectionType"), "ALL");
                        if !right {
                            self.fail(
                                "outbox-sweeper",
                                &table,
                                format!(
                                    "index {shown_name} must be pending (S, HASH) + created_at (N, RANGE) projecting \
                                     ALL, not KeySchema {} Projection {}",
                                    show(get(Some(index), "KeySchema")),
                                    show(projection)
                                ),
                            );
                        }
                    }
                }
                let binary = self.t.binary(&c.function);
                let watching: Vec<String> = self
                    .alarms
                    .iter()
                    .filter(|a| {
                        let ap = self.t.props(a);
                        is_str(get(ap, "Namespace"), "sqsafe")
                            && is_str(
                                get(ap, "MetricName"),
                                sqsafe_telemetry::metrics::OUTBOX_OLDEST_PENDING_AGE,
                            )
                            && as_list(get(ap, "Dimensions")).into_iter().any(|d| {
                                d.is_mapping()
                                    && is_str(get(Some(d), "Name"), "consumer")
                                    && is_binary(get(Some(d), "Value"), binary.as_deref())
                            })
                    })
                    .cloned()
                    .collect();
                if watching.is_empty() {
                    self.fail(
                        "outbox-sweeper",
                        &c.function,
                        format!(
                            "no alarm on sqsafe {} (consumer = {}): an event neither the relay nor the sweeper can \
                             publish would wait unseen; add one (TreatMissingData breaching)",
                            sqsafe_telemetry::metrics::OUTBOX_OLDEST_PENDING_AGE,
                            binary.as_deref().unwrap_or("unset")
                        ),
                    );
                }
                for a in watching {
                    self.require_notifies("outbox-sweeper", &a);
                    let missing = self.t.prop(&a, "TreatMissingData");
                    if !is_str(missing, "breaching") {
                        self.fail(
                            "outbox-sweeper",
                            &a,
                            format!(
                                "TreatMissingData is {}: a sweeper that stopped running reports nothing, which must \
                                 alarm (breaching)",
                                show(missing)
                            ),
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_schedules_are_read_in_seconds() {
        let s = |text: &str| schedule_seconds(Some(&Value::from(text)));
        assert_eq!(s("rate(5 minutes)"), Some(300));
        assert_eq!(s(" rate(1 hour) "), Some(3600));
        assert_eq!(s("rate(2 days)"), Some(172_800));
        assert_eq!(s("cron(0/5 * * * ? *)"), None);
        assert_eq!(s("rate(five minutes)"), None);
        assert_eq!(s("rate(5 weeks)"), None);
    }
}

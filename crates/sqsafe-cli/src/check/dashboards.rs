//! Dashboards and metric names: dashboard, dashboard-metrics.

use std::collections::BTreeMap;

use serde_norway::{Mapping, Value};
use sqsafe_telemetry::metrics::METRIC_NAMES;

use super::template::{get, is_str, refs, text};
use super::{Checker, Consumer};

/// A metric (or a metric-math expression) that a dashboard widget shows.
#[derive(Debug, Clone, Default)]
pub(super) struct DashboardMetric {
    namespace: Value,
    name: Value,
    /// Dimension name → its value: a literal, or the intrinsic a `${Var}` of the body's Fn::Sub stands for.
    dimensions: Vec<(String, Value)>,
    /// A metric-math expression, its `${Var}`s resolved.
    expression: Option<String>,
}

impl DashboardMetric {
    fn dimension(&self, name: &str) -> Option<&Value> {
        self.dimensions
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }
}

/// `${X}` → `@@X@@`: placeholders that stay valid inside JSON strings.
fn mark(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) if end > 0 => {
                out.push_str(&rest[..start]);
                out.push_str("@@");
                out.push_str(&after[..end]);
                out.push_str("@@");
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str(&rest[..start + 2]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Each `@@X@@` of `s` replaced by `with(X)`.
fn unmark(s: &str, with: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("@@") {
        let after = &rest[start + 2..];
        let inner_len = after.find('@').unwrap_or(after.len());
        if inner_len > 0 && after[inner_len..].starts_with("@@") {
            out.push_str(&rest[..start]);
            out.push_str(&with(&after[..inner_len]));
            rest = &after[inner_len + 2..];
        } else {
            out.push_str(&rest[..start + 1]);
            rest = &rest[start + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// `MetricName="X"` names in a SEARCH expression.
fn expression_metric_names(expression: &str) -> Vec<&str> {
    const KEY: &str = "MetricName=\"";
    let mut found = Vec::new();
    let mut rest = expression;
    while let Some(start) = rest.find(KEY) {
        let after = &rest[start + KEY.len()..];
        let len = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if len > 0 && after[len..].starts_with('"') {
            found.push(&after[..len]);
        }
        rest = after;
    }
    found
}

impl Checker<'_> {
    /// Every dashboard's metrics (dashboard: a body that cannot be read is a violation).
    pub(super) fn dashboards(&mut self) -> BTreeMap<String, Vec<DashboardMetric>> {
        self.t
            .of_type("AWS::CloudWatch::Dashboard")
            .into_iter()
            .map(|d| {
                let metrics = self.dashboard_metrics(&d);
                (d, metrics)
            })
            .collect()
    }

    /// The metrics (and expressions) of dashboard `d`'s widgets, with `${Var}` of its Fn::Sub resolved to what Var
    /// names.
    fn dashboard_metrics(&mut self, d: &str) -> Vec<DashboardMetric> {
        let body = self.t.prop(d, "DashboardBody");
        let empty = Mapping::new();
        let (text_value, variables) = match get(body, "Fn::Sub") {
            Some(Value::Sequence(parts)) => (
                parts.first(),
                parts.get(1).and_then(Value::as_mapping).unwrap_or(&empty),
            ),
            Some(sub) => (Some(sub), &empty),
            None => (body, &empty),
        };
        let Some(body_text) = text_value.and_then(Value::as_str) else {
            self.fail(
                "dashboard",
                d,
                "DashboardBody is not a string (or a Fn::Sub of one): write the body as JSON text",
            );
            return Vec::new();
        };
        let doc: serde_json::Value = match serde_json::from_str(&mark(body_text)) {
            Ok(doc) => doc,
            Err(e) => {
                self.fail(
                    "dashboard",
                    d,
                    format!("DashboardBody is not valid JSON: {e}"),
                );
                return Vec::new();
            }
        };
        let doc: Value = serde_norway::to_value(&doc).unwrap_or_default();
        let resolve = |value: &Value| -> Value {
            if let Some(s) = value.as_str() {
                let inner = s.strip_prefix("@@").and_then(|x| x.strip_suffix("@@"));
                if let Some(name) = inner.filter(|n| !n.is_empty() && !n.contains('@')) {
                    return variables.get(name).cloned().unwrap_or_else(|| {
                        let mut m = Mapping::new();
                        m.insert(Value::from("Ref"), Value::from(name));
                        Value::Mapping(m)
                    });
                }
            }
            value.clone()
        };

        let mut found = Vec::new();
        let widgets = get(Some(&doc), "widgets").and_then(Value::as_sequence);
        for widget in widgets.into_iter().flatten() {
            let rows = get(get(Some(widget), "properties"), "metrics").and_then(Value::as_sequence);
            for row in rows.into_iter().flatten() {
                let Some(row) = row.as_sequence() else {
                    continue;
                };
                let items: Vec<&Value> = row.iter().filter(|x| !x.is_mapping()).collect();
                let expression = row
                    .iter()
                    .filter(|x| x.is_mapping())
                    .find_map(|o| o.as_mapping()?.get("expression"));
                if let Some(expression) = expression {
                    let resolved = unmark(&text(Some(expression)), |name| {
                        text(Some(&resolve(&Value::from(format!("@@{name}@@")))))
                    });
                    found.push(DashboardMetric {
                        expression: Some(resolved),
                        ..DashboardMetric::default()
                    });
                    continue;
                }
                if items.len() < 2 || items[..2].iter().any(|x| is_str(Some(x), ".")) {
                    self.fail(
                        "dashboard",
                        d,
                        format!(
                            "metric row {}: write namespace and name out (no '.' shorthand)",
                            super::template::show(Some(&Value::Sequence(row.clone())))
                        ),
                    );
                    continue;
                }
                let dimensions = items[2..]
                    .chunks_exact(2)
                    .map(|pair| (text(Some(pair[0])), resolve(pair[1])))
                    .collect();
                found.push(DashboardMetric {
                    namespace: items[0].clone(),
                    name: items[1].clone(),
                    dimensions,
                    expression: None,
                });
            }
        }
        found
    }

    /// dashboard: some dashboard shows this consumer's records, dead letters (in all and by error kind), queue, DLQ
    /// and function.
    pub(super) fn check_dashboard(
        &mut self,
        c: &Consumer,
        dashboards: &BTreeMap<String, Vec<DashboardMetric>>,
    ) {
        let f = c.name();
        let binary = self.t.binary(f);
        let shows = |metrics: &[DashboardMetric],
                     namespace: &str,
                     name: &str,
                     dim: &str,
                     target: Option<&str>| {
            metrics.iter().any(|m| {
                if !is_str(Some(&m.namespace), namespace) || !is_str(Some(&m.name), name) {
                    return false;
                }
                let (Some(value), Some(target)) = (m.dimension(dim), target) else {
                    return false;
                };
                value.as_str() == Some(target)
                    || (value.is_mapping() && super::template::is_only(&refs(Some(value)), target))
                    || (namespace == "AWS/Lambda"
                        && dim == "FunctionName"
                        && self.names_function(Some(value), target))
            })
        };
        let wanted: [(&str, &str, &str, Option<&str>, &str); 7] = [
            (
                "sqsafe",
                "RecordsReceived",
                "consumer",
                binary.as_deref(),
                "records received",
            ),
            (
                "sqsafe",
                "RecordsProcessed",
                "consumer",
                binary.as_deref(),
                "records applied",
            ),
            (
                "sqsafe",
                "RecordsReplayed",
                "consumer",
                binary.as_deref(),
                "records replayed",
            ),
            (
                "sqsafe",
                "RecordsSentToDlq",
                "consumer",
                binary.as_deref(),
                "records dead-lettered",
            ),
            (
                "AWS/SQS",
                "ApproximateNumberOfMessagesVisible",
                "QueueName",
                c.dlq.as_deref(),
                "the DLQ's depth",
            ),
            (
                "AWS/SQS",
                "ApproximateAgeOfOldestMessage",
                "QueueName",
                c.queue.as_deref(),
                "the age of the oldest message",
            ),
            (
                "AWS/Lambda",
                "Duration",
                "FunctionName",
                Some(f),
                "the function's duration",
            ),
        ];
        let by_consumer = format!("consumer=\"{}\"", binary.as_deref().unwrap_or("None"));
        let mut best: Option<(&String, Vec<&str>)> = None;
        for (d, metrics) in dashboards {
            let mut missing: Vec<&str> = wanted
                .iter()
                .filter(|(ns, name, dim, target, _)| !shows(metrics, ns, name, dim, *target))
                .map(|w| w.4)
                .collect();
            let by_kind = metrics.iter().any(|m| {
                m.expression.as_deref().is_some_and(|e| {
                    e.contains("error_kind")
                        && e.contains("RecordsSentToDlq")
                        && e.contains(&by_consumer)
                })
            });
            if !by_kind {
                missing.push("dead letters by error kind (a SEARCH on {sqsafe,consumer,error_kind} RecordsSentToDlq)");
            }
            if missing.is_empty() {
                return;
            }
            if missing.len() < wanted.len()
                && best.as_ref().is_none_or(|(_, b)| missing.len() < b.len())
            {
                best = Some((d, missing));
            }
        }
        match best {
            None => self.fail(
                "dashboard",
                f,
                "no dashboard shows this consumer: add an AWS::CloudWatch::Dashboard for it",
            ),
            Some((d, missing)) => self.fail(
                "dashboard",
                f,
                format!("dashboard {d} does not show {}", missing.join(", ")),
            ),
        }
    }

    /// dashboard-metrics: every sqsafe metric an alarm or a dashboard names is one the code writes.
    pub(super) fn check_metric_names(
        &mut self,
        dashboards: &BTreeMap<String, Vec<DashboardMetric>>,
    ) {
        let known = || METRIC_NAMES.join(", ");
        for a in self.alarms.clone() {
            let ap = self.t.props(&a);
            let name = get(ap, "MetricName");
            let written = name
                .and_then(Value::as_str)
                .is_some_and(|n| METRIC_NAMES.contains(&n));
            if is_str(get(ap, "Namespace"), "sqsafe") && !written {
                self.fail(
                    "dashboard-metrics",
                    &a,
                    format!(
                        "sqsafe metric {} is not written by the code: it writes {}",
                        super::template::show(name),
                        known()
                    ),
                );
            }
        }
        for (d, metrics) in dashboards {
            for m in metrics {
                let mut named: Vec<String> = Vec::new();
                if is_str(Some(&m.namespace), "sqsafe") {
                    named.push(text(Some(&m.name)));
                }
                if let Some(e) = m.expression.as_deref().filter(|e| e.contains("sqsafe")) {
                    named.extend(expression_metric_names(e).into_iter().map(str::to_owned));
                }
                for name in named {
                    if !METRIC_NAMES.contains(&name.as_str()) {
                        self.fail(
                            "dashboard-metrics",
                            d,
                            format!(
                                "sqsafe metric {name:?} is not written by the code: it writes {}",
                                known()
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
    fn placeholders_survive_json_and_come_back() {
        let marked = mark(r#"{"a": "${Queue}", "b": "x${!Literal}y", "c": "${}"}"#);
        assert_eq!(
            marked,
            r#"{"a": "@@Queue@@", "b": "x@@!Literal@@y", "c": "${}"}"#
        );
        assert_eq!(unmark("q=@@Q@@ @@@c@@", |n| n.to_lowercase()), "q=q @c");
    }

    #[test]
    fn search_expressions_name_their_metrics() {
        let e = r#"SEARCH('{sqsafe,consumer,error_kind} MetricName="RecordsSentToDlq" consumer="x"', 'Sum', 60)"#;
        assert_eq!(expression_metric_names(e), ["RecordsSentToDlq"]);
        assert!(expression_metric_names(r#"MetricName="a-b""#).is_empty());
    }
}

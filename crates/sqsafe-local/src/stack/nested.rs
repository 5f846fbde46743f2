//! Nested applications whose template is a local file, inlined into the parent: what `sqsafe check` checks and what
//! the local stack ([`TemplateSpec::read`](super::TemplateSpec::read)) reads.
//!
//! An `AWS::Serverless::Application` (`Location`) or `AWS::CloudFormation::Stack` (`TemplateURL`) naming a file
//! (relative to the parent template's folder) is replaced by the child's resources, each under `<AppId><ChildId>`:
//! the child's `Ref`, `Fn::GetAtt` and `Fn::Sub` are renamed to match, its parameters become the values the parent
//! passes (or their defaults), and the parent's `!GetAtt App.Outputs.Name` becomes the child output's value. Readers
//! then see one template, as if the consumer's queue, DLQ and alarms were written in the parent. Children are
//! flattened the same way first, so nesting may go deeper. Any other location (S3, the Serverless Application
//! Repository) is left in place: `sqsafe check` reports it (rule `nested-application`), the local stack has none of
//! its resources.
//!
//! In a child's `Fn::Sub` text, a parameter whose value has a text of its own is written into the text: a literal
//! (`ConsumerName: send-invoice`) as itself, `!Ref X` as `${X}` (so `StackName: !Ref AWS::StackName` makes
//! `!Sub "${StackName}-${ConsumerName}"` read `!Sub "${AWS::StackName}-send-invoice"`), `!GetAtt X.A` as `${X.A}`.
//! Any other value (a `!Sub` of the parent's, say) stays a variable of the Sub: `!Sub ["${Name}", {Name: value}]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_norway::{Mapping, Value};

use super::TemplateError;
use super::cfn::{get, is_empty, parse, show, sub_names};

/// The resource types that nest a template, and the property that says where it is.
pub const NESTED: [(&str, &str); 2] = [
    ("AWS::Serverless::Application", "Location"),
    ("AWS::CloudFormation::Stack", "TemplateURL"),
];

/// Where a nested application's template is, when the resource is one (type and location value).
pub fn location(resource: &Value) -> Option<&Value> {
    let kind = get(Some(resource), "Type")?.as_str()?;
    let (_, key) = NESTED.iter().find(|(k, _)| *k == kind)?;
    get(get(Some(resource), "Properties"), key).or(Some(&Value::Null))
}

/// A location that is a file path (not a URL, not a Serverless Application Repository mapping, not an intrinsic).
fn local_path(location: &Value) -> Option<&str> {
    location.as_str().filter(|s| !s.contains("://"))
}

/// `doc` with every nested application whose template is a local file inlined (`folder`: the parent template's
/// folder, which relative locations start from).
///
/// # Errors
/// A child template that cannot be read or parsed, a parameter with no value, a child that uses what is not
/// inlined (Conditions, Mappings, Globals), a renamed id that collides, a missing output, a template that
/// nests itself.
pub fn flatten(doc: Value, folder: &Path) -> Result<Value, TemplateError> {
    flatten_in(doc, folder, &mut Vec::new())
}

fn flatten_in(
    mut doc: Value,
    folder: &Path,
    open: &mut Vec<PathBuf>,
) -> Result<Value, TemplateError> {
    let Some(resources) = doc.get("Resources").and_then(Value::as_mapping) else {
        return Ok(doc);
    };
    let taken: Vec<Value> = resources.keys().cloned().collect();
    let mut flat = Mapping::new();
    let mut outputs: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for (id, resource) in resources {
        let path = location(resource).and_then(local_path);
        let (Some(app), Some(path)) = (id.as_str(), path) else {
            flat.insert(id.clone(), resource.clone());
            continue;
        };
        let child = Child::read(app, resource, &folder.join(path), open)?;
        for (child_id, child_resource) in child.resources {
            if taken.contains(&child_id) || flat.contains_key(&child_id) {
                return Err(TemplateError(format!(
                    "nested application {app}: a resource of it becomes {}, which the template already has",
                    show(Some(&child_id))
                )));
            }
            flat.insert(child_id, child_resource);
        }
        outputs.insert(app.to_owned(), child.outputs);
    }
    if outputs.is_empty() {
        return Ok(doc);
    }
    if let Some(m) = doc.as_mapping_mut() {
        m.insert("Resources".into(), Value::Mapping(flat));
    }
    let parent = Rewrite {
        outputs,
        ..Rewrite::default()
    };
    parent.value(doc)
}

/// A child template, flattened and renamed into the parent's namespace.
struct Child {
    resources: Mapping,
    outputs: BTreeMap<String, Value>,
}

impl Child {
    fn read(
        app: &str,
        resource: &Value,
        path: &Path,
        open: &mut Vec<PathBuf>,
    ) -> Result<Self, TemplateError> {
        let shown = path.display();
        let fail = |why: String| TemplateError(format!("nested application {app}: {why}"));
        let text = std::fs::read_to_string(path)
            .map_err(|e| fail(format!("cannot read its template {shown}: {e}")))?;
        let canonical = path.canonicalize().unwrap_or_else(|_| path.to_owned());
        if open.contains(&canonical) {
            return Err(fail(format!("{shown} nests itself")));
        }
        let doc = parse(&text).map_err(|e| fail(format!("cannot parse {shown}: {e}")))?;
        for section in ["Conditions", "Mappings", "Globals"] {
            if doc.get(section).is_some_and(|s| !is_empty(Some(s))) {
                return Err(fail(format!(
                    "{section} are not supported by sqsafe check (nor by sqsafe local) in {shown}"
                )));
            }
        }
        open.push(canonical);
        let folder = path.parent().unwrap_or(Path::new("."));
        let doc = flatten_in(doc, folder, open);
        open.pop();
        let doc = doc?;

        let declared = get(Some(&doc), "Parameters").and_then(Value::as_mapping);
        let passed =
            get(get(Some(resource), "Properties"), "Parameters").and_then(Value::as_mapping);
        for name in passed.into_iter().flatten().filter_map(|(k, _)| k.as_str()) {
            if !declared.is_some_and(|d| d.contains_key(name)) {
                return Err(fail(format!(
                    "passes parameter {name}, which {shown} does not declare"
                )));
            }
        }
        let mut params = BTreeMap::new();
        for (name, declaration) in declared.into_iter().flatten() {
            let Some(name) = name.as_str() else { continue };
            let value = passed
                .and_then(|p| p.get(name))
                .filter(|v| !v.is_null())
                .or_else(|| get(Some(declaration), "Default"))
                .ok_or_else(|| {
                    fail(format!(
                        "parameter {name} of {shown} has no value (pass it in Parameters or give it a Default)"
                    ))
                })?;
            params.insert(name.to_owned(), value.clone());
        }

        let resources = get(Some(&doc), "Resources").and_then(Value::as_mapping);
        let renames: BTreeMap<String, String> = resources
            .into_iter()
            .flatten()
            .filter_map(|(id, _)| id.as_str())
            .map(|id| (id.to_owned(), format!("{app}{id}")))
            .collect();
        let rewrite = Rewrite {
            renames,
            params,
            ..Rewrite::default()
        };
        let mut renamed = Mapping::new();
        for (id, child) in resources.into_iter().flatten() {
            let Some(id) = id.as_str() else { continue };
            let mut child = rewrite.value(child.clone())?;
            if let Some(depends) = child.get_mut("DependsOn") {
                *depends = rewrite.depends_on(depends.clone());
            }
            renamed.insert(Value::String(rewrite.renames[id].clone()), child);
        }
        let mut outputs = BTreeMap::new();
        for (name, output) in get(Some(&doc), "Outputs")
            .and_then(Value::as_mapping)
            .into_iter()
            .flatten()
        {
            if let (Some(name), Some(value)) = (name.as_str(), get(Some(output), "Value")) {
                outputs.insert(name.to_owned(), rewrite.value(value.clone())?);
            }
        }
        Ok(Self {
            resources: renamed,
            outputs,
        })
    }
}

/// How one template's references change: resources renamed, parameters given their values, nested outputs
/// resolved.
#[derive(Default)]
struct Rewrite {
    renames: BTreeMap<String, String>,
    params: BTreeMap<String, Value>,
    /// Application → its outputs' values (already in the parent's names).
    outputs: BTreeMap<String, BTreeMap<String, Value>>,
}

impl Rewrite {
    fn value(&self, value: Value) -> Result<Value, TemplateError> {
        Ok(match value {
            Value::Sequence(items) => Value::Sequence(
                items
                    .into_iter()
                    .map(|x| self.value(x))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Mapping(m) if m.len() == 1 => {
                let (key, inner) = m.into_iter().next().unwrap_or_default();
                match key.as_str() {
                    Some("Ref") => self.reference(inner),
                    Some("Fn::GetAtt") => self.get_att(inner)?,
                    Some("Fn::Sub") => self.sub(inner)?,
                    _ => one(key, self.value(inner)?),
                }
            }
            Value::Mapping(m) => Value::Mapping(
                m.into_iter()
                    .map(|(k, v)| Ok((k, self.value(v)?)))
                    .collect::<Result<_, TemplateError>>()?,
            ),
            other => other,
        })
    }

    fn reference(&self, inner: Value) -> Value {
        let Some(name) = inner.as_str() else {
            return one("Ref".into(), inner);
        };
        if let Some(value) = self.params.get(name) {
            return value.clone();
        }
        match self.renames.get(name) {
            Some(id) => one("Ref".into(), Value::String(id.clone())),
            None => one("Ref".into(), inner),
        }
    }

    fn get_att(&self, inner: Value) -> Result<Value, TemplateError> {
        let (resource, attribute) = match &inner {
            Value::Sequence(p) if p.len() == 2 => (p[0].as_str(), p[1].as_str()),
            Value::String(s) => match s.split_once('.') {
                Some((r, a)) => (Some(r), Some(a)),
                None => (None, None),
            },
            _ => (None, None),
        };
        let (Some(resource), Some(attribute)) = (resource, attribute) else {
            return Ok(one("Fn::GetAtt".into(), self.value(inner)?));
        };
        if let Some(value) = self.output(resource, attribute)? {
            return Ok(value);
        }
        let resource = self.renames.get(resource).map_or(resource, String::as_str);
        Ok(one(
            "Fn::GetAtt".into(),
            Value::Sequence(vec![resource.into(), attribute.into()]),
        ))
    }

    /// The value of `App.Outputs.Name`, when `resource` is a flattened application.
    fn output(&self, resource: &str, attribute: &str) -> Result<Option<Value>, TemplateError> {
        let Some(outputs) = self.outputs.get(resource) else {
            return Ok(None);
        };
        let Some(name) = attribute.strip_prefix("Outputs.") else {
            return Ok(None);
        };
        match outputs.get(name) {
            Some(value) => Ok(Some(value.clone())),
            None => Err(TemplateError(format!(
                "nested application {resource} has no output {name} (GetAtt {resource}.{attribute})"
            ))),
        }
    }

    fn sub(&self, inner: Value) -> Result<Value, TemplateError> {
        let (text, variables) = match inner {
            Value::String(s) => (s, Mapping::new()),
            Value::Sequence(mut parts) if parts.len() == 2 => {
                let variables = match parts.pop() {
                    Some(Value::Mapping(v)) => v,
                    _ => return Ok(one("Fn::Sub".into(), Value::Sequence(parts))),
                };
                match parts.pop() {
                    Some(Value::String(s)) => (s, variables),
                    other => {
                        let parts = vec![other.unwrap_or_default(), Value::Mapping(variables)];
                        return Ok(one("Fn::Sub".into(), self.value(Value::Sequence(parts))?));
                    }
                }
            }
            other => return Ok(one("Fn::Sub".into(), self.value(other)?)),
        };
        let mut variables: Mapping = variables
            .into_iter()
            .map(|(k, v)| Ok((k, self.value(v)?)))
            .collect::<Result<_, TemplateError>>()?;
        let own: Vec<String> = variables
            .keys()
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect();
        let mut out = String::new();
        let mut rest = text.as_str();
        for name in sub_names(&text) {
            let placeholder = format!("${{{name}}}");
            let Some(at) = rest.find(&placeholder) else {
                continue;
            };
            out.push_str(&rest[..at]);
            rest = &rest[at + placeholder.len()..];
            if own.iter().any(|v| v == name) {
                out.push_str(&placeholder);
                continue;
            }
            let (head, attribute) = match name.split_once('.') {
                Some((h, a)) => (h, Some(a)),
                None => (name, None),
            };
            let replaced = match attribute {
                None if self.params.contains_key(head) => self.params.get(head).cloned(),
                Some(a) => self.output(head, a)?,
                None => None,
            };
            match replaced {
                Some(value) => match inline(&value) {
                    Some(text) => out.push_str(&text),
                    None => {
                        let variable = name.replace('.', "");
                        out.push_str(&format!("${{{variable}}}"));
                        variables.insert(variable.into(), value);
                    }
                },
                None => match self.renames.get(head) {
                    Some(id) => match attribute {
                        Some(a) => out.push_str(&format!("${{{id}.{a}}}")),
                        None => out.push_str(&format!("${{{id}}}")),
                    },
                    None => out.push_str(&placeholder),
                },
            }
        }
        out.push_str(rest);
        Ok(if variables.is_empty() {
            one("Fn::Sub".into(), Value::String(out))
        } else {
            one(
                "Fn::Sub".into(),
                Value::Sequence(vec![Value::String(out), Value::Mapping(variables)]),
            )
        })
    }

    fn depends_on(&self, value: Value) -> Value {
        let rename = |v: Value| match v.as_str().and_then(|s| self.renames.get(s)) {
            Some(id) => Value::String(id.clone()),
            None => v,
        };
        match value {
            Value::Sequence(items) => Value::Sequence(items.into_iter().map(rename).collect()),
            other => rename(other),
        }
    }
}

/// A value as `Fn::Sub` text, when it has one: a literal (with `${` kept literal), `${X}` for `Ref X`, `${X.A}`
/// for `GetAtt X.A`.
fn inline(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.replace("${", "${!")),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Mapping(m) if m.len() == 1 => {
            let (key, inner) = m.iter().next()?;
            match (key.as_str()?, inner) {
                ("Ref", Value::String(name)) => Some(format!("${{{name}}}")),
                ("Fn::GetAtt", Value::Sequence(p)) if p.len() == 2 => {
                    Some(format!("${{{}.{}}}", p[0].as_str()?, p[1].as_str()?))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

fn one(key: Value, value: Value) -> Value {
    let mut m = Mapping::new();
    m.insert(key, value);
    Value::Mapping(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any YAML value, short forms made long.
    fn yaml(text: &str) -> Value {
        super::super::cfn::long_form(serde_norway::from_str(text).expect("test YAML parses"))
    }

    /// The fixture's parent flattened, and one property of one resource of it.
    fn flat_property(id: &str, key: &str) -> Value {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nested");
        let text = std::fs::read_to_string(folder.join("template.yaml")).expect("fixture");
        let flat = flatten(parse(&text).expect("parses"), &folder).expect("flattens");
        get(
            get(get(get(Some(&flat), "Resources"), id), "Properties"),
            key,
        )
        .cloned()
        .unwrap_or_else(|| panic!("{id}.{key} in {flat:?}"))
    }

    #[test]
    fn what_the_parent_passes_is_written_into_the_childs_sub_text() {
        let sub = |text: &str| yaml(&format!("{{Q: !Sub {text:?}}}"))["Q"].clone();
        // A literal as itself, `!Ref AWS::StackName` as `${AWS::StackName}`.
        assert_eq!(
            flat_property("SendInvoiceQueue", "QueueName"),
            sub("${AWS::StackName}-send-invoice")
        );
        assert_eq!(
            flat_property("ApplyLedgerDeadLetterQueue", "QueueName"),
            sub("${AWS::StackName}-apply-ledger-dlq.fifo")
        );
        // A parent's Sub stays a variable of the child's.
        assert_eq!(
            flat_property("SendInvoiceLogGroup", "LogGroupName"),
            yaml(r#"{Q: !Sub ["/aws/lambda/${FunctionName}", {FunctionName: !Sub "${AWS::StackName}-send-invoice"}]}"#)
                ["Q"]
                .clone()
        );
        // A child's own resource, renamed inside the text.
        let body = flat_property("SendInvoiceDashboard", "DashboardBody");
        assert!(
            get(Some(&body), "Fn::Sub")
                .and_then(Value::as_str)
                .is_some_and(|s| s.contains("${SendInvoiceQueue.QueueName}")),
            "{body:?}"
        );
        // Outside Sub, a parameter is its value: a number, a parent's parameter, a parent's resource.
        assert_eq!(
            flat_property("SendInvoiceQueue", "VisibilityTimeout"),
            Value::from(400)
        );
        assert_eq!(
            flat_property("SendInvoiceLogGroup", "RetentionInDays"),
            yaml("{Ref: LogRetentionDays}")
        );
        assert_eq!(
            flat_property("SendInvoiceDeadLetterAlarm", "AlarmActions"),
            yaml("[!Ref AlarmTopic]")
        );
    }

    #[test]
    fn a_pseudo_parameter_passed_in_stays_the_parents_in_the_text() {
        let mut params = BTreeMap::new();
        params.insert("StackName".to_owned(), yaml("{Ref: AWS::StackName}"));
        params.insert("Region".to_owned(), yaml("{Ref: AWS::Region}"));
        params.insert("Literal".to_owned(), Value::from("${not-a-variable}"));
        let rewrite = Rewrite {
            params,
            ..Rewrite::default()
        };
        let out = rewrite
            .value(yaml(
                r#"{Q: !Sub "${StackName}:${Region}:${Literal}:${AWS::AccountId}"}"#,
            ))
            .expect("rewrites");
        assert_eq!(
            out,
            yaml(
                r#"{Q: !Sub "${AWS::StackName}:${AWS::Region}:${!not-a-variable}:${AWS::AccountId}"}"#
            )
        );
    }
}

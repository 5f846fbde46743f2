//! CloudFormation templates as YAML values in their long form, and the few lookups on them that more than one
//! reader needs (the local stack's [`TemplateSpec`](super::TemplateSpec), [`flatten`](super::flatten), and
//! `sqsafe check`).
//!
//! A template is read as YAML (JSON is YAML too); CloudFormation's short-form tags become their long form, as the SAM
//! translator's loader makes them (`!Ref X` → `{"Ref": "X"}`, `!GetAtt A.B` → `{"Fn::GetAtt": ["A", "B"]}`,
//! `!Sub s` → `{"Fn::Sub": "s"}`, `!Condition C` → `{"Condition": "C"}`, any other `!Name v` → `{"Fn::Name": v}`),
//! so readers see one form whatever the file used.

use std::fmt::Write as _;

use serde_norway::{Mapping, Value};

use super::TemplateError;

/// Parses template text (YAML with short-form tags, or JSON) into its long form.
///
/// # Errors
/// Text that is not YAML (or JSON), or whose top level is not a mapping.
pub fn parse(text: &str) -> Result<Value, TemplateError> {
    let raw: Value = serde_norway::from_str(text).map_err(|e| TemplateError(e.to_string()))?;
    let doc = long_form(raw);
    if !doc.is_mapping() {
        return Err(TemplateError(
            "the template is not a mapping (Resources, Parameters, ...)".into(),
        ));
    }
    Ok(doc)
}

/// `value` with every short-form tag replaced by its long-form mapping.
pub fn long_form(value: Value) -> Value {
    match value {
        Value::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let name = tag.trim_start_matches('!');
            let key = if matches!(name, "Ref" | "Condition") {
                name.to_owned()
            } else {
                format!("Fn::{name}")
            };
            let inner = match tagged.value {
                // `!GetAtt A.B.C` → ["A", "B.C"]: the resource, then the attribute (which may hold dots).
                Value::String(s) if name == "GetAtt" => match s.split_once('.') {
                    Some((resource, attribute)) => Value::Sequence(vec![
                        Value::String(resource.into()),
                        Value::String(attribute.into()),
                    ]),
                    None => Value::Sequence(vec![Value::String(s)]),
                },
                // A tagged scalar is its text (`!Ref 5` names "5").
                Value::Null => Value::String(String::new()),
                Value::Bool(b) => Value::String(if b { "true" } else { "false" }.into()),
                Value::Number(n) => Value::String(n.to_string()),
                other => long_form(other),
            };
            let mut m = Mapping::new();
            m.insert(Value::String(key), inner);
            Value::Mapping(m)
        }
        Value::Sequence(items) => Value::Sequence(items.into_iter().map(long_form).collect()),
        Value::Mapping(m) => Value::Mapping(
            m.into_iter()
                .map(|(k, v)| (long_form(k), long_form(v)))
                .collect(),
        ),
        scalar => scalar,
    }
}

/// `v[key]`, when `v` is a mapping that has `key` with a value other than null.
pub fn get<'a>(v: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    v?.as_mapping()?.get(key).filter(|x| !x.is_null())
}

/// Whether a value is empty or false (none, null, false, 0, "", [], {}).
pub fn is_empty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => !b,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Sequence(s)) => s.is_empty(),
        Some(Value::Mapping(m)) => m.is_empty(),
        Some(Value::Tagged(_)) => false,
    }
}

/// A value as a message quotes it: strings in quotes, `unset` for none.
pub fn show(v: Option<&Value>) -> String {
    let mut out = String::new();
    match v {
        None | Some(Value::Null) => out.push_str("unset"),
        Some(v) => write_value(&mut out, v),
    }
    out
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => {
            let _ = write!(out, "{s:?}");
        }
        Value::Sequence(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, x);
            }
            out.push(']');
        }
        Value::Mapping(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, k);
                out.push_str(": ");
                write_value(out, x);
            }
            out.push('}');
        }
        Value::Tagged(t) => {
            let _ = write!(out, "{} ", t.tag);
            write_value(out, &t.value);
        }
    }
}

/// The names of a `Fn::Sub` text's `${Name}` placeholders (not the literal `${!Name}`).
pub fn sub_names(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(first) = after.chars().next() else {
            break;
        };
        if first == '!' {
            rest = after;
            continue;
        }
        let body = &after[first.len_utf8()..];
        match body.find('}') {
            Some(end) => {
                out.push(&after[..first.len_utf8() + end]);
                rest = &body[end + 1..];
            }
            None => rest = after,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any YAML or JSON value, short forms made long (`parse` takes whole templates only).
    fn j(text: &str) -> Value {
        long_form(serde_norway::from_str(text).expect("parses"))
    }

    #[test]
    fn short_forms_become_long_forms() {
        let doc = j(r#"
A: !Ref Queue
B: !GetAtt Queue.Arn
C: !GetAtt [Table, StreamArn]
D: !Sub "${AWS::StackName}-x"
E: !Sub
  - "${Q}"
  - Q: !GetAtt Queue.QueueName
F: !Select [0, !GetAZs ""]
G: !Condition IsProd
H: !GetAtt Bucket.Outputs.Name
I: !Ref 5
"#);
        let expected = j(r#"{
            "A": {"Ref": "Queue"},
            "B": {"Fn::GetAtt": ["Queue", "Arn"]},
            "C": {"Fn::GetAtt": ["Table", "StreamArn"]},
            "D": {"Fn::Sub": "${AWS::StackName}-x"},
            "E": {"Fn::Sub": ["${Q}", {"Q": {"Fn::GetAtt": ["Queue", "QueueName"]}}]},
            "F": {"Fn::Select": [0, {"Fn::GetAZs": ""}]},
            "G": {"Condition": "IsProd"},
            "H": {"Fn::GetAtt": ["Bucket", "Outputs.Name"]},
            "I": {"Ref": "5"}
        }"#);
        assert_eq!(doc, expected);
        assert!(
            matches!(doc.get("F").and_then(|f| f.get("Fn::Select")), Some(Value::Sequence(s)) if s[0] == 0)
        );
    }

    #[test]
    fn json_reads_as_the_same_document() {
        let yaml = j(
            "Resources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties:\n      VisibilityTimeout: 30\n      RedrivePolicy:\n        deadLetterTargetArn: !GetAtt D.Arn\n",
        );
        let json = j(
            r#"{"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": 30,
            "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["D", "Arn"]}}}}}}"#,
        );
        assert_eq!(yaml, json);
    }

    #[test]
    fn unreadable_text_is_an_error() {
        assert!(parse("Resources: [unclosed").is_err());
        assert!(parse("{\"Resources\": ").is_err());
        assert!(parse("- a list\n- not a template\n").is_err());
    }
}

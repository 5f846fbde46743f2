//! Reading a template, and the lookups the rules share.
//!
//! A template is read in long form by sqsafe-local's [`cfn`] (`!Ref X` → `{"Ref": "X"}`, ...), the reader that the
//! local stack uses too, so the rules see one form whatever the file used.

use std::collections::BTreeSet;

use serde_norway::{Mapping, Value};
use sqsafe_local::stack::cfn;

pub(crate) use cfn::{get, is_empty, show, sub_names};

/// A template that cannot be read: one line that says why.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

impl From<sqsafe_local::stack::TemplateError> for TemplateError {
    fn from(e: sqsafe_local::stack::TemplateError) -> Self {
        Self(e.0)
    }
}

/// Parses template text (YAML with short-form tags, or JSON) into its long form ([`cfn::parse`]).
///
/// # Errors
/// Text that is not YAML (or JSON), or whose top level is not a mapping.
pub fn parse(text: &str) -> Result<Value, TemplateError> {
    Ok(cfn::parse(text)?)
}

// ------------------------------------------------------------------------------------------------ value helpers

/// Whether `v` is a mapping that has `key` (with any value, null included).
pub(crate) fn has(v: Option<&Value>, key: &str) -> bool {
    v.and_then(Value::as_mapping)
        .is_some_and(|m| m.contains_key(key))
}

/// `v[key]`, or `default` when `v` has no such key (a key present with null stays null).
pub(crate) fn get_or(v: Option<&Value>, key: &str, default: Value) -> Value {
    match v.and_then(Value::as_mapping).and_then(|m| m.get(key)) {
        Some(x) => x.clone(),
        None => default,
    }
}

/// A value as a list: nothing for none, a list as itself, anything else as a list of one.
pub(crate) fn as_list(v: Option<&Value>) -> Vec<&Value> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Sequence(items)) => items.iter().collect(),
        Some(other) => vec![other],
    }
}

/// Whether `v` is a string equal to `s`.
pub(crate) fn is_str(v: Option<&Value>, s: &str) -> bool {
    v.and_then(Value::as_str) == Some(s)
}

/// A whole number: a number (truncated) or a string that holds one; never a boolean.
pub(crate) fn to_int(v: Option<&Value>) -> Option<i64> {
    let truncate = |f: f64| f.is_finite().then(|| f.trunc() as i64);
    match v? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().and_then(truncate)),
        Value::String(s) => s.trim().parse::<f64>().ok().and_then(truncate),
        _ => None,
    }
}

/// `true`, or a string that says true (any case).
pub(crate) fn truthy(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// Equality as the template means it: numbers by value (1 and 1.0 are one), none and null alike.
pub(crate) fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    let a = a.filter(|v| !v.is_null());
    let b = b.filter(|v| !v.is_null());
    match (a, b) {
        (None, None) => true,
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (Some(Value::Sequence(x)), Some(Value::Sequence(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(Some(x), Some(y)))
        }
        (Some(Value::Mapping(x)), Some(Value::Mapping(y))) => {
            x.len() == y.len() && x.iter().all(|(k, v)| same(Some(v), y.get(k)))
        }
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// Whether any string in `v` (keys included) contains `needle`.
pub(crate) fn mentions(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s.contains(needle),
        Value::Sequence(items) => items.iter().any(|x| mentions(x, needle)),
        Value::Mapping(m) => m
            .iter()
            .any(|(k, v)| mentions(k, needle) || mentions(v, needle)),
        Value::Tagged(t) => mentions(&t.value, needle),
        _ => false,
    }
}

/// A value as a message shows it: a string as itself, anything else compactly (`{"Ref": "X"}`, `[1, 2]`).
pub(crate) fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        other => show(other),
    }
}

/// A sorted list of names, as messages show them.
pub(crate) fn names<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    let items: Vec<&str> = items.into_iter().map(String::as_str).collect();
    format!("[{}]", items.join(", "))
}

// ------------------------------------------------------------------------------------------------ references

/// Logical ids (and parameters) a value refers to: `Ref`, `Fn::GetAtt`, and `${X}` / `${X.Attr}` in `Fn::Sub` (with
/// the variables of its second element). Pseudo parameters (`AWS::...`) are left out.
pub(crate) fn refs(v: Option<&Value>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    if let Some(v) = v {
        collect_refs(v, &mut found);
    }
    found.retain(|r| !r.starts_with("AWS::"));
    found
}

fn collect_refs(v: &Value, found: &mut BTreeSet<String>) {
    match v {
        Value::Mapping(m) => {
            for (key, inner) in m {
                match key.as_str() {
                    Some("Ref") => {
                        if let Some(name) = inner.as_str() {
                            found.insert(name.to_owned());
                        }
                    }
                    Some("Fn::GetAtt") => match inner {
                        Value::Sequence(parts) => {
                            if let Some(name) = parts.first().and_then(Value::as_str) {
                                found.insert(name.to_owned());
                            }
                        }
                        Value::String(s) => {
                            found.insert(s.split('.').next().unwrap_or_default().to_owned());
                        }
                        _ => {}
                    },
                    Some("Fn::Sub") => {
                        let (text, variables) = match inner {
                            Value::Sequence(parts) => (parts.first(), parts.get(1)),
                            other => (Some(other), None),
                        };
                        if let Some(text) = text.and_then(Value::as_str) {
                            for name in sub_names(text) {
                                found.insert(name.split('.').next().unwrap_or_default().to_owned());
                            }
                        }
                        if let Some(variables) = variables {
                            collect_refs(variables, found);
                        }
                    }
                    _ => collect_refs(inner, found),
                }
            }
        }
        Value::Sequence(items) => items.iter().for_each(|x| collect_refs(x, found)),
        _ => {}
    }
}

/// Logical ids whose stream a value refers to: `Fn::GetAtt [X, StreamArn]` (or `"X.StreamArn"`).
pub(crate) fn stream_refs(v: Option<&Value>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    if let Some(v) = v {
        collect_stream_refs(v, &mut found);
    }
    found
}

fn collect_stream_refs(v: &Value, found: &mut BTreeSet<String>) {
    match v {
        Value::Mapping(m) => {
            for (key, inner) in m {
                if key.as_str() == Some("Fn::GetAtt") {
                    let parts: Option<(Option<&str>, Option<&str>)> = match inner {
                        Value::Sequence(p) if p.len() == 2 => Some((p[0].as_str(), p[1].as_str())),
                        Value::String(s) => s.split_once('.').map(|(a, b)| (Some(a), Some(b))),
                        _ => None,
                    };
                    if let Some((Some(table), Some("StreamArn"))) = parts {
                        found.insert(table.to_owned());
                    }
                } else {
                    collect_stream_refs(inner, found);
                }
            }
        }
        Value::Sequence(items) => items.iter().for_each(|x| collect_stream_refs(x, found)),
        _ => {}
    }
}

/// The one name of a single-element set.
pub(crate) fn is_only(set: &BTreeSet<String>, name: &str) -> bool {
    set.len() == 1 && set.contains(name)
}

// ------------------------------------------------------------------------------------------------ the template

/// Which bound of a value a rule needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    Min,
    Max,
}

/// A read-only view of a parsed template (long form), with the lookups the rules share.
pub(crate) struct Template<'a> {
    resources: Option<&'a Mapping>,
    parameters: Option<&'a Mapping>,
    globals: Option<&'a Mapping>,
}

impl<'a> Template<'a> {
    pub(crate) fn new(doc: &'a Value) -> Self {
        let doc = Some(doc);
        Self {
            resources: get(doc, "Resources").and_then(Value::as_mapping),
            parameters: get(doc, "Parameters").and_then(Value::as_mapping),
            globals: get(get(doc, "Globals"), "Function").and_then(Value::as_mapping),
        }
    }

    /// Every resource, in the template's order.
    pub(crate) fn resources(&self) -> impl Iterator<Item = (&'a str, &'a Value)> {
        self.resources
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str()?, v)))
    }

    /// The logical ids of the resources of one type, in the template's order.
    pub(crate) fn of_type(&self, kind: &str) -> Vec<String> {
        self.resources()
            .filter(|(_, r)| is_str(get(Some(r), "Type"), kind))
            .map(|(id, _)| id.to_owned())
            .collect()
    }

    pub(crate) fn resource(&self, id: &str) -> Option<&'a Value> {
        self.resources?.get(id)
    }

    /// A resource's Properties.
    pub(crate) fn props(&self, id: &str) -> Option<&'a Value> {
        get(self.resource(id), "Properties")
    }

    /// A property of a resource.
    pub(crate) fn prop(&self, id: &str, key: &str) -> Option<&'a Value> {
        get(self.props(id), key)
    }

    pub(crate) fn is_type(&self, id: &str, kind: &str) -> bool {
        is_str(get(self.resource(id), "Type"), kind)
    }

    /// `Metadata.BuildProperties.Binary` of a function: the cargo binary it deploys.
    pub(crate) fn binary(&self, id: &str) -> Option<String> {
        let binary = get(
            get(get(self.resource(id), "Metadata"), "BuildProperties"),
            "Binary",
        )?;
        match binary {
            Value::String(s) => Some(s.clone()),
            other => Some(text(Some(other))),
        }
    }

    /// A SAM function's properties with Globals.Function underneath (shallow, as SAM merges most keys).
    pub(crate) fn function_props(&self, id: &str) -> Value {
        let mut merged = self.globals.cloned().unwrap_or_default();
        if let Some(own) = self.props(id).and_then(Value::as_mapping) {
            for (k, v) in own {
                merged.insert(k.clone(), v.clone());
            }
        }
        Value::Mapping(merged)
    }

    /// A parameter's declaration, when `value` is `{"Ref": P}` of a parameter P of the template.
    pub(crate) fn parameter_of<'v>(
        &self,
        value: Option<&'v Value>,
    ) -> Option<(&'v str, &'a Value)> {
        let m = value?.as_mapping()?;
        if m.len() != 1 {
            return None;
        }
        let name = m.get("Ref")?.as_str()?;
        Some((name, self.parameters?.get(name)?))
    }

    /// The value at one bound: a literal is its own bound; a Ref to a parameter gives its MaxValue / MinValue (or
    /// the extreme of its AllowedValues). Also says where the number comes from, for messages.
    pub(crate) fn bound(&self, value: &Value, which: Bound) -> (Option<i64>, String) {
        if let Some(literal) = to_int(Some(value)) {
            return (Some(literal), literal.to_string());
        }
        let Some((name, param)) = self.parameter_of(Some(value)) else {
            return (None, format!("unresolvable value {}", show(Some(value))));
        };
        let key = match which {
            Bound::Max => "MaxValue",
            Bound::Min => "MinValue",
        };
        let shown = |got: Option<i64>| got.map_or_else(|| "unset".to_owned(), |n| n.to_string());
        let got = to_int(get(Some(param), key));
        if got.is_none() {
            let allowed = as_list(get(Some(param), "AllowedValues"))
                .into_iter()
                .filter_map(|v| to_int(Some(v)));
            let extreme = match which {
                Bound::Max => allowed.max(),
                Bound::Min => allowed.min(),
            };
            if let Some(extreme) = extreme {
                let which = if which == Bound::Max { "max" } else { "min" };
                return (
                    Some(extreme),
                    format!("parameter {name} AllowedValues {which} {extreme}"),
                );
            }
        }
        (got, format!("parameter {name} {key} {}", shown(got)))
    }

    /// Whether parameter `name` holds a string that can name a resource (`String`, or a string read from SSM): not a
    /// Number or a list.
    pub(crate) fn is_string_parameter(&self, name: &str) -> bool {
        let kind = get(self.parameters.and_then(|p| p.get(name)), "Type").and_then(Value::as_str);
        matches!(kind, Some("String" | "AWS::SSM::Parameter::Value<String>"))
    }

    /// The Default of parameter `name`, if the template declares it with one.
    pub(crate) fn parameter_default(&self, name: &str) -> Option<&'a Value> {
        get(self.parameters?.get(name), "Default")
    }

    /// A setting at its default: a literal, or the Default of the parameter it Refs.
    pub(crate) fn default_of(&self, value: Option<&'a Value>) -> Option<&'a Value> {
        match self.parameter_of(value) {
            Some((_, param)) => get(Some(param), "Default"),
            None => value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any YAML or JSON value, short forms made long (`parse` takes whole templates only).
    fn j(text: &str) -> Value {
        cfn::long_form(serde_norway::from_str(text).expect("parses"))
    }

    #[test]
    fn refs_follow_ref_getatt_and_sub() {
        let v = j(r#"
- !Ref A
- !GetAtt B.Arn
- !Sub "arn:${AWS::Partition}:sqs:${C.Arn}:${!Literal}"
- !Sub ["${D}", {D: !Ref E}]
- {"Fn::GetAtt": "F.Arn"}
- !Ref AWS::Region
"#);
        let found: Vec<String> = refs(Some(&v)).into_iter().collect();
        assert_eq!(found, ["A", "B", "C", "D", "E", "F"]);
        assert_eq!(
            stream_refs(Some(&j("[!GetAtt T.StreamArn, !GetAtt U.Arn]")))
                .into_iter()
                .collect::<Vec<_>>(),
            ["T"]
        );
    }

    #[test]
    fn parameters_are_read_at_their_bounds() {
        let doc = j(r#"
Parameters:
  Timeout: {Type: Number, MinValue: 1, MaxValue: 60, Default: 30}
  Size: {Type: Number, AllowedValues: [1, 10, 100]}
  Open: {Type: Number, Default: 5}
"#);
        let t = Template::new(&doc);
        let r = |p: &str| j(&format!("!Ref {p}"));
        assert_eq!(t.bound(&r("Timeout"), Bound::Max).0, Some(60));
        assert_eq!(t.bound(&r("Timeout"), Bound::Min).0, Some(1));
        assert_eq!(t.bound(&r("Size"), Bound::Max).0, Some(100));
        assert_eq!(t.bound(&r("Size"), Bound::Min).0, Some(1));
        assert_eq!(t.bound(&r("Open"), Bound::Max).0, None);
        assert_eq!(t.bound(&r("Missing"), Bound::Max).0, None);
        assert_eq!(t.bound(&Value::from("42"), Bound::Max).0, Some(42));
        assert_eq!(t.default_of(Some(&r("Open"))), Some(&Value::from(5)));
    }
}

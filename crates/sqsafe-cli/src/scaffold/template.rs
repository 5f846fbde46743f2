//! template.yaml: where a consumer's resources and outputs go, and the nested template each consumer uses.

use super::error::{ScaffoldError, fail};
use super::spec::{ConsumerSource, Spec};

/// Markers in template.yaml between which generated consumers' resources and outputs go.
pub const RESOURCES_MARKER: &str =
    "  # ---------------------------------------------------------------- end of consumers";
/// The marker before which generated consumers' outputs go.
pub const OUTPUTS_MARKER: &str =
    "  # ---------------------------------------------------------------- end of consumer outputs";

/// Inserts the consumer's resources and outputs before the markers.
///
/// # Errors
/// A template without the markers, or with them out of order.
pub fn add_to_template(template: &str, spec: &Spec) -> Result<String, ScaffoldError> {
    let (Some(resources_at), Some(outputs_at)) = (
        template.find(RESOURCES_MARKER),
        template.find(OUTPUTS_MARKER),
    ) else {
        return fail(format!(
            "template.yaml has no `{}` / `{}` markers: generated consumers go before them",
            RESOURCES_MARKER.trim(),
            OUTPUTS_MARKER.trim()
        ));
    };
    if resources_at > outputs_at {
        return fail("template.yaml's consumer markers are out of order");
    }
    let parameters = spec.render(PARAMETERS_YAML)?;
    let mut out = String::with_capacity(template.len() + 8192);
    if parameters.is_empty() {
        out.push_str(&template[..resources_at]);
    } else {
        // The API the effect calls: a parameter of its own, at the end of the template's Parameters.
        let Some(parameters_end) = parameters_end(template) else {
            return fail(
                "template.yaml has no top-level `Parameters:` section before its consumers",
            );
        };
        if parameters_end > resources_at {
            return fail("template.yaml's `Parameters:` section comes after its consumer markers");
        }
        out.push_str(&template[..parameters_end]);
        out.push_str(&parameters);
        out.push_str(&template[parameters_end..resources_at]);
    }
    out.push_str(&spec.render(resources_yaml(spec))?);
    out.push_str(&template[resources_at..outputs_at]);
    out.push_str(&spec.render(outputs_yaml(spec))?);
    out.push_str(&template[outputs_at..]);
    Ok(out)
}

/// Where the template's top-level `Parameters:` mapping ends: after its last indented line, before the blank lines
/// and comments that precede the next top-level key.
pub(crate) fn parameters_end(template: &str) -> Option<usize> {
    let start = if template.starts_with("Parameters:\n") {
        0
    } else {
        template.find("\nParameters:\n")? + 1
    };
    let mut at = start + "Parameters:\n".len();
    let mut end = at;
    for line in template[at..].split_inclusive('\n') {
        if line.starts_with(|c: char| !c.is_whitespace() && c != '#') {
            break;
        }
        at += line.len();
        if line.starts_with(' ') && !line.trim().is_empty() {
            end = at;
        }
    }
    Some(end)
}

/// What a consumer adds to template.yaml: at the end of its Parameters (a plain consumer's API URL), to its Resources
/// (the nested application, the role, the function, with --transact the effect table), to its Outputs.
pub(crate) const PARAMETERS_YAML: &str = "consumer/template/parameters.yaml.jinja";
pub(crate) const RESOURCES_YAML: &str = "consumer/template/resources.yaml.jinja";
pub(crate) const OUTPUTS_YAML: &str = "consumer/template/outputs.yaml.jinja";

/// A stream consumer's resources and outputs: all in the template itself (no nested application).
pub(crate) const STREAM_RESOURCES_YAML: &str = "consumer/template/stream-resources.yaml.jinja";
pub(crate) const STREAM_OUTPUTS_YAML: &str = "consumer/template/stream-outputs.yaml.jinja";

/// The resources template of `spec`'s source.
pub(crate) fn resources_yaml(spec: &Spec) -> &'static str {
    match spec.source {
        ConsumerSource::Sqs => RESOURCES_YAML,
        ConsumerSource::Kinesis | ConsumerSource::DynamodbStream => STREAM_RESOURCES_YAML,
    }
}

/// The outputs template of `spec`'s source.
pub(crate) fn outputs_yaml(spec: &Spec) -> &'static str {
    match spec.source {
        ConsumerSource::Sqs => OUTPUTS_YAML,
        ConsumerSource::Kinesis | ConsumerSource::DynamodbStream => STREAM_OUTPUTS_YAML,
    }
}

/// The folder, next to template.yaml, that holds the child templates.
pub(crate) const CHILD_DIR: &str = "sqsafe";

/// The logical ids of the child templates' resources (the same in both): `sqsafe check` and `sqsafe local` read them
/// as `<Pascal><Id>` in the parent, so those must be free too.
pub(crate) const CHILD_IDS: [&str; 8] = [
    "Queue",
    "DeadLetterQueue",
    "LogGroup",
    "DeadLetterAlarm",
    "QueueAgeAlarm",
    "DeadLettersAlarm",
    "FunctionErrorsAlarm",
    "Dashboard",
];

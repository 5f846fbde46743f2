//! The files a consumer is made of, as Jinja templates: `templates/project/templates/consumer/` in sqsafe's
//! repository, the folder cookiecutter (`sam init --location templates/project`) includes them from for a project's
//! first consumer, compiled into `sqsafe` for `sqsafe new consumer`. One text of each file for both.
//!
//! Every template reads `consumer` ([`ConsumerVars`]); the crate's Cargo.toml also reads `workspace`
//! ([`WorkspaceVars`]). Both renderers use the same settings: a block tag alone on its line leaves no line
//! (`trim_blocks` and `lstrip_blocks`, cookiecutter.json's `_jinja2_env_vars`) and a file's last newline is kept
//! (cookiecutter's default).

use minijinja::{Environment, UndefinedBehavior, context};
use serde::Serialize;

use crate::scaffold::error::ScaffoldError;

/// A template file of `templates/project/templates/`: its name there (as cookiecutter's loader and `{% include %}`
/// name it) and its text.
macro_rules! template {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../templates/project/templates/",
                $name
            )),
        )
    };
}

/// Every template file of a consumer and of an API, compiled in.
const FILES: [(&str, &str); 27] = [
    template!("consumer/Cargo.toml.jinja"),
    template!("consumer/README.md.jinja"),
    template!("consumer/events/dynamodb.json.jinja"),
    template!("consumer/events/event.json.jinja"),
    template!("consumer/events/kinesis.json.jinja"),
    template!("consumer/src/change.rs.jinja"),
    template!("consumer/src/handler.rs.jinja"),
    template!("consumer/src/lib.rs.jinja"),
    template!("consumer/src/main.rs.jinja"),
    template!("consumer/src/payload.rs.jinja"),
    template!("consumer/template/outputs.yaml.jinja"),
    template!("consumer/template/parameters.yaml.jinja"),
    template!("consumer/template/resources.yaml.jinja"),
    template!("consumer/template/stream-outputs.yaml.jinja"),
    template!("consumer/template/stream-resources.yaml.jinja"),
    template!("consumer/tests/changes.rs.jinja"),
    template!("consumer/tests/handler.rs.jinja"),
    template!("consumer/tests/stream.rs.jinja"),
    template!("api/Cargo.toml.jinja"),
    template!("api/README.md.jinja"),
    template!("api/events/event.json.jinja"),
    template!("api/src/handler.rs.jinja"),
    template!("api/src/lib.rs.jinja"),
    template!("api/src/main.rs.jinja"),
    template!("api/template/outputs.yaml.jinja"),
    template!("api/template/resources.yaml.jinja"),
    template!("api/tests/api.rs.jinja"),
];

/// The child templates a consumer's nested application points at (`sqsafe/<file>` beside template.yaml), as
/// sqsafe ships them: plain YAML, copied as they are (the project template includes them the same way).
pub(crate) const CHILD_STANDARD: (&str, &str) = template!("child/consumer.yaml");
/// The FIFO one.
pub(crate) const CHILD_FIFO: (&str, &str) = template!("child/consumer-fifo.yaml");

/// The consumer the templates are rendered for.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ConsumerVars {
    /// `send-invoice`: the crate, the binary, the function's name suffix.
    pub(crate) name: String,
    /// `SendInvoice`: the logical ids' prefix, the consumer type.
    pub(crate) pascal: String,
    /// `send_invoice`: the library crate's name.
    pub(crate) snake: String,
    /// The queue's name (`send-invoice`, `send-invoice.fifo`).
    pub(crate) queue: String,
    /// Its DLQ's name.
    pub(crate) dlq: String,
    /// A FIFO queue.
    pub(crate) fifo: bool,
    /// The effect is DynamoDB writes committed with the record (else one HTTP call).
    pub(crate) transact: bool,
    /// What the queue's bodies wrap: `sqs` (nothing), `sns`, `eventbridge`, `s3`.
    pub(crate) envelope: &'static str,
    /// What feeds it: `sqs` (a queue), `kinesis` (a Kinesis data stream), `dynamodb-stream` (a table's stream).
    pub(crate) source: &'static str,
    /// The child template's file name in `sqsafe/`.
    pub(crate) child: String,
}

/// The HTTP API the `api/` templates are rendered for (`sqsafe new api`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ApiVars {
    /// `orders-api`: the crate, the binary, the function's name suffix, its records' key prefix.
    pub(crate) name: String,
    /// `OrdersApi`: the logical ids' prefix.
    pub(crate) pascal: String,
    /// `orders_api`: the library crate's name.
    pub(crate) snake: String,
}

/// What the workspace's Cargo.toml offers its members (for the crate's Cargo.toml).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct WorkspaceVars {
    /// Keys of `[workspace.package]`.
    pub(crate) package: Vec<String>,
    /// Whether `[workspace.lints]` exists.
    pub(crate) lints: bool,
    /// Whether the workspace names the workspace-hack crate in `[workspace.dependencies]`.
    pub(crate) hack: bool,
}

/// Renders the template `name` (e.g. `consumer/src/handler.rs.jinja`) for `consumer` in `workspace`.
///
/// # Errors
/// An unknown template, or one that does not render (a syntax error, an undefined variable): a defect of the
/// templates, which the tests below render in every variant.
pub(crate) fn render(
    name: &str,
    consumer: &ConsumerVars,
    workspace: &WorkspaceVars,
) -> Result<String, ScaffoldError> {
    render_in(name, context! { consumer, workspace })
}

/// Renders the API template `name` (e.g. `api/src/handler.rs.jinja`) for `api` in `workspace`.
///
/// # Errors
/// As [`render`].
pub(crate) fn render_api(
    name: &str,
    api: &ApiVars,
    workspace: &WorkspaceVars,
) -> Result<String, ScaffoldError> {
    render_in(name, context! { api, workspace })
}

fn render_in(name: &str, context: minijinja::Value) -> Result<String, ScaffoldError> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(true);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    let broken =
        |e: minijinja::Error| ScaffoldError(format!("the consumer template {name}: {e:#}"));
    for (file, text) in FILES {
        env.add_template(file, text).map_err(broken)?;
    }
    env.get_template(name)
        .and_then(|t| t.render(context))
        .map_err(broken)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(fifo: bool, transact: bool, envelope: &'static str) -> ConsumerVars {
        vars_from(fifo, transact, envelope, "sqs")
    }

    fn vars_from(
        fifo: bool,
        transact: bool,
        envelope: &'static str,
        source: &'static str,
    ) -> ConsumerVars {
        ConsumerVars {
            name: "send-invoice".into(),
            pascal: "SendInvoice".into(),
            snake: "send_invoice".into(),
            queue: "send-invoice".into(),
            dlq: "send-invoice-dlq".into(),
            fifo,
            transact,
            envelope,
            source,
            child: "consumer.yaml".into(),
        }
    }

    #[test]
    fn every_template_renders_in_every_variant_with_no_jinja_left() {
        let workspace = WorkspaceVars {
            package: vec!["version".into()],
            lints: true,
            hack: true,
        };
        let variants = [(false, false), (true, false), (false, true), (true, true)];
        let queues = variants
            .into_iter()
            .flat_map(|v| ["sqs", "sns", "eventbridge", "s3"].map(|e| (v, e, "sqs")));
        // A Kinesis consumer: a plain one (no FIFO, no transaction, no envelope).
        let streams = [
            ((false, false), "sqs", "kinesis"),
            ((false, false), "sqs", "dynamodb-stream"),
        ];
        for ((fifo, transact), envelope, source) in queues.chain(streams) {
            for (name, _) in FILES.iter().filter(|(n, _)| n.starts_with("consumer/")) {
                let consumer = vars_from(fifo, transact, envelope, source);
                let text = render(name, &consumer, &workspace).unwrap_or_else(|e| panic!("{e}"));
                for delimiter in ["{{", "{%", "{#", "#}", "%}"] {
                    assert!(
                        !text.contains(delimiter),
                        "{name} ({fifo}, {transact}, {envelope}, {source}) keeps {delimiter}:\n{text}"
                    );
                }
                assert!(
                    text.is_empty() || text.ends_with('\n'),
                    "{name}: its last newline"
                );
                assert!(
                    !text.contains("\n\n\n"),
                    "{name} ({fifo}, {transact}, {envelope}, {source}): no run of blank lines:\n{text}"
                );
            }
        }
    }

    #[test]
    fn every_api_template_renders_with_no_jinja_left() {
        let api = ApiVars {
            name: "orders-api".into(),
            pascal: "OrdersApi".into(),
            snake: "orders_api".into(),
        };
        for hack in [false, true] {
            let workspace = WorkspaceVars {
                package: vec!["version".into()],
                lints: hack,
                hack,
            };
            for (name, _) in FILES.iter().filter(|(n, _)| n.starts_with("api/")) {
                let text = render_api(name, &api, &workspace).unwrap_or_else(|e| panic!("{e}"));
                for delimiter in ["{{", "{%", "{#", "#}", "%}"] {
                    assert!(
                        !text.contains(delimiter),
                        "{name} keeps {delimiter}:\n{text}"
                    );
                }
                assert!(
                    text.ends_with('\n') && !text.contains("\n\n\n"),
                    "{name}:\n{text}"
                );
            }
        }
        let event = render_api(
            "api/events/event.json.jinja",
            &api,
            &WorkspaceVars::default(),
        )
        .expect("event");
        let event: serde_json::Value =
            serde_json::from_str(&event).expect("the sample event is JSON");
        assert_eq!(event["version"], "2.0", "an HTTP API payload 2.0: {event}");
        let outputs = render_api(
            "api/template/outputs.yaml.jinja",
            &api,
            &WorkspaceVars::default(),
        )
        .expect("outputs");
        assert!(
            outputs.contains("https://${OrdersApiHttpApi}.execute-api."),
            "{outputs}"
        );
    }

    #[test]
    fn an_undefined_variable_is_an_error_naming_the_template() {
        let err = render(
            "consumer/nope.jinja",
            &vars(false, false, "sqs"),
            &WorkspaceVars::default(),
        )
        .expect_err("unknown");
        assert!(err.to_string().contains("consumer/nope.jinja"), "{err}");
    }
}

//! `sqsafe new consumer`: the files of a new consumer. Generated code is code a person would have written:
//! formatted, documented, tested.

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::consumer_templates::{self, CHILD_FIFO, CHILD_STANDARD, ConsumerVars, WorkspaceVars};

/// Markers in template.yaml between which generated consumers' resources and outputs go.
pub const RESOURCES_MARKER: &str =
    "  # ---------------------------------------------------------------- end of consumers";
/// The marker before which generated consumers' outputs go.
pub const OUTPUTS_MARKER: &str =
    "  # ---------------------------------------------------------------- end of consumer outputs";

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// `send-invoice`
    pub name: String,
    /// `SendInvoice`
    pub pascal: String,
    /// `send_invoice`
    pub snake: String,
    /// A FIFO queue (records of one MessageGroupId in order).
    pub fifo: bool,
    /// The effect is DynamoDB writes committed with the record in one transaction.
    pub transact: bool,
    /// What the queue's bodies wrap (see [`Spec::envelope`]).
    pub envelope: ConsumerEnvelope,
}

/// What a new consumer's queue is fed by: its `Consumer::ENVELOPE`, and how its sample event wraps the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ConsumerEnvelope {
    /// Producers send to the queue (or an SNS subscription with raw delivery): the body is the payload.
    #[default]
    Sqs,
    /// An SNS topic's subscription: each body is a notification, its `Message` the payload.
    Sns,
    /// An EventBridge rule targeting the queue: each body is an event, its `detail` the payload.
    #[value(name = "eventbridge")]
    EventBridge,
    /// A bucket's event notifications: each body is one object's notification, its `sqsafe::S3Object` the payload.
    S3,
}

impl ConsumerEnvelope {
    /// As the templates name it: `sqs`, `sns`, `eventbridge`, `s3`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerEnvelope::Sqs => "sqs",
            ConsumerEnvelope::Sns => "sns",
            ConsumerEnvelope::EventBridge => "eventbridge",
            ConsumerEnvelope::S3 => "s3",
        }
    }
}

/// Why a name, the workspace or the template refuses the consumer; nothing was written.
#[derive(Debug)]
pub struct ScaffoldError(pub(crate) String);

impl fmt::Display for ScaffoldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScaffoldError {}

pub(crate) fn fail<T>(message: impl Into<String>) -> Result<T, ScaffoldError> {
    Err(ScaffoldError(message.into()))
}

impl Spec {
    /// Checks `name` and derives the other spellings.
    ///
    /// # Errors
    /// A name that cannot name a crate, a binary, queues and a log group, or a reserved one.
    pub fn new(name: &str, fifo: bool, transact: bool) -> Result<Self, ScaffoldError> {
        let valid = name.len() >= 2
            && name.len() <= 40
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.ends_with('-')
            && !name.contains("--");
        if !valid {
            return fail(format!(
                "consumer name `{name}`: use 2-40 lower-case letters, digits and single `-`, starting with a letter \
                 (it names the crate, the binary, the queues and the log group)"
            ));
        }
        if name.starts_with("sqsafe") || name == "xtask" {
            return fail(format!("consumer name `{name}` is reserved"));
        }
        let pascal = name
            .split('-')
            .map(|part| {
                let mut chars = part.chars();
                chars
                    .next()
                    .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                    .unwrap_or_default()
            })
            .collect();
        Ok(Self {
            name: name.to_owned(),
            pascal,
            snake: name.replace('-', "_"),
            fifo,
            transact,
            envelope: ConsumerEnvelope::Sqs,
        })
    }

    /// The consumer reads its payload out of `envelope` (default: the body is the payload).
    #[must_use]
    pub fn envelope(mut self, envelope: ConsumerEnvelope) -> Self {
        self.envelope = envelope;
        self
    }

    /// What the templates read of the consumer.
    fn vars(&self) -> ConsumerVars {
        ConsumerVars {
            name: self.name.clone(),
            pascal: self.pascal.clone(),
            snake: self.snake.clone(),
            queue: self.queue_name(),
            dlq: self.dlq_name(),
            fifo: self.fifo,
            transact: self.transact,
            envelope: self.envelope.as_str(),
            child: child_template(self).0.to_owned(),
        }
    }

    /// Renders the consumer's template `name` (in `templates/project/templates/`) other than its Cargo.toml.
    fn render(&self, name: &str) -> Result<String, ScaffoldError> {
        consumer_templates::render(name, &self.vars(), &WorkspaceVars::default())
    }

    fn queue_name(&self) -> String {
        if self.fifo {
            format!("{}.fifo", self.name)
        } else {
            self.name.clone()
        }
    }

    fn dlq_name(&self) -> String {
        if self.fifo {
            format!("{}-dlq.fifo", self.name)
        } else {
            format!("{}-dlq", self.name)
        }
    }
}

/// The dependencies a generated consumer inherits from its workspace (`name.workspace = true`).
const DEPENDENCIES: [&str; 5] = ["aws-sdk-dynamodb", "serde", "sqsafe", "tokio", "tracing"];
/// The dev-dependencies of its tests, inherited the same way.
const DEV_DEPENDENCIES: [&str; 5] = [
    "aws-sdk-sqs",
    "aws_lambda_events",
    "serde_json",
    "sqsafe-local",
    "sqsafe-testkit",
];
/// A workspace-hack (cargo-hakari) that generated crates depend on when the workspace names it.
const WORKSPACE_HACK: &str = "sqsafe-workspace-hack";

/// The project a consumer goes into: a Cargo workspace and the SAM template at or above its root.
#[derive(Debug, Clone)]
pub struct Project {
    /// The workspace root: the folder whose Cargo.toml has `[workspace]`. The consumer goes in `functions/NAME`.
    pub root: PathBuf,
    /// The SAM template: `template.yaml` in the root or the nearest folder above it.
    pub template: PathBuf,
    /// What the workspace's Cargo.toml offers its members.
    manifest: WorkspaceManifest,
}

/// The parts of a workspace's Cargo.toml that decide what a generated crate's own Cargo.toml says.
#[derive(Debug, Clone, Default)]
pub(crate) struct WorkspaceManifest {
    /// Keys of `[workspace.package]`.
    package: BTreeSet<String>,
    /// Names in `[workspace.dependencies]`.
    dependencies: BTreeSet<String>,
    /// Whether `[workspace.lints]` exists.
    lints: bool,
    /// `[workspace] members` and `exclude` patterns.
    members: Vec<String>,
    exclude: Vec<String>,
}

impl Project {
    /// The project around `start`, found as cargo finds a workspace: the nearest folder at or above `start` whose
    /// Cargo.toml has a `[workspace]` table; its template is the nearest `template.yaml` at or above that root.
    ///
    /// # Errors
    /// No workspace or no template there, or a Cargo.toml that does not parse.
    pub fn find(start: &Path) -> Result<Self, ScaffoldError> {
        match Self::workspace_root(start)? {
            Some(root) => Self::at(&root),
            None => fail(format!(
                "no Cargo workspace at or above {}: run inside a workspace (a Cargo.toml with [workspace]) that has a \
                 template.yaml, or pass --root",
                start.display()
            )),
        }
    }

    /// The nearest folder at or above `start` whose Cargo.toml has a `[workspace]` table (canonical), if any.
    ///
    /// # Errors
    /// `start` does not exist, or a Cargo.toml on the way does not parse.
    pub fn workspace_root(start: &Path) -> Result<Option<PathBuf>, ScaffoldError> {
        let start = start
            .canonicalize()
            .map_err(|e| ScaffoldError(format!("{}: {e}", start.display())))?;
        for dir in start.ancestors() {
            let manifest = dir.join("Cargo.toml");
            if manifest.is_file() && read_manifest(&manifest)?.is_some() {
                return Ok(Some(dir.to_path_buf()));
            }
        }
        Ok(None)
    }

    /// The project whose workspace root is `root`.
    ///
    /// # Errors
    /// `root` has no Cargo.toml with `[workspace]`, or no template.yaml at or above it.
    pub fn at(root: &Path) -> Result<Self, ScaffoldError> {
        let root = root
            .canonicalize()
            .map_err(|e| ScaffoldError(format!("{}: {e}", root.display())))?;
        let manifest_path = root.join("Cargo.toml");
        let Some(manifest) = read_manifest(&manifest_path)? else {
            return fail(format!(
                "{} has no [workspace] table: a consumer is a member crate of a Cargo workspace",
                manifest_path.display()
            ));
        };
        let Some(template) = root
            .ancestors()
            .map(|dir| dir.join("template.yaml"))
            .find(|path| path.is_file())
        else {
            return fail(format!(
                "no template.yaml in {} or above it: the consumer's queue, DLQ, alarms and function go into the \
                 project's SAM template",
                root.display()
            ));
        };
        Ok(Self {
            root,
            template,
            manifest,
        })
    }

    /// What the workspace's Cargo.toml offers its members.
    pub(crate) fn manifest(&self) -> &WorkspaceManifest {
        &self.manifest
    }

    /// The crate's Cargo.toml: what the workspace offers is inherited, the rest written out. Refuses a workspace
    /// that lacks a dependency the consumer needs (naming each) or whose members would not include the crate.
    fn cargo_toml(&self, spec: &Spec) -> Result<String, ScaffoldError> {
        self.manifest
            .cargo_toml(&self.root.join("Cargo.toml"), spec)
    }
}

impl WorkspaceManifest {
    pub(crate) fn cargo_toml(
        &self,
        manifest_path: &Path,
        spec: &Spec,
    ) -> Result<String, ScaffoldError> {
        let needs: Vec<&str> = DEPENDENCIES
            .iter()
            .chain(DEV_DEPENDENCIES.iter())
            .copied()
            .collect();
        self.require(manifest_path, &spec.name, "a consumer", &needs)?;
        consumer_templates::render("consumer/Cargo.toml.jinja", &spec.vars(), &self.vars())
    }

    /// Refuses a workspace that lacks one of `needs` in `[workspace.dependencies]` (naming each) or whose members
    /// would not include `functions/<name>`. `what` names the crate in the message (`a consumer`, `an API`).
    pub(crate) fn require(
        &self,
        manifest_path: &Path,
        name: &str,
        what: &str,
        needs: &[&str],
    ) -> Result<(), ScaffoldError> {
        let missing: Vec<_> = needs
            .iter()
            .filter(|name| !self.dependencies.contains(**name))
            .collect();
        if !missing.is_empty() {
            return fail(format!(
                "{}: [workspace.dependencies] lacks {}; {what} inherits them (sqsafe's project template has \
                 the lines: add them, then run this again)",
                manifest_path.display(),
                missing
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let path = format!("functions/{name}");
        let matches = |patterns: &[String]| patterns.iter().any(|p| glob_matches(p, &path));
        if !matches(&self.members) || matches(&self.exclude) {
            return fail(format!(
                "{path} would not be a member of the workspace: add \"functions/*\" to [workspace] members in {}",
                manifest_path.display()
            ));
        }
        Ok(())
    }

    /// What the workspace offers, as the crate's Cargo.toml template reads it.
    pub(crate) fn vars(&self) -> WorkspaceVars {
        WorkspaceVars {
            package: self.package.iter().cloned().collect(),
            lints: self.lints,
            hack: self.dependencies.contains(WORKSPACE_HACK),
        }
    }
}

/// Reads a Cargo.toml: `None` when it has no `[workspace]` table.
fn read_manifest(path: &Path) -> Result<Option<WorkspaceManifest>, ScaffoldError> {
    let text = fs::read_to_string(path)
        .map_err(|e| ScaffoldError(format!("read {}: {e}", path.display())))?;
    let doc: toml::Table = text
        .parse()
        .map_err(|e| ScaffoldError(format!("{} is not TOML: {e}", path.display())))?;
    let Some(workspace) = doc.get("workspace").and_then(toml::Value::as_table) else {
        return Ok(None);
    };
    let keys = |name: &str| -> BTreeSet<String> {
        workspace
            .get(name)
            .and_then(toml::Value::as_table)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    };
    let strings = |name: &str| -> Vec<String> {
        workspace
            .get(name)
            .and_then(toml::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(Some(WorkspaceManifest {
        package: keys("package"),
        dependencies: keys("dependencies"),
        lints: workspace.contains_key("lints"),
        members: strings("members"),
        exclude: strings("exclude"),
    }))
}

/// Whether a workspace member pattern (`functions/*`, as cargo reads it: a glob whose `*` stays within one path
/// segment) names `path`.
fn glob_matches(pattern: &str, path: &str) -> bool {
    let segments = glob::MatchOptions {
        require_literal_separator: true,
        ..glob::MatchOptions::new()
    };
    glob::Pattern::new(pattern.trim_end_matches('/')).is_ok_and(|p| p.matches_with(path, segments))
}

/// Writes every file of the consumer into `project`; refuses to overwrite anything and checks everything before
/// writing (the child template of its nested application is written only when missing). Returns the paths written,
/// relative to the workspace root (the template's as it is found), and whether a different child template was kept.
///
/// # Errors
/// A clash with what exists (crate folder, event file, template resources), a workspace that cannot take the crate,
/// a template without the consumer markers, or a file that cannot be written.
pub fn generate(project: &Project, spec: &Spec) -> Result<Generated, ScaffoldError> {
    let root = project.root.as_path();
    let crate_dir = root.join("functions").join(&spec.name);
    if crate_dir.exists() {
        return fail(format!("functions/{} exists already", spec.name));
    }
    let cargo_toml = project.cargo_toml(spec)?;
    let template_path = project.template.as_path();
    let template = fs::read_to_string(template_path)
        .map_err(|e| ScaffoldError(format!("read {}: {e}", template_path.display())))?;
    let template = with_consumer(&template, spec)?;
    let files = consumer_files(cargo_toml, spec)?;
    // The sample events live beside the template (where sqsafe_testkit::event_file looks for them).
    let events_dir = template_path.parent().unwrap_or(root).join("events");
    let event_path = events_dir.join(format!("{}.json", spec.name));
    if event_path.exists() {
        return fail(format!("{} exists already", event_path.display()));
    }
    let child = ChildFile::at(template_path.parent().unwrap_or(root), spec)?;
    let mut written = Vec::with_capacity(files.len() + 2);
    for (path, text) in files {
        let full = match path.strip_prefix("events/") {
            Some(file) => events_dir.join(file),
            None => root.join(&path),
        };
        if let Some(dir) = full.parent() {
            fs::create_dir_all(dir)
                .map_err(|e| ScaffoldError(format!("create {}: {e}", dir.display())))?;
        }
        fs::write(&full, text).map_err(|e| ScaffoldError(format!("write {path}: {e}")))?;
        written.push(path);
    }
    // Before the template that nests it.
    let shown = child.shown(root);
    let kept = match child.state {
        ChildState::Same => None,
        ChildState::Missing => {
            child.write()?;
            written.push(shown);
            None
        }
        ChildState::Different => Some(format!(
            "kept {shown}: it differs from the one this sqsafe ships (edited, or from another sqsafe version), and \
             the new consumer uses it as it is. Compare it with templates/project/templates/child/{} in sqsafe's \
             repository at version {}",
            child.file_name(),
            env!("CARGO_PKG_VERSION")
        )),
    };
    fs::write(template_path, template)
        .map_err(|e| ScaffoldError(format!("write {}: {e}", template_path.display())))?;
    written.push(template_path.display().to_string());
    format_rust(root, &written)?;
    Ok(Generated { written, kept })
}

/// What [`generate()`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The files written, relative to the workspace root (the template's as it is found).
    pub written: Vec<String>,
    /// Why the project's copy of the child template was left as it is, when it differs from the one this sqsafe
    /// ships (the team may have edited it).
    pub kept: Option<String>,
}

/// The project's copy of a consumer's child template (`sqsafe/consumer.yaml` next to template.yaml) and what to do
/// with it: write it when missing, nothing when it is sqsafe's, leave it alone (and say so) when it differs.
#[derive(Debug)]
struct ChildFile {
    path: PathBuf,
    shipped: &'static str,
    state: ChildState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChildState {
    Missing,
    Same,
    Different,
}

impl ChildFile {
    fn at(template_dir: &Path, spec: &Spec) -> Result<Self, ScaffoldError> {
        let (name, shipped) = child_template(spec);
        let path = template_dir.join(CHILD_DIR).join(name);
        let state = match fs::read_to_string(&path) {
            Ok(text) if text == shipped => ChildState::Same,
            Ok(_) => ChildState::Different,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ChildState::Missing,
            Err(e) => return fail(format!("read {}: {e}", path.display())),
        };
        Ok(Self {
            path,
            shipped,
            state,
        })
    }

    /// Writes sqsafe's text (the file was missing).
    fn write(&self) -> Result<(), ScaffoldError> {
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir)
                .map_err(|e| ScaffoldError(format!("create {}: {e}", dir.display())))?;
        }
        fs::write(&self.path, self.shipped)
            .map_err(|e| ScaffoldError(format!("write {}: {e}", self.path.display())))
    }

    /// The path as the other written files are shown: relative to the workspace root when inside it.
    fn shown(&self, root: &Path) -> String {
        self.path
            .strip_prefix(root)
            .unwrap_or(&self.path)
            .display()
            .to_string()
    }

    fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// The template with the consumer's resources and outputs added; refuses a logical id it already has.
pub(crate) fn with_consumer(template: &str, spec: &Spec) -> Result<String, ScaffoldError> {
    // Every logical id the consumer adds must be new (the template also holds resources that are not consumers',
    // e.g. the outbox's `OutboxTable`, which `new-consumer outbox --transact` would otherwise duplicate).
    // The child's resources count as the parent's `<Pascal><Id>` for sqsafe check and sqsafe local.
    // Its parameter (a plain consumer's API URL) must be new too.
    let generated = spec.render(RESOURCES_YAML)? + &spec.render(PARAMETERS_YAML)?;
    let ids = generated
        .lines()
        .filter_map(|line| line.strip_prefix("  ").and_then(|l| l.strip_suffix(':')))
        .map(str::to_owned)
        .chain(CHILD_IDS.iter().map(|id| format!("{}{id}", spec.pascal)));
    for id in ids {
        if !id.is_empty()
            && id.chars().all(|c| c.is_ascii_alphanumeric())
            && template.contains(&format!("\n  {id}:"))
        {
            return fail(format!("template.yaml already has {id}"));
        }
    }
    add_to_template(template, spec)
}

/// The consumer's files (paths relative to the workspace root; the sample event's under `events/`), unformatted.
pub(crate) fn consumer_files(
    cargo_toml: String,
    spec: &Spec,
) -> Result<Vec<(String, String)>, ScaffoldError> {
    let mut files = vec![(format!("functions/{}/Cargo.toml", spec.name), cargo_toml)];
    for path in [
        "README.md",
        "src/main.rs",
        "src/lib.rs",
        "src/handler.rs",
        "tests/handler.rs",
    ] {
        let text = spec.render(&format!("consumer/{path}.jinja"))?;
        files.push((format!("functions/{}/{path}", spec.name), text));
    }
    files.push((
        format!("events/{}.json", spec.name),
        spec.render("consumer/events/event.json.jinja")?,
    ));
    Ok(files)
}

/// Formats the generated Rust files with the toolchain's rustfmt (the workspace's edition), as a person would.
pub(crate) fn format_rust(root: &Path, written: &[String]) -> Result<(), ScaffoldError> {
    let files: Vec<_> = written
        .iter()
        .filter(|p| p.ends_with(".rs"))
        .map(|p| root.join(p))
        .collect();
    let status = std::process::Command::new("rustfmt")
        .args(["--edition", "2024"])
        .args(&files)
        .status()
        .map_err(|e| ScaffoldError(format!("run rustfmt (rustup component add rustfmt): {e}")))?;
    if !status.success() {
        return fail(format!("rustfmt failed on the generated files ({status})"));
    }
    Ok(())
}

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
    out.push_str(&spec.render(RESOURCES_YAML)?);
    out.push_str(&template[resources_at..outputs_at]);
    out.push_str(&spec.render(OUTPUTS_YAML)?);
    out.push_str(&template[outputs_at..]);
    Ok(out)
}

/// Where the template's top-level `Parameters:` mapping ends: after its last indented line, before the blank lines
/// and comments that precede the next top-level key.
fn parameters_end(template: &str) -> Option<usize> {
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

/// The child template of a consumer's nested application: its file name in the project's `sqsafe/` folder and its
/// text as sqsafe ships it.
pub(crate) fn child_template(spec: &Spec) -> (&'static str, &'static str) {
    let (path, text) = if spec.fifo {
        CHILD_FIFO
    } else {
        CHILD_STANDARD
    };
    (path.trim_start_matches("child/"), text)
}

/// What a consumer adds to template.yaml: at the end of its Parameters (a plain consumer's API URL), to its Resources
/// (the nested application, the role, the function, with --transact the effect table), to its Outputs.
const PARAMETERS_YAML: &str = "consumer/template/parameters.yaml.jinja";
const RESOURCES_YAML: &str = "consumer/template/resources.yaml.jinja";
const OUTPUTS_YAML: &str = "consumer/template/outputs.yaml.jinja";

/// The folder, next to template.yaml, that holds the child templates.
pub(crate) const CHILD_DIR: &str = "sqsafe";

/// The logical ids of the child templates' resources (the same in both): `sqsafe check` and `sqsafe local` read them
/// as `<Pascal><Id>` in the parent, so those must be free too.
const CHILD_IDS: [&str; 8] = [
    "Queue",
    "DeadLetterQueue",
    "LogGroup",
    "DeadLetterAlarm",
    "QueueAgeAlarm",
    "DeadLettersAlarm",
    "FunctionErrorsAlarm",
    "Dashboard",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_derived() {
        let spec = Spec::new("send-invoice", false, false).expect("valid");
        assert_eq!(
            (spec.pascal.as_str(), spec.snake.as_str()),
            ("SendInvoice", "send_invoice")
        );
        for bad in [
            "",
            "x",
            "Send",
            "send_invoice",
            "-send",
            "send-",
            "a--b",
            "9lives",
            "sqsafe-x",
            "xtask",
        ] {
            assert!(Spec::new(bad, false, false).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_template_gets_resources_and_outputs_before_the_markers() {
        let template = format!(
            "Resources:\n  A: 1\n{RESOURCES_MARKER}\n\nOutputs:\n  B: 2\n{OUTPUTS_MARKER}\n"
        );
        let spec = Spec::new("send-invoice", true, true).expect("valid");
        let out = add_to_template(&template, &spec).expect("added");
        let app = out
            .find("  SendInvoice:\n")
            .expect("the nested application");
        let table = out.find("  SendInvoiceTable:").expect("table");
        let function = out.find("  SendInvoiceFunction:").expect("function");
        let marker = out.find(RESOURCES_MARKER).expect("marker kept");
        let output = out.find("  SendInvoiceQueueUrl:").expect("output");
        assert!(table < app && app < function && function < marker && marker < output);
        assert!(
            out.contains("Location: sqsafe/consumer-fifo.yaml"),
            "a FIFO consumer nests the FIFO child"
        );
        assert!(
            !out.contains("AWS::SQS::Queue") && !out.contains("AWS::CloudWatch::"),
            "the queues, alarms and dashboard are the child's"
        );
        assert!(
            !out.contains("MaximumBatchingWindowInSeconds"),
            "FIFO queues have no batching window"
        );
        assert!(!out.contains("{{"), "every placeholder filled");
        let missing = add_to_template("Resources:\n", &spec).expect_err("no markers");
        assert!(missing.to_string().contains("markers"), "{missing}");
    }

    /// A scratch workspace with the dependencies a consumer inherits, `extra` appended to its Cargo.toml, and
    /// `template` as its template.yaml.
    fn scratch_project(name: &str, extra: &str, template: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("sqsafe-new-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).expect("scratch");
        let deps: String = DEPENDENCIES
            .iter()
            .chain(DEV_DEPENDENCIES.iter())
            .map(|d| format!("{d} = \"1\"\n"))
            .collect();
        fs::write(
            root.join("Cargo.toml"),
            format!("[workspace]\nmembers = [\"functions/*\"]\n\n[workspace.dependencies]\n{deps}{extra}"),
        )
        .expect("Cargo.toml");
        fs::write(root.join("template.yaml"), template).expect("template");
        root
    }

    fn markers_only() -> String {
        format!(
            "Parameters:\n  Other:\n    Type: String\n\nResources:\n{RESOURCES_MARKER}\n\nOutputs:\n{OUTPUTS_MARKER}\n"
        )
    }

    #[test]
    fn a_plain_consumer_gets_its_api_parameter_at_the_end_of_parameters() {
        let template = format!(
            "Parameters:\n  Other:\n    Type: String\n    # a comment inside\n\n# a comment between\nConditions: {{}}\n\
             Resources:\n{RESOURCES_MARKER}\n\nOutputs:\n{OUTPUTS_MARKER}\n"
        );
        let spec = Spec::new("send-invoice", false, false).expect("valid");
        let out = with_consumer(&template, &spec).expect("added");
        let other = out.find("  Other:").expect("kept");
        let parameter = out
            .find("  SendInvoiceApiUrl:\n    Type: String")
            .expect("the parameter");
        let conditions = out.find("Conditions:").expect("kept");
        assert!(other < parameter && parameter < conditions, "{out}");
        assert!(
            out.contains("          API_URL: !Ref SendInvoiceApiUrl\n"),
            "{out}"
        );
        // A template that has the parameter already is refused, naming it.
        let taken = template.replace("  Other:", "  SendInvoiceApiUrl:");
        let refused = with_consumer(&taken, &spec).expect_err("the parameter exists");
        assert!(
            refused.to_string().contains("SendInvoiceApiUrl"),
            "{refused}"
        );
        // A transactional consumer calls no API.
        let transact = with_consumer(
            &template,
            &Spec::new("book-it", false, true).expect("valid"),
        )
        .expect("added");
        assert!(!transact.contains("ApiUrl"), "{transact}");
        let none = with_consumer(
            &format!("Resources:\n{RESOURCES_MARKER}\nOutputs:\n{OUTPUTS_MARKER}\n"),
            &spec,
        )
        .expect_err("no Parameters");
        assert!(none.to_string().contains("Parameters"), "{none}");
    }

    #[test]
    fn a_consumer_whose_resources_exist_is_refused_before_writing() {
        // A resource that is not a consumer's: `outbox --transact` would add an `OutboxTable` too.
        let template = format!(
            "Parameters:\n  Other:\n    Type: String\n\nResources:\n  OutboxTable:\n    Type: AWS::DynamoDB::Table\n\
             {RESOURCES_MARKER}\n\nOutputs:\n{OUTPUTS_MARKER}\n"
        );
        let root = scratch_project("clash", "", &template);
        let project = Project::at(&root).expect("project");
        let spec = Spec::new("outbox", false, true).expect("valid");
        let refused = generate(&project, &spec).expect_err("clash");
        assert!(refused.to_string().contains("OutboxTable"), "{refused}");
        assert!(!root.join("functions").exists(), "nothing written");
        let without_table = Spec::new("outbox", false, false).expect("valid");
        assert!(
            with_consumer(&template, &without_table).is_ok(),
            "no clash without --transact"
        );
        // The child's queue becomes `OutboxQueue` where sqsafe check and sqsafe local read the template.
        let queue = template.replace("OutboxTable:", "OutboxQueue:");
        let refused = with_consumer(&queue, &without_table).expect_err("clash with a child's id");
        assert!(refused.to_string().contains("OutboxQueue"), "{refused}");
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn the_project_is_found_upward_from_a_folder_inside_it() {
        let root = scratch_project("find", "", &markers_only());
        let inside = root.join("functions").join("other").join("src");
        fs::create_dir_all(&inside).expect("a member's folder");
        // A member's own Cargo.toml (no [workspace]) is passed over, as cargo does.
        fs::write(
            root.join("functions/other/Cargo.toml"),
            "[package]\nname = \"other\"\n",
        )
        .expect("member");
        let project = Project::find(&inside).expect("found");
        assert_eq!(project.root, root.canonicalize().expect("root"));
        assert_eq!(project.template, project.root.join("template.yaml"));
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn no_workspace_or_no_template_is_refused_with_what_to_do() {
        let root = std::env::temp_dir().join(format!("sqsafe-new-none-{}", std::process::id()));
        fs::create_dir_all(&root).expect("scratch");
        fs::write(root.join("Cargo.toml"), "[package]\nname = \"alone\"\n").expect("a package");
        let refused = Project::at(&root).expect_err("not a workspace");
        assert!(refused.to_string().contains("[workspace]"), "{refused}");
        let _ = fs::remove_dir_all(&root);

        let root = scratch_project("no-template", "", "");
        fs::remove_file(root.join("template.yaml")).expect("no template");
        // (A template.yaml above the scratch folder, as in the system temp folder, would be found: there is none.)
        let refused = Project::at(&root).expect_err("no template");
        assert!(
            refused.to_string().contains("no template.yaml"),
            "{refused}"
        );
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn a_workspace_without_the_dependencies_is_refused_naming_each_and_nothing_is_written() {
        let root = scratch_project("deps", "", &markers_only());
        let manifest = fs::read_to_string(root.join("Cargo.toml")).expect("manifest");
        let trimmed: String = manifest
            .lines()
            .filter(|l| !l.starts_with("sqsafe-local ") && !l.starts_with("tokio "))
            .map(|l| format!("{l}\n"))
            .collect();
        fs::write(root.join("Cargo.toml"), trimmed).expect("manifest");
        let project = Project::at(&root).expect("project");
        let spec = Spec::new("send-invoice", false, false).expect("valid");
        let refused = generate(&project, &spec).expect_err("missing dependencies");
        let message = refused.to_string();
        assert!(
            message.contains("`tokio`") && message.contains("`sqsafe-local`"),
            "{message}"
        );
        assert!(
            !root.join("functions").exists() && !root.join("events").exists(),
            "nothing written"
        );
        assert_eq!(
            fs::read_to_string(root.join("template.yaml")).expect("template"),
            markers_only(),
            "template untouched"
        );
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn the_crate_inherits_what_the_workspace_offers_and_writes_out_the_rest() {
        let spec = Spec::new("send-invoice", false, false).expect("valid");
        let plain = scratch_project("plain", "", &markers_only());
        let text = Project::at(&plain)
            .expect("project")
            .cargo_toml(&spec)
            .expect("toml");
        assert!(
            text.contains("version = \"0.1.0\"") && text.contains("edition = \"2024\""),
            "{text}"
        );
        assert!(
            !text.contains("[lints]") && !text.contains(WORKSPACE_HACK),
            "{text}"
        );
        assert!(
            text.contains("sqsafe = { workspace = true, features = [\"http\"] }")
                && text.contains("sqsafe-testkit.workspace = true"),
            "{text}"
        );
        let _: toml::Table = text.parse().expect("valid TOML");
        let transact = Project::at(&plain)
            .expect("project")
            .cargo_toml(&Spec::new("book-it", false, true).expect("valid"))
            .expect("toml");
        assert!(
            transact.contains("sqsafe.workspace = true") && !transact.contains("http"),
            "a transactional consumer calls no API: {transact}"
        );

        let extra = format!(
            "{WORKSPACE_HACK} = {{ path = \"hack\" }}\n\n[workspace.package]\nversion = \"2.0.0\"\nedition = \"2024\"\n\n\
             [workspace.lints.rust]\nunsafe_code = \"forbid\"\n"
        );
        let full = scratch_project("full", &extra, &markers_only());
        let text = Project::at(&full)
            .expect("project")
            .cargo_toml(&spec)
            .expect("toml");
        assert!(
            text.contains("version.workspace = true") && text.contains("[lints]"),
            "{text}"
        );
        assert!(
            text.contains(&format!("{WORKSPACE_HACK}.workspace = true")),
            "{text}"
        );
        assert!(
            text.contains("publish = false"),
            "not in [workspace.package]: written out: {text}"
        );
        let _: toml::Table = text.parse().expect("valid TOML");
        let _ = fs::remove_dir_all(&plain);
        let _ = fs::remove_dir_all(&full);
    }

    #[test]
    fn a_crate_the_members_would_not_include_is_refused() {
        let root = scratch_project("members", "", &markers_only());
        let manifest = fs::read_to_string(root.join("Cargo.toml")).expect("manifest");
        fs::write(
            root.join("Cargo.toml"),
            manifest.replace("members = [\"functions/*\"]", "members = [\"crates/*\"]"),
        )
        .expect("manifest");
        let spec = Spec::new("send-invoice", false, false).expect("valid");
        let refused =
            generate(&Project::at(&root).expect("project"), &spec).expect_err("not a member");
        assert!(refused.to_string().contains("functions/*"), "{refused}");
        assert!(glob_matches("functions/*", "functions/send-invoice"));
        assert!(glob_matches(
            "functions/send-invoice",
            "functions/send-invoice"
        ));
        assert!(
            !glob_matches("functions/*", "functions/a/b")
                && !glob_matches("crates/*", "functions/a")
        );
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn the_sample_event_is_json_in_every_variant() {
        for (fifo, transact) in [(false, false), (true, false), (false, true), (true, true)] {
            let spec = Spec::new("send-invoice", fifo, transact).expect("valid");
            let text = spec
                .render("consumer/events/event.json.jinja")
                .expect("rendered");
            let event: serde_json::Value =
                serde_json::from_str(&text).expect("the sample event is JSON");
            let records = event["Records"].as_array().expect("records");
            assert_eq!(records.len(), 2, "{event}");
            assert_eq!(
                records[1]["attributes"]["MessageGroupId"]
                    .as_str()
                    .is_some(),
                fifo,
                "{event}"
            );
        }
    }

    fn child_doc(fifo: bool) -> serde_norway::Value {
        let spec = Spec::new("send-invoice", fifo, false).expect("valid");
        crate::check::parse(child_template(&spec).1).expect("the child template parses")
    }

    fn keys(doc: &serde_norway::Value, section: &str) -> BTreeSet<String> {
        doc.get(section)
            .and_then(serde_norway::Value::as_mapping)
            .map(|m| {
                m.keys()
                    .filter_map(|k| k.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The repository's own template.yaml nests the children sqsafe ships, from its sqsafe/ folder as a project
    /// does: those copies are the shipped files, byte for byte.
    #[test]
    fn the_repository_nests_the_children_sqsafe_ships() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for fifo in [false, true] {
            let (file, shipped) = child_template(&Spec::new("a-b", fifo, false).expect("valid"));
            let path = root.join(CHILD_DIR).join(file);
            let copy =
                std::fs::read_to_string(&path).expect("the repository's copy of a child template");
            assert!(
                copy == shipped,
                "{} differs from templates/project/templates/child/{file}: copy the shipped file over it",
                path.display()
            );
            let parent =
                std::fs::read_to_string(root.join("template.yaml")).expect("template.yaml");
            assert!(
                parent.contains(&format!("Location: {CHILD_DIR}/{file}")),
                "template.yaml nests {file}"
            );
        }
    }

    #[test]
    fn the_fifo_child_is_the_standard_one_with_fifo_queues() {
        let (_, standard) = child_template(&Spec::new("a-b", false, false).expect("valid"));
        let (_, fifo) = child_template(&Spec::new("a-b", true, false).expect("valid"));
        // Past the header comment, the only differences are the queues' FIFO lines and names.
        let body = |text: &str| {
            text.lines()
                .skip_while(|l| l.starts_with('#'))
                .filter(|l| {
                    !l.contains("FifoQueue: true") && !l.contains("ContentBasedDeduplication")
                })
                .map(|l| l.replace(".fifo", "").replace("FIFO consumer", "consumer"))
                .collect::<Vec<_>>()
        };
        assert_eq!(body(standard), body(fifo));
        assert_eq!(fifo.matches("FifoQueue: true").count(), 2, "both queues");
        assert!(fifo.contains("ContentBasedDeduplication: true"));
        for text in [standard, fifo] {
            assert!(
                text.starts_with("# ") && text.contains("sqsafe ships this file"),
                "a header that says what it is"
            );
        }
    }

    #[test]
    fn the_parent_reads_only_what_the_child_declares() {
        for fifo in [false, true] {
            let doc = child_doc(fifo);
            let ids: BTreeSet<String> = CHILD_IDS.iter().map(|id| (*id).to_owned()).collect();
            assert_eq!(
                keys(&doc, "Resources"),
                ids,
                "CHILD_IDS lists the child's resources"
            );
            assert!(
                keys(&doc, "Conditions").is_empty() && keys(&doc, "Mappings").is_empty(),
                "sqsafe check does not inline a child's Conditions or Mappings"
            );
            let spec = Spec::new("send-invoice", fifo, true).expect("valid");
            let parent = spec.render(RESOURCES_YAML).expect("resources")
                + &spec.render(OUTPUTS_YAML).expect("outputs");
            let outputs = keys(&doc, "Outputs");
            for used in parent.split("SendInvoice.Outputs.").skip(1) {
                let name: String = used
                    .chars()
                    .take_while(char::is_ascii_alphanumeric)
                    .collect();
                assert!(outputs.contains(&name), "the child has no output {name}");
            }
            let parameters = keys(&doc, "Parameters");
            let passed: BTreeSet<String> = parent
                .split("      Parameters:\n")
                .nth(1)
                .expect("the application's parameters")
                .lines()
                .take_while(|l| l.starts_with("        "))
                .filter_map(|l| l.trim().split_once(':').map(|(k, _)| k.to_owned()))
                .collect();
            assert!(passed.is_subset(&parameters), "{passed:?} ⊄ {parameters:?}");
            assert!(
                parameters
                    .difference(&passed)
                    .all(|p| { doc["Parameters"][p.as_str()].get("Default").is_some() }),
                "every parameter the parent does not pass has a default"
            );
            let function_name = "FunctionName: !Sub \"${AWS::StackName}-send-invoice\"";
            assert_eq!(
                parent.matches(function_name).count(),
                2,
                "the function and the application derive the same name"
            );
        }
    }

    #[test]
    fn the_child_template_is_written_when_missing_and_never_overwritten() {
        let root = scratch_project("child", "", &markers_only());
        let project = Project::at(&root).expect("project");
        let child = root.join("sqsafe/consumer.yaml");

        let first = generate(&project, &Spec::new("first", false, false).expect("valid"))
            .expect("generated");
        assert!(
            first.written.contains(&"sqsafe/consumer.yaml".to_owned()),
            "{first:?}"
        );
        assert_eq!(first.kept, None);
        let (_, shipped) = child_template(&Spec::new("first", false, false).expect("valid"));
        assert_eq!(fs::read_to_string(&child).expect("child"), shipped);

        let same = generate(&project, &Spec::new("second", false, false).expect("valid"))
            .expect("generated");
        assert!(
            !same.written.iter().any(|p| p.starts_with("sqsafe/")) && same.kept.is_none(),
            "the same file: nothing to write or say: {same:?}"
        );

        let edited = shipped.replace(
            "MessageRetentionPeriod: 345600",
            "MessageRetentionPeriod: 300000",
        );
        fs::write(&child, &edited).expect("a team's edit");
        let kept = generate(&project, &Spec::new("third", false, false).expect("valid"))
            .expect("generated");
        let said = kept.kept.expect("says it kept the team's file");
        assert!(
            said.contains("sqsafe/consumer.yaml") && said.contains("differs"),
            "{said}"
        );
        assert_eq!(
            fs::read_to_string(&child).expect("child"),
            edited,
            "left alone"
        );

        let fifo = generate(&project, &Spec::new("fourth", true, false).expect("valid"))
            .expect("generated");
        assert!(
            fifo.written
                .contains(&"sqsafe/consumer-fifo.yaml".to_owned()),
            "{fifo:?}"
        );
        let _ = fs::remove_dir_all(&root);
    }

    /// The project template's template.yaml before its first consumer (templates/project in sqsafe's repository):
    /// without the lines that include the consumer's parts, the project's name filled in.
    fn project_base_template() -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../templates/project/{{cookiecutter.project_name}}/template.yaml");
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let base: String = text
            .split_inclusive('\n')
            .filter(|line| !line.starts_with("{%") && !line.starts_with("{#"))
            .collect();
        base.replace("{{ cookiecutter.project_name }}", "my-consumers")
    }

    /// `sqsafe check` on the scratch project at `root`: its exit code and output.
    fn check_at(root: &Path) -> (u8, String) {
        let args = crate::CheckArgs {
            template: None,
            root: Some(root.to_path_buf()),
            list_rules: false,
        };
        let mut out = Vec::new();
        let code = crate::run_check(&args, &mut out).expect("checked");
        (code, String::from_utf8_lossy(&out).into_owned())
    }

    #[test]
    fn a_generated_api_keeps_every_rule_and_each_break_is_named() {
        let extra = "axum = \"0.8\"\nlambda_http = \"1\"\nuuid = \"1\"\n";
        let root = scratch_project("api", extra, &project_base_template());
        let project = Project::at(&root).expect("project");
        generate(
            &project,
            &Spec::new("send-invoice", false, false).expect("valid"),
        )
        .expect("consumer");
        let api = crate::ApiSpec::new("orders-api").expect("valid");
        let generated = crate::generate_api(&project, &api).expect("generated");
        assert!(
            generated
                .written
                .contains(&"functions/orders-api/tests/api.rs".to_owned()),
            "{generated:?}"
        );
        assert!(root.join("events/orders-api.json").is_file());
        let again = crate::generate_api(&project, &api).expect_err("exists");
        assert!(
            again
                .to_string()
                .contains("functions/orders-api exists already"),
            "{again}"
        );
        let (code, out) = check_at(&root);
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains("all 43 rules hold for its 2 function(s)"),
            "{out}"
        );

        let good = fs::read_to_string(root.join("template.yaml")).expect("template");
        let without = |from: &str, to: &str| -> String {
            let start = good
                .find(from)
                .unwrap_or_else(|| panic!("{from} in the template"));
            let end = start
                + good[start..]
                    .find(to)
                    .unwrap_or_else(|| panic!("{to} after {from}"));
            format!("{}{}", &good[..start], &good[end..])
        };
        let breaks = [
            (
                "the grant for any consumer's keys",
                good.replace("dynamodb:LeadingKeys: [\"orders-api#*\"]", "dynamodb:LeadingKeys: [\"*\"]"),
                "[idempotency-leading-keys] OrdersApiRole",
            ),
            (
                "routes open to anyone",
                good.replace("        DefaultAuthorizer: AWS_IAM\n", ""),
                "[api-function] OrdersApiFunction",
            ),
            (
                "no 5xx alarm",
                without("  OrdersApiServerErrorsAlarm:", "  # ------"),
                "[api-function] OrdersApiHttpApi",
            ),
            (
                "no errors alarm",
                without("  OrdersApiErrorsAlarm:", "  # 5xx answers"),
                "[alarm-function-errors] OrdersApiFunction",
            ),
            (
                "no idempotency table",
                good.replace("          IDEMPOTENCY_TABLE: !Ref IdempotencyTable\n          IDEMPOTENCY_WINDOW_DAYS", "          IDEMPOTENCY_WINDOW_DAYS"),
                "[api-function] OrdersApiFunction",
            ),
            (
                "may read every record",
                good.replace(
                    "Action: [dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:DeleteItem]\n                Resource: !GetAtt IdempotencyTable.Arn\n                Condition:\n                  ForAllValues:StringLike:\n                    dynamodb:LeadingKeys: [\"orders-api#*\"]",
                    "Action: [dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:DeleteItem, dynamodb:Scan]\n                Resource: !GetAtt IdempotencyTable.Arn\n                Condition:\n                  ForAllValues:StringLike:\n                    dynamodb:LeadingKeys: [\"orders-api#*\"]",
                ),
                "[grant-only-what-is-used] OrdersApiRole",
            ),
        ];
        for (how, broken, want) in breaks {
            assert_ne!(broken, good, "{how}: the break changed nothing");
            fs::write(root.join("template.yaml"), &broken).expect("template");
            let (code, out) = check_at(&root);
            assert!(
                code == 1 && out.contains(want),
                "{how}: expected {want} in:\n{out}"
            );
        }
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn generated_consumers_keep_every_rule_of_sqsafe_check() {
        let root = scratch_project("check", "", &project_base_template());
        let project = Project::at(&root).expect("project");
        for (name, fifo, transact) in [
            ("send-invoice", false, false),
            ("ship-order", true, false),
            ("book-refund", false, true),
            ("book-shipment", true, true),
        ] {
            generate(&project, &Spec::new(name, fifo, transact).expect("valid"))
                .expect("generated");
        }
        let args = crate::CheckArgs {
            template: None,
            root: Some(root.clone()),
            list_rules: false,
        };
        let mut out = Vec::new();
        let code = crate::run_check(&args, &mut out).expect("checked");
        let out = String::from_utf8_lossy(&out);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("all 43 rules hold"), "{out}");

        // Not vacuous: the function renamed without its application, the child's alarms and dashboard watch nothing.
        let template = fs::read_to_string(root.join("template.yaml")).expect("template");
        let function_name = "\n      FunctionName: !Sub \"${AWS::StackName}-send-invoice\"";
        assert_eq!(
            template.matches(function_name).count(),
            1,
            "the function's own"
        );
        fs::write(
            root.join("template.yaml"),
            template.replace(
                function_name,
                "\n      FunctionName: !Sub \"${AWS::StackName}-renamed\"",
            ),
        )
        .expect("template");
        let mut out = Vec::new();
        let code = crate::run_check(&args, &mut out).expect("checked");
        let out = String::from_utf8_lossy(&out);
        assert_eq!(code, 1, "{out}");
        for rule in [
            "[alarm-function-errors] SendInvoiceFunction",
            "[dashboard] SendInvoiceFunction",
        ] {
            assert!(out.contains(rule), "{rule} missing from:\n{out}");
        }
        let _ = fs::remove_dir_all(&root);
    }
}

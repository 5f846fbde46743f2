//! The files of a new consumer: rendered, formatted, written only when none of them exists.

use std::fs;
use std::path::{Path, PathBuf};

use super::error::{ScaffoldError, fail};
use super::project::Project;
use super::spec::{ConsumerSource, Spec, child_template};
use super::template::{CHILD_DIR, CHILD_IDS, PARAMETERS_YAML, add_to_template, resources_yaml};

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
    // A queue's consumer nests its queue, DLQ and alarms (sqsafe/consumer.yaml); a stream consumer has them inline.
    let child = match spec.source {
        ConsumerSource::Sqs => Some(ChildFile::at(template_path.parent().unwrap_or(root), spec)?),
        ConsumerSource::Kinesis | ConsumerSource::DynamodbStream => None,
    };
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
    let kept = match &child {
        None => None,
        Some(child) => child_kept(child, root, &mut written)?,
    };
    fs::write(template_path, template)
        .map_err(|e| ScaffoldError(format!("write {}: {e}", template_path.display())))?;
    written.push(template_path.display().to_string());
    format_rust(root, &written)?;
    Ok(Generated { written, kept })
}

/// Writes the child template when missing; says why a different one was kept.
fn child_kept(
    child: &ChildFile,
    root: &Path,
    written: &mut Vec<String>,
) -> Result<Option<String>, ScaffoldError> {
    let shown = child.shown(root);
    Ok(match child.state {
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
    })
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
pub(crate) struct ChildFile {
    path: PathBuf,
    shipped: &'static str,
    state: ChildState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChildState {
    Missing,
    Same,
    Different,
}

impl ChildFile {
    pub(crate) fn at(template_dir: &Path, spec: &Spec) -> Result<Self, ScaffoldError> {
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
    pub(crate) fn write(&self) -> Result<(), ScaffoldError> {
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir)
                .map_err(|e| ScaffoldError(format!("create {}: {e}", dir.display())))?;
        }
        fs::write(&self.path, self.shipped)
            .map_err(|e| ScaffoldError(format!("write {}: {e}", self.path.display())))
    }

    /// The path as the other written files are shown: relative to the workspace root when inside it.
    pub(crate) fn shown(&self, root: &Path) -> String {
        self.path
            .strip_prefix(root)
            .unwrap_or(&self.path)
            .display()
            .to_string()
    }

    pub(crate) fn file_name(&self) -> String {
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
    let generated = spec.render(resources_yaml(spec))? + &spec.render(PARAMETERS_YAML)?;
    let child_ids: &[&str] = match spec.source {
        ConsumerSource::Sqs => &CHILD_IDS,
        ConsumerSource::Kinesis | ConsumerSource::DynamodbStream => &[],
    };
    let ids = generated
        .lines()
        .filter_map(|line| line.strip_prefix("  ").and_then(|l| l.strip_suffix(':')))
        .map(str::to_owned)
        .chain(child_ids.iter().map(|id| format!("{}{id}", spec.pascal)));
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
    let (handler, tests, sample) = match spec.source {
        ConsumerSource::Sqs => ("src/handler.rs", "tests/handler.rs", "event.json"),
        ConsumerSource::Kinesis => ("src/handler.rs", "tests/stream.rs", "kinesis.json"),
        ConsumerSource::DynamodbStream => ("src/change.rs", "tests/changes.rs", "dynamodb.json"),
    };
    for (path, template) in [
        ("README.md", "README.md"),
        ("src/main.rs", "src/main.rs"),
        ("src/lib.rs", "src/lib.rs"),
        ("src/handler.rs", handler),
        ("tests/handler.rs", tests),
    ] {
        let text = spec.render(&format!("consumer/{template}.jinja"))?;
        files.push((format!("functions/{}/{path}", spec.name), text));
    }
    files.push((
        format!("events/{}.json", spec.name),
        spec.render(&format!("consumer/events/{sample}.jinja"))?,
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

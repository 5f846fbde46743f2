//! The project generated into: its workspace manifest (what it offers, what a new crate needs) and its folders.

use std::collections::BTreeSet;

use std::fs;
use std::path::{Path, PathBuf};

use super::error::{ScaffoldError, fail};
use super::spec::Spec;
use crate::consumer_templates::{self, WorkspaceVars};

/// The dependencies a generated consumer inherits from its workspace (`name.workspace = true`).
/// (serde_json: the answer an HTTP consumer's effect keeps.)
pub(crate) const DEPENDENCIES: [&str; 6] = [
    "aws-sdk-dynamodb",
    "serde",
    "serde_json",
    "sqsafe",
    "tokio",
    "tracing",
];
/// The dev-dependencies of its tests, inherited the same way.
pub(crate) const DEV_DEPENDENCIES: [&str; 2] = ["sqsafe-local", "sqsafe-testkit"];
/// A workspace-hack (cargo-hakari) that generated crates depend on when the workspace names it.
pub(crate) const WORKSPACE_HACK: &str = "sqsafe-workspace-hack";

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
    pub(crate) fn cargo_toml(&self, spec: &Spec) -> Result<String, ScaffoldError> {
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
pub(crate) fn read_manifest(path: &Path) -> Result<Option<WorkspaceManifest>, ScaffoldError> {
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
pub(crate) fn glob_matches(pattern: &str, path: &str) -> bool {
    let segments = glob::MatchOptions {
        require_literal_separator: true,
        ..glob::MatchOptions::new()
    };
    glob::Pattern::new(pattern.trim_end_matches('/')).is_ok_and(|p| p.matches_with(path, segments))
}

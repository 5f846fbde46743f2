//! `sqsafe new api`: the files of a new HTTP API function (an axum Router behind `sqsafe::api`'s idempotency
//! layer, served by lambda_http) and its resources in template.yaml. The templates are
//! `templates/project/templates/api/` in sqsafe's repository.

use std::fs;

use crate::consumer_templates::{self, ApiVars};
use crate::scaffold::error::fail;
use crate::scaffold::generate::format_rust;
use crate::scaffold::{Generated, OUTPUTS_MARKER, Project, RESOURCES_MARKER, ScaffoldError, Spec};

/// The dependencies a generated API inherits from its workspace (`name.workspace = true`), tests included.
pub const API_DEPENDENCIES: [&str; 8] = [
    "axum",
    "lambda_http",
    "serde",
    "serde_json",
    "sqsafe",
    "sqsafe-testkit",
    "tokio",
    "uuid",
];

/// An API to generate: its name in the spellings the templates need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiSpec {
    vars: ApiVars,
}

impl ApiSpec {
    /// Checks `name` (the rules of a consumer's name: it names the crate, the binary, the function and its
    /// records' key prefix).
    ///
    /// # Errors
    /// A name that cannot, or a reserved one.
    pub fn new(name: &str) -> Result<Self, ScaffoldError> {
        let spec = Spec::new(name, false, false)
            .map_err(|e| ScaffoldError(e.0.replacen("consumer name", "API name", 1)))?;
        Ok(Self {
            vars: ApiVars {
                name: spec.name,
                pascal: spec.pascal,
                snake: spec.snake,
            },
        })
    }

    /// `orders-api`.
    pub fn name(&self) -> &str {
        &self.vars.name
    }

    fn render(&self, project: &Project, file: &str) -> Result<String, ScaffoldError> {
        consumer_templates::render_api(
            &format!("api/{file}.jinja"),
            &self.vars,
            &project.manifest().vars(),
        )
    }
}

/// Writes the API's crate (`functions/NAME`), its sample request (`events/NAME.json`) and its resources and outputs
/// in template.yaml; checks everything before writing anything, and overwrites nothing.
///
/// # Errors
/// A clash with what exists (the crate folder, the event file, a logical id of the template), a workspace that
/// cannot take the crate, a template without the markers, or a file that cannot be written.
pub fn generate_api(project: &Project, spec: &ApiSpec) -> Result<Generated, ScaffoldError> {
    let root = project.root.as_path();
    let name = spec.name();
    if root.join("functions").join(name).exists() {
        return fail(format!("functions/{name} exists already"));
    }
    project
        .manifest()
        .require(&root.join("Cargo.toml"), name, "an API", &API_DEPENDENCIES)?;
    let template_path = project.template.as_path();
    let template = fs::read_to_string(template_path)
        .map_err(|e| ScaffoldError(format!("read {}: {e}", template_path.display())))?;
    let resources = spec.render(project, "template/resources.yaml")?;
    let outputs = spec.render(project, "template/outputs.yaml")?;
    let template = with_api(&template, &resources, &outputs)?;
    let events_dir = template_path.parent().unwrap_or(root).join("events");
    let event_path = events_dir.join(format!("{name}.json"));
    if event_path.exists() {
        return fail(format!("{} exists already", event_path.display()));
    }
    let mut files = Vec::new();
    for file in [
        "Cargo.toml",
        "README.md",
        "src/main.rs",
        "src/lib.rs",
        "src/handler.rs",
        "tests/api.rs",
    ] {
        files.push((
            root.join("functions").join(name).join(file),
            format!("functions/{name}/{file}"),
            spec.render(project, file)?,
        ));
    }
    files.push((
        event_path,
        format!("events/{name}.json"),
        spec.render(project, "events/event.json")?,
    ));
    let mut written = Vec::with_capacity(files.len() + 1);
    for (path, shown, text) in files {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)
                .map_err(|e| ScaffoldError(format!("create {}: {e}", dir.display())))?;
        }
        fs::write(&path, text).map_err(|e| ScaffoldError(format!("write {shown}: {e}")))?;
        written.push(shown);
    }
    fs::write(template_path, template)
        .map_err(|e| ScaffoldError(format!("write {}: {e}", template_path.display())))?;
    written.push(template_path.display().to_string());
    format_rust(root, &written)?;
    Ok(Generated {
        written,
        kept: None,
    })
}

/// The template with the API's resources and outputs before the markers; refuses a logical id it already has.
fn with_api(template: &str, resources: &str, outputs: &str) -> Result<String, ScaffoldError> {
    let ids = resources
        .lines()
        .chain(outputs.lines())
        .filter_map(|line| line.strip_prefix("  ").and_then(|l| l.strip_suffix(':')))
        .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric()));
    for id in ids {
        if template.contains(&format!("\n  {id}:")) {
            return fail(format!("template.yaml already has {id}"));
        }
    }
    let (Some(resources_at), Some(outputs_at)) = (
        template.find(RESOURCES_MARKER),
        template.find(OUTPUTS_MARKER),
    ) else {
        return fail(format!(
            "template.yaml has no `{}` / `{}` markers: generated functions go before them",
            RESOURCES_MARKER.trim(),
            OUTPUTS_MARKER.trim()
        ));
    };
    if resources_at > outputs_at {
        return fail("template.yaml's markers are out of order");
    }
    Ok([
        &template[..resources_at],
        resources,
        &template[resources_at..outputs_at],
        outputs,
        &template[outputs_at..],
    ]
    .concat())
}

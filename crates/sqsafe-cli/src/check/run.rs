//! `sqsafe check [--template PATH] [--root DIR] [--list-rules]`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::{RULES, TemplateError, check, flatten, function_crate_binaries, parse};
use crate::error::Error;
use crate::scaffold::Project;

/// `sqsafe check`
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The template to check: YAML (short-form tags such as !Ref and !GetAtt included) or JSON. Default: the
    /// project's template.yaml (the nearest at or above the workspace root around the current folder).
    #[arg(long, value_name = "PATH")]
    pub template: Option<PathBuf>,
    /// The Cargo workspace whose functions/ crates the template must deploy (rule function-crates). Default: the
    /// workspace at or above the current folder, else at or above the template's folder.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Print each rule's name and what it demands, and check nothing.
    #[arg(long)]
    pub list_rules: bool,
}

/// Where the template and the workspace are.
fn locate(args: &CheckArgs) -> Result<(PathBuf, PathBuf), Error> {
    let here =
        || std::env::current_dir().map_err(|e| Error::Usage(format!("the current folder: {e}")));
    let Some(template) = &args.template else {
        let project = match &args.root {
            Some(root) => Project::at(root)?,
            None => Project::find(&here()?)?,
        };
        return Ok((project.template, project.root));
    };
    if let Some(root) = &args.root {
        let root = root
            .canonicalize()
            .map_err(|e| Error::Usage(format!("--root {}: {e}", root.display())))?;
        return Ok((template.clone(), root));
    }
    let folder = template
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let root = match Project::workspace_root(&here()?)? {
        Some(root) => Some(root),
        None => Project::workspace_root(folder).ok().flatten(),
    };
    match root {
        Some(root) => Ok((template.clone(), root)),
        None => Err(Error::Usage(format!(
            "no Cargo workspace at or above the current folder or {}: pass --root (its functions/ crates are \
             what the template must deploy)",
            template.display()
        ))),
    }
}

/// Runs `sqsafe check`: prints every violation, then one summary line. Returns the exit code: 0 when every rule
/// holds, 1 when one does not.
///
/// # Errors
/// No template or workspace found, a template (or the local template of a nested application) that cannot be
/// read, parsed or inlined, a functions/ Cargo.toml that does not
/// parse (the command exits 2 then).
pub fn run_check(args: &CheckArgs, out: &mut dyn Write) -> Result<u8, Error> {
    if args.list_rules {
        for (name, demands) in RULES {
            writeln!(out, "{name:<26}  {demands}")?;
        }
        return Ok(0);
    }
    let (template, root) = locate(args)?;
    let shown = template.display();
    let text = std::fs::read_to_string(&template)
        .map_err(|e| TemplateError(format!("cannot read the template {shown}: {e}")))?;
    let doc = parse(&text)
        .map_err(|e| TemplateError(format!("cannot parse the template {shown}: {e}")))?;
    let folder = template.parent().unwrap_or(Path::new("."));
    let doc = flatten(doc, folder).map_err(|e| TemplateError(format!("{shown}: {e}")))?;
    let crates = function_crate_binaries(&root)?;
    let violations = check(&doc, &crates);
    for v in &violations {
        writeln!(out, "{v}")?;
    }
    if !violations.is_empty() {
        writeln!(
            out,
            "sqsafe check: {} violation(s) in {shown} (crates of {})",
            violations.len(),
            root.display()
        )?;
        return Ok(1);
    }
    let functions = super::template::Template::new(&doc)
        .of_type("AWS::Serverless::Function")
        .len();
    writeln!(
        out,
        "sqsafe check: {shown}: all {} rules hold for its {functions} function(s) (crates of {})",
        RULES.len(),
        root.display()
    )?;
    Ok(0)
}

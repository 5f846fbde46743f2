//! templates/project's generated files: written by `cargo xtask project-template`, compared by `--check` and by
//! the test below, so the project template never drifts from `sqsafe new consumer` or from this repository's scripts.

use std::fs;
use std::path::{Path, PathBuf};

/// The template folder `sam init --location` renders, relative to the repository root.
pub(crate) const TEMPLATE_DIR: &str = "templates/project";
/// The project's template.yaml before any consumer (not rendered itself: outside the project folder).
const BASE_TEMPLATE: &str = "template.base.yaml";
/// Files the project shares with this repository, copied as they are: the pinned Python tools, moto and its env.
const SHARED: [&str; 5] = [
    "requirements/test.txt",
    "requirements/uv.txt",
    "scripts/venv.sh",
    "scripts/moto.sh",
    "scripts/aws-env.sh",
];

/// This repository's root (xtask's crate is one folder below it).
pub(crate) fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))
}

/// Every generated file: `(path relative to the repository root, text)`.
fn generated(root: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    let template_dir = root.join(TEMPLATE_DIR);
    let base = read(&template_dir.join(BASE_TEMPLATE))?;
    let shared = SHARED
        .iter()
        .map(|path| Ok(((*path).to_owned(), read(&root.join(path))?)))
        .collect::<Result<Vec<_>, String>>()?;
    let files = sqsafe_cli::project_template::files(&base, &shared).map_err(|e| e.to_string())?;
    Ok(files
        .into_iter()
        .map(|(path, text)| (Path::new(TEMPLATE_DIR).join(path), text))
        .collect())
}

/// Writes the generated files; returns their paths.
pub(crate) fn write(root: &Path) -> Result<Vec<String>, String> {
    let mut written = Vec::new();
    for (path, text) in generated(root)? {
        let full = root.join(&path);
        if let Some(dir) = full.parent() {
            fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        }
        fs::write(&full, text).map_err(|e| format!("write {}: {e}", full.display()))?;
        written.push(path.display().to_string());
    }
    Ok(written)
}

/// Fails, naming each file, when a committed generated file differs from what [`write()`] would write or is missing.
pub(crate) fn check(root: &Path) -> Result<(), String> {
    let stale: Vec<String> = generated(root)?
        .into_iter()
        .filter(|(path, text)| fs::read_to_string(root.join(path)).ok().as_ref() != Some(text))
        .map(|(path, _)| path.display().to_string())
        .collect();
    if stale.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "templates/project is not what `sqsafe new consumer` and the shared scripts make now; run \
             `cargo xtask project-template` and commit. Differs: {}",
            stale.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_project_template_is_what_the_generator_writes() {
        check(&repository_root()).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_stale_generated_file_is_named() {
        let scratch = std::env::temp_dir().join(format!("xtask-template-{}", std::process::id()));
        let _ = fs::remove_dir_all(&scratch);
        let root = repository_root();
        for path in SHARED
            .iter()
            .map(PathBuf::from)
            .chain([Path::new(TEMPLATE_DIR).join(BASE_TEMPLATE)])
        {
            let to = scratch.join(&path);
            fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
            fs::copy(root.join(&path), to).expect("copy");
        }
        write(&scratch).expect("write");
        check(&scratch).expect("fresh is current");
        let handler = scratch.join(TEMPLATE_DIR).join(
            "{{cookiecutter.project_name}}/functions/{{cookiecutter.consumer_name}}/src/handler.rs",
        );
        let edited = read(&handler).expect("handler").replace("Applied", "Done");
        fs::write(&handler, edited).expect("edit");
        let err = check(&scratch).expect_err("an edited generated file is stale");
        assert!(err.contains("src/handler.rs"), "{err}");
        let _ = fs::remove_dir_all(&scratch);
    }
}

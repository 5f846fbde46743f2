//! templates/project's copied files: the scripts and pinned requirements a project shares with this repository,
//! written by `cargo xtask project-template`, compared by `--check` and by the test below. (The project's consumer
//! is not copied: its files include the templates `sqsafe new consumer` renders, templates/project/templates/.)

use std::fs;
use std::path::{Path, PathBuf};

/// The template folder `sam init --location` renders, relative to the repository root.
pub(crate) const TEMPLATE_DIR: &str = "templates/project";
/// The folder cookiecutter renders (the project's root), inside the template folder.
const PROJECT_DIR: &str = "{{cookiecutter.project_name}}";
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

/// Every copied file: `(path relative to the repository root, text)`.
fn generated(root: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    SHARED
        .iter()
        .map(|path| {
            let to = Path::new(TEMPLATE_DIR).join(PROJECT_DIR).join(path);
            Ok((to, read(&root.join(path))?))
        })
        .collect()
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
            "templates/project's copies of this repository's scripts differ from them; run \
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
        for path in SHARED.iter().map(PathBuf::from) {
            let to = scratch.join(&path);
            fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
            fs::copy(root.join(&path), to).expect("copy");
        }
        write(&scratch).expect("write");
        check(&scratch).expect("fresh is current");
        let script = scratch
            .join(TEMPLATE_DIR)
            .join(PROJECT_DIR)
            .join("scripts/moto.sh");
        let edited = read(&script).expect("moto.sh") + "# edited\n";
        fs::write(&script, edited).expect("edit");
        let err = check(&scratch).expect_err("an edited copy is stale");
        assert!(err.contains("scripts/moto.sh"), "{err}");
        let _ = fs::remove_dir_all(&scratch);
    }
}

//! Where the project is: the folder of the `template.yaml` whose functions a test or a local tool works on.
//!
//! Found at run time, looking upward as cargo does, from the crate being tested (cargo sets `CARGO_MANIFEST_DIR`
//! for `cargo test` and `cargo run`) or else from the current folder; never from where sqsafe's own crates were
//! compiled, which for a team's project is a copy in cargo's git or registry cache. `SQSAFE_PROJECT_ROOT` overrides
//! the search.

use std::path::{Path, PathBuf};

/// The file that marks a project's root.
pub const TEMPLATE_FILE: &str = "template.yaml";

/// The nearest folder at or above `start` that holds [`TEMPLATE_FILE`].
pub fn project_root_from(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|dir| dir.join(TEMPLATE_FILE).is_file())
        .map(Path::to_path_buf)
}

/// Where the search for the project starts: `SQSAFE_PROJECT_ROOT`, else the `CARGO_MANIFEST_DIR` cargo sets when it
/// runs a test or a binary, else the current folder.
pub fn search_start() -> PathBuf {
    ["SQSAFE_PROJECT_ROOT", "CARGO_MANIFEST_DIR"]
        .iter()
        .filter_map(std::env::var_os)
        .find(|value| !value.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The project root: the nearest folder with a `template.yaml` at or above [`search_start`].
///
/// # Errors
/// When there is none, with the folder the search started from (the message says what to do).
pub fn project_root() -> Result<PathBuf, String> {
    let start = search_start();
    project_root_from(&start).ok_or_else(|| {
        format!(
            "no {TEMPLATE_FILE} in {} or any folder above it: run inside a project with a SAM template, or set \
             SQSAFE_PROJECT_ROOT to its folder",
            start.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sqsafe-project-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch folder");
        dir
    }

    #[test]
    fn a_crate_nested_in_a_project_finds_the_template_above_it() {
        let root = scratch("nested");
        std::fs::write(root.join(TEMPLATE_FILE), "Resources: {}\n").expect("template");
        let function = root.join("functions").join("send-invoice");
        std::fs::create_dir_all(function.join("src")).expect("crate folder");
        assert_eq!(project_root_from(&function.join("src")), Some(root.clone()));
        assert_eq!(project_root_from(&root), Some(root.clone()));
        std::fs::remove_dir_all(&root).expect("clean up");
    }

    #[test]
    fn the_nearest_template_wins_and_a_folder_named_like_it_does_not_count() {
        let outer = scratch("nearest");
        std::fs::write(outer.join(TEMPLATE_FILE), "Resources: {}\n").expect("outer template");
        let inner = outer.join("services").join("billing");
        std::fs::create_dir_all(inner.join(TEMPLATE_FILE)).expect("a folder, not a file");
        assert_eq!(
            project_root_from(&inner),
            Some(outer.clone()),
            "a folder is not a template"
        );
        std::fs::remove_dir_all(inner.join(TEMPLATE_FILE)).expect("remove the folder");
        std::fs::write(inner.join(TEMPLATE_FILE), "Resources: {}\n").expect("inner template");
        assert_eq!(
            project_root_from(&inner.join("functions")),
            Some(inner.clone())
        );
        std::fs::remove_dir_all(&outer).expect("clean up");
    }

    #[test]
    fn this_repository_is_found_from_the_running_test() {
        // cargo test sets CARGO_MANIFEST_DIR to this crate's folder; the repository's template is two levels up.
        let root = project_root().expect("the repository's template.yaml");
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(
            root.canonicalize().ok(),
            manifest.join("../..").canonicalize().ok()
        );
    }
}

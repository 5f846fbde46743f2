//! The saves of a workspace's source files, seen as they happen.
//!
//! `cargo lambda watch` notices a save seconds later (3 s on a quiet 2-core machine), then rebuilds and restarts the
//! function; a delivery in between would run the previous code. [`Saves`] tells the invoker at once that a source
//! file changed, so it holds deliveries until watch has built and started what was saved (see
//! [`Status::after_save`](super::Status::after_save)).
//!
//! What counts as a source file: `*.rs`, `Cargo.toml` and `Cargo.lock`, in the workspace's root folder and in its
//! folders, except `target` (anywhere), hidden folders (`.git`, `.venv`, `.tools`, ...) and the cargo target folder
//! given. Folders created in the workspace's root after the start are not watched (restart `sqsafe local up`).

use std::path::{Component, Path, PathBuf};
use std::time::Instant;

use notify::event::{EventKind, ModifyKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::watch;

use super::error::WatchError;

/// The latest save of a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Save {
    /// When it was seen (within milliseconds of the save).
    pub at: Instant,
    /// The file, relative to the workspace.
    pub path: PathBuf,
}

/// Watches a workspace's source files (inotify on Linux) until dropped.
#[derive(Debug)]
pub struct Saves {
    _watcher: RecommendedWatcher,
    latest: watch::Receiver<Option<Save>>,
}

impl Saves {
    /// Starts watching `workspace`'s source files; `skip`: folders inside it that hold no sources (the cargo target
    /// folder when it is not `target`).
    ///
    /// # Errors
    ///
    /// [`WatchError::Io`] when a folder cannot be read or watched (for instance when the system's limit of watches,
    /// `fs.inotify.max_user_watches`, is reached).
    pub fn watch(workspace: &Path, skip: &[PathBuf]) -> Result<Self, WatchError> {
        let root = workspace.to_path_buf();
        let skip_in_events = skip.to_vec();
        let (tx, latest) = watch::channel(None);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else { return };
                if !is_change(event.kind) {
                    return;
                }
                let changed = event.paths.iter().find_map(|path| {
                    let relative = path.strip_prefix(&root).ok()?;
                    (is_source(relative) && !skip_in_events.iter().any(|s| path.starts_with(s)))
                        .then(|| relative.to_path_buf())
                });
                if let Some(path) = changed {
                    tx.send_replace(Some(Save {
                        at: Instant::now(),
                        path,
                    }));
                }
            })
            .map_err(|e| io_error(workspace, e))?;
        watcher
            .watch(workspace, RecursiveMode::NonRecursive)
            .map_err(|e| io_error(workspace, e))?;
        let entries = std::fs::read_dir(workspace).map_err(WatchError::io(format!(
            "reading {} to watch its sources",
            workspace.display()
        )))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && holds_sources(&entry.file_name()) && !skip.contains(&path) {
                watcher
                    .watch(&path, RecursiveMode::Recursive)
                    .map_err(|e| io_error(&path, e))?;
            }
        }
        Ok(Self {
            _watcher: watcher,
            latest,
        })
    }

    /// The latest save (`None` before the first).
    pub fn latest(&self) -> watch::Receiver<Option<Save>> {
        self.latest.clone()
    }
}

/// A change of a file's content or name (an editor's save, a rename over it, a new or removed file); not a read or
/// a change of its metadata alone.
fn is_change(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::Create(_)
            | EventKind::Remove(_)
            | EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Name(_) | ModifyKind::Any)
    )
}

/// Whether a folder of the workspace's root may hold sources: not `target`, not hidden.
fn holds_sources(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    name != "target" && !name.starts_with('.')
}

/// Whether `relative` (a path inside the workspace) names a source file that cargo builds from: `*.rs`,
/// `Cargo.toml`, `Cargo.lock`, outside `target` and hidden folders (an editor's `.main.rs.swp` or `main.rs~` is not
/// one).
pub fn is_source(relative: &Path) -> bool {
    let mut components = relative.components().peekable();
    while let Some(component) = components.next() {
        let Component::Normal(name) = component else {
            return false;
        };
        if components.peek().is_some() && !holds_sources(name) {
            return false;
        }
    }
    let Some(name) = relative.file_name().map(|n| n.to_string_lossy()) else {
        return false;
    };
    !name.starts_with('.')
        && (name == "Cargo.toml" || name == "Cargo.lock" || name.ends_with(".rs"))
}

fn io_error(path: &Path, e: notify::Error) -> WatchError {
    let what = format!("watching {} for saves", path.display());
    let source = match e.kind {
        notify::ErrorKind::Io(source) => source,
        other => std::io::Error::other(format!("{other:?}")),
    };
    WatchError::Io { what, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_rust_files_and_cargo_manifests_outside_target_and_hidden_folders() {
        for source in [
            "src/main.rs",
            "functions/ship-order/src/handler.rs",
            "Cargo.toml",
            "Cargo.lock",
            "crates/x/Cargo.toml",
            "build.rs",
        ] {
            assert!(is_source(Path::new(source)), "{source}");
        }
        for other in [
            "target/debug/build/x/out/generated.rs",
            "functions/a/target/debug/a.rs",
            ".git/index",
            ".venv/lib/x.rs",
            "src/.main.rs.swp",
            "src/main.rs~",
            "src/.#main.rs",
            "README.md",
            "events/ship-order.json",
            "template.yaml",
            "../outside.rs",
            "",
        ] {
            assert!(!is_source(Path::new(other)), "{other}");
        }
    }

    #[tokio::test]
    async fn a_save_is_seen_with_its_path_in_the_workspace() {
        let root = std::env::temp_dir().join(format!(
            "sqsafe-saves-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(root.join("src")).expect("scratch");
        let saves = Saves::watch(&root, &[]).expect("watch");
        let mut latest = saves.latest();
        assert_eq!(*latest.borrow_and_update(), None);
        let before = Instant::now();
        std::fs::write(root.join("src/main.rs"), "fn main() {}\n").expect("save");
        tokio::time::timeout(std::time::Duration::from_secs(10), latest.changed())
            .await
            .expect("the save seen within 10 s")
            .expect("watching");
        let save = latest.borrow().clone().expect("a save");
        assert_eq!(save.path, Path::new("src/main.rs"));
        assert!(save.at >= before);
        drop(saves);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn only_content_and_name_changes_count() {
        use notify::event::{
            AccessKind, CreateKind, DataChange, MetadataKind, RemoveKind, RenameMode,
        };
        for change in [
            EventKind::Create(CreateKind::File),
            EventKind::Remove(RemoveKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Content)),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Modify(ModifyKind::Any),
        ] {
            assert!(is_change(change), "{change:?}");
        }
        for other in [
            EventKind::Access(AccessKind::Read),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::Permissions)),
            EventKind::Other,
        ] {
            assert!(!is_change(other), "{other:?}");
        }
    }
}

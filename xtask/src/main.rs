//! `cargo xtask`: the project's own tasks, a plain binary run through the cargo alias in `.cargo/config.toml`.
//!
//! `cargo xtask new-consumer NAME [--fifo] [--transact]` adds a consumer: its function crate (payload, handler,
//! tests, README), its sample event, and its resources in template.yaml (queue, DLQ, log group, role, function with
//! its event source mapping, alarms, outputs), following every template rule. Nothing else needs an edit: the
//! Makefile, the scripts, the local stack and the docs' tables find consumers in the workspace and template.yaml.
#![forbid(unsafe_code)]

mod scaffold;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "sqsafe's project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Adds a consumer: functions/NAME, events/NAME.json, its resources in template.yaml.
    NewConsumer {
        /// The consumer's name: lower-case letters, digits and `-`, starting with a letter (e.g. `send-invoice`).
        name: String,
        /// Consume a FIFO queue (records of one MessageGroupId in order).
        #[arg(long)]
        fifo: bool,
        /// The effect is DynamoDB writes committed with the record in one transaction (adds a table for them).
        #[arg(long)]
        transact: bool,
        /// The workspace root (default: the nearest folder at or above the current one with template.yaml and
        /// Cargo.toml).
        #[arg(long)]
        root: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.task {
        Task::NewConsumer {
            name,
            fifo,
            transact,
            root,
        } => {
            let Some(root) = root.or_else(workspace_root) else {
                eprintln!(
                    "error: no template.yaml and Cargo.toml at or above the current folder: pass --root"
                );
                return ExitCode::from(2);
            };
            let spec = match scaffold::Spec::new(&name, fifo, transact) {
                Ok(spec) => spec,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            match scaffold::generate(&root, &spec) {
                Ok(written) => {
                    for path in written {
                        println!("wrote {path}");
                    }
                    println!(
                        "\nnext: edit functions/{name}/src/handler.rs (payload, intent, effect), then `cargo test -p {name}`"
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// The nearest folder at or above the current one that holds both template.yaml and Cargo.toml. (Not the folder this
/// tool was compiled in: the same binary serves copies of the workspace.)
fn workspace_root() -> Option<PathBuf> {
    let here = std::env::current_dir().ok()?;
    here.ancestors()
        .find(|dir| dir.join("template.yaml").is_file() && dir.join("Cargo.toml").is_file())
        .map(PathBuf::from)
}

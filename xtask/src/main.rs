//! `cargo xtask`: the project's own tasks, a plain binary run through the cargo alias in `.cargo/config.toml`.
//!
//! - `cargo xtask new-consumer NAME [--fifo] [--transact] [--root DIR]` is `sqsafe new consumer` (crates/sqsafe-cli),
//!   kept so that this repository's scripts and habits keep working: the same code, the same files written.
//! - `cargo xtask project-template [--check]` copies into the project template (templates/project) the scripts it
//!   shares with this repository. `--check` writes nothing and fails when what is committed differs (a test runs
//!   it). Its consumer is not copied: it includes the files `sqsafe new consumer` renders (templates/project/templates).
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sqsafe_cli::{NewCommand, NewConsumerArgs};

mod project_template;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "sqsafe's project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Adds a consumer: functions/NAME, events/NAME.json, its resources in template.yaml (`sqsafe new consumer`).
    NewConsumer {
        /// The consumer's name: lower-case letters, digits and `-`, starting with a letter (e.g. `send-invoice`).
        name: String,
        /// Consume a FIFO queue (records of one MessageGroupId in order).
        #[arg(long)]
        fifo: bool,
        /// The effect is DynamoDB writes committed with the record in one transaction (adds a table for them).
        #[arg(long)]
        transact: bool,
        /// The workspace root (default: found upward from the current folder).
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Copies the shared scripts into templates/project; `--check` only compares.
    ProjectTemplate {
        /// Write nothing; fail, naming each file, when the committed template differs from what would be written.
        #[arg(long)]
        check: bool,
    },
}

fn main() -> ExitCode {
    match Cli::parse().task {
        Task::NewConsumer {
            name,
            fifo,
            transact,
            root,
        } => {
            let command = NewCommand::Consumer(NewConsumerArgs {
                name,
                fifo,
                transact,
                root,
            });
            match sqsafe_cli::run_new(command, &mut std::io::stdout().lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Task::ProjectTemplate { check } => {
            let root = project_template::repository_root();
            let result = if check {
                project_template::check(&root).map(|()| {
                    println!("templates/project's copies of the shared scripts are current");
                })
            } else {
                project_template::write(&root).map(|written| {
                    for path in written {
                        println!("wrote {path}");
                    }
                })
            };
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

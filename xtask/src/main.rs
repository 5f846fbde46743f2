//! `cargo xtask`: the project's own tasks, a plain binary run through the cargo alias in `.cargo/config.toml`.
//!
//! - `cargo xtask new-consumer NAME [--fifo] [--transact] [--envelope E] [--source S] [--root DIR]` is `sqsafe new consumer` (crates/sqsafe-cli),
//!   kept so that this repository's scripts and habits keep working: the same code, the same files written.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sqsafe_cli::{NewCommand, NewConsumerArgs};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "sqsafe's project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Adds a consumer: functions/NAME, events/NAME.json, its resources in template.yaml (`sqsafe new consumer`,
    /// the same arguments).
    NewConsumer(NewConsumerArgs),
}

fn main() -> ExitCode {
    match Cli::parse().task {
        Task::NewConsumer(args) => {
            let command = NewCommand::Consumer(args);
            match sqsafe_cli::run_new(command, &mut std::io::stdout().lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

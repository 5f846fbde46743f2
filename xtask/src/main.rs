//! `cargo xtask`: the project's own tasks, a plain binary run through the cargo alias in `.cargo/config.toml`.
//!
//! - `cargo xtask new-consumer NAME [--fifo] [--transact] [--envelope E] [--root DIR]` is `sqsafe new consumer` (crates/sqsafe-cli),
//!   kept so that this repository's scripts and habits keep working: the same code, the same files written.
#![forbid(unsafe_code)]

use std::path::PathBuf;
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
        /// What the queue's bodies wrap: sqs, sns, eventbridge or s3.
        #[arg(long, value_enum, default_value = "sqs")]
        envelope: sqsafe_cli::ConsumerEnvelope,
        /// The workspace root (default: found upward from the current folder).
        #[arg(long)]
        root: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match Cli::parse().task {
        Task::NewConsumer {
            name,
            fifo,
            transact,
            envelope,
            root,
        } => {
            let command = NewCommand::Consumer(NewConsumerArgs {
                name,
                fifo,
                transact,
                envelope,
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
    }
}

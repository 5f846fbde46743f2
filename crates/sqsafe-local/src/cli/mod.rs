//! The command line of the local pipeline, `sqsafe local up | send | resources` (the `sqsafe` binary of sqsafe-cli parses
//! it with [`LocalCommand`] and calls [`run`]).
//!
//! - `up` runs the whole local pipeline of a template for hands-on use: moto server with the template's tables,
//!   queues and Kinesis streams, every function with an SQS mapping under the local Lambda Runtime API (or, with
//!   `--watch`, under `cargo lambda watch`, see [`watch`](crate::watch)) behind its event source mappings, and every
//!   function fed by a stream of the template behind a stream mapping per shard (`streams`); it prints how to reach
//!   everything and runs until Ctrl-C or SIGTERM, then stops all of it and prints what each mapping did. While it
//!   runs, a small state file under the project's target folder (`target/sqsafe-local/pipeline.json`: moto's
//!   endpoint, each consumer's queue) tells `send` where the pipeline is; `up` removes it when it stops.
//! - `send` sends a consumer's sample event to its queue in the running pipeline, one message per record (a stream
//!   consumer's records to its stream).
//! - `resources` creates the template's tables and queues in a moto server the user runs, named as the template
//!   names them.

mod apis;
mod hints;
mod parameters;
mod resources;
mod send;
mod send_stream;
mod stand_ins;
mod state;
mod streams;
mod tools;
mod up;
mod watch_mode;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;

use crate::stack::{target_dir, template_path};

pub use crate::send_error::SendError;

/// `sqsafe local ...`: the local AWS pipeline of a SAM template (moto server, SQS event source mappings, the functions
/// under a local Lambda Runtime API or `cargo lambda watch`).
#[derive(Debug, Subcommand)]
pub enum LocalCommand {
    /// Runs the template's functions locally, behind their SQS and stream event source mappings, until Ctrl-C or
    /// SIGTERM.
    ///
    /// Starts moto server (SQS, DynamoDB, Kinesis) with the template's tables, queues and Kinesis streams, and runs
    /// each function that has an SQS event: under a local Lambda Runtime API (its binary from --bin-dir: build the
    /// functions first; timeouts, crashes and cold starts as in Lambda), or with --watch under `cargo lambda watch`
    /// (built from the template's workspace; a delivery after a save waits until watch has rebuilt and started the
    /// saved code: `up` prints `reloaded` then). Each function with a Kinesis or DynamoDB event on a stream of the
    /// template runs behind Lambda's stream poller, one per shard (checkpoint, bisection, retry limit and on-failure
    /// queue as the template sets them), from --bin-dir, or with --watch under `cargo lambda watch`. Prints the queue
    /// URLs, the `export` lines that point
    /// the AWS CLI v2 and `sqsafe dlq` at the local moto (and an `aws --endpoint-url` line: the AWS CLI v1 ignores
    /// AWS_ENDPOINT_URL), and a `sqsafe local send FUNCTION` line per function with a sample event
    /// (events/FUNCTION.json or events/FUNCTION-*.json). Ctrl-C or SIGTERM stops everything it started.
    ///
    /// A function's environment is the template's, with its references resolved: tables and queues to the local
    /// ones, parameters to their Default. A parameter without a Default that a function's environment uses must be
    /// given with --parameter NAME=VALUE, as `sam deploy --parameter-overrides` would; without it `up` stops before
    /// starting anything and names the parameter. Except an API's URL, a parameter named *ApiUrl (what `sqsafe new
    /// consumer` adds for each consumer's API): `up` gives it a local stand-in, a fake API on loopback that answers
    /// every call with 200 and `{"call": N, "idempotency_key": KEY}`, and prints the calls it received per
    /// Idempotency-Key when it stops. A function that reads more of an answer than its status needs
    /// --parameter NAME=URL of an API (or a fake of it) that answers as the real one does.
    Up(UpArgs),
    /// Creates the template's tables and queues in the moto server at AWS_ENDPOINT_URL, for running a function by hand.
    ///
    /// Names are the template's without a stack name (`idempotency`, `charge-payment`), as the functions' READMEs use
    /// them; what exists is kept. Prints the table names and queue URLs. Start moto first (`make moto` prints the
    /// export lines).
    Resources(ResourcesArgs),
    /// Sends a consumer's sample event to its queue in the pipeline `sqsafe local up` runs, one SQS message per record
    /// (a stream consumer's: its records put on its Kinesis stream, or its item changes written to its table).
    ///
    /// Each record's body, its message attributes (the correlationId) and, on a FIFO queue, its MessageGroupId and
    /// MessageDeduplicationId are sent as a producer would send them: a FIFO queue drops a copy with the same
    /// deduplication id within 5 minutes, a standard queue delivers it again. The pipeline is found through the file
    /// `up` writes under the project's target folder while it runs (target/sqsafe-local/pipeline.json); no
    /// AWS_ENDPOINT_URL is needed.
    Send(SendArgs),
    /// Creates or updates the project's .venv with the Python tools sqsafe pins (moto server, SAM CLI, cfn-lint,
    /// cargo-lambda); nothing to do when it already holds them. Needs python3 (3.10 or later; PYTHON= to choose).
    Venv,
    /// Runs moto server (from .venv) on a free loopback port: `sqsafe local moto -- cargo test` runs the command
    /// against it (AWS_ENDPOINT_URL and test credentials set), then stops it and fails as the command does; alone,
    /// it runs until Ctrl-C or SIGTERM and prints the lines to export in another terminal.
    Moto(MotoArgs),
}

/// `sqsafe local moto`
#[derive(Debug, Clone, clap::Args)]
pub struct MotoArgs {
    /// The command to run against moto, after `--` (e.g. `-- cargo test`); none: run until stopped.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `sqsafe local send`
#[derive(Debug, Clone, clap::Args)]
pub struct SendArgs {
    /// The consumer: its function's binary, as `sqsafe local up` lists it.
    pub consumer: String,
    /// An event to send (`{"Records": [...]}`: an SQS event, or a stream consumer's Kinesis or DynamoDB stream event)
    /// instead of the consumer's sample (events/CONSUMER.json, else the first events/CONSUMER-*.json).
    pub file: Option<PathBuf>,
    /// Sends the event this many times (a redelivery, a producer's retry).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub times: u32,
}

/// `sqsafe local up`
#[derive(Debug, Clone, clap::Args)]
pub struct UpArgs {
    /// The template (default: the project's template.yaml, found upward from the current folder).
    #[arg(long, default_value_os_t = template_path())]
    pub template: PathBuf,
    /// Where the function binaries are (not used with --watch).
    #[arg(long, default_value_os_t = target_dir().join("debug"))]
    pub bin_dir: PathBuf,
    /// Event source mappings (pollers) per function, for the local Runtime API.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..), conflicts_with = "watch")]
    pub pollers: u16,
    /// Shortens the source queues' visibility timeout (seconds) and scales the functions' backoff and visibility
    /// heartbeat to it.
    #[arg(long = "visibility-timeout", value_name = "SECONDS", value_parser = parse_seconds)]
    pub visibility: Option<Duration>,
    /// Runs each function under `cargo lambda watch` instead (the pinned one in .venv), one per function on its own
    /// port, built from the template's workspace: a saved change is rebuilt, with no restart, and deliveries after
    /// the save wait (held invisible) until the saved code runs. One mapping and one process per function.
    #[arg(long)]
    pub watch: bool,
    /// A template parameter's value, NAME=VALUE (repeat for more): replaces its Default; required for a parameter
    /// without one that a function's environment uses.
    #[arg(long = "parameter", value_name = "NAME=VALUE", value_parser = parse_parameter)]
    pub parameters: Vec<(String, String)>,
}

/// `sqsafe local resources`
#[derive(Debug, Clone, clap::Args)]
pub struct ResourcesArgs {
    /// The template (default: the project's template.yaml, found upward from the current folder).
    #[arg(long, default_value_os_t = template_path())]
    pub template: PathBuf,
}

/// Runs `command` until it is done (`resources`) or stopped (`up`: Ctrl-C or SIGTERM).
///
/// # Errors
/// [`Error::Command`](crate::Error::Command), one line that says what went wrong and, where it can, what to do.
pub async fn run(command: LocalCommand) -> crate::Result<()> {
    let done = match command {
        LocalCommand::Up(args) => up::up(args).await,
        LocalCommand::Resources(args) => resources::resources(&args.template).await,
        LocalCommand::Send(args) => return Ok(send::send(&args).await?),
        LocalCommand::Venv => tools::venv().await,
        LocalCommand::Moto(args) => tools::moto(&args.command).await,
    };
    done.map_err(crate::Error::Command)
}

impl UpArgs {
    /// The parameter values given (`--parameter`), the last one winning.
    fn parameter_map(&self) -> BTreeMap<String, String> {
        self.parameters.iter().cloned().collect()
    }
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    text.parse()
        .map(Duration::from_secs)
        .map_err(|_| format!("{text:?} is not a number of seconds"))
}

fn parse_parameter(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Debug, Parser)]
    struct Local {
        #[command(subcommand)]
        command: LocalCommand,
    }

    #[test]
    fn the_command_line_is_consistent() {
        Local::command().debug_assert();
    }

    #[test]
    fn up_reads_its_parameters() {
        let Local {
            command: LocalCommand::Up(args),
        } = Local::try_parse_from([
            "local",
            "up",
            "--watch",
            "--parameter",
            "ApiUrl=http://127.0.0.1:9/v1?a=b",
            "--parameter",
            "Empty=",
        ])
        .expect("parses")
        else {
            panic!("up");
        };
        assert!(args.watch);
        assert_eq!(
            args.parameter_map(),
            BTreeMap::from([
                ("ApiUrl".to_owned(), "http://127.0.0.1:9/v1?a=b".to_owned()),
                ("Empty".to_owned(), String::new()),
            ])
        );
        for bad in ["ApiUrl", "=x"] {
            assert!(Local::try_parse_from(["local", "up", "--parameter", bad]).is_err());
        }
        assert!(
            Local::try_parse_from(["local", "up", "--watch", "--pollers", "2"]).is_err(),
            "--pollers is for the local Runtime API"
        );
    }
}

//! The command line: `sqsafe new consumer`, `sqsafe check`, `sqsafe local up | send | resources`, `sqsafe dlq inspect` and
//! `sqsafe dlq redrive`.

use std::io::Write;
use std::path::PathBuf;

use aws_sdk_sqs::Client;
use clap::{Args, Parser, Subcommand};
use jiff::SignedDuration;

use sqsafe_local::cli::LocalCommand;

use crate::check::{CheckArgs, run_check};
use crate::clock::Clock;
use crate::error::Error;
use crate::inspect::{InspectOptions, inspect};
use crate::redrive::{RedriveOptions, redrive};
use crate::scan::ScanOptions;
use crate::time::parse_duration;

/// sqsafe: add consumers to a project, check its SAM template, run it locally behind its SQS queues, and operate the
/// dead-letter queues of sqsafe consumers.
///
/// AWS (for `dlq`) is reached the standard way: AWS_REGION, credentials, and AWS_ENDPOINT_URL for a local endpoint
/// (moto).
#[derive(Debug, Parser)]
#[command(name = "sqsafe", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The command groups.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add to the project around the current folder (its Cargo workspace and SAM template).
    #[command(subcommand)]
    New(NewCommand),
    /// Check a SAM template against sqsafe's 44 deployment rules (no AWS, no Python).
    ///
    /// Every function, queue, table, alarm, role and dashboard found is checked: DLQs and their retention and alarms,
    /// visibility timeout against the function timeout, idempotency window against the retentions, least
    /// privilege, the outbox relay and sweeper, the dashboards, the function crates under functions/. Values that
    /// are parameters are checked at their bounds (MinValue, MaxValue, AllowedValues). Prints each violation as
    /// `[rule] resource: what to fix`, then a summary line (`--list-rules` lists the rules). A nested application
    /// (AWS::Serverless::Application) whose Location is a local template file is read and its resources checked
    /// with the parent's, as `<AppId><ChildId>`; one in S3 or the Serverless Application Repository is reported.
    ///
    /// Exit status: 0 when every rule holds, 1 when one does not, 2 when the template or the workspace cannot be
    /// found or read.
    Check(CheckArgs),
    /// Run the project's functions locally behind their SQS queues (moto server, event source mappings, the local
    /// Lambda Runtime API or cargo lambda watch), send a consumer's sample event to it, or create its tables and
    /// queues in a running moto.
    #[command(subcommand)]
    Local(LocalCommand),
    /// Dead-letter queues: look at what is there, move it back.
    #[command(subcommand)]
    Dlq(DlqCommand),
}

/// `sqsafe new ...`
#[derive(Debug, Subcommand)]
pub enum NewCommand {
    /// A consumer: functions/NAME (payload, handler, tests, README), events/NAME.json, and its resources in
    /// template.yaml (queue, DLQ, log group, role, function and mapping, alarms, dashboard, outputs).
    Consumer(NewConsumerArgs),
    /// An HTTP API: functions/NAME (an axum Router served by lambda_http, behind sqsafe's idempotency layer on the
    /// project's idempotency table; tests against moto, README), events/NAME.json (a sample request), and its
    /// resources in template.yaml (HTTP API with IAM authorization, log group, role whose table grant is limited to
    /// its own keys, function, alarms on errors, throttles and 5xx answers, outputs).
    Api(NewApiArgs),
}

/// `sqsafe new api`
#[derive(Debug, Clone, Args)]
pub struct NewApiArgs {
    /// The API's name: lower-case letters, digits and `-`, starting with a letter (e.g. `orders-api`). It names
    /// the crate, the binary, the function and its records' key prefix.
    pub name: String,
    /// The workspace root (default: found upward from the current folder, as cargo finds a workspace; the
    /// template.yaml at or above it).
    #[arg(long)]
    pub root: Option<PathBuf>,
}

/// `sqsafe new consumer`
#[derive(Debug, Clone, Args)]
pub struct NewConsumerArgs {
    /// The consumer's name: lower-case letters, digits and `-`, starting with a letter (e.g. `send-invoice`).
    pub name: String,
    /// Consume a FIFO queue (records of one MessageGroupId in order).
    #[arg(long)]
    pub fifo: bool,
    /// The effect is DynamoDB writes committed with the record in one transaction (adds a table for them).
    #[arg(long)]
    pub transact: bool,
    /// What the queue's bodies wrap: `sqs` (producers send to it; an SNS subscription with raw delivery), `sns` (an
    /// SNS topic's subscription: each body a notification), `eventbridge` (a rule's target: each body an event), `s3`
    /// (a bucket's event notifications: the payload is `sqsafe::S3Object`). The consumer's ENVELOPE and its sample
    /// event follow it.
    #[arg(long, value_enum, default_value = "sqs")]
    pub envelope: crate::ConsumerEnvelope,
    /// What feeds it: `sqs` (a queue of its own, with its DLQ), `kinesis` (a Kinesis data stream of its own) or
    /// `dynamodb-stream` (the changes of a DynamoDB table of its own): a stream's shard in order, stopped at the first
    /// record that must come back, with a failure queue for poison records (with their content) and the mapping's
    /// on-failure queue. A stream consumer's effect is an HTTP call (no --transact, --fifo or --envelope).
    #[arg(long, value_enum, default_value = "sqs")]
    pub source: crate::ConsumerSource,
    /// The workspace root (default: found upward from the current folder, as cargo finds a workspace; the
    /// template.yaml at or above it).
    #[arg(long)]
    pub root: Option<PathBuf>,
}

/// Runs `sqsafe new ...`, writing what it wrote and what to do next to `out`. Needs no AWS.
///
/// # Errors
/// What refuses the consumer (see [`ScaffoldError`](crate::ScaffoldError)); nothing is written then.
pub fn run_new(command: NewCommand, out: &mut dyn Write) -> Result<(), Error> {
    let args = match command {
        NewCommand::Consumer(args) => args,
        NewCommand::Api(args) => return run_new_api(&args, out),
    };
    let project = project_at(args.root.as_deref())?;
    let spec = crate::Spec::new(&args.name, args.fifo, args.transact)?
        .envelope(args.envelope)
        .source(args.source)?;
    let generated = crate::generate(&project, &spec)?;
    for path in generated.written {
        writeln!(out, "wrote {path}")?;
    }
    if let Some(kept) = generated.kept {
        writeln!(out, "{kept}")?;
    }
    writeln!(
        out,
        "\nnext: edit functions/{name}/src/handler.rs (payload, intent, effect), then `cargo test -p {name}`",
        name = args.name
    )?;
    Ok(())
}

/// The project at `root`, or found upward from the current folder.
fn project_at(root: Option<&std::path::Path>) -> Result<crate::Project, Error> {
    Ok(match root {
        Some(root) => crate::Project::at(root)?,
        None => {
            let here = std::env::current_dir()
                .map_err(|e| Error::Usage(format!("the current folder: {e}")))?;
            crate::Project::find(&here)?
        }
    })
}

fn run_new_api(args: &NewApiArgs, out: &mut dyn Write) -> Result<(), Error> {
    let project = project_at(args.root.as_deref())?;
    let spec = crate::ApiSpec::new(&args.name)?;
    let generated = crate::generate_api(&project, &spec)?;
    for path in generated.written {
        writeln!(out, "wrote {path}")?;
    }
    writeln!(
        out,
        "\nnext: edit functions/{name}/src/handler.rs (routes, handlers, caller), then `cargo test -p {name}`",
        name = args.name
    )?;
    Ok(())
}

/// `sqsafe dlq ...`
#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// List the DLQ's messages with their sqsafe context, by error kind, without consuming them.
    ///
    /// Every message received is made visible again; nothing is deleted.
    Inspect(InspectArgs),
    /// Move a few dead letters back to their source queue: sent first, then deleted from the DLQ.
    ///
    /// Exit status: 0 when every dead letter considered moved (or would), 1 when one failed, 3 when one was refused
    /// (past its idempotency window, or no source queue known).
    Redrive(RedriveArgs),
}

/// How the DLQ is read.
#[derive(Debug, Clone, Args)]
pub struct ScanArgs {
    /// The DLQ: its URL, name or ARN.
    #[arg(long, value_name = "DLQ")]
    pub queue: String,
    /// Seconds the messages stay invisible while the command works (they come back by themselves after this if it
    /// dies).
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub visibility_timeout: i32,
    /// Long-poll wait of each receive, in seconds (0 to 20).
    #[arg(long, default_value_t = 1, value_name = "SECONDS")]
    pub wait: i32,
    /// The most messages read.
    #[arg(long, default_value_t = 1000)]
    pub limit: usize,
    /// The message attribute that carries the correlation id.
    #[arg(long, default_value = "correlationId", value_name = "NAME")]
    pub correlation_attribute: String,
}

impl ScanArgs {
    fn options(&self) -> ScanOptions {
        ScanOptions {
            visibility_timeout_secs: self.visibility_timeout,
            wait_secs: self.wait,
            limit: self.limit,
        }
    }
}

/// `sqsafe dlq inspect`
#[derive(Debug, Clone, Args)]
pub struct InspectArgs {
    /// How the DLQ is read.
    #[command(flatten)]
    pub scan: ScanArgs,
    /// JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `sqsafe dlq redrive`
#[derive(Debug, Clone, Args)]
pub struct RedriveArgs {
    /// How the DLQ is read.
    #[command(flatten)]
    pub scan: ScanArgs,
    /// The most dead letters to move (copies of one message count once).
    #[arg(long, value_name = "N")]
    pub max: usize,
    /// Only dead letters of this error kind (repeat for more; `no_context` for messages SQS moved).
    #[arg(long = "kind", value_name = "KIND")]
    pub kinds: Vec<String>,
    /// Print what would move; send and delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Send to this queue (URL, name or ARN) instead of each dead letter's recorded source queue.
    #[arg(long, value_name = "QUEUE")]
    pub to: Option<String>,
    /// Also move dead letters that may have outlived their idempotency window: their effect may apply again.
    #[arg(long)]
    pub force: bool,
    /// The consumer's idempotency window (IDEMPOTENCY_WINDOW_DAYS), for dead letters that do not record it, e.g. 30d.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub window: Option<SignedDuration>,
    /// Refuse dead letters whose idempotency window ends sooner than this: the time the consumer needs to take a
    /// redriven message.
    #[arg(long, value_parser = parse_duration, default_value = "1d", value_name = "DURATION")]
    pub margin: SignedDuration,
}

/// How a command ended; the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Done (0).
    Done,
    /// A dead letter failed to move, or moved without every DLQ copy deleted (1).
    Failed,
    /// A dead letter was refused (3).
    Refused,
}

impl Status {
    /// The exit code.
    pub fn code(self) -> u8 {
        match self {
            Status::Done => 0,
            Status::Failed => 1,
            Status::Refused => 3,
        }
    }
}

/// Runs `cli` with `sqs`, measuring time with `clock`, writing to `out`.
///
/// # Errors
/// What stops the command as a whole (a queue not found, a receive that fails, bad arguments).
pub async fn run(
    cli: Cli,
    sqs: &Client,
    clock: &dyn Clock,
    out: &mut dyn Write,
) -> Result<Status, Error> {
    match cli.command {
        Command::New(command) => {
            run_new(command, out)?;
            Ok(Status::Done)
        }
        Command::Check(args) => Ok(match run_check(&args, out)? {
            0 => Status::Done,
            _ => Status::Failed,
        }),
        Command::Local(command) => {
            // It prints as it goes (a long-running pipeline): what was written so far comes first.
            out.flush()?;
            sqsafe_local::cli::run(command).await?;
            Ok(Status::Done)
        }
        Command::Dlq(DlqCommand::Inspect(args)) => {
            let options = InspectOptions {
                scan: args.scan.options(),
                correlation_attribute: args.scan.correlation_attribute.clone(),
            };
            let report = inspect(sqs, &args.scan.queue, &options, clock).await?;
            if args.json {
                serde_json::to_writer_pretty(&mut *out, &report).map_err(std::io::Error::from)?;
                writeln!(out)?;
            } else {
                report.write_text(out)?;
            }
            Ok(Status::Done)
        }
        Command::Dlq(DlqCommand::Redrive(args)) => {
            let options = RedriveOptions {
                max: args.max,
                kinds: args.kinds,
                dry_run: args.dry_run,
                to: args.to,
                force: args.force,
                window: args.window,
                margin: args.margin,
                correlation_attribute: args.scan.correlation_attribute.clone(),
                endpoint: std::env::var("AWS_ENDPOINT_URL_SQS")
                    .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
                    .ok()
                    .filter(|e| !e.is_empty()),
                scan: args.scan.options(),
            };
            let report = redrive(sqs, &args.scan.queue, &options, clock, out).await?;
            Ok(if report.failed() > 0 {
                Status::Failed
            } else if report.refused() > 0 {
                Status::Refused
            } else {
                Status::Done
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The help of `sqsafe local` and `sqsafe local up`, as clap prints it.
    fn help(path: &[&str]) -> String {
        let mut command = Cli::command();
        let mut sub = &mut command;
        for name in path {
            sub = sub.find_subcommand_mut(name).expect("subcommand");
        }
        sub.render_long_help().to_string()
    }

    #[test]
    fn sqsafe_local_lists_up_send_and_resources() {
        let local = help(&["local"]);
        for listed in ["up ", "send ", "resources "] {
            assert!(
                local.lines().any(|l| l.trim_start().starts_with(listed)),
                "{listed:?} in:\n{local}"
            );
        }
        let up = help(&["local", "up"]);
        for option in [
            "--watch",
            "--template",
            "--visibility-timeout",
            "--parameter <NAME=VALUE>",
        ] {
            assert!(up.contains(option), "{option} in:\n{up}");
        }
        assert!(
            up.contains("*ApiUrl") && up.contains("local stand-in") && !up.contains("payments"),
            "--help says what an API's URL gets without --parameter, and knows no payments API:\n{up}"
        );
        let cli = Cli::try_parse_from(["sqsafe", "local", "up", "--watch"]).expect("parses");
        assert!(matches!(
            cli.command,
            Command::Local(LocalCommand::Up(ref args)) if args.watch
        ));
    }

    #[test]
    fn redrive_reads_its_flags() {
        let cli = Cli::try_parse_from([
            "sqsafe",
            "dlq",
            "redrive",
            "--queue",
            "ledger-dlq.fifo",
            "--max",
            "5",
            "--kind",
            "precondition",
            "--kind",
            "bad_payload",
            "--dry-run",
            "--window",
            "30d",
        ])
        .expect("parses");
        let Command::Dlq(DlqCommand::Redrive(args)) = cli.command else {
            panic!("redrive");
        };
        assert_eq!(args.max, 5);
        assert_eq!(args.kinds, ["precondition", "bad_payload"]);
        assert!(args.dry_run && !args.force);
        assert_eq!(args.window, Some(SignedDuration::from_hours(720)));
        assert_eq!(args.margin, SignedDuration::from_hours(24));
        assert_eq!(args.scan.visibility_timeout, 120);
        assert!(
            Cli::try_parse_from(["sqsafe", "dlq", "redrive", "--queue", "q"]).is_err(),
            "--max is required"
        );
        assert!(
            Cli::try_parse_from([
                "sqsafe", "dlq", "redrive", "--queue", "q", "--max", "1", "--window", "soon"
            ])
            .is_err()
        );
    }
}

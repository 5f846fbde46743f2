//! `sqsafe-local resources`: template.yaml's tables and queues in a running moto server, named as the functions' READMEs
//! use them.
//!
//! `sqsafe-local up`: the whole local pipeline for hands-on use. Starts moto server, creates template.yaml's tables and
//! queues in it, starts the local payments API, runs every function of the template (its binary from `--bin-dir`,
//! default `target/debug`) under the local Lambda Runtime API with `--pollers` event source mappings each, prints how
//! to reach everything, and runs until Ctrl-C or SIGTERM, then stops all of it and prints what each mapping and function did.
//! With `--watch`, each function with an SQS mapping runs under `cargo lambda watch` instead (hot reload; see
//! `sqsafe_local::watch`), behind the same mappings.

#[path = "sqsafe-local/watch_mode.rs"]
mod watch_mode;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use sqsafe_local::PaymentsApi;
use sqsafe_local::esm::{EventSourceMapping, MappingConfig};
use sqsafe_local::lambda::{FunctionInstance, FunctionSpec};
use sqsafe_local::moto::{MotoServer, venv_bin};
use sqsafe_local::stack::{
    LocalStack, StackOptions, TemplateSpec, scaled_visibility_env, target_dir, template_path,
};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::{mpsc, watch};

/// The local AWS pipeline of template.yaml: `up` runs it, `resources` only creates its tables and queues.
#[derive(Debug, Parser)]
#[command(name = "sqsafe-local", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs template.yaml's functions locally: moto server (SQS, DynamoDB), the payments API, the functions under a
    /// local Lambda Runtime API, and an SQS event source mapping per poller. Build the functions first (make local
    /// does). Runs until Ctrl-C or SIGTERM, then stops everything it started.
    Up(Args),
    /// Creates template.yaml's tables and queues in the moto server at AWS_ENDPOINT_URL (`make moto`), named as the
    /// template names them without a stack name (`idempotency`, `charge-payment`), for running a function by hand
    /// as its README shows. What exists is kept. Prints the table names and queue URLs.
    Resources {
        /// The template.
        #[arg(long, default_value_os_t = template_path())]
        template: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
struct Args {
    /// The template.
    #[arg(long, default_value_os_t = template_path())]
    template: PathBuf,
    /// Where the function binaries are (not used with --watch).
    #[arg(long, default_value_os_t = target_dir().join("debug"))]
    bin_dir: PathBuf,
    /// Event source mappings (pollers) per function, for the local Runtime API.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..), conflicts_with = "watch")]
    pollers: u16,
    /// Shortens the source queues' visibility timeout (seconds) and scales the functions' backoff and visibility
    /// heartbeat to it.
    #[arg(long = "visibility-timeout", value_name = "SECONDS", value_parser = parse_seconds)]
    visibility: Option<Duration>,
    /// Runs each function under `cargo lambda watch` instead (the pinned one in .venv), one per function on its own
    /// port, built from the template's workspace: a saved change is rebuilt and runs from the next delivery, with
    /// no restart. One mapping and one process per function.
    #[arg(long)]
    watch: bool,
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    text.parse()
        .map(Duration::from_secs)
        .map_err(|_| format!("{text:?} is not a number of seconds"))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let done = match Cli::parse().command {
        Command::Up(args) => up(args).await,
        Command::Resources { template } => resources(&template).await,
    };
    match done {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sqsafe-local: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `sqsafe-local resources`: the template's tables and queues in the moto server the user runs.
async fn resources(template: &std::path::Path) -> Result<(), String> {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
    let uri = endpoint.parse::<hyper::Uri>().ok();
    let loopback = uri.as_ref().and_then(hyper::Uri::host).is_some_and(|host| {
        host == "localhost"
            || host
                .trim_matches(['[', ']'])
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    if !loopback || uri.as_ref().and_then(hyper::Uri::scheme_str) != Some("http") {
        return Err(format!(
            "AWS_ENDPOINT_URL must point at the local moto server (got {endpoint:?}): run `make moto` and apply the \
             export lines it prints"
        ));
    }
    let spec = TemplateSpec::read(template).map_err(|e| e.to_string())?;
    let config = sqsafe_aws::local_config_loader(&endpoint).load().await;
    let options = StackOptions {
        template_names: true,
        ..StackOptions::default()
    };
    let stack = LocalStack::create(
        &aws_sdk_sqs::Client::new(&config),
        &aws_sdk_dynamodb::Client::new(&config),
        spec,
        options,
    )
    .await
    .map_err(|e| format!("{e} (is moto server running at {endpoint}?)"))?;
    for (logical, table) in &stack.tables {
        println!("table  {table}  ({logical})");
    }
    for (logical, queue) in &stack.queues {
        println!("queue  {}  ({logical})", queue.url);
    }
    Ok(())
}

async fn up(args: Args) -> Result<(), String> {
    let mut stop_signal = StopSignal::new()?;
    let spec = TemplateSpec::read(&args.template).map_err(|e| e.to_string())?;
    // The workspace the template belongs to (a copy of the workspace has its own): where watch builds.
    let workspace = args
        .template
        .canonicalize()
        .ok()
        .and_then(|t| t.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."));
    if args.watch {
        let binaries: Vec<String> = spec.functions.values().map(|f| f.binary.clone()).collect();
        tokio::select! {
            built = watch_mode::prebuild_all(&workspace, &binaries) => built?,
            stopped = stop_signal.recv() => return stopped,
        }
    }
    for f in spec.functions.values().filter(|_| !args.watch) {
        let path = args.bin_dir.join(&f.binary);
        if !path.exists() {
            return Err(format!(
                "{} is missing: cargo build -p {}",
                path.display(),
                f.binary
            ));
        }
    }
    let moto = MotoServer::start(&venv_bin())
        .await
        .map_err(|e| e.to_string())?;
    let config = sqsafe_aws::local_config_loader(&moto.endpoint())
        .load()
        .await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let dynamodb = aws_sdk_dynamodb::Client::new(&config);
    let payments = PaymentsApi::builder()
        .start("127.0.0.1:0".parse().map_err(|e| format!("{e}"))?)
        .await
        .map_err(|e| e.to_string())?;
    let options = StackOptions {
        prefix: "local".into(),
        visibility_timeout: args.visibility,
        parameters: BTreeMap::from([("PaymentsApiUrl".to_owned(), payments.base_url())]),
        ..StackOptions::default()
    };
    let stack = LocalStack::create(&sqs, &dynamodb, spec.clone(), options)
        .await
        .map_err(|e| e.to_string())?;
    // A folder per run: two runs (or two instances at once) never share or append to each other's files.
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let log_dir = target_dir()
        .join("local-logs")
        .join(format!("{started}-{}", std::process::id()));
    std::fs::create_dir_all(&log_dir).map_err(|e| format!("{}: {e}", log_dir.display()))?;
    let log_dir = log_dir.canonicalize().unwrap_or(log_dir);

    println!("moto server      {}", moto.endpoint());
    println!("payments API     {}", payments.base_url());
    for (logical, table) in &stack.tables {
        println!("table            {table}  ({logical})");
    }
    let (stop_tx, stop) = watch::channel(false);
    let (gone_tx, mut gone) = mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    let mut watched = Vec::new();
    for function in spec.functions.values() {
        let queue = stack
            .source_queue(&function.binary)
            .ok_or("queue missing")?;
        let dlq = stack
            .dead_letter_queue(&function.binary)
            .map(|q| q.url.clone())
            .unwrap_or_default();
        println!(
            "{:<16} queue {}\n{:<16} DLQ   {}",
            function.binary, queue.url, "", dlq
        );
        let mut env = stack.function_env(&function.binary);
        if let Some(visibility) = args.visibility {
            env.extend(scaled_visibility_env(visibility));
        }
        env.extend([
            ("AWS_ENDPOINT_URL".to_owned(), moto.endpoint()),
            ("AWS_ACCESS_KEY_ID".to_owned(), "testing".to_owned()),
            ("AWS_SECRET_ACCESS_KEY".to_owned(), "testing".to_owned()),
            ("AWS_REGION".to_owned(), "us-east-1".to_owned()),
        ]);
        if args.watch {
            let shared = watch_mode::Shared {
                workspace: &workspace,
                sqs: &sqs,
                log_dir: &log_dir,
                stop: &stop,
                gone: &gone_tx,
            };
            let started = watch_mode::start(
                &shared,
                &function.binary,
                env,
                queue,
                stack.batch_size(&function.binary),
            )
            .await;
            match started {
                Ok(w) => watched.push(w),
                Err(e) => {
                    let _ = stop_tx.send(true);
                    watch_mode::shutdown(watched).await;
                    return Err(e);
                }
            }
            continue;
        }
        for i in 0..args.pollers {
            let spec = FunctionSpec {
                name: function.binary.clone(),
                binary: args.bin_dir.join(&function.binary),
                env: env.clone(),
                timeout: Duration::from_secs(30),
                log_dir: log_dir.clone(),
            };
            let instance = FunctionInstance::start(spec, usize::from(i))
                .await
                .map_err(|e| e.to_string())?;
            let mapping = MappingConfig {
                queue_url: queue.url.clone(),
                batch_size: stack.batch_size(&function.binary),
                wait_seconds: 5,
                drop_delete_rate: 0.0,
                seed: 0,
            };
            let esm = EventSourceMapping::new(sqs.clone(), mapping, instance).await?;
            let stats = esm.stats();
            let stop = stop.clone();
            let name = format!("{}#{i}", function.binary);
            tasks.push(tokio::spawn(async move {
                let instance = esm.run(stop).await;
                let function = instance.stats();
                instance.shutdown().await;
                (name, stats.snapshot(), function)
            }));
        }
    }
    println!("function logs    {}", log_dir.display());
    println!("\nPoint the AWS CLI and sqsafe dlq at it (another terminal):");
    for line in export_lines(&moto.endpoint()) {
        println!("  {line}");
    }
    println!("\nSend a message (Ctrl-C or SIGTERM stops everything):");
    // The sample events beside the template (a copy of the workspace has its own).
    let events = args
        .template
        .parent()
        .map_or_else(|| PathBuf::from("events"), |dir| dir.join("events"));
    for function in spec.functions.values() {
        let Some(queue) = stack.source_queue(&function.binary) else {
            continue;
        };
        match send_hint(
            &moto.endpoint(),
            &queue.url,
            &function.binary,
            &events,
            &log_dir,
        ) {
            Ok(Some(command)) => println!("  {:<14} {command}", function.binary),
            Ok(None) => println!(
                "  {:<14} (no events/{}*.json to take a sample body from)",
                function.binary, function.binary
            ),
            Err(e) => println!("  {:<14} (no sample: {e})", function.binary),
        }
    }
    if args.watch {
        println!(
            "\nUnder cargo lambda watch: save a change and the next delivery runs it. Each function's output (cargo's \
             and its JSON logs) is in <function logs>/<function>.watch.log."
        );
    }
    let ended = tokio::select! {
        stopped = stop_signal.recv() => stopped,
        Some((name, how)) = gone.recv() => Err(format!("cargo lambda watch for {name} ended: {how}")),
    };
    let _ = stop_tx.send(true);
    println!("\nstopping…");
    for task in tasks {
        if let Ok((name, [invocations, records, deleted, reported, failed, _], function)) =
            task.await
        {
            println!(
                "{name}: {invocations} invocations, {records} records, {deleted} deleted, {reported} reported, \
                 {failed} failed invocations; cold starts {}, crashes {}, timeouts {}",
                function.cold_starts, function.crashes, function.timeouts
            );
        }
    }
    watch_mode::shutdown(watched).await;
    println!("payments API: {}", payments.stats());
    payments.shutdown().await;
    moto.shutdown().await;
    ended
}

/// Ctrl-C (SIGINT) or SIGTERM (what `kill`, systemd and CI runners send): either stops everything this started.
/// Listened to from the start, so that one arriving while things start up is kept, not lost (or fatal).
struct StopSignal {
    interrupt: Signal,
    terminate: Signal,
}

impl StopSignal {
    fn new() -> Result<Self, String> {
        let listen = |kind, name| signal(kind).map_err(|e| format!("cannot watch {name}: {e}"));
        Ok(Self {
            interrupt: listen(SignalKind::interrupt(), "SIGINT")?,
            terminate: listen(SignalKind::terminate(), "SIGTERM")?,
        })
    }

    async fn recv(&mut self) -> Result<(), String> {
        tokio::select! {
            _ = self.interrupt.recv() => Ok(()),
            _ = self.terminate.recv() => Ok(()),
        }
    }
}

/// The shell lines that point the AWS CLI, the SDKs and `sqsafe dlq` at the local endpoint (moto takes any
/// credentials; these are test values, never real ones).
fn export_lines(endpoint: &str) -> [String; 4] {
    [
        format!("export AWS_ENDPOINT_URL={endpoint}"),
        "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing".to_owned(),
        "export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1".to_owned(),
        "unset AWS_PROFILE AWS_SESSION_TOKEN".to_owned(),
    ]
}

/// A ready command that sends the first record of the function's first sample event (`events/<binary>*.json`), with
/// its correlation id and, on a FIFO queue, its message group. The body is written beside the run's logs. Relative
/// paths in the command are relative to the workspace root.
fn send_hint(
    endpoint: &str,
    queue_url: &str,
    binary: &str,
    events: &std::path::Path,
    log_dir: &std::path::Path,
) -> Result<Option<String>, String> {
    let mut samples: Vec<PathBuf> = std::fs::read_dir(events)
        .map_err(|e| format!("{}: {e}", events.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(binary))
        })
        .collect();
    samples.sort();
    let Some(sample) = samples.first() else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(sample).map_err(|e| format!("{}: {e}", sample.display()))?;
    let event: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", sample.display()))?;
    let record = &event["Records"][0];
    let body = record["body"]
        .as_str()
        .ok_or("its first record has no body")?;
    std::fs::create_dir_all(log_dir).map_err(|e| e.to_string())?;
    let body_file = log_dir.join(format!("sample-{binary}.json"));
    std::fs::write(&body_file, body).map_err(|e| e.to_string())?;
    let mut command = format!(
        ".venv/bin/python scripts/send-message.py --endpoint {endpoint} --queue {queue_url} --body {}",
        body_file.display()
    );
    if let Some(group) = record["attributes"]["MessageGroupId"].as_str() {
        command.push_str(&format!(" --group {group}"));
    }
    if let Some(id) = record["messageAttributes"]["correlationId"]["stringValue"].as_str() {
        command.push_str(&format!(" --correlation-id {id}"));
    }
    Ok(Some(command))
}

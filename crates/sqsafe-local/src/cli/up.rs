//! `sqsafe local up`: the whole local pipeline of a template, until Ctrl-C or SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::{mpsc, watch};

use super::apis::{self, Apis};
use super::hints::{cli_v1_line, export_lines, send_hint};
use super::stand_ins::{self, StandIns};
use super::state::{ConsumerQueue, PipelineState, StateFile, StreamTarget, state_path};
use super::streams;
use super::{UpArgs, parameters, watch_mode};
use crate::esm::{EventSourceMapping, MappingConfig, Reports};
use crate::lambda::{FunctionInstance, FunctionSpec, INIT_TIMEOUT};
use crate::moto::{MotoServer, venv_bin};
use crate::stack::{
    LocalStack, StackOptions, StreamSource, TemplateSpec, scaled_visibility_env, target_dir,
};
use crate::watch::Saves;

/// Runs the pipeline of `args.template` until Ctrl-C or SIGTERM, then stops everything it started.
pub(super) async fn up(args: UpArgs) -> Result<(), String> {
    let mut stop_signal = StopSignal::new()?;
    let spec = TemplateSpec::read(&args.template).map_err(|e| e.to_string())?;
    let mut given = args.parameter_map();
    // The APIs the functions call that no value names: a local stand-in each (see stand_ins).
    let stand_in_names = stand_ins::needed(&spec, &given);
    let supplied: Vec<&str> = stand_in_names.iter().map(String::as_str).collect();
    parameters::check(&spec, &given, &supplied)?;
    // The workspace the template belongs to (a copy of the workspace has its own): where watch builds.
    let workspace = args
        .template
        .canonicalize()
        .ok()
        .and_then(|t| t.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."));
    if args.watch {
        let consumers = spec.functions.values().map(|f| f.binary.clone());
        let streams = spec.stream_functions.values().map(|f| f.binary.clone());
        let binaries: Vec<String> = consumers
            .chain(streams)
            .chain(spec.apis.values().map(|a| a.binary.clone()))
            .collect();
        tokio::select! {
            built = watch_mode::prebuild_all(&workspace, &binaries) => built?,
            stopped = stop_signal.recv() => return stopped,
        }
    }
    let queues = spec.functions.values().map(|f| &f.binary);
    let streams = spec.stream_functions.values().map(|f| &f.binary);
    for binary in queues.chain(streams).filter(|_| !args.watch) {
        let path = args.bin_dir.join(binary);
        if !path.exists() {
            return Err(format!(
                "{} is missing: cargo build -p {binary}",
                path.display()
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
    let stand_ins = StandIns::start(&stand_in_names, &mut given).await?;
    let options = StackOptions {
        prefix: "local".into(),
        visibility_timeout: args.visibility,
        parameters: given,
        ..StackOptions::default()
    };
    let mut stack = LocalStack::create(&sqs, &dynamodb, spec.clone(), options)
        .await
        .map_err(|e| e.to_string())?;
    let clients = streams::Clients {
        sqs: sqs.clone(),
        dynamodb: dynamodb.clone(),
        streams: aws_sdk_dynamodbstreams::Client::new(&config),
        kinesis: aws_sdk_kinesis::Client::new(&config),
    };
    stack
        .create_kinesis_streams(&clients.kinesis)
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
    stand_ins.print_endpoints();
    for (logical, table) in &stack.tables {
        println!("table            {table}  ({logical})");
    }
    for (logical, stream) in &stack.kinesis_streams {
        println!("Kinesis stream   {}  ({logical})", stream.name);
    }
    // Under watch: the saves of source files, as they happen, so a delivery after a save waits for the saved code.
    let saves = if args.watch {
        let target = target_dir();
        let target = target.canonicalize().unwrap_or(target);
        Some(Saves::watch(&workspace, &[target]).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let (stop_tx, stop) = watch::channel(false);
    let (gone_tx, mut gone) = mpsc::unbounded_channel();
    // What every function under watch shares (queues', streams' and APIs'); none without --watch.
    let shared = saves.as_ref().map(|saves| watch_mode::Shared {
        workspace: &workspace,
        saves,
        sqs: &sqs,
        log_dir: &log_dir,
        stop: &stop,
        gone: &gone_tx,
    });
    let run = match &shared {
        Some(shared) => watch_mode::Run::Watch(shared),
        None => watch_mode::Run::Built(&args.bin_dir),
    };
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
        env.extend(apis::aws_env(&moto.endpoint()));
        // A line per batch, as each is answered (the function's full output stays in its log file).
        let reports = match stand_ins.calls_counter(&env) {
            Some(counter) => Reports::printed(&function.binary).with_calls(counter),
            None => Reports::printed(&function.binary),
        };
        if let Some(shared) = &shared {
            let started = watch_mode::start(
                shared,
                &function.binary,
                env,
                queue,
                stack.batch_size(&function.binary),
                reports,
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
                init_timeout: INIT_TIMEOUT,
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
            let esm = EventSourceMapping::new(sqs.clone(), mapping, instance)
                .await?
                .with_reports(reports.clone());
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
    // The stream consumers: a mapping per shard, each with its own instance; under --watch, one watch per function,
    // its shards read in turn.
    let stream_runs = match streams::start(
        &stack,
        &run,
        &clients,
        &apis::aws_env(&moto.endpoint()),
        &log_dir,
        &stop,
    )
    .await
    {
        Ok(runs) => runs,
        Err(e) => {
            let _ = stop_tx.send(true);
            watch_mode::shutdown(watched).await;
            moto.shutdown().await;
            return Err(e);
        }
    };
    // The functions behind an HTTP API: each on a loopback port.
    let aws = apis::aws_env(&moto.endpoint());
    let apis = match Apis::start(&spec, &stack, &aws, &run, &log_dir).await {
        Ok(apis) => apis,
        Err(e) => {
            let _ = stop_tx.send(true);
            watch_mode::shutdown(watched).await;
            moto.shutdown().await;
            return Err(e);
        }
    };
    println!("function logs    {}", log_dir.display());
    // The sample events beside the template (a copy of the workspace has its own).
    let events = args
        .template
        .parent()
        .map_or_else(|| PathBuf::from("events"), |dir| dir.join("events"));
    let events = events.canonicalize().unwrap_or(events);
    let consumers: std::collections::BTreeMap<String, ConsumerQueue> = spec
        .functions
        .values()
        .filter_map(|f| {
            let queue = stack.source_queue(&f.binary)?;
            Some((
                f.binary.clone(),
                ConsumerQueue {
                    url: queue.url.clone(),
                    fifo: queue.spec.fifo,
                    content_based_deduplication: queue.spec.content_based_deduplication,
                },
            ))
        })
        .collect();
    let stream_targets = stream_targets(&stack);
    let names: Vec<&str> = consumers
        .keys()
        .chain(stream_targets.keys())
        .map(String::as_str)
        .collect();
    // `sqsafe local send` finds the pipeline through it; removed when this returns.
    let _state = StateFile::write(
        state_path(),
        &PipelineState {
            pid: std::process::id(),
            endpoint: moto.endpoint(),
            events: events.clone(),
            consumers: consumers.clone(),
            streams: stream_targets.clone(),
        },
    )?;
    println!("\nPoint the AWS CLI v2 and sqsafe dlq at it (another terminal):");
    for line in export_lines(&moto.endpoint()) {
        println!("  {line}");
    }
    let first_dlq = spec
        .functions
        .values()
        .find_map(|f| stack.dead_letter_queue(&f.binary))
        .map(|q| q.url.as_str());
    println!(
        "The AWS CLI v1 ignores AWS_ENDPOINT_URL: give it --endpoint-url on each command, e.g."
    );
    println!("  {}", cli_v1_line(&moto.endpoint(), first_dlq));
    println!(
        "\nSend a sample event (another terminal, in the project; Ctrl-C or SIGTERM here stops everything):"
    );
    let width = names.iter().map(|n| n.len()).max().unwrap_or(0) + "sqsafe local send ".len();
    for name in &names {
        match send_hint(name, &events, &names) {
            Ok((command, note)) => println!("  {command:<width$}   # {note}"),
            Err(e) => println!("  {name:<width$}   (no sample to send: {e})"),
        }
    }
    if let Some(hint) = apis.hint() {
        println!("  {hint}");
    }
    if args.watch {
        println!(
            "\nUnder cargo lambda watch: after you save a source file (*.rs, Cargo.toml, Cargo.lock), deliveries wait, \
             held invisible, until watch has noticed the save (seconds later), rebuilt and started the saved code; \
             `reloaded` below says how long that took from the save. Each function's output (cargo's and its JSON \
             logs) is in <function logs>/<function>.watch.log."
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
    stream_runs.finish().await;
    apis.shutdown().await;
    watch_mode::shutdown(watched).await;
    stand_ins.print_calls();
    moto.shutdown().await;
    ended
}

/// Where `sqsafe local send` writes each stream consumer's records: its Kinesis stream, or the table whose stream it
/// reads.
fn stream_targets(stack: &LocalStack) -> std::collections::BTreeMap<String, StreamTarget> {
    stack
        .spec
        .stream_functions
        .values()
        .filter_map(|f| {
            let target = match &f.source {
                StreamSource::Kinesis(logical) => StreamTarget::Kinesis {
                    stream: stack.kinesis_streams.get(logical)?.name.clone(),
                },
                StreamSource::DynamoDb(logical) => StreamTarget::DynamodbTable {
                    table: stack.tables.get(logical)?.clone(),
                },
            };
            Some((f.binary.clone(), target))
        })
        .collect()
}

/// Ctrl-C (SIGINT) or SIGTERM (what `kill`, systemd and CI runners send): either stops everything this started.
/// Listened to from the start, so that one arriving while things start up is kept, not lost (or fatal).
pub(super) struct StopSignal {
    interrupt: Signal,
    terminate: Signal,
}

impl StopSignal {
    pub(super) fn new() -> Result<Self, String> {
        let listen = |kind, name| signal(kind).map_err(|e| format!("cannot watch {name}: {e}"));
        Ok(Self {
            interrupt: listen(SignalKind::interrupt(), "SIGINT")?,
            terminate: listen(SignalKind::terminate(), "SIGTERM")?,
        })
    }

    pub(super) async fn recv(&mut self) -> Result<(), String> {
        tokio::select! {
            _ = self.interrupt.recv() => Ok(()),
            _ = self.terminate.recv() => Ok(()),
        }
    }
}

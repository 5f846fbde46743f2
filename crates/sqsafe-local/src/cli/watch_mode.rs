//! `sqsafe local up --watch`: each function under `cargo lambda watch` behind its event source mappings (a queue's,
//! or a stream's shards: see `streams`), and what the terminal is told while watch builds, reloads or loses the
//! function.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::esm::{EventSourceMapping, MappingConfig, Reports};
use crate::stack::LocalQueue;
use crate::watch::{
    AfterSave, Phase, Save, Saves, Status, VisibilityHold, WatchFunction, WatchInvoker, WatchSpec,
    prebuild,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// How often a build in progress is reported.
const PROGRESS_EVERY: Duration = Duration::from_secs(15);

/// One function under watch: the watch process and its mapping (the reporter runs on its own until `stop`).
pub(crate) struct Watched {
    function: WatchFunction,
    mapping: JoinHandle<(String, [u64; 6])>,
}

/// Builds every function as watch will run it, one after the other (the first build of a workspace compiles the
/// dependencies once for all). A failed build is reported, not fatal: watch rebuilds on the next save.
pub(crate) async fn prebuild_all(workspace: &Path, binaries: &[String]) -> Result<(), String> {
    for binary in binaries {
        println!(
            "==> cargo build --bin {binary}   (as cargo lambda watch runs it; the first build of the workspace takes minutes)"
        );
        let started = Instant::now();
        let status = prebuild(workspace, binary)
            .await
            .map_err(|e| e.to_string())?;
        if status.success() {
            println!("{binary:<16} built in {}", seconds(started.elapsed()));
        } else {
            println!(
                "{binary:<16} does not build yet ({status}): watch shows the errors in its log and builds again when \
                 you save; its messages wait until it runs"
            );
        }
    }
    Ok(())
}

/// Where the functions run (`up` without and with `--watch`).
pub(crate) enum Run<'a> {
    /// The built binaries in this folder, each in the local Lambda emulator.
    Built(&'a Path),
    /// Under `cargo lambda watch`.
    Watch(&'a Shared<'a>),
}

/// What every function under watch shares.
pub(crate) struct Shared<'a> {
    /// The workspace the template belongs to: where watch builds and what it watches.
    pub(crate) workspace: &'a Path,
    /// The workspace's saves: a delivery after one waits for the saved code.
    pub(crate) saves: &'a Saves,
    pub(crate) sqs: &'a aws_sdk_sqs::Client,
    /// The run's log folder: `<binary>.watch.log` each.
    pub(crate) log_dir: &'a Path,
    /// Turns true on Ctrl-C or SIGTERM.
    pub(crate) stop: &'a watch::Receiver<bool>,
    /// Told the name of a function whose watch ended before `stop`, and how.
    pub(crate) gone: &'a mpsc::UnboundedSender<(String, String)>,
}

/// Starts watch for `binary` with `env` and one mapping on `queue` (its batches told to `reports`); reports its
/// phases until `stop`.
pub(crate) async fn start(
    shared: &Shared<'_>,
    binary: &str,
    env: Vec<(String, String)>,
    queue: &LocalQueue,
    batch_size: i32,
    reports: Reports,
) -> Result<Watched, String> {
    let function = start_function(shared, binary, env).await?;
    let hold = VisibilityHold::new(
        shared.sqs.clone(),
        &queue.url,
        Duration::from_secs(queue.spec.visibility_timeout.into()),
    );
    let config = MappingConfig {
        queue_url: queue.url.clone(),
        batch_size,
        wait_seconds: 5,
        drop_delete_rate: 0.0,
        seed: 0,
    };
    let invoker = function
        .invoker(shared.stop.clone())
        .with_hold(hold)
        .with_saves(shared.saves.latest());
    let esm = EventSourceMapping::new(shared.sqs.clone(), config, invoker)
        .await?
        .with_reports(reports);
    let stats = esm.stats();
    let polling = shared.stop.clone();
    let name = format!("{binary}#0");
    let mapping = tokio::spawn(async move {
        esm.run(polling).await;
        (name, stats.snapshot())
    });
    Ok(Watched { function, mapping })
}

/// Starts watch for the stream consumer `binary` with `env`, reported on until `stop`, and the invoker its shards'
/// mappings share: a batch after a save waits for the saved code (its records wait in their shard, nothing to hold).
pub(crate) async fn start_stream(
    shared: &Shared<'_>,
    binary: &str,
    env: Vec<(String, String)>,
) -> Result<(WatchFunction, WatchInvoker), String> {
    let function = start_function(shared, binary, env).await?;
    let invoker = function
        .invoker(shared.stop.clone())
        .with_saves(shared.saves.latest());
    Ok((function, invoker))
}

/// Starts watch for `binary` with `env` (its output in `<binary>.watch.log`) and the task that reports its phases.
async fn start_function(
    shared: &Shared<'_>,
    binary: &str,
    env: Vec<(String, String)>,
) -> Result<WatchFunction, String> {
    let Shared {
        workspace,
        saves,
        log_dir,
        stop,
        gone,
        ..
    } = *shared;
    let log = log_dir.join(format!("{binary}.watch.log"));
    let spec = WatchSpec::new(binary, workspace, &log).with_env(env);
    let function = WatchFunction::start(spec)
        .await
        .map_err(|e| e.to_string())?;
    println!("{:<16} watch {}", "", function.invoke_url());
    tokio::spawn(report(
        function.status(),
        saves.latest(),
        binary.to_owned(),
        log,
        stop.clone(),
        gone.clone(),
    ));
    Ok(function)
}

/// Waits for the mappings (already told by `stop`), then stops watch; prints what each did.
pub(crate) async fn shutdown(functions: Vec<Watched>) {
    for watched in functions {
        if let Ok((name, [invocations, records, deleted, reported, failed, _])) =
            watched.mapping.await
        {
            println!(
                "{name}: {invocations} invocations, {records} records, {deleted} deleted, {reported} reported, \
                 {failed} failed invocations"
            );
        }
        stop_function(watched.function).await;
    }
}

/// Stops watch for one function; prints how often it started and built.
pub(crate) async fn stop_function(function: WatchFunction) {
    let status = function.status().borrow().clone();
    let name = function.binary().to_owned();
    let ended = function.shutdown().await;
    println!(
        "{name}: under watch, starts {}, builds {}; {ended}",
        status.starts, status.builds
    );
}

/// Tells the terminal what watch does with the function: builds (with progress), runs, exits.
pub(crate) async fn report(
    mut status: watch::Receiver<Status>,
    saves: watch::Receiver<Option<Save>>,
    name: String,
    log: PathBuf,
    mut stop: watch::Receiver<bool>,
    gone: mpsc::UnboundedSender<(String, String)>,
) {
    let mut progress = tokio::time::interval(PROGRESS_EVERY);
    progress.tick().await;
    let mut build_started: Option<Instant> = None;
    // The save whose reload was reported: a later restart is not that save's.
    let mut reloaded_for: Option<Instant> = None;
    loop {
        tokio::select! {
            changed = status.changed() => {
                if changed.is_err() {
                    return;
                }
                let now = status.borrow_and_update().clone();
                match now.phase {
                    Phase::Idle => {}
                    Phase::Building => {
                        build_started = Some(Instant::now());
                        let save = saves.borrow().clone();
                        match save.filter(|s| now.starts > 0 && Some(s.at) != reloaded_for) {
                            None if now.starts == 0 => {
                                println!("{name:<16} starting: cargo run --bin {name}");
                            }
                            None => println!("{name:<16} rebuilding"),
                            Some(save) => println!(
                                "{name:<16} rebuilding: watch noticed the save of {} {} after it; deliveries \
                                 wait for the saved code",
                                save.path.display(),
                                seconds(save.at.elapsed())
                            ),
                        }
                    }
                    Phase::Running => {
                        let built = build_started
                            .take()
                            .map(|t| format!(" in {}", seconds(t.elapsed())))
                            .unwrap_or_default();
                        let save = saves.borrow().clone();
                        match save.filter(|s| {
                            Some(s.at) != reloaded_for && now.after_save(s.at) == AfterSave::Ready
                        }) {
                            _ if now.starts == 1 => {
                                println!("{name:<16} running (started{built})");
                            }
                            Some(save) => {
                                reloaded_for = Some(save.at);
                                println!(
                                    "{name:<16} reloaded in {} from the save of {} (built and started{built}): \
                                     deliveries since the save run the saved code (start #{})",
                                    seconds(save.at.elapsed()),
                                    save.path.display(),
                                    now.starts
                                );
                            }
                            None => println!(
                                "{name:<16} restarted{built} (start #{})",
                                now.starts
                            ),
                        }
                    }
                    Phase::Exited => println!(
                        "{name:<16} {}: it stays down until you save a change (watch then rebuilds and restarts it); \
                         its deliveries wait, held invisible. Log: {}",
                        now.exit.unwrap_or_default(),
                        log.display()
                    ),
                    Phase::Stopped => {
                        if !*stop.borrow() {
                            let how = now.exit.unwrap_or_default();
                            let _ = gone.send((name, format!("{how}; log: {}", log.display())));
                        }
                        return;
                    }
                }
            }
            _ = progress.tick() => {
                let now = status.borrow().clone();
                if let (Phase::Building, Some(started)) = (now.phase, build_started) {
                    println!(
                        "{name:<16} still building after {}: {}",
                        seconds(started.elapsed()),
                        now.build_line.unwrap_or_default()
                    );
                }
            }
            _ = stop.changed() => return,
        }
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

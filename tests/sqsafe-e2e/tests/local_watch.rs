//! `sqsafe local up --watch` end to end, as a user runs it: a scratch workspace (two throwaway functions and their
//! template, `fixtures/watch-probe`), the real CLI, its own moto server, the function under `cargo lambda watch`
//! behind the event source mapping, and a stream consumer under watch behind its table's stream (a change reaches
//! it). A success is deleted; a failure comes back after the visibility timeout and
//! reaches the DLQ after `maxReceiveCount` receives; a saved edit of the handler answers the next delivery, with no
//! restart, including a message sent during the rebuild; while a saved change does not build, a message is held
//! invisible instead of burning its receives, and the fix answers it; SIGTERM leaves no process behind. Timings are
//! printed (`--nocapture`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;
use sqsafe_e2e::workspace_root;

/// The source queue's visibility timeout for the run: each redelivery waits this long.
const VISIBILITY_SECONDS: u64 = 2;
/// The fixture template's `maxReceiveCount`.
const MAX_RECEIVE_COUNT: usize = 3;
/// Generous bound for the first build of the probe in a cold target folder (2 cores shared with other builds).
const BUILD_LIMIT: Duration = Duration::from_secs(900);
/// The scratch workspace's target folder, under the main one.
const TARGET: &str = "target/local-watch-test";
/// Bound for anything the queues decide (a few visibility timeouts).
const QUEUE_LIMIT: Duration = Duration::from_secs(60);

#[test]
fn sqs_deliveries_through_cargo_lambda_watch_follow_saved_edits() {
    let started = Instant::now();
    let scratch = Scratch::new();
    let cli = build_cli(&scratch);
    println!("sqsafe built in {:.1} s", started.elapsed().as_secs_f64());

    let mut up = Up::start(&cli, &scratch);
    let ready = Instant::now();
    let endpoint = up.field(|l| l.starts_with("moto server"), BUILD_LIMIT);
    let queue = up.field(
        |l| l.starts_with("watch-probe") && l.contains(" queue "),
        QUEUE_LIMIT,
    );
    let dlq = up.field(|l| l.trim_start().starts_with("DLQ "), QUEUE_LIMIT);
    let logs = PathBuf::from(up.field(|l| l.starts_with("function logs"), QUEUE_LIMIT));
    up.wait_line(|l| l.starts_with("Under cargo lambda watch"), QUEUE_LIMIT);
    println!(
        "prebuilt, watch listening, mapping polling: {:.1} s",
        ready.elapsed().as_secs_f64()
    );
    // The template's stream consumer runs under watch too, behind its table's stream.
    let table = up
        .wait_line(
            |l| l.starts_with("table ") && l.ends_with("(StreamTable)"),
            QUEUE_LIMIT,
        )
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    up.wait_line(
        |l| l.starts_with("stream-probe") && l.contains(&format!("stream of table {table}")),
        QUEUE_LIMIT,
    );
    assert!(
        !up.seen(|l| l.starts_with("payments API")),
        "sqsafe local up starts no payments API (this repository's is in sqsafe-test-servers):\n{}",
        up.output()
    );
    let function_log = logs.join("watch-probe.watch.log");

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (sqs, dynamodb) = rt.block_on(async {
        let config = sqsafe_aws::local_config_loader(&endpoint).load().await;
        (
            aws_sdk_sqs::Client::new(&config),
            aws_sdk_dynamodb::Client::new(&config),
        )
    });

    // An item written to the stream consumer's table reaches it, under watch, through the table's stream.
    let t = Instant::now();
    rt.block_on(async {
        dynamodb
            .put_item()
            .table_name(&table)
            .item(
                "pk",
                aws_sdk_dynamodb::types::AttributeValue::S("probe-1".into()),
            )
            .send()
            .await
            .expect("put an item")
    });
    let invoked = up.wait_line(
        |l| l.starts_with("stream-probe") && l.contains(" 1 record: "),
        BUILD_LIMIT,
    );
    let stream_log = logs.join("stream-probe.watch.log");
    assert_eq!(
        count_lines(&stream_log, "stream-probe event=INSERT pk=probe-1"),
        1,
        "the stream consumer under watch got the change once:\n{}",
        std::fs::read_to_string(&stream_log).unwrap_or_default()
    );
    println!(
        "stream consumer: the change handed over in {:.1} s ({})",
        t.elapsed().as_secs_f64(),
        invoked.trim()
    );

    // A success: delivered once, deleted. The first delivery also starts the function (cargo run, fresh).
    let t = Instant::now();
    rt.block_on(send(&sqs, &queue, "ok"));
    rt.block_on(until(BUILD_LIMIT, "the success deleted", || {
        is_empty(&sqs, &queue)
    }));
    let line = format!("probe v1 queue={queue} greeting=hello-from-template body=ok");
    assert_eq!(
        count_lines(&function_log, &line),
        1,
        "the function ran once with its template environment"
    );
    println!(
        "success: delivered and deleted in {:.1} s (includes the function's first start)",
        t.elapsed().as_secs_f64()
    );

    // A failure: back after each visibility timeout, then to the DLQ after maxReceiveCount receives.
    let t = Instant::now();
    rt.block_on(send(&sqs, &queue, "fail"));
    rt.block_on(until(QUEUE_LIMIT, "the failure dead-lettered", || async {
        messages(&sqs, &dlq).await.map(|n| n == 1)
    }));
    let took = t.elapsed();
    assert_eq!(
        count_lines(&function_log, "probe v1 queue="),
        1 + MAX_RECEIVE_COUNT,
        "the failure was delivered maxReceiveCount times:\n{}",
        std::fs::read_to_string(&function_log).unwrap_or_default()
    );
    assert!(
        took >= Duration::from_secs(VISIBILITY_SECONDS * (MAX_RECEIVE_COUNT as u64 - 1)),
        "redelivered only after the visibility timeout: {took:?}"
    );
    assert!(rt.block_on(is_empty(&sqs, &queue)).unwrap_or(false));
    println!(
        "failure: {MAX_RECEIVE_COUNT} deliveries, {VISIBILITY_SECONDS} s apart, then the DLQ, in {:.1} s",
        took.as_secs_f64()
    );

    // Edit the handler and save. A message sent right after the save (before watch has even noticed it) and one
    // sent while watch rebuilds both wait for the new process (held invisible meanwhile) and are answered by the
    // saved code, once each, on their first receive.
    let t = Instant::now();
    scratch.edit(&[
        (
            "const VERSION: &str = \"v1\";",
            "const VERSION: &str = \"v2\";",
        ),
        (
            "const FAILS: &str = \"fail\";",
            "const FAILS: &str = \"never\";",
        ),
    ]);
    rt.block_on(send(&sqs, &queue, "after-save"));
    println!(
        "saved, and sent a message {:.2} s after the save",
        t.elapsed().as_secs_f64()
    );
    up.wait_line(
        |l| l.starts_with("watch-probe") && l.contains("rebuilding"),
        QUEUE_LIMIT,
    );
    println!(
        "save noticed, rebuilding, in {:.1} s; sending during the build",
        t.elapsed().as_secs_f64()
    );
    rt.block_on(send(&sqs, &queue, "during-build"));
    let reloaded = up.wait_line(
        |l| l.starts_with("watch-probe") && l.contains("reloaded"),
        BUILD_LIMIT,
    );
    rt.block_on(until(
        QUEUE_LIMIT,
        "the edited handler's successes deleted",
        || is_empty(&sqs, &queue),
    ));
    let ready = t.elapsed();
    assert_eq!(
        (
            count_lines(&function_log, "probe v2 queue="),
            count_lines(&function_log, "body=after-save receives=1"),
            count_lines(&function_log, "body=during-build receives=1"),
        ),
        (2, 1, 1),
        "the saved code answered both, once each, on their first receive:\n{}",
        std::fs::read_to_string(&function_log).unwrap_or_default()
    );
    assert_eq!(
        count_lines(&function_log, "probe v1 queue="),
        1 + MAX_RECEIVE_COUNT,
        "the old code got nothing sent after the save:\n{}",
        std::fs::read_to_string(&function_log).unwrap_or_default()
    );
    assert!(
        rt.block_on(until_value(&sqs, &dlq, 1)),
        "nothing more in the DLQ"
    );
    let said = said_seconds(&reloaded, "reloaded in ");
    assert!(
        said <= ready.as_secs_f64() && said >= ready.as_secs_f64() / 2.0,
        "the printed reload time is from the save ({said} s; the saved code answered {:.1} s after it): {reloaded}",
        ready.as_secs_f64()
    );
    println!(
        "after the save: both answered by the saved code and deleted {:.1} s after the save ({})",
        ready.as_secs_f64(),
        reloaded.trim()
    );

    // Save a change that does not build: the function stays down. A message sent meanwhile is received once and held
    // invisible (well past its visibility timeout) instead of coming back; the fix is saved, the fixed code answers
    // it, on its first receive.
    let t = Instant::now();
    scratch.edit(&[("const VERSION: &str = \"v2\";", "const VERSION: &str = v3;")]);
    let exited = up.wait_line(
        |l| l.starts_with("watch-probe") && l.contains("build failed"),
        BUILD_LIMIT,
    );
    println!(
        "a broken save: the build failed in {:.1} s ({})",
        t.elapsed().as_secs_f64(),
        exited.trim()
    );
    rt.block_on(send(&sqs, &queue, "held"));
    rt.block_on(until(QUEUE_LIMIT, "the message received", || async {
        counts(&sqs, &queue)
            .await
            .map(|(visible, in_flight)| (visible, in_flight) == (0, 1))
    }));
    let held_from = Instant::now();
    // Three visibility timeouts: without the hold it would be visible again after the first.
    std::thread::sleep(Duration::from_secs(3 * VISIBILITY_SECONDS));
    assert_eq!(
        rt.block_on(counts(&sqs, &queue)),
        Some((0, 1)),
        "held invisible while the function is down"
    );
    let t = Instant::now();
    scratch.edit(&[("const VERSION: &str = v3;", "const VERSION: &str = \"v3\";")]);
    up.wait_line(
        |l| l.starts_with("watch-probe") && l.contains("reloaded"),
        BUILD_LIMIT,
    );
    rt.block_on(until(QUEUE_LIMIT, "the held message answered", || {
        is_empty(&sqs, &queue)
    }));
    assert_eq!(
        count_lines(&function_log, "body=held receives=1"),
        1,
        "answered once, on its first receive:\n{}",
        std::fs::read_to_string(&function_log).unwrap_or_default()
    );
    assert!(count_lines(&function_log, "probe v3 queue=") == 1);
    println!(
        "held {:.1} s while down, answered by the fixed code {:.1} s after the fix was saved",
        held_from.elapsed().as_secs_f64() - t.elapsed().as_secs_f64(),
        t.elapsed().as_secs_f64()
    );

    // SIGTERM stops everything it started.
    let t = Instant::now();
    let ports = up.watch_ports();
    let running = processes_matching(&ports);
    assert!(
        running.iter().any(|cmd| cmd.contains("cargo-lambda"))
            && running.iter().any(|cmd| cmd.contains("/debug/watch-probe")),
        "watch and the function run before the SIGTERM: {running:?}"
    );
    let output = up.terminate();
    let starts: u32 = output
        .lines()
        .find_map(|l| l.strip_prefix("watch-probe: under watch, starts "))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary for watch-probe:\n{output}"));
    assert!(starts >= 2, "the summary counts the reload:\n{output}");
    assert!(
        output.lines().any(|l| l.starts_with("stream-probe#")
            && l.contains(": 1 invocations, 1 records, 0 failed invocations"))
            && output
                .lines()
                .any(|l| l.starts_with("stream-probe: under watch, starts ")),
        "the stream consumer's shard and watch summed up:\n{output}"
    );
    let left = processes_matching(&ports);
    assert!(left.is_empty(), "left behind: {left:?}");
    println!(
        "stopped by SIGTERM in {:.2} s, nothing left; whole test {:.1} s",
        t.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// A copy of `fixtures/watch-probe` as a cargo workspace of its own, with the main workspace's Cargo.lock (the same
/// dependency versions, nothing to fetch); removed on drop. It builds into a target folder of its own that stays
/// between runs ([`TARGET`]): the first run compiles its few dependencies, later runs only the probe, and no build
/// waits for the main workspace's lock or touches its artifacts.
struct Scratch {
    root: PathBuf,
}

impl Scratch {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let root =
            std::env::temp_dir().join(format!("sqsafe-watch-{}-{nanos}", std::process::id()));
        let workspace = root.join("ws");
        let fixture = workspace_root().join("tests/sqsafe-e2e/fixtures/watch-probe");
        std::fs::create_dir_all(workspace.join("src")).expect("scratch folder");
        for (from, to) in [
            (
                fixture.join("Cargo.toml.fixture"),
                workspace.join("Cargo.toml"),
            ),
            (
                fixture.join("template.yaml"),
                workspace.join("template.yaml"),
            ),
            (fixture.join("main.rs"), workspace.join("src/main.rs")),
            (fixture.join("stream.rs"), workspace.join("src/stream.rs")),
            (
                workspace_root().join("Cargo.lock"),
                workspace.join("Cargo.lock"),
            ),
        ] {
            std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
        }
        Self { root }
    }

    fn workspace(&self) -> PathBuf {
        self.root.join("ws")
    }

    fn edit(&self, replacements: &[(&str, &str)]) {
        let path = self.workspace().join("src/main.rs");
        let mut text = std::fs::read_to_string(&path).expect("read main.rs");
        for (from, to) in replacements {
            assert!(text.contains(from), "main.rs lacks {from}");
            text = text.replace(from, to);
        }
        std::fs::write(&path, text).expect("save main.rs");
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The `sqsafe` binary as a team installs it: `SQSAFE_E2E_SQSAFE_BIN` when set (make test's, built alone), else built
/// now by `cargo build -p sqsafe-cli --bin sqsafe` (a no-op when fresh; alone, so that no other package's features
/// reach it). Copied into the scratch folder: a build of the workspace meanwhile replaces the file in the target
/// folder, not the one this test runs.
fn build_cli(scratch: &Scratch) -> PathBuf {
    let built = sqsafe_e2e::sqsafe_cli();
    let cli = scratch.root.join("sqsafe");
    std::fs::copy(&built, &cli).unwrap_or_else(|e| panic!("copy {}: {e}", built.display()));
    cli
}

/// `sqsafe local up --watch` on the scratch template; its stdout read line by line, its stderr (cargo's build
/// progress) in a file beside the scratch workspace (not inside it: watch would see it change).
struct Up {
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: PathBuf,
}

impl Up {
    fn start(cli: &Path, scratch: &Scratch) -> Self {
        let stderr = scratch.root.join("up.stderr");
        let mut child = Command::new(cli)
            .current_dir(scratch.workspace())
            .args(["local", "up", "--watch", "--template"])
            .arg(scratch.workspace().join("template.yaml"))
            .args(["--visibility-timeout", &VISIBILITY_SECONDS.to_string()])
            .env("CARGO_TARGET_DIR", workspace_root().join(TARGET))
            // The scratch lock file has every version: nothing to fetch.
            .env("CARGO_NET_OFFLINE", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn sqsafe local up --watch");
        let lines = sqsafe_e2e::stdout_lines(child.stdout.take().expect("stdout"));
        Self {
            child: Some(child),
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    /// Waits for a line that `matches` (seen before or arriving within `limit`), and returns it.
    fn wait_line(&mut self, matches: impl Fn(&str) -> bool, limit: Duration) -> String {
        if let Some(line) = self.seen.iter().find(|l| matches(l)) {
            return line.clone();
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    println!("  | {line}");
                    self.seen.push(line.clone());
                    if matches(&line) {
                        return line;
                    }
                }
                Err(e) => panic!(
                    "sqsafe local up --watch: no expected line ({e}) after {limit:?}; output:\n{}\nstderr:\n{}",
                    self.output(),
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                ),
            }
        }
    }

    /// The last word of the first line that `matches`.
    fn field(&mut self, matches: impl Fn(&str) -> bool, limit: Duration) -> String {
        let line = self.wait_line(matches, limit);
        line.split_whitespace()
            .last()
            .unwrap_or_default()
            .to_owned()
    }

    fn seen(&self, matches: impl Fn(&str) -> bool) -> bool {
        self.seen.iter().any(|l| matches(l))
    }

    fn output(&self) -> String {
        self.seen.join("\n")
    }

    /// The ports of the watch processes (from their invoke URLs).
    fn watch_ports(&self) -> Vec<String> {
        self.seen
            .iter()
            .filter_map(|l| l.trim_start().strip_prefix("watch http://127.0.0.1:"))
            .filter_map(|rest| rest.split('/').next())
            .map(str::to_owned)
            .collect()
    }

    /// SIGTERM, then everything it prints until it exits (it must exit 0 within 30 s).
    fn terminate(&mut self) -> String {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .args(["-s", "TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            println!("  | {line}");
            self.seen.push(line);
        }
        let status = child.wait().expect("wait");
        assert!(status.success(), "sqsafe exited with {status}");
        self.output()
    }
}

impl Drop for Up {
    /// After a failed assertion: SIGTERM (it stops its watch processes), SIGKILL if it hangs.
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-s", "TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

async fn send(sqs: &aws_sdk_sqs::Client, queue: &str, body: &str) {
    sqs.send_message()
        .queue_url(queue)
        .message_body(body)
        .send()
        .await
        .expect("send");
}

/// `Some(true)` when the queue holds no message, visible or in flight.
async fn is_empty(sqs: &aws_sdk_sqs::Client, queue: &str) -> Option<bool> {
    messages(sqs, queue).await.map(|n| n == 0)
}

/// Messages visible and in flight.
async fn messages(sqs: &aws_sdk_sqs::Client, queue: &str) -> Option<usize> {
    counts(sqs, queue)
        .await
        .map(|(visible, in_flight)| visible + in_flight)
}

/// (visible, in flight).
async fn counts(sqs: &aws_sdk_sqs::Client, queue: &str) -> Option<(usize, usize)> {
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(queue)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .ok()?;
    let attributes = attributes.attributes()?;
    let count = |name| {
        attributes
            .get(&name)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0)
    };
    Some((
        count(QueueAttributeName::ApproximateNumberOfMessages),
        count(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
    ))
}

async fn until_value(sqs: &aws_sdk_sqs::Client, queue: &str, expected: usize) -> bool {
    messages(sqs, queue).await == Some(expected)
}

/// Polls `check` until it says `Some(true)`: the queues decide in their own time (visibility timeouts), and moto
/// has nothing to notify.
async fn until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<bool>>,
{
    let deadline = Instant::now() + limit;
    while check().await != Some(true) {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The number of seconds `line` gives right after `before` (`reloaded in 5.6 s ...`: 5.6).
fn said_seconds(line: &str, before: &str) -> f64 {
    line.split_once(before)
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no seconds after {before:?} in {line:?}"))
}

fn count_lines(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(needle))
        .count()
}

/// Processes still running that belong to this run: a watch on one of `ports`, or the probe itself.
fn processes_matching(ports: &[String]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .filter(|cmd| {
            cmd.contains("/debug/watch-probe")
                || cmd.contains("--bin watch-probe")
                || ports.iter().any(|p| {
                    cmd.contains("cargo-lambda") && cmd.contains(&format!("--invoke-port {p} "))
                })
        })
        .collect()
}

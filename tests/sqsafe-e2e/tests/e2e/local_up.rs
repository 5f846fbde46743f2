//! `sqsafe local up` on the repository's own template, as `make local` runs it: the real CLI, its own moto server,
//! charge-payment under the local Runtime API against a payments API run here, messages sent with `sqsafe local send`.
//! Each batch must show one line in the terminal, promptly: how many records and how each ended (applied, replayed,
//! dead-lettered, returned for retry), and how long it took. The seed of the payment ids is printed (`--nocapture`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sqsafe_e2e::harness::build_functions;
use sqsafe_e2e::workspace_root;
use sqsafe_test_servers::{Fault, PaymentsApi};

/// The source queues' visibility timeout for the run: a record returned for retry comes back after this long.
pub(super) const VISIBILITY_SECONDS: u64 = 2;
/// Bound for `up` to be ready (moto, the stack, the functions' processes).
pub(super) const START_LIMIT: Duration = Duration::from_secs(120);
/// Bound from a send to the line of the batch that holds it (a receive, an invocation against moto, on 2 busy cores).
pub(super) const LINE_LIMIT: Duration = Duration::from_secs(15);
/// Bound for a returned record's redelivery (a few visibility timeouts).
const REDELIVERY_LIMIT: Duration = Duration::from_secs(30);

#[test]
fn local_up_prints_a_line_per_batch_with_how_each_record_ended() {
    let seed = std::env::var("SQSAFE_E2E_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    println!("seed {seed} (SQSAFE_E2E_SEED={seed} replays the payment ids)");
    let run = fastrand::Rng::with_seed(seed).u32(..);
    let scratch = Scratch::new(run);
    let cli = build_cli(&scratch);
    let functions = build_functions(false);

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let payments = rt
        .block_on(async {
            PaymentsApi::builder()
                .keys_in_memory()
                .build()?
                .start("127.0.0.1:0".parse().expect("address"))
                .await
        })
        .expect("the payments API");
    let (fresh, retried) = (format!("p-{run}-1"), format!("p-{run}-2"));
    // Its first charge is answered 503 before charging: a transient failure, returned for retry.
    payments.force_for_payment(&retried, Fault::Before);

    let mut up = Up::start(&cli, &scratch, &functions, &payments.base_url());
    up.wait_line(|l| l.starts_with("Send a sample event"), START_LIMIT);

    // A fresh payment, one the API fails once, and a body that is no payment at all.
    let first = scratch.event(
        "first.json",
        &[&payment(&fresh), &payment(&retried), "not a payment"],
    );
    let sent = Instant::now();
    scratch.send(&cli, &first);
    let lines = up.batches_until(3, LINE_LIMIT);
    let since_send = sent.elapsed();
    let total = totals(&lines);
    assert_eq!(
        total,
        Totals {
            records: 3,
            applied: 1,
            dead_lettered: 1,
            returned: 1,
            ..Totals::default()
        },
        "{lines:?}"
    );
    println!(
        "first batch told {:.2} s after the send: {lines:?}",
        since_send.as_secs_f64()
    );

    // The returned record comes back after its visibility timeout and is charged.
    let lines = up.batches_until(1, REDELIVERY_LIMIT);
    assert_eq!(
        totals(&lines),
        Totals {
            records: 1,
            applied: 1,
            ..Totals::default()
        },
        "{lines:?}"
    );

    // The fresh payment sent again: answered from the idempotency record, not charged twice.
    let again = scratch.event("again.json", &[&payment(&fresh)]);
    scratch.send(&cli, &again);
    let lines = up.batches_until(1, LINE_LIMIT);
    assert_eq!(
        lines,
        [format!(
            "charge-payment   1 record: 1 replayed ({})",
            took(&lines[0])
        )],
        "the duplicate's line"
    );
    let charges = payments.charges();
    assert_eq!(
        (
            charges.iter().filter(|c| c.payment_id == fresh).count(),
            charges.iter().filter(|c| c.payment_id == retried).count()
        ),
        (1, 1),
        "each payment charged once: {charges:?}"
    );

    // The outbox relay, a DynamoDB stream consumer on sqsafe's stream processor: its sample's three item changes
    // written to the outbox table reach it through the table's stream. The MODIFY and the item that is not an outbox
    // event are ignored; the outbox event's destination (the AWS URL of the sample) is not one of the local queues
    // it may publish to, a permanent failure: its details go to the failure queue, as the line says.
    scratch.send_to(
        &cli,
        "outbox-relay",
        &workspace_root().join("events/outbox-relay-stream.json"),
    );
    let deadline = Instant::now() + LINE_LIMIT;
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut relayed = 0;
    while relayed < 3 {
        let line = up.next_line(deadline, "outbox-relay's line");
        if let Some(rest) = line.strip_prefix("outbox-relay     ") {
            let (records, told) = rest.split_once(" record").expect("a record count");
            relayed += records.parse::<usize>().expect("a count");
            // "3 records: 2 ignored, 1 dead-lettered (0.40 s)"
            let told = told.split_once(": ").expect("outcomes").1;
            let told = told.rsplit_once(" (").expect("a duration").0;
            for outcome in told.split(", ") {
                let (n, what) = outcome.split_once(' ').expect("a count and an outcome");
                *outcomes.entry(what.to_owned()).or_default() +=
                    n.parse::<usize>().expect("a count");
            }
        }
    }
    assert_eq!(relayed, 3, "each change once");
    assert_eq!(
        outcomes,
        BTreeMap::from([("ignored".to_owned(), 2), ("dead-lettered".to_owned(), 1)]),
        "the relay's outcomes"
    );

    let output = up.terminate();
    assert!(
        output
            .lines()
            .any(|l| l.starts_with("charge-payment#0: ") && l.contains(" invocations, 5 records, ")),
        "the summary at the end still counts every record:\n{output}"
    );
}

/// A charge-payment message body.
pub(super) fn payment(id: &str) -> String {
    serde_json::json!({
        "type": "PaymentRequested", "version": "1", "payment_id": id, "tenant": "acme",
        "amount": 1250, "currency": "EUR", "customer_id": "cus-17",
    })
    .to_string()
}

/// What the report lines of some batches add up to.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Totals {
    pub(super) records: usize,
    pub(super) applied: usize,
    pub(super) replayed: usize,
    pub(super) dead_lettered: usize,
    pub(super) returned: usize,
}

/// Adds up `charge-payment   3 records: 1 applied, 1 dead-lettered, 1 returned for retry (0.16 s)` lines; every
/// record of a line must be told once.
pub(super) fn totals(lines: &[String]) -> Totals {
    let mut t = Totals::default();
    for line in lines {
        let (records, rest) = line
            .strip_prefix("charge-payment   ")
            .and_then(|l| l.split_once(' '))
            .unwrap_or_else(|| panic!("not a batch line: {line:?}"));
        let records: usize = records.parse().expect("a record count");
        let (_, parts) = rest.split_once(": ").expect("a colon");
        let (parts, _) = parts.rsplit_once(" (").expect("a time");
        let mut told = 0;
        for part in parts.split(", ") {
            let (n, what) = part.split_once(' ').expect("count and outcome");
            let n: usize = n.parse().expect("a count");
            told += n;
            let field = match what {
                "applied" => &mut t.applied,
                "replayed" => &mut t.replayed,
                "dead-lettered" => &mut t.dead_lettered,
                "returned for retry" => &mut t.returned,
                other => panic!("unexpected outcome {other:?} in {line:?}"),
            };
            *field += n;
        }
        assert_eq!(told, records, "each record told once: {line:?}");
        t.records += records;
    }
    t
}

/// The time a line ends with: `0.16 s` of `... (0.16 s)`.
fn took(line: &str) -> &str {
    let time = line
        .rsplit_once(" (")
        .and_then(|(_, t)| t.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no time in {line:?}"));
    let seconds: f64 = time
        .strip_suffix(" s")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not seconds: {time:?}"));
    assert!(seconds < 30.0, "{line}");
    time
}

/// A folder of this run's own under target/: its events, its copy of sqsafe, and the target folder `up` and `send`
/// share (the state file and function logs), apart from a `make local` running meanwhile.
pub(super) struct Scratch {
    pub(super) root: PathBuf,
}

impl Scratch {
    pub(super) fn new(run: u32) -> Self {
        let root = workspace_root().join(format!("target/local-up-test/{run}"));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("scratch folder");
        Self { root }
    }

    /// An SQS event file with one record per body.
    pub(super) fn event(&self, name: &str, bodies: &[&str]) -> PathBuf {
        let records: Vec<serde_json::Value> = bodies
            .iter()
            .map(|body| serde_json::json!({ "body": body, "eventSource": "aws:sqs" }))
            .collect();
        let path = self.root.join(name);
        std::fs::write(&path, serde_json::json!({ "Records": records }).to_string())
            .expect("event file");
        path
    }

    /// `sqsafe local send charge-payment FILE`, which finds the pipeline through the state file under our target.
    fn send(&self, cli: &Path, file: &Path) {
        self.send_to(cli, "charge-payment", file);
    }

    /// `sqsafe local send CONSUMER FILE`.
    pub(super) fn send_to(&self, cli: &Path, consumer: &str, file: &Path) {
        let output = Command::new(cli)
            .current_dir(workspace_root())
            .env("CARGO_TARGET_DIR", &self.root)
            .args(["local", "send", consumer])
            .arg(file)
            .output()
            .expect("run sqsafe local send");
        assert!(
            output.status.success(),
            "sqsafe local send failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// `sqsafe` as make builds it: `SQSAFE_E2E_SQSAFE_BIN` when set, else `cargo build -p sqsafe-cli --bin sqsafe`;
/// copied into the scratch folder, out of the way of builds meanwhile.
pub(super) fn build_cli(scratch: &Scratch) -> PathBuf {
    let built = sqsafe_e2e::sqsafe_cli();
    let cli = scratch.root.join("sqsafe");
    std::fs::copy(&built, &cli).unwrap_or_else(|e| panic!("copy {}: {e}", built.display()));
    cli
}

/// `sqsafe local up` on template.yaml, its stdout read line by line.
pub(super) struct Up {
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: PathBuf,
}

impl Up {
    fn start(cli: &Path, scratch: &Scratch, functions: &Path, payments: &str) -> Self {
        Self::start_with(
            cli,
            scratch,
            functions,
            &workspace_root().join("template.yaml"),
            payments,
        )
    }

    /// `sqsafe local up` on `template`, its `PaymentsApiUrl` the payments API at `payments`.
    pub(super) fn start_with(
        cli: &Path,
        scratch: &Scratch,
        functions: &Path,
        template: &Path,
        payments: &str,
    ) -> Self {
        let stderr = scratch.root.join("up.stderr");
        let mut child = Command::new(cli)
            .current_dir(workspace_root())
            .env("CARGO_TARGET_DIR", &scratch.root)
            .args(["local", "up", "--template"])
            .arg(template)
            .arg("--bin-dir")
            .arg(functions)
            .args(["--visibility-timeout", &VISIBILITY_SECONDS.to_string()])
            .args(["--parameter", &format!("PaymentsApiUrl={payments}")])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn sqsafe local up");
        let lines = sqsafe_e2e::stdout_lines(child.stdout.take().expect("stdout"));
        Self {
            child: Some(child),
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    pub(super) fn next_line(&mut self, deadline: Instant, waiting_for: &str) -> String {
        match self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(line) => {
                println!("  | {line}");
                self.seen.push(line.clone());
                line
            }
            Err(e) => panic!(
                "sqsafe local up: no {waiting_for} ({e}); output:\n{}\nstderr:\n{}",
                self.seen.join("\n"),
                std::fs::read_to_string(&self.stderr).unwrap_or_default()
            ),
        }
    }

    pub(super) fn wait_line(&mut self, matches: impl Fn(&str) -> bool, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let line = self.next_line(deadline, "expected line");
            if matches(&line) {
                return line;
            }
        }
    }

    /// The next charge-payment batch lines, until they tell `records` records, within `limit`.
    fn batches_until(&mut self, records: usize, limit: Duration) -> Vec<String> {
        let deadline = Instant::now() + limit;
        let mut lines = Vec::new();
        while totals(&lines).records < records {
            let line = self.next_line(deadline, "line for the batch");
            if line.starts_with("charge-payment   ") && line.contains(" record") {
                lines.push(line);
            }
        }
        lines
    }

    /// SIGTERM, then everything it prints until it exits (it must exit 0 within 30 s).
    pub(super) fn terminate(&mut self) -> String {
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
        self.seen.join("\n")
    }
}

impl Drop for Up {
    /// After a failed assertion: SIGTERM (it stops moto and the functions), SIGKILL if it hangs.
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

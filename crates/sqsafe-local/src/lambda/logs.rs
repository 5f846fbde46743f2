//! The function's output: appended to its log file line by line, and scanned for fault markers and EMF metrics.
//!
//! Each pipe (stdout, stderr) is read by its own task so that the process never blocks on a full pipe, and can also
//! be drained on demand: after an answer or an exit, [`Pipe::drain`] reads whatever is in the pipe *now* with a plain
//! non-blocking `read` on a duplicate descriptor, not through the reactor's cached readiness. Everything the function
//! wrote before it posted its answer (or died) is already in the pipe, so once `invoke` returns, its lines are in the
//! file and the counters.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::net::unix::pipe::Receiver;

use super::outcomes::BatchOutcomes;

/// Prefix of the line a fault-injection build prints just before it kills itself.
const FAULT_PREFIX: &str = "sqsafe-fault: ";
/// A longer line is cut here, as CloudWatch Logs cuts events at 256 KB.
const MAX_LINE_BYTES: usize = 256 * 1024;

/// One instance's log file and the counters scanned out of it, shared by the pipes of all its processes.
#[derive(Debug)]
pub(crate) struct LogSink {
    path: PathBuf,
    state: Mutex<SinkState>,
}

#[derive(Debug, Default)]
struct SinkState {
    file: Option<File>,
    write_failed: bool,
    fault_markers: BTreeMap<String, u64>,
    emf: BTreeMap<String, f64>,
    /// The batch metrics lines since the last [`LogSink::take_outcomes`].
    outcomes: Option<BatchOutcomes>,
}

impl LogSink {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            state: Mutex::new(SinkState::default()),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the folder and opens the file for appending, once; called before each spawn so that a missing or
    /// read-only folder fails the spawn loudly.
    pub(crate) fn open(&self) -> io::Result<()> {
        let mut state = self.state();
        if state.file.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            state.file = Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?,
            );
        }
        Ok(())
    }

    /// A line the function printed: written, then scanned.
    fn function_line(&self, line: &str) {
        let mut state = self.state();
        state.write(&self.path, line);
        state.scan(line);
    }

    /// A line the emulator adds (`START`, `END`, `REPORT`, ...), like the ones Lambda puts in CloudWatch Logs.
    pub(crate) fn platform_line(&self, line: &str) {
        self.state().write(&self.path, line);
    }

    pub(crate) fn fault_markers(&self) -> BTreeMap<String, u64> {
        self.state().fault_markers.clone()
    }

    pub(crate) fn emf(&self) -> BTreeMap<String, f64> {
        self.state().emf.clone()
    }

    /// What the batch metrics lines counted since the last call; `None` when there was none.
    pub(crate) fn take_outcomes(&self) -> Option<BatchOutcomes> {
        self.state().outcomes.take()
    }

    /// No code panics while holding the lock, and every update leaves the state whole: poisoning is ignored.
    fn state(&self) -> MutexGuard<'_, SinkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SinkState {
    fn write(&mut self, path: &Path, line: &str) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        if let Err(e) = file.write_all(&bytes)
            && !self.write_failed
        {
            // Once: a full disk would otherwise log a warning per line.
            self.write_failed = true;
            tracing::warn!(path = %path.display(), error = %e, "cannot write the function log");
        }
    }

    fn scan(&mut self, line: &str) {
        if let Some(point) = fault_point(line) {
            *self.fault_markers.entry(point.to_owned()).or_default() += 1;
        } else if let Some(values) = emf_values(line) {
            for (name, value) in values {
                *self.emf.entry(name).or_default() += value;
            }
            if let Some(counts) = BatchOutcomes::from_line(line) {
                self.outcomes.get_or_insert_default().add(counts);
            }
        }
    }
}

/// `after_claim` from `sqsafe-fault: SIGKILL at after_claim key=k`.
fn fault_point(line: &str) -> Option<&str> {
    let mut words = line.strip_prefix(FAULT_PREFIX)?.split_whitespace();
    words.find(|w| *w == "at")?;
    words.next()
}

/// The values of the metrics an EMF line declares (`_aws.CloudWatchMetrics[].Metrics[].Name`), read from the
/// line's top-level members; an array of values (EMF allows up to 100) counts as their sum. `None` for any other
/// line.
fn emf_values(line: &str) -> Option<Vec<(String, f64)>> {
    let line = line.trim();
    if !line.starts_with('{') || !line.contains("\"_aws\"") {
        return None;
    }
    let doc: Value = serde_json::from_str(line).ok()?;
    let directives = doc.get("_aws")?.get("CloudWatchMetrics")?.as_array()?;
    let declared: BTreeSet<&str> = directives
        .iter()
        .filter_map(|d| d.get("Metrics")?.as_array())
        .flatten()
        .filter_map(|m| m.get("Name")?.as_str())
        .collect();
    let values = declared
        .into_iter()
        .filter_map(|name| {
            let value = match doc.get(name)? {
                Value::Number(n) => n.as_f64()?,
                Value::Array(items) => items.iter().filter_map(Value::as_f64).sum(),
                _ => return None,
            };
            Some((name.to_owned(), value))
        })
        .collect();
    Some(values)
}

/// The read end of one of a process's output pipes.
#[derive(Debug)]
pub(crate) struct Pipe {
    /// Registered with the reactor: the pump waits on it.
    receiver: Receiver,
    /// The same pipe (a duplicate descriptor, non-blocking too): [`drain`](Self::drain) reads it directly, whatever
    /// readiness the reactor has cached.
    file: File,
    partial: Mutex<Partial>,
    sink: Arc<LogSink>,
}

#[derive(Debug, Default)]
struct Partial {
    line: Vec<u8>,
    eof: bool,
}

impl Pipe {
    /// Takes a pipe's read end (blocking or not), makes it non-blocking and registers it with the reactor.
    pub(crate) fn new(fd: OwnedFd, sink: Arc<LogSink>) -> io::Result<Arc<Self>> {
        let receiver = Receiver::from_owned_fd(fd)?;
        let file = File::from(receiver.as_fd().try_clone_to_owned()?);
        Ok(Arc::new(Self {
            receiver,
            file,
            partial: Mutex::new(Partial::default()),
            sink,
        }))
    }

    /// Reads until end of file; run as a task per pipe.
    pub(crate) async fn pump(self: Arc<Self>) {
        loop {
            if let Err(e) = self.receiver.readable().await {
                tracing::warn!(error = %e, "cannot poll a function output pipe");
                return;
            }
            // `WouldBlock` (drained meanwhile) clears the cached readiness, and the loop waits again.
            match self.receiver.try_io(|| self.read_chunk()) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read a function output pipe");
                    return;
                }
            }
        }
    }

    /// Reads everything the pipe holds right now. Returns `true` at end of file (every writer has exited).
    pub(crate) fn drain(&self) -> bool {
        loop {
            match self.read_chunk() {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // `WouldBlock`: empty for now. Any other error: the pump reports it.
                Err(_) => return false,
            }
        }
    }

    /// One `read`, under the line buffer's lock so that the pump and `drain` never reorder lines.
    fn read_chunk(&self) -> io::Result<usize> {
        let mut partial = self.partial.lock().unwrap_or_else(PoisonError::into_inner);
        if partial.eof {
            return Ok(0);
        }
        let mut buf = [0u8; 8192];
        let n = (&self.file).read(&mut buf)?;
        if n == 0 {
            partial.eof = true;
            if !partial.line.is_empty() {
                let rest = std::mem::take(&mut partial.line);
                self.emit(&rest);
            }
            return Ok(0);
        }
        let mut chunk = &buf[..n];
        while let Some(end) = chunk.iter().position(|&b| b == b'\n') {
            partial.line.extend_from_slice(&chunk[..end]);
            let line = std::mem::take(&mut partial.line);
            self.emit(&line);
            chunk = &chunk[end + 1..];
        }
        partial.line.extend_from_slice(chunk);
        if partial.line.len() >= MAX_LINE_BYTES {
            let line = std::mem::take(&mut partial.line);
            self.emit(&line);
        }
        Ok(n)
    }

    fn emit(&self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.sink.function_line(&String::from_utf8_lossy(line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_markers_are_keyed_by_the_word_after_at() {
        assert_eq!(
            fault_point("sqsafe-fault: SIGKILL at after_claim key=payment:p-1"),
            Some("after_claim")
        );
        assert_eq!(
            fault_point("sqsafe-fault: SIGKILL at after_effect"),
            Some("after_effect")
        );
        assert_eq!(fault_point("sqsafe-fault: SIGKILL"), None);
        assert_eq!(fault_point("  sqsafe-fault: SIGKILL at after_claim"), None);
        assert_eq!(fault_point("INFO sqsafe-fault: at after_claim"), None);
    }

    #[test]
    fn emf_lines_give_their_declared_metrics() {
        let line = r#"{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"sqsafe","Dimensions":[["consumer"]],
            "Metrics":[{"Name":"RecordsReplayed","Unit":"Count"},{"Name":"BatchDuration","Unit":"Milliseconds"},
            {"Name":"Missing"}]}]},"consumer":"c","RecordsReplayed":2,"BatchDuration":12.5,"Other":7}"#
            .replace('\n', "");
        let mut values = emf_values(&line).expect("an EMF line");
        values.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            values,
            [
                ("BatchDuration".to_owned(), 12.5),
                ("RecordsReplayed".to_owned(), 2.0)
            ]
        );
    }

    #[test]
    fn a_metric_declared_twice_counts_once_and_arrays_are_summed() {
        let line = r#"{"_aws":{"CloudWatchMetrics":[{"Metrics":[{"Name":"A"}]},{"Metrics":[{"Name":"A"}]}]},"A":[1,2,3]}"#;
        assert_eq!(emf_values(line), Some(vec![("A".to_owned(), 6.0)]));
    }

    #[test]
    fn other_lines_are_not_emf() {
        assert_eq!(emf_values("plain text"), None);
        assert_eq!(emf_values(r#"{"level":"INFO","message":"_aws"}"#), None);
        assert_eq!(emf_values(r#"{"_aws": oops"#), None);
        assert_eq!(emf_values(r#"{"level":"INFO","_aws":{}}"#), None);
    }

    #[test]
    fn the_sink_sums_across_lines() {
        let sink = LogSink::new(PathBuf::from("/nonexistent/never-opened.log"));
        sink.function_line(r#"{"_aws":{"CloudWatchMetrics":[{"Metrics":[{"Name":"N"}]}]},"N":2}"#);
        sink.function_line(r#"{"_aws":{"CloudWatchMetrics":[{"Metrics":[{"Name":"N"}]}]},"N":3}"#);
        sink.function_line("sqsafe-fault: SIGKILL at after_claim key=a");
        sink.function_line("sqsafe-fault: SIGKILL at after_claim key=b");
        sink.function_line("sqsafe-fault: SIGKILL at after_complete key=c");
        assert_eq!(sink.emf(), BTreeMap::from([("N".to_owned(), 5.0)]));
        assert_eq!(sink.take_outcomes(), None, "no batch metrics line");
        assert_eq!(
            sink.fault_markers(),
            BTreeMap::from([
                ("after_claim".to_owned(), 2),
                ("after_complete".to_owned(), 1)
            ])
        );
    }

    #[test]
    fn the_sink_hands_over_the_batch_outcomes_once() {
        let sink = LogSink::new(PathBuf::from("/nonexistent/never-opened.log"));
        let batch = r#"{"_aws":{"CloudWatchMetrics":[{"Dimensions":[["consumer"]],"Metrics":[{"Name":"RecordsReceived"},{"Name":"RecordsProcessed"}]}]},"RecordsReceived":2,"RecordsProcessed":2}"#;
        sink.function_line(batch);
        sink.function_line(batch);
        let taken = sink.take_outcomes().expect("two batch lines");
        assert_eq!((taken.received, taken.applied), (4, 4));
        assert_eq!(sink.take_outcomes(), None, "taken already");
    }
}

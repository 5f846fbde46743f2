//! How `sqsafe local send` finds the pipeline `sqsafe local up` runs: `up` writes a small JSON file under the
//! project's target folder (moto's endpoint, each consumer's queue and sample folder) once its queues exist, and
//! removes it when it stops. A file left by an `up` that could not clean up (SIGKILL) names an endpoint that no
//! longer answers: `send` says so rather than sending into nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::stack::target_dir;

/// The running pipeline, as `up` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PipelineState {
    /// The process of `sqsafe local up` that wrote it (only that one removes it).
    pub(crate) pid: u32,
    /// moto server's endpoint, `http://127.0.0.1:PORT`.
    pub(crate) endpoint: String,
    /// The folder of the sample events (`events/` beside the template).
    pub(crate) events: PathBuf,
    /// Each consumer (a function with an SQS event source) by its binary's name.
    pub(crate) consumers: BTreeMap<String, ConsumerQueue>,
    /// Each stream consumer (a function with a Kinesis or DynamoDB event source) by its binary's name: what
    /// `send` writes its records to.
    #[serde(default)]
    pub(crate) streams: BTreeMap<String, StreamTarget>,
}

/// Where a stream consumer's records are written locally.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum StreamTarget {
    /// Put on a Kinesis stream (its name).
    Kinesis {
        /// The stream's name in moto.
        stream: String,
    },
    /// Written to the table whose stream feeds the consumer.
    DynamodbTable {
        /// The table's name in moto.
        table: String,
    },
}

/// A consumer's local source queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ConsumerQueue {
    /// Its URL in moto.
    pub(crate) url: String,
    /// A FIFO queue: each message needs its group.
    pub(crate) fifo: bool,
    /// With content-based deduplication (else a FIFO message needs its deduplication id).
    pub(crate) content_based_deduplication: bool,
}

/// Where `up` writes the state of the project's pipeline.
pub(crate) fn state_path() -> PathBuf {
    target_dir().join("sqsafe-local").join("pipeline.json")
}

/// The state file while `up` runs: written at once, removed on drop unless another `up` has replaced it since.
#[derive(Debug)]
pub(crate) struct StateFile {
    path: PathBuf,
    pid: u32,
}

impl StateFile {
    /// Writes `state` to `path` (its folder created).
    pub(crate) fn write(path: PathBuf, state: &PipelineState) -> Result<Self, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let text = serde_json::to_string_pretty(state).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self {
            path,
            pid: state.pid,
        })
    }
}

impl Drop for StateFile {
    fn drop(&mut self) {
        // Two `up` in one project: the later one's file stays until that one stops.
        if read(&self.path).is_ok_and(|state| state.pid == self.pid) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Reads the state file at `path`.
pub(crate) fn read(path: &Path) -> std::io::Result<PipelineState> {
    let text = std::fs::read_to_string(path)?;
    serde_json::from_str(&text).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(pid: u32) -> PipelineState {
        PipelineState {
            pid,
            endpoint: "http://127.0.0.1:9".to_owned(),
            events: PathBuf::from("events"),
            consumers: BTreeMap::from([(
                "apply-ledger".to_owned(),
                ConsumerQueue {
                    url: "http://127.0.0.1:9/123456789012/local-LedgerQueue.fifo".to_owned(),
                    fifo: true,
                    content_based_deduplication: true,
                },
            )]),
            streams: BTreeMap::from([(
                "ship-order".to_owned(),
                StreamTarget::Kinesis {
                    stream: "local-Orders".to_owned(),
                },
            )]),
        }
    }

    #[test]
    fn the_file_is_read_back_and_removed_by_its_writer_only() {
        let dir = std::env::temp_dir().join(sqsafe_testkit::unique_name("pipeline-state"));
        let path = dir.join("sqsafe-local").join("pipeline.json");
        let first = StateFile::write(path.clone(), &state(1)).expect("write");
        assert_eq!(read(&path).expect("read"), state(1));
        // A second `up` in the same project replaces it: the first one's stop leaves the second one's file.
        let second = StateFile::write(path.clone(), &state(2)).expect("write");
        drop(first);
        assert_eq!(read(&path).expect("still there").pid, 2);
        drop(second);
        assert!(!path.exists(), "removed on stop");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

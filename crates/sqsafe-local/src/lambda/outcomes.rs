//! How a batch's records ended, as the function itself counted them: sqsafe's batch metrics line.
//!
//! A consumer built on `sqsafe-batch` prints one EMF document per invocation with the dimension `consumer` alone
//! (`RecordsReceived`, `RecordsProcessed`, `RecordsReplayed`, ...), then one more per error kind it dead-lettered,
//! which declares `RecordsSentToDlq` again under `consumer` and `error_kind`. Only the first kind of document is
//! read here, so each record counts once.

use serde_json::Value;

/// The metric that marks a batch document: the per-kind dead-letter documents do not declare it.
const RECEIVED: &str = "RecordsReceived";

/// Records counted by the function's batch metrics lines, summed over the lines read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchOutcomes {
    /// `RecordsReceived`: records in the batches.
    pub received: u64,
    /// `RecordsProcessed`: the effect ran and completed.
    pub applied: u64,
    /// `RecordsReplayed` + `RecordsSkippedByCache`: duplicates answered without running the effect again.
    pub replayed: u64,
    /// `RecordsIgnored`: not an event for the handler, acknowledged.
    pub ignored: u64,
    /// `RecordsSentToDlq`: sent to the dead-letter queue by the function, then acknowledged.
    pub dead_lettered: u64,
}

impl BatchOutcomes {
    /// The counts of a batch metrics line; `None` for any other line (a log line, a per-kind dead-letter document).
    pub fn from_line(line: &str) -> Option<Self> {
        let line = line.trim();
        if !line.starts_with('{') || !line.contains(RECEIVED) {
            return None;
        }
        let doc: Value = serde_json::from_str(line).ok()?;
        let declares_received = doc
            .get("_aws")?
            .get("CloudWatchMetrics")?
            .as_array()?
            .iter()
            .filter_map(|d| d.get("Metrics")?.as_array())
            .flatten()
            .any(|m| m.get("Name").and_then(Value::as_str) == Some(RECEIVED));
        if !declares_received {
            return None;
        }
        let count = |name: &str| doc.get(name).and_then(Value::as_u64).unwrap_or(0);
        Some(Self {
            received: count(RECEIVED),
            applied: count("RecordsProcessed"),
            replayed: count("RecordsReplayed") + count("RecordsSkippedByCache"),
            ignored: count("RecordsIgnored"),
            dead_lettered: count("RecordsSentToDlq"),
        })
    }

    /// Adds another line's counts.
    pub fn add(&mut self, other: Self) {
        self.received += other.received;
        self.applied += other.applied;
        self.replayed += other.replayed;
        self.ignored += other.ignored;
        self.dead_lettered += other.dead_lettered;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The two kinds of document a batch with a dead letter prints, as sqsafe-telemetry writes them.
    fn batch_lines() -> [String; 2] {
        let batch = json!({
            "_aws": {"Timestamp": 1, "CloudWatchMetrics": [{"Namespace": "sqsafe", "Dimensions": [["consumer"]],
                "Metrics": [{"Name": "RecordsReceived"}, {"Name": "RecordsProcessed"}, {"Name": "RecordsReplayed"},
                    {"Name": "RecordsSkippedByCache"}, {"Name": "RecordsIgnored"}, {"Name": "RecordsSentToDlq"},
                    {"Name": "RecordsFailedTransient"}]}]},
            "consumer": "c", "RecordsReceived": 6, "RecordsProcessed": 2, "RecordsReplayed": 1,
            "RecordsSkippedByCache": 1, "RecordsIgnored": 0, "RecordsSentToDlq": 1, "RecordsFailedTransient": 1,
        });
        let by_kind = json!({
            "_aws": {"Timestamp": 1, "CloudWatchMetrics": [{"Namespace": "sqsafe",
                "Dimensions": [["consumer", "error_kind"]], "Metrics": [{"Name": "RecordsSentToDlq"}]}]},
            "consumer": "c", "error_kind": "bad_payload", "RecordsSentToDlq": 1,
        });
        [batch.to_string(), by_kind.to_string()]
    }

    #[test]
    fn a_batch_document_gives_its_counts() {
        let [batch, _] = batch_lines();
        assert_eq!(
            BatchOutcomes::from_line(&batch),
            Some(BatchOutcomes {
                received: 6,
                applied: 2,
                replayed: 2,
                ignored: 0,
                dead_lettered: 1,
            })
        );
    }

    #[test]
    fn a_dead_letter_counts_once_though_two_documents_declare_it() {
        let mut sum = BatchOutcomes::default();
        for line in batch_lines() {
            if let Some(counts) = BatchOutcomes::from_line(&line) {
                sum.add(counts);
            }
        }
        assert_eq!(sum.dead_lettered, 1);
        assert_eq!(sum.received, 6);
    }

    #[test]
    fn other_lines_give_nothing() {
        for line in [
            "plain text",
            r#"{"level":"INFO","fields":{"message":"RecordsReceived"}}"#,
            r#"{"_aws":{"CloudWatchMetrics":[{"Metrics":[{"Name":"Echoed"}]}]},"Echoed":1,"RecordsReceived":3}"#,
            r#"{"RecordsReceived": oops"#,
        ] {
            assert_eq!(BatchOutcomes::from_line(line), None, "{line}");
        }
    }
}

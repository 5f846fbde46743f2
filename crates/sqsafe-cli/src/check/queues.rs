//! Queues and the mappings that read them: report-batch-item-failures, maximum-concurrency, fifo-mapping,
//! stream-mapping, stream-consumer, visibility-timeout, dlq-url, queue-url, max-attempts, idempotency-window, dlq-required,
//! max-receive-count, dlq-fifo, dlq-retention, redrive-allow-policy, orphan-queue, message-size, sse (queues).

use std::collections::{BTreeMap, BTreeSet};

use serde_norway::Value;

use super::template::{
    Bound, as_list, get, get_or, has, is_only, is_str, names, refs, same, show, text, to_int,
    truthy,
};
use super::{Checker, Consumer};

/// Time allowed, after a message reaches the end of its DLQ retention, for an operator to redrive it and for the
/// redriven copy to be consumed.
const REDRIVE_MARGIN_SECONDS: i64 = 86_400;
const DLQ_RETENTION_SECONDS: i64 = 14 * 86_400;
const MIN_MAX_RECEIVE_COUNT: i64 = 5;
const VISIBILITY_FACTOR: i64 = 6;
/// SQS's defaults.
const DEFAULT_VISIBILITY_TIMEOUT: i64 = 30;
const DEFAULT_RETENTION: i64 = 345_600;
/// SAM's default function timeout.
const SAM_DEFAULT_TIMEOUT: i64 = 3;
/// MAX_ATTEMPTS when unset (functions/*/README.md).
const CODE_DEFAULT_MAX_ATTEMPTS: i64 = 5;
/// Lambda's bounds for a stream mapping's MaximumRetryAttempts and MaximumRecordAgeInSeconds (-1, infinite, aside).
const STREAM_MAX_RETRY_ATTEMPTS: i64 = 10_000;
const STREAM_MIN_RECORD_AGE: i64 = 60;
const STREAM_MAX_RECORD_AGE: i64 = 604_800;

fn reports_item_failures(ev: &Value) -> bool {
    as_list(get(Some(ev), "FunctionResponseTypes"))
        .into_iter()
        .any(|t| is_str(Some(t), "ReportBatchItemFailures"))
}

impl Checker<'_> {
    /// report-batch-item-failures, maximum-concurrency, fifo-mapping: an SQS mapping `ev` (at `at`).
    pub(super) fn check_mapping(&mut self, c: &Consumer, ev: &Value, at: &str) {
        if !reports_item_failures(ev) {
            self.fail(
                "report-batch-item-failures",
                at,
                "FunctionResponseTypes lacks ReportBatchItemFailures: one failed record would redeliver the whole batch",
            );
        }

        match get(get(Some(ev), "ScalingConfig"), "MaximumConcurrency") {
            None => self.fail(
                "maximum-concurrency",
                at,
                "ScalingConfig.MaximumConcurrency is not set (unbounded scaling); set it within 2..1000",
            ),
            Some(conc) => {
                let (lo, lo_d) = self.t.bound(conc, Bound::Min);
                let (hi, hi_d) = self.t.bound(conc, Bound::Max);
                match (lo, hi) {
                    (Some(lo), Some(hi)) if lo < 2 || hi > 1000 => self.fail(
                        "maximum-concurrency",
                        at,
                        format!("MaximumConcurrency range {lo}..{hi} is outside 2..1000 ({lo_d}, {hi_d})"),
                    ),
                    (Some(_), Some(_)) => {}
                    _ => self.fail(
                        "maximum-concurrency",
                        at,
                        format!("MaximumConcurrency must be bounded: {lo_d}, {hi_d}"),
                    ),
                }
            }
        }

        if let Some(q) = &c.queue
            && truthy(self.t.prop(q, "FifoQueue"))
        {
            let (batch, batch_d) = self
                .t
                .bound(&get_or(Some(ev), "BatchSize", Value::from(10)), Bound::Max);
            if batch.is_none_or(|b| b > 1) {
                self.fail(
                    "fifo-mapping",
                    at,
                    format!(
                        "BatchSize can reach {} ({batch_d}); on a FIFO queue it must be 1, or a record held back \
                         behind a failing one of its group spends receives without running",
                        batch.map_or_else(|| "any size".to_owned(), |b| b.to_string())
                    ),
                );
            }
            if has(Some(ev), "MaximumBatchingWindowInSeconds") {
                self.fail(
                    "fifo-mapping",
                    at,
                    "MaximumBatchingWindowInSeconds is set; FIFO queues do not support a batching window: remove it",
                );
            }
        }
    }

    /// stream-mapping: what makes a stream function's mapping `ev` (at `at`) survive a poison record without
    /// losing events.
    pub(super) fn check_stream_mapping(&mut self, c: &Consumer, mapping: &Value, at: &str) {
        let table = c.stream_table.clone().unwrap_or_default();
        let view = get(self.t.prop(&table, "StreamSpecification"), "StreamViewType");
        if !(is_str(view, "NEW_IMAGE") || is_str(view, "NEW_AND_OLD_IMAGES")) {
            self.fail(
                "stream-mapping",
                &table,
                format!(
                    "StreamSpecification.StreamViewType is {}: the relay reads each INSERT's NewImage (NEW_IMAGE or NEW_AND_OLD_IMAGES)",
                    show(view)
                ),
            );
        }
        let ev = Some(mapping);
        if !is_str(get(ev, "StartingPosition"), "TRIM_HORIZON") {
            self.fail(
                "stream-mapping",
                at,
                format!(
                    "StartingPosition is {}, not TRIM_HORIZON: records written before the mapping reads would be skipped",
                    show(get(ev, "StartingPosition"))
                ),
            );
        }
        if !reports_item_failures(mapping) {
            self.fail(
                "stream-mapping",
                at,
                "FunctionResponseTypes lacks ReportBatchItemFailures: a failed record would replay its whole batch",
            );
        }
        if !truthy(get(ev, "BisectBatchOnFunctionError")) {
            self.fail(
                "stream-mapping",
                at,
                "BisectBatchOnFunctionError is not true: a record that crashes the function is never isolated",
            );
        }
        let retries = get_or(ev, "MaximumRetryAttempts", Value::from(-1));
        let (lo, lo_d) = self.t.bound(&retries, Bound::Min);
        let (hi, hi_d) = self.t.bound(&retries, Bound::Max);
        if lo != Some(-1) || hi != Some(-1) {
            self.fail(
                "stream-mapping",
                at,
                format!(
                    "MaximumRetryAttempts must be -1 (retry while the stream holds the record): {lo_d}, {hi_d}; a \
                     mapping that gives up on a retryable failure leaves its event for the sweeper alone"
                ),
            );
        }
        match &c.on_failure {
            Some(queue) => {
                let named = c.var("FAILURE_QUEUE_URL");
                if !is_only(&refs(named), queue) {
                    self.fail(
                        "stream-mapping",
                        &c.function,
                        format!(
                            "FAILURE_QUEUE_URL is {}, not its on-failure queue {queue}: a permanent failure's details \
                             would go elsewhere, or the relay would refuse to start",
                            show(named)
                        ),
                    );
                }
                if truthy(self.t.prop(queue, "FifoQueue")) {
                    self.fail("stream-mapping", queue, "an on-failure destination must be a standard queue");
                }
            }
            None => self.fail(
                "stream-mapping",
                at,
                "no DestinationConfig.OnFailure.Destination naming a queue of this template: a record given up on \
                 would leave no trace",
            ),
        }
    }

    /// stream-consumer, the mapping's part: a stream consumer's mapping `mapping` (at `at`) stops on a failed
    /// record, isolates a crashing one, and gives up within known bounds, leaving a trace.
    pub(super) fn check_stream_consumer_mapping(
        &mut self,
        mapping: &Value,
        at: &str,
        on_failure: Option<&str>,
    ) {
        let ev = Some(mapping);
        if !reports_item_failures(mapping) {
            self.fail(
                "stream-consumer",
                at,
                "FunctionResponseTypes lacks ReportBatchItemFailures: the records after a failed one would be applied \
                 before it is retried, or the whole batch replayed",
            );
        }
        if !truthy(get(ev, "BisectBatchOnFunctionError")) {
            self.fail(
                "stream-consumer",
                at,
                "BisectBatchOnFunctionError is not true: a record that crashes the function is never isolated",
            );
        }
        for (key, lo_want, hi_want, why) in [
            (
                "MaximumRetryAttempts",
                0,
                STREAM_MAX_RETRY_ATTEMPTS,
                "unset or -1 retries a failing record for the stream's retention, its shard blocked behind it",
            ),
            (
                "MaximumRecordAgeInSeconds",
                STREAM_MIN_RECORD_AGE,
                STREAM_MAX_RECORD_AGE,
                "unset or -1 keeps a failing record for the stream's retention, its shard blocked behind it",
            ),
        ] {
            let Some(value) = get(ev, key) else {
                self.fail(
                    "stream-consumer",
                    at,
                    format!("{key} is not set: {why}; set it within {lo_want}..{hi_want}"),
                );
                continue;
            };
            let (lo, lo_d) = self.t.bound(value, Bound::Min);
            let (hi, hi_d) = self.t.bound(value, Bound::Max);
            match (lo, hi) {
                (Some(lo), Some(hi)) if lo >= lo_want && hi <= hi_want => {}
                _ => self.fail(
                    "stream-consumer",
                    at,
                    format!("{key} must be within {lo_want}..{hi_want} ({lo_d}, {hi_d}): {why}"),
                ),
            }
        }
        match on_failure {
            Some(queue) if truthy(self.t.prop(queue, "FifoQueue")) => {
                self.fail("stream-consumer", queue, "an on-failure destination must be a standard queue");
            }
            Some(_) => {}
            None => self.fail(
                "stream-consumer",
                at,
                "no DestinationConfig.OnFailure.Destination naming a queue of this template: a batch Lambda gives up \
                 on would leave no trace of which records it skipped",
            ),
        }
    }

    /// stream-consumer, the function's part: its failure queue (DLQ_URL) and an idempotency window that outlasts
    /// every retry of a record.
    pub(super) fn check_stream_consumer(&mut self, c: &Consumer) {
        let f = c.name();
        let dlq: Vec<String> = refs(c.var("DLQ_URL"))
            .into_iter()
            .filter(|x| self.is_queue(x))
            .collect();
        match dlq.as_slice() {
            [queue] if Some(queue.as_str()) == c.on_failure.as_deref() => self.fail(
                "stream-consumer",
                f,
                format!(
                    "DLQ_URL names {queue}, its mapping's on-failure destination: Lambda's metadata and sqsafe's dead \
                     letters (each record's content) would share one queue; give the dead letters their own"
                ),
            ),
            [queue] if truthy(self.t.prop(queue, "FifoQueue")) => self.fail(
                "stream-consumer",
                queue,
                "a stream consumer's failure queue (DLQ_URL) must be a standard queue",
            ),
            [_] => {}
            _ => self.fail(
                "stream-consumer",
                f,
                format!(
                    "DLQ_URL is {}, not a queue of this template: a poison record's content would have nowhere to go",
                    show(c.var("DLQ_URL"))
                ),
            ),
        }

        let Some(days_value) = c.var("IDEMPOTENCY_WINDOW_DAYS") else {
            self.fail(
                "stream-consumer",
                f,
                "IDEMPOTENCY_WINDOW_DAYS is not set: the window must be explicit to be checked",
            );
            return;
        };
        let (days, days_d) = self.t.bound(days_value, Bound::Min);
        let (age, age_d) = self.t.bound(
            get(Some(&c.event), "MaximumRecordAgeInSeconds").unwrap_or(&Value::Null),
            Bound::Max,
        );
        let (timeout, timeout_d) = self.t.bound(
            &get_or(Some(&c.props), "Timeout", Value::from(SAM_DEFAULT_TIMEOUT)),
            Bound::Max,
        );
        let (Some(days), Some(age), Some(timeout)) = (days, age, timeout) else {
            // An unbounded age is the mapping's part above; an unbounded window or timeout, here.
            if days.is_none() || timeout.is_none() {
                self.fail(
                    "stream-consumer",
                    f,
                    format!("the window and the timeout must be bounded to be checked: {days_d}, {timeout_d}"),
                );
            }
            return;
        };
        let need = age + timeout;
        if days * 86_400 < need {
            self.fail(
                "stream-consumer",
                f,
                format!(
                    "IDEMPOTENCY_WINDOW_DAYS can be {days} ({days_d}) = {} s < MaximumRecordAgeInSeconds {age} \
                     ({age_d}) + Timeout {timeout} ({timeout_d}) = {need} s: a record retried after its idempotency \
                     record expired would be applied again",
                    days * 86_400
                ),
            );
        }
    }

    /// visibility-timeout, dlq-url, queue-url, max-attempts: the numbers and names that tie a function to its queue.
    pub(super) fn check_wiring(&mut self, c: &Consumer) {
        let f = c.name();
        let Some(q) = c.queue.as_deref() else { return };
        let qp = self.t.props(q);

        let (timeout, timeout_d) = self.t.bound(
            &get_or(Some(&c.props), "Timeout", Value::from(SAM_DEFAULT_TIMEOUT)),
            Bound::Max,
        );
        let (window, window_d) = self.t.bound(
            &get_or(
                Some(&c.event),
                "MaximumBatchingWindowInSeconds",
                Value::from(0),
            ),
            Bound::Max,
        );
        let (visibility, visibility_d) = self.t.bound(
            &get_or(
                qp,
                "VisibilityTimeout",
                Value::from(DEFAULT_VISIBILITY_TIMEOUT),
            ),
            Bound::Min,
        );
        match (timeout, window, visibility) {
            (Some(timeout), Some(window), Some(visibility)) => {
                let need = VISIBILITY_FACTOR * timeout + window;
                if visibility < need {
                    self.fail(
                        "visibility-timeout",
                        q,
                        format!(
                            "VisibilityTimeout {visibility} < {VISIBILITY_FACTOR} x {f} Timeout {timeout} ({timeout_d}) \
                             + batching window {window} ({window_d}) = {need}; raise it to {need} or more"
                        ),
                    );
                }
            }
            _ => self.fail(
                "visibility-timeout",
                q,
                format!(
                    "cannot bound the numbers: timeout {timeout_d}, window {window_d}, visibility {visibility_d} \
                     (give each parameter its bound)"
                ),
            ),
        }

        let env = c.env();
        if let Some(dlq) = &c.dlq {
            if !has(env, "DLQ_URL") {
                self.fail(
                    "dlq-url",
                    f,
                    format!("DLQ_URL is not set (sqsafe sends poison messages to {dlq} itself): set it to !Ref {dlq}"),
                );
            } else if !is_only(&refs(get(env, "DLQ_URL")), dlq) {
                self.fail(
                    "dlq-url",
                    f,
                    format!(
                        "DLQ_URL refers to {}, not {dlq}, the DLQ of {q}",
                        names(&refs(get(env, "DLQ_URL")))
                    ),
                );
            }
        }
        if !has(env, "QUEUE_URL") {
            self.fail(
                "queue-url",
                f,
                format!("QUEUE_URL is not set (sqsafe changes the visibility of {q}'s messages itself): set it to !Ref {q}"),
            );
        } else if !is_only(&refs(get(env, "QUEUE_URL")), q) {
            self.fail(
                "queue-url",
                f,
                format!(
                    "QUEUE_URL refers to {}, not {q}, the queue it consumes",
                    names(&refs(get(env, "QUEUE_URL")))
                ),
            );
        }

        if let Some(receive) = to_int(get(get(qp, "RedrivePolicy"), "maxReceiveCount")) {
            let attempts = get_or(env, "MAX_ATTEMPTS", Value::from(CODE_DEFAULT_MAX_ATTEMPTS));
            match self.t.bound(&attempts, Bound::Max) {
                (None, shown) => self.fail(
                    "max-attempts",
                    f,
                    format!("MAX_ATTEMPTS is unbounded ({shown}); give its parameter a MaxValue"),
                ),
                (Some(attempts), shown) if attempts > receive => self.fail(
                    "max-attempts",
                    f,
                    format!(
                        "MAX_ATTEMPTS can be {attempts} ({shown}) > {q} maxReceiveCount {receive}: SQS would \
                         dead-letter the message without the context sqsafe adds"
                    ),
                ),
                _ => {}
            }
        }
    }

    /// idempotency-window: a redriven message still finds its idempotency record.
    pub(super) fn check_window(&mut self, c: &Consumer) {
        let f = c.name();
        let env = c.env();
        if !has(env, "IDEMPOTENCY_WINDOW_DAYS") {
            self.fail(
                "idempotency-window",
                f,
                "IDEMPOTENCY_WINDOW_DAYS is not set: the window must be explicit to be checked",
            );
            return;
        }
        let days_value = get_or(env, "IDEMPOTENCY_WINDOW_DAYS", Value::Null);
        let (days, days_d) = self.t.bound(&days_value, Bound::Min);
        let Some(days) = days else {
            self.fail(
                "idempotency-window",
                f,
                format!("IDEMPOTENCY_WINDOW_DAYS has no lower bound ({days_d}); give its parameter a MinValue"),
            );
            return;
        };
        let (Some(queue), Some(dlq)) = (&c.queue, &c.dlq) else {
            return; // dlq-required reports it
        };
        let retention = |id: &str| {
            self.t.bound(
                &get_or(
                    self.t.props(id),
                    "MessageRetentionPeriod",
                    Value::from(DEFAULT_RETENTION),
                ),
                Bound::Max,
            )
        };
        let (Some(source_ret), _) = retention(queue) else {
            self.fail(
                "idempotency-window",
                f,
                "queue retention periods must be literals to check the window",
            );
            return;
        };
        let (Some(dlq_ret), _) = retention(dlq) else {
            self.fail(
                "idempotency-window",
                f,
                "queue retention periods must be literals to check the window",
            );
            return;
        };
        let need = source_ret + dlq_ret + REDRIVE_MARGIN_SECONDS;
        if days * 86_400 < need {
            self.fail(
                "idempotency-window",
                f,
                format!(
                    "IDEMPOTENCY_WINDOW_DAYS can be {days} ({days_d}) = {} s < {queue} retention {source_ret} + {dlq} \
                     retention {dlq_ret} + redrive margin {REDRIVE_MARGIN_SECONDS} = {need} s (>= {} days): a \
                     redriven message would be applied again",
                    days * 86_400,
                    (need + 86_399) / 86_400
                ),
            );
        }
    }

    /// sse and orphan-queue (every queue), dlq-retention and redrive-allow-policy (DLQs and on-failure queues),
    /// dlq-required, max-receive-count, dlq-fifo.
    pub(super) fn check_queues(
        &mut self,
        consumed: &BTreeSet<String>,
        dlq_of: &BTreeMap<String, String>,
        dlqs: &BTreeSet<String>,
        on_failure: &BTreeSet<String>,
    ) {
        for q in self.queues.clone() {
            let qp = self.t.props(&q);
            if !(truthy(get(qp, "SqsManagedSseEnabled"))
                || get(qp, "KmsMasterKeyId").is_some_and(|k| !super::template::is_empty(Some(k))))
            {
                self.fail(
                    "sse",
                    &q,
                    "neither SqsManagedSseEnabled: true nor KmsMasterKeyId: encrypt it",
                );
            }
            if !consumed.contains(&q) && !dlqs.contains(&q) && !on_failure.contains(&q) {
                self.fail(
                    "orphan-queue",
                    &q,
                    "is neither consumed by a function, nor a dead-letter queue, nor a stream mapping's on-failure \
                     queue: wire it or remove it",
                );
            }
        }
        // A stream mapping's on-failure queue: Lambda sends to it; it keeps what it holds as long as a DLQ, and no
        // queue may dead-letter into it.
        for q in on_failure.difference(dlqs) {
            let qp = self.t.props(q);
            if to_int(get(qp, "MessageRetentionPeriod")) != Some(DLQ_RETENTION_SECONDS) {
                self.fail(
                    "dlq-retention",
                    q,
                    format!(
                        "MessageRetentionPeriod is {}, needs {DLQ_RETENTION_SECONDS} (14 days)",
                        show(get(qp, "MessageRetentionPeriod"))
                    ),
                );
            }
            let rap = get(qp, "RedriveAllowPolicy");
            if !(rap.is_some_and(Value::is_mapping)
                && is_str(get(rap, "redrivePermission"), "denyAll"))
            {
                self.fail(
                    "redrive-allow-policy",
                    q,
                    format!(
                        "RedriveAllowPolicy is {}: an on-failure queue takes no queue's dead letters (redrivePermission: denyAll)",
                        show(rap)
                    ),
                );
            }
        }
        for q in consumed {
            if !dlq_of.contains_key(q) {
                self.fail(
                    "dlq-required",
                    q,
                    "consumed queue has no RedrivePolicy to a queue of this template: give it a dead-letter queue",
                );
            }
        }
        for (q, d) in dlq_of {
            let rp = self.t.prop(q, "RedrivePolicy");
            let receive = to_int(get(rp, "maxReceiveCount"));
            if receive.is_none_or(|r| r < MIN_MAX_RECEIVE_COUNT) {
                self.fail(
                    "max-receive-count",
                    q,
                    format!(
                        "maxReceiveCount is {}, needs >= {MIN_MAX_RECEIVE_COUNT}",
                        show(get(rp, "maxReceiveCount"))
                    ),
                );
            }
            let (source_fifo, dlq_fifo) =
                (self.t.prop(q, "FifoQueue"), self.t.prop(d, "FifoQueue"));
            if truthy(source_fifo) != truthy(dlq_fifo) {
                self.fail(
                    "dlq-fifo",
                    d,
                    format!(
                        "FifoQueue {} does not match its source {q} ({})",
                        show(dlq_fifo),
                        show(source_fifo)
                    ),
                );
            }
        }
        for d in dlqs {
            let dp = self.t.props(d);
            if to_int(get(dp, "MessageRetentionPeriod")) != Some(DLQ_RETENTION_SECONDS) {
                self.fail(
                    "dlq-retention",
                    d,
                    format!(
                        "MessageRetentionPeriod is {}, needs {DLQ_RETENTION_SECONDS} (14 days)",
                        show(get(dp, "MessageRetentionPeriod"))
                    ),
                );
            }
            let rap = get(dp, "RedriveAllowPolicy").filter(|r| r.is_mapping());
            let Some(rap) = rap else {
                self.fail(
                    "redrive-allow-policy",
                    d,
                    "no RedriveAllowPolicy: any queue of the account could use it as its DLQ (add redrivePermission: \
                     byQueue with its source queue's ARN)",
                );
                continue;
            };
            let rap = Some(rap);
            if !is_str(get(rap, "redrivePermission"), "byQueue") {
                self.fail(
                    "redrive-allow-policy",
                    d,
                    format!(
                        "redrivePermission is {}, not byQueue",
                        show(get(rap, "redrivePermission"))
                    ),
                );
                continue;
            }
            let arns = get(rap, "sourceQueueArns");
            let named: Vec<String> = as_list(arns).into_iter().map(|a| text(Some(a))).collect();
            let named = named.join(" ");
            for (q, _) in dlq_of.iter().filter(|(_, x)| *x == d) {
                let name = self.t.prop(q, "QueueName");
                let name_text = match name {
                    Some(Value::Mapping(m)) => text(m.get("Fn::Sub")),
                    other => text(other),
                };
                let by_name = !super::template::is_empty(name) && named.contains(&name_text);
                if !refs(arns).contains(q) && !by_name {
                    self.fail(
                        "redrive-allow-policy",
                        d,
                        format!(
                            "sourceQueueArns {} does not name its source {q}",
                            show(arns)
                        ),
                    );
                }
            }
        }
    }

    /// message-size, for one consumer: its queue and DLQ, and the DLQ_MAX_MESSAGE_SIZE it fits its copies to.
    pub(super) fn check_message_sizes(&mut self, c: &Consumer) {
        let (Some(queue), Some(dlq)) = (&c.queue, &c.dlq) else {
            return;
        };
        let size = |id: &str| -> (Option<Value>, Option<i64>) {
            let raw = self.t.prop(id, "MaximumMessageSize");
            match raw {
                Some(Value::Mapping(m)) if m.contains_key("Ref") => {
                    let param = m
                        .get("Ref")
                        .and_then(Value::as_str)
                        .and_then(|p| self.t.parameter_default(p));
                    (raw.cloned(), to_int(param))
                }
                _ => (raw.cloned(), to_int(raw)),
            }
        };
        let (source_raw, source) = size(queue);
        let (dlq_raw, dlq_size) = size(dlq);
        for (q, raw) in [(queue, &source_raw), (dlq, &dlq_raw)] {
            if raw.is_none() {
                self.fail(
                    "message-size",
                    q,
                    "no MaximumMessageSize: say the largest message it takes (SQS: up to 1048576)",
                );
            }
        }
        if let (Some(source), Some(dlq_size)) = (source, dlq_size)
            && dlq_size < source
        {
            self.fail(
                "message-size",
                dlq,
                format!(
                    "MaximumMessageSize {dlq_size} is smaller than its source queue {queue}'s {source}: a dead letter \
                     would not fit"
                ),
            );
        }
        let fitted = c.var("DLQ_MAX_MESSAGE_SIZE");
        if let Some(dlq_raw) = &dlq_raw
            && !same(fitted, Some(dlq_raw))
        {
            self.fail(
                "message-size",
                c.name(),
                format!(
                    "DLQ_MAX_MESSAGE_SIZE is {}, not its DLQ {dlq}'s MaximumMessageSize {}: its dead-letter copies \
                     would be fitted to another size",
                    show(fitted),
                    show(Some(dlq_raw))
                ),
            );
        }
    }
}

//! The rules `sqsafe check` holds a template to, by name.

/// Every rule: its name (what a violation names) and what it demands.
pub const RULES: [(&str, &str); 44] = [
    (
        "function-crates",
        "every binary of every crate under functions/ is deployed by exactly one function, and no function builds a binary that is not there",
    ),
    ("runtime", "functions run on provided.al2023"),
    (
        "architecture",
        "functions are arm64 (a parameter may offer x86_64 for builds, but its default is arm64)",
    ),
    (
        "build-method",
        "functions are built by rust-cargolambda (Metadata BuildMethod, BuildProperties.Binary, Handler bootstrap)",
    ),
    (
        "log-group",
        "each function logs JSON (LoggingConfig LogFormat JSON) to a log group of the template with RetentionInDays",
    ),
    (
        "sqs-event",
        "each function has exactly one event source of the template: one SQS queue (an SQS consumer), one DynamoDB stream (a stream consumer, or the outbox relay when it has OUTBOX_TABLE), one Kinesis stream (of the template, or a String parameter: a stream consumer), or one schedule (the outbox sweeper)",
    ),
    (
        "api-function",
        "an HTTP API function (an HttpApi event, made by sqsafe new api) has exactly that one event, on an AWS::Serverless::HttpApi of the template whose routes need an authorizer (the idempotency layer keeps keys per caller: an open route has none); its IDEMPOTENCY_TABLE names a table of the template; the API has an alarm on its AWS/ApiGateway 5xx (ApiId dimension), and the function one on sqsafe RequestsStoreFailed (api = its binary), each notifying an SNS topic of the template",
    ),
    (
        "outbox-sweeper",
        "each outbox table a stream function relays has a sweeper: a scheduled function (rate of at most 5 minutes) with that OUTBOX_TABLE and the relay's OUTBOX_DESTINATIONS, reading its OUTBOX_PENDING_INDEX (a global secondary index on pending (S, HASH) and created_at (N, RANGE) projecting ALL), and an alarm on sqsafe's OutboxOldestPendingAge (consumer = the sweeper's binary) that notifies an SNS topic and treats missing data as breaching",
    ),
    (
        "stream-mapping",
        "the outbox relay's DynamoDB event (a stream function with OUTBOX_TABLE) reads a table whose stream has NEW_IMAGE or NEW_AND_OLD_IMAGES, from TRIM_HORIZON, with ReportBatchItemFailures, BisectBatchOnFunctionError true, MaximumRetryAttempts -1 (or unset), and an on-failure destination (a standard SQS queue of the template) that the function's FAILURE_QUEUE_URL names",
    ),
    (
        "stream-consumer",
        "a stream consumer's mapping (Kinesis, or DynamoDB without OUTBOX_TABLE) has ReportBatchItemFailures, BisectBatchOnFunctionError true, MaximumRetryAttempts within 0..10000 and MaximumRecordAgeInSeconds within 60..604800 (never unset or -1: a failing record would block its shard for the stream's retention), and an on-failure destination (a standard SQS queue of the template); its DLQ_URL names another standard queue of the template (the dead letters, each with its record's content); its IDEMPOTENCY_WINDOW_DAYS outlasts MaximumRecordAgeInSeconds + Timeout (a record retried after its idempotency record expired would be applied again)",
    ),
    (
        "report-batch-item-failures",
        "every SQS event source mapping has FunctionResponseTypes [ReportBatchItemFailures]",
    ),
    (
        "maximum-concurrency",
        "every SQS event source mapping sets ScalingConfig.MaximumConcurrency, bounded within 2..1000",
    ),
    (
        "fifo-mapping",
        "a FIFO queue's mapping has BatchSize 1 (no record held back behind a failing one of its group) and no batching window (Lambda rejects one)",
    ),
    (
        "visibility-timeout",
        "a source queue's VisibilityTimeout >= 6 x its function's Timeout (max) + MaximumBatchingWindowInSeconds (max)",
    ),
    (
        "dlq-required",
        "every consumed queue has a RedrivePolicy to a dead-letter queue of the template",
    ),
    (
        "max-receive-count",
        "every RedrivePolicy has maxReceiveCount >= 5",
    ),
    (
        "dlq-fifo",
        "a FIFO queue's dead-letter queue is FIFO, a standard queue's is standard",
    ),
    (
        "dlq-retention",
        "every dead-letter queue and on-failure queue keeps messages 14 days (MessageRetentionPeriod 1209600)",
    ),
    (
        "redrive-allow-policy",
        "every dead-letter queue has a RedriveAllowPolicy (byQueue) that names its source queue; a stream mapping's on-failure queue has denyAll",
    ),
    (
        "dlq-url",
        "a function's DLQ_URL is the dead-letter queue of the queue it consumes",
    ),
    (
        "queue-url",
        "a function's QUEUE_URL is the queue it consumes (backoff, visibility heartbeat and the in-progress hold change visibility there)",
    ),
    (
        "orphan-queue",
        "every queue is consumed by a function, a dead-letter queue, or a stream mapping's on-failure queue",
    ),
    (
        "message-size",
        "every queue sets MaximumMessageSize; a dead-letter queue's is never smaller than its source queue's; a consumer's DLQ_MAX_MESSAGE_SIZE is its DLQ's MaximumMessageSize",
    ),
    (
        "sse",
        "every queue (SqsManagedSseEnabled or KmsMasterKeyId) and every table (SSESpecification.SSEEnabled) is encrypted",
    ),
    ("pitr", "every table has point-in-time recovery"),
    ("on-demand", "every table is on-demand (PAY_PER_REQUEST)"),
    (
        "idempotency-table",
        "an IDEMPOTENCY_TABLE has the DynamoDB store's key schema (pk, String, no sort key) and TTL on expiration",
    ),
    (
        "alarm-dlq",
        "each dead-letter queue and on-failure queue has an alarm: AWS/SQS ApproximateNumberOfMessagesVisible > 0 (Threshold 0, TreatMissingData notBreaching), AlarmActions to an SNS topic of the template",
    ),
    (
        "alarm-queue-age",
        "each consumed queue has an alarm on AWS/SQS ApproximateAgeOfOldestMessage, AlarmActions to an SNS topic of the template",
    ),
    (
        "alarm-dead-letters",
        "each SQS and stream consumer has an alarm on sqsafe's RecordsSentToDlq (namespace sqsafe, dimension consumer = its binary) Sum > 0",
    ),
    (
        "alarm-function-errors",
        "each function has an alarm on its AWS/Lambda Errors and Throttles (> 0), AlarmActions to an SNS topic of the template",
    ),
    (
        "alarm-stream-age",
        "each stream function (DynamoDB or Kinesis) has an alarm on its AWS/Lambda IteratorAge, AlarmActions to an SNS topic of the template",
    ),
    (
        "dashboard",
        "each consumer has an AWS::CloudWatch::Dashboard (body valid JSON) that shows its records received, applied, replayed and dead-lettered (in all and by error kind), its DLQ's depth, the age of its queue's oldest message and its function's duration",
    ),
    (
        "dashboard-metrics",
        "every sqsafe metric a dashboard or an alarm names is one the code writes (sqsafe_telemetry::metrics::METRIC_NAMES)",
    ),
    (
        "emf-log-level",
        "a function's ApplicationLogLevel can only be TRACE, DEBUG or INFO: EMF metric lines carry no level and are dropped at WARN and above",
    ),
    (
        "grant-only-what-is-used",
        "on each table a function's role grants no item action its code does not call (idempotency table: PutItem, UpdateItem, DeleteItem; ledger: PutItem, UpdateItem; effect table: PutItem; outbox table: UpdateItem, and Query for the sweeper; outbox destinations: SendMessage)",
    ),
    (
        "idempotency-leading-keys",
        "every statement that grants item actions on a function's IDEMPOTENCY_TABLE limits them to its own keys: Condition ForAllValues:StringLike dynamodb:LeadingKeys [\"<its binary>#*\"]",
    ),
    (
        "least-privilege",
        "no Action '*'; for DynamoDB and SQS no wildcard action or resource, and each function's role reaches only its own queue, DLQ, on-failure queue, the tables and queues of its environment (another stack's through the String parameters it uses) and its own stream; no managed policies",
    ),
    (
        "permissions",
        "each function's role grants what the function needs on its queue, its QUEUE_URL, its DLQ, its tables, its stream, its on-failure queue and its outbox destinations",
    ),
    (
        "environment-grants",
        "every table and queue of the template that a function's environment names is granted to its role: a DynamoDB action on the table (or its stream, when the variable names the stream), an SQS action on the queue; a parameter or literal (another stack's resource) is not checked here",
    ),
    (
        "change-message-visibility",
        "each SQS consumer's role grants sqs:ChangeMessageVisibility on its source queue and on nothing else; a function without a source queue nowhere",
    ),
    (
        "max-attempts",
        "MAX_ATTEMPTS (max) <= the consumed queue's maxReceiveCount",
    ),
    (
        "idempotency-window",
        "IDEMPOTENCY_WINDOW_DAYS (min) x 86400 >= source queue retention + DLQ retention + redrive margin (1 day)",
    ),
    (
        "nested-application",
        "every nested application (AWS::Serverless::Application Location, AWS::CloudFormation::Stack TemplateURL) is a local template file, inlined and checked with the rest (one in S3 or the Serverless Application Repository is not read)",
    ),
];

#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod attributes;
mod context;
mod dlq;
mod envelope;
mod error;
mod parse;
mod processor;
mod record;
mod redrive;
mod stream;
mod visibility;

pub use context::DeadLetterContext;
pub use dlq::{
    DEFAULT_MAX_MESSAGE_SIZE, DeadLetterQueue, FailureContext, MAX_MESSAGE_SIZE_LIMIT,
    SqsDeadLetterQueue,
};
pub use envelope::{Envelope, S3Object};
pub use error::{BatchError, ErrorClass, RecordError};
pub use processor::{
    AllFailedPolicy, BatchProcessor, BatchProcessorBuilder, BatchReport, DEFAULT_DEADLINE_RESERVE,
    Disposition, FifoMode, RecordHandler, RecordReport, VisibilityHeartbeat, usable_deadline,
};
pub use record::{Processed, Record};
pub use redrive::RedriveContext;
pub use stream::{Change, ChangeKind, StreamBatch, StreamOrigin, StreamSource, record_identity};
pub use visibility::{Backoff, MAX_VISIBILITY, SqsVisibility, VisibilityControl};

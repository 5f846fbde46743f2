#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod dlq;
mod error;
mod processor;
mod record;
mod visibility;

pub use dlq::{DeadLetterQueue, FailureContext, SqsDeadLetterQueue, attributes};
pub use error::{BatchError, ErrorClass, RecordError};
pub use processor::{
    AllFailedPolicy, BatchProcessor, BatchProcessorBuilder, BatchReport, Disposition, FifoMode,
    RecordHandler, RecordReport, VisibilityHeartbeat,
};
pub use record::{Processed, Record};
pub use visibility::{Backoff, MAX_VISIBILITY, SqsVisibility, VisibilityControl};

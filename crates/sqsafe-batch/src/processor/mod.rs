//! The batch processor, in rooms by concern:
//!
//! - `config`: the processor, its builder and its settings;
//! - `batch`: one invocation's batch: checked, run (in parallel, or through the FIFO path), metrics written;
//! - `fifo`: the FIFO path: one record at a time, and a group stopped at its first failure;
//! - `run`: one record: its span, its handler, its outcome;
//! - `report`: how each record ended, and what that does (acknowledged, reported, dead-lettered, delayed);
//! - `budget`: the invocation's deadline: what is still started, and how long each call may take.

mod batch;
mod budget;
mod config;
mod fifo;
mod report;
mod run;

pub use budget::usable_deadline;
pub use config::{
    AllFailedPolicy, BatchProcessor, BatchProcessorBuilder, DEFAULT_DEADLINE_RESERVE, FifoMode,
    RecordHandler, VisibilityHeartbeat,
};
pub use report::{BatchReport, Disposition, RecordReport};

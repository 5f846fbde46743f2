#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod api_metrics;
mod config;
pub mod correlation;
mod error;
mod json;
mod logging;
pub mod metrics;
mod spans;
mod timestamp;
pub mod trace;
pub mod traces;

pub use config::{LogConfig, LogFormat};
pub use correlation::{CorrelationId, CorrelationOrigin, CorrelationSource};
pub use error::{Error, Result};
pub use logging::{init, init_with, layer, layer_with_writer};
pub use metrics::{BatchMetrics, Metric};
pub use spans::{RecordFields, invocation_span, queue_name, record_span};
pub use trace::{TraceContext, TraceOrigin};
pub use traces::Traces;

//! Test support for sqsafe's crates and functions: SDK clients pointed at the local AWS (moto server, started by
//! `make test`), unique table and queue names so tests run in parallel against one server, and a request counter
//! that asserts request budgets. For a consumer that calls an HTTP API, [`FakeDownstream`] is that API on loopback,
//! recording each call and counting effects per `Idempotency-Key` (with feature `honoured-keys`, behind sqsafe's
//! idempotency layer: `FakeDownstream::start_honouring_keys`); [`ServerTask`] is the accept loop it (and the
//! servers of sqsafe-local and sqsafe-test-servers) run on. For an HTTP API (an axum `Router` behind `sqsafe::api`),
//! [`send`] hands it a request and reads its [`Answer`] whole.
//!
//! A test that needs the server fails loudly when it is not there; it never skips.
//!
//! ```
//! use sqsafe_testkit::{RequestCounter, unique_name};
//!
//! // Names unique per process and call, so tests share one moto server.
//! assert_ne!(unique_name("idem"), unique_name("idem"));
//! // A client whose requests are counted (no request is sent until the test makes one):
//! let counter = RequestCounter::default();
//! assert!(counter.take().is_empty());
//! ```
#![forbid(unsafe_code)]

mod answer;
mod counter;
mod downstream;
mod fixtures;
#[cfg(feature = "honoured-keys")]
mod honoured;
mod lambda;
mod lost_answer;
mod otlp;
mod project;
mod server;

pub use answer::{Answer, send};
pub use counter::RequestCounter;
pub use downstream::{Call, FakeDownstream, Reply};
pub use fixtures::{
    binary_attribute, completed_records, create_queue, create_streamed_table, create_table,
    dlq_context, dynamodb, dynamodb_at, dynamodb_losing, endpoint, item_string, message_attribute,
    queue_arn, receive, sdk_config, sdk_config_at, sqs, unique_name,
};
#[cfg(feature = "honoured-keys")]
pub use honoured::HONOURED_RECORD_NAME;
pub use lambda::{event_file, events_dir, invocation, invocation_of, with_binary_attribute};
pub use lost_answer::LostAnswer;
pub use otlp::{OtlpReceiver, ReceivedSpan};
pub use project::{TEMPLATE_FILE, project_root, project_root_from, search_start};
pub use server::{ServerSettings, ServerTask};

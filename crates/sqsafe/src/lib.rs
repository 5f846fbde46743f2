#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

#[cfg(feature = "api")]
pub mod api;
mod app;
mod clients;
mod consumer;
mod error;
#[cfg(feature = "http")]
pub mod http;
mod settings;
mod setup;
#[cfg(any(feature = "http", feature = "api"))]
pub mod status;

pub use app::{App, ConsumerBuilder, consumer, main, run, runtime};
pub use clients::Clients;
pub use consumer::{Consumer, Context, Effect, Intent};
pub use error::{BoxError, Error};
pub use settings::{ConfigError, Env, IdempotencyMode, Settings};
pub use setup::Setup;

/// The record-level error a consumer returns: [`RecordError::transient`] comes back, [`RecordError::permanent`] goes to
/// the DLQ with its context.
pub use sqsafe_batch::RecordError;
/// A stream consumer's payload and record origin: a DynamoDB Streams consumer reads [`Change<T>`] of its item type;
/// [`Context::stream_origin`] says where a stream record came from.
pub use sqsafe_batch::{Change, ChangeKind, StreamOrigin, StreamSource};
/// What a message body wraps ([`Consumer::ENVELOPE`]), and the payload of an S3 object notification.
pub use sqsafe_batch::{Envelope, S3Object};
/// The trace context a record carries on ([`Context::trace_context`]): the producer's trace, continued.
pub use sqsafe_telemetry::TraceContext;

/// What [`App::handle_report`] says of each record: a consumer's tests assert [`Processed::Applied`] on the first
/// delivery, [`Processed::Replayed`] on a redelivery, and [`Disposition::DeadLettered`] for poison.
pub use sqsafe_batch::{BatchReport, Disposition, Processed, RecordReport};

/// The memory allocator sqsafe's functions run with: [mimalloc](https://github.com/microsoft/mimalloc), through the
/// `mimalloc` crate. A consumer's `main.rs` sets it (a library cannot choose a program's allocator for it):
///
/// ```
/// #[global_allocator]
/// static ALLOCATOR: sqsafe::Allocator = sqsafe::Allocator;
/// ```
///
/// Why: a record's work is mostly small allocations (the SQS event, the body, the key, the log line), and on
/// `make bench`'s toolkit figure mimalloc takes about a fifth off the CPU per record compared with glibc's malloc,
/// for about the same peak memory (bench/RESULTS.md). Leave the two lines out to keep the system allocator.
pub use mimalloc::MiMalloc as Allocator;

/// The layers underneath, for what the hooks and traits do not cover.
pub mod layers {
    pub use sqsafe_batch as batch;
    pub use sqsafe_idempotency as idempotency;
    pub use sqsafe_telemetry as telemetry;
}

/// The workspace README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct WorkspaceReadme;

/// The book's examples (book/src), one item per chapter with Rust code, compiled as doctests so they stay true.
/// scripts/book-check.py fails on a chapter with a Rust block that is not named here.
#[cfg(doctest)]
#[doc = include_str!("../../../book/src/introduction.md")]
struct BookIntroduction;

#[cfg(all(doctest, feature = "api"))]
#[doc = include_str!("../../../book/src/idempotent-apis.md")]
struct BookIdempotentApis;

#[cfg(doctest)]
#[doc = include_str!("../../../book/src/outbox.md")]
struct BookOutbox;

#[cfg(doctest)]
#[doc = include_str!("../../../book/src/envelopes.md")]
struct BookEnvelopes;

#[cfg(doctest)]
#[doc = include_str!("../../../book/src/streams.md")]
struct BookStreams;

/// Needs the `http` feature (on in a workspace build: charge-payment turns it on).
#[cfg(all(doctest, feature = "http"))]
#[doc = include_str!("../../../book/src/http-effects.md")]
struct BookHttpEffects;

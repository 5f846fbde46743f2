//! Message attribute names of a dead-letter copy.
//!
//! A copy carries [`CONTEXT`] and the correlation id attribute. The others, from [`ERROR_KIND`] to [`REDRIVE`],
//! are the legacy layout: copies written by sqsafe before [`CONTEXT`] carried the context one fact per attribute,
//! and DLQs may still hold some, so `sqsafe dlq inspect` and `sqsafe dlq redrive` read them. Nothing writes them
//! now.

/// The whole sqsafe context, as compact JSON ([`DeadLetterContext`](crate::DeadLetterContext)).
pub const CONTEXT: &str = "sqsafe.context";
/// Legacy: error label, e.g. `payload_mismatch` (now the context's `error_kind`).
pub const ERROR_KIND: &str = "sqsafe.error_kind";
/// Legacy: `transient` or `permanent` (now the context's `error_class`).
pub const ERROR_CLASS: &str = "sqsafe.error_class";
/// Legacy: the error message, `-` when empty (now the context's `error`).
pub const ERROR_MESSAGE: &str = "sqsafe.error";
/// Legacy: delivery attempts made (now the context's `attempts`).
pub const ATTEMPTS: &str = "sqsafe.attempts";
/// Legacy: consumer name (now the context's `consumer`).
pub const CONSUMER: &str = "sqsafe.consumer";
/// Legacy: consumer (effect) version (now the context's `consumer_version`).
pub const CONSUMER_VERSION: &str = "sqsafe.consumer_version";
/// Legacy: message id of the original message (now the context's `original_message_id`).
pub const ORIGINAL_MESSAGE_ID: &str = "sqsafe.original_message_id";
/// Legacy: [`RedriveContext`](crate::RedriveContext) as JSON (now the context's `source_queue`, `first_sent`
/// and `expires`). It was carried only when SQS's limit of 10 attributes and the message size left room after
/// the original attributes, so a legacy copy without it may have lost some of them.
pub const REDRIVE: &str = "sqsafe.redrive";
/// Put on a redriven message by `sqsafe dlq redrive`: when its first copy was sent (RFC 3339). A later
/// dead-lettering counts the message's age and idempotency expiry from it, not from the redrive (it becomes the
/// context's `first_sent`).
pub const FIRST_SENT: &str = "sqsafe.first_sent";
/// Put on a redriven message by `sqsafe dlq redrive`: the message id of its first copy. A later dead-lettering
/// records it as the context's `original_message_id`, so `inspect` shows one id for the message however often it
/// was redriven (the redriven copies' own ids are in the consumer's logs).
pub const FIRST_MESSAGE_ID: &str = "sqsafe.first_message_id";
/// Every attribute sqsafe writes starts with this. Such attributes are never copied from the original message
/// (they would be stale).
pub const PREFIX: &str = "sqsafe.";

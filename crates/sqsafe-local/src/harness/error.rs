use sqsafe::Error as ConsumerError;

use crate::stack::StackError;

/// Why a [`Harness`](super::Harness) could not be made. Each message names the consumer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// template.yaml could not be read, has no function built as the consumer, or the local AWS refused a table or
    /// a queue (is the moto server running? `make test` starts it).
    #[error("the template's resources for {consumer}: {source}")]
    Stack {
        /// The consumer's name.
        consumer: &'static str,
        /// Why.
        #[source]
        source: StackError,
    },
    /// The consumer's function has no dead-letter queue in the template (its source queue has no `RedrivePolicy`; a
    /// stream consumer's `DLQ_URL` names no queue of the template).
    #[error(
        "{consumer} has no dead-letter queue in the template (its queue has no RedrivePolicy; a stream consumer: its \
         DLQ_URL is no !Ref of a queue)"
    )]
    NoDeadLetterQueue {
        /// The consumer's name.
        consumer: &'static str,
    },
    /// [`Harness::with_api`](super::Harness::with_api) was given a parameter that the function's environment does
    /// not refer to: the fake API's URL would reach nothing.
    #[error(
        "{consumer}'s environment in the template refers to no parameter {parameter}: the fake API would not be called"
    )]
    ApiParameter {
        /// The consumer's name.
        consumer: &'static str,
        /// The parameter given.
        parameter: String,
    },
    /// The consumer could not be built on the template's environment (a variable missing or invalid).
    #[error("{consumer} on the template's environment: {source}")]
    Consumer {
        /// The consumer's name.
        consumer: &'static str,
        /// Why.
        #[source]
        source: ConsumerError,
    },
}

impl HarnessError {
    /// `true` for [`HarnessError::Stack`]: the template or the local AWS, not the consumer.
    pub fn is_stack(&self) -> bool {
        matches!(self, Self::Stack { .. })
    }

    /// `true` for [`HarnessError::Consumer`]: the consumer refused its environment.
    pub fn is_consumer(&self) -> bool {
        matches!(self, Self::Consumer { .. })
    }
}

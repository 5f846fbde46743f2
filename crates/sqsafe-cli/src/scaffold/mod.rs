//! `sqsafe new consumer`: the files of a new consumer. Generated code is code a person would have written:
//! formatted, documented, tested.

pub(crate) mod error;
pub(crate) mod generate;
pub(crate) mod project;
pub(crate) mod spec;
pub(crate) mod template;
#[cfg(test)]
mod tests;

pub use error::ScaffoldError;
pub use generate::{Generated, generate};
pub use project::Project;
pub use spec::{ConsumerEnvelope, ConsumerSource, Spec};
pub use template::{OUTPUTS_MARKER, RESOURCES_MARKER, add_to_template};

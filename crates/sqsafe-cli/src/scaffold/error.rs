//! What goes wrong when generating: said in a sentence a person can act on.

use std::fmt;

/// Why a name, the workspace or the template refuses the consumer; nothing was written.
#[derive(Debug)]
pub struct ScaffoldError(pub(crate) String);

impl fmt::Display for ScaffoldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScaffoldError {}

pub(crate) fn fail<T>(message: impl Into<String>) -> Result<T, ScaffoldError> {
    Err(ScaffoldError(message.into()))
}

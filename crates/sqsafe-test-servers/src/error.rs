use std::net::SocketAddr;
use std::path::PathBuf;

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a [`PaymentsApi`](crate::PaymentsApi) could not be configured or started (the fault proxy has its own,
/// [`proxy::Error`](crate::proxy::Error)).
///
/// Requests the payments API answers with an HTTP error (a missing key, a conflict, an injected fault, its table
/// failing) are not errors here: they are the behaviour under test.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A fault rate is not a probability.
    #[error("invalid {name}: {value} is not a probability in [0, 1]")]
    InvalidRate {
        /// Which rate: `fail_before_rate` or `fail_after_rate`.
        name: &'static str,
        /// The rejected value.
        value: f64,
    },
    /// No place for the keys was chosen: [`PaymentsApiBuilder::keys_in_dynamodb`](crate::PaymentsApiBuilder::keys_in_dynamodb)
    /// or [`keys_in_memory`](crate::PaymentsApiBuilder::keys_in_memory).
    #[error(
        "the payments API needs a place for its keys: keys_in_dynamodb(client, table) or keys_in_memory()"
    )]
    NoKeyStore,
    /// The idempotency layer could not be set up (an empty table name, a lease it refuses).
    #[error("the payments API's idempotency layer: {0}")]
    Layer(String),
    /// The ledger file could not be opened, read or parsed.
    #[error("ledger file {}: {source}", path.display())]
    Ledger {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The listening socket could not be bound (address in use, no permission) or its address read back.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// `true` for [`Error::InvalidRate`].
    pub fn is_invalid_rate(&self) -> bool {
        matches!(self, Error::InvalidRate { .. })
    }

    /// `true` for [`Error::NoKeyStore`].
    pub fn is_no_key_store(&self) -> bool {
        matches!(self, Error::NoKeyStore)
    }

    /// `true` for [`Error::Bind`].
    pub fn is_bind(&self) -> bool {
        matches!(self, Error::Bind { .. })
    }
}

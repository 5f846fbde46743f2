use std::net::SocketAddr;

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while starting a local service or running a command of the local pipeline.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The listening socket could not be bound (address in use, no permission) or its address read back.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A command of the local pipeline ([`cli::run`](crate::cli::run): `sqsafe local up | resources`) could not
    /// start or stopped; the message says what went wrong and, where it can, what to do.
    #[error("{0}")]
    Command(String),
    /// `sqsafe local send` sent nothing: no pipeline runs, no such consumer, no sample, not an SQS event, or SQS
    /// refused a message.
    #[error(transparent)]
    Send(#[from] crate::send_error::SendError),
}

impl Error {
    /// `true` for [`Error::Bind`].
    pub fn is_bind(&self) -> bool {
        matches!(self, Error::Bind { .. })
    }

    /// `true` for [`Error::Command`].
    pub fn is_command(&self) -> bool {
        matches!(self, Error::Command(_))
    }

    /// `true` for [`Error::Send`].
    pub fn is_send(&self) -> bool {
        matches!(self, Error::Send(_))
    }
}

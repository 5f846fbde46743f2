//! An HTTP/1 accept loop on a spawned task that serves an axum [`Router`], and the handle that stops it: the one loop
//! behind every local server of sqsafe's (the fake downstream API here; sqsafe-local's Lambda Runtime API;
//! sqsafe-test-servers' payments API and fault proxy).
//!
//! Routing is axum's. The accept loop is written here because `axum::serve` spawns each connection on a detached
//! task: stopping it (gracefully or not) would leave requests in flight running, and a Runtime API long poll would
//! outlive its server. It also runs no timer, so hyper's header read timeout would be off.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

/// How a server treats the connections it accepts. Every connection is HTTP/1 with keep-alive.
#[derive(Debug, Clone, Copy)]
pub struct ServerSettings {
    /// Sets `TCP_NODELAY` on each accepted connection.
    pub nodelay: bool,
    /// `true`: hyper's default header read timeout (30 seconds), run on a Tokio timer. `false`: no timeout, a
    /// connection may sit idle between requests for as long as it likes.
    pub header_read_timeout: bool,
    /// Starts the log messages, e.g. `"proxy "` for "proxy accept failed".
    pub log_prefix: &'static str,
}

impl ServerSettings {
    fn builder(self) -> http1::Builder {
        let mut builder = http1::Builder::new();
        if self.header_read_timeout {
            builder.timer(TokioTimer::new());
        } else {
            builder.header_read_timeout(None);
        }
        builder.keep_alive(true);
        builder
    }
}

/// An accept loop serving on a spawned task. Dropping it aborts the task, which also ends every connection;
/// [`shutdown`](Self::shutdown) stops it and waits until the port is released.
#[derive(Debug)]
pub struct ServerTask {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ServerTask {
    /// Serves `listener` on a spawned task. `make_router` is called for each connection when it is accepted, so the
    /// router's state can capture what holds at that moment. Must be called within a Tokio runtime.
    pub fn spawn<F>(listener: TcpListener, settings: ServerSettings, make_router: F) -> Self
    where
        F: Fn() -> Router + Send + 'static,
    {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(serve(listener, settings, make_router, stopped));
        Self {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops accepting, cuts open connections (requests in flight are dropped) and waits until the listening socket
    /// is closed.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            // The task ends on the stop signal; an error would mean it panicked, which it does not.
            let _ = task.await;
        }
    }
}

impl Drop for ServerTask {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Accepts until told to stop (or until the handle is gone). Connections live in a `JoinSet`, so that stopping or
/// aborting this task also ends every connection task.
async fn serve<F>(
    listener: TcpListener,
    settings: ServerSettings,
    make_router: F,
    mut stop: oneshot::Receiver<()>,
) where
    F: Fn() -> Router,
{
    let prefix = settings.log_prefix;
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    if settings.nodelay {
                        let _ = stream.set_nodelay(true);
                    }
                    let service = TowerToHyperService::new(make_router());
                    connections.spawn(async move {
                        let served = settings
                            .builder()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                        if let Err(e) = served {
                            tracing::debug!(%peer, error = %e, "{prefix}connection ended with an error");
                        }
                    });
                }
                // Per-connection failures (reset before accept, out of file descriptors); keep serving the others.
                Err(e) => tracing::warn!(error = %e, "{prefix}accept failed"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

//! What local tools and tests need to reach a local AWS (moto server, or a proxy in front of it).

use std::net::{Ipv4Addr, SocketAddr, TcpListener};

use aws_config::{ConfigLoader, Region};

use crate::{Timeouts, config_loader_with};

/// A configuration loader for a local endpoint: every service at `endpoint`, `us-east-1`, test credentials, and
/// [`Timeouts::LOCAL_TOOLS`] (a local emulator may queue requests under load). Add overrides before `.load()`.
pub fn local_config_loader(endpoint: &str) -> ConfigLoader {
    config_loader_with(Timeouts::LOCAL_TOOLS)
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .test_credentials()
}

/// A loopback port that was free a moment ago (bound, read back, released). Another process may take it before the
/// caller binds it: a caller that can, retries.
pub fn free_port() -> std::io::Result<u16> {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_local_config_names_the_endpoint_and_region() {
        let config = local_config_loader("http://127.0.0.1:5000").load().await;
        assert_eq!(config.endpoint_url(), Some("http://127.0.0.1:5000"));
        assert_eq!(config.region().map(Region::as_ref), Some("us-east-1"));
        assert!(config.credentials_provider().is_some());
        assert_eq!(
            config.timeout_config(),
            Some(&Timeouts::LOCAL_TOOLS.to_timeout_config())
        );
        assert!(
            !config
                .stalled_stream_protection()
                .expect("set by sqsafe's loader")
                .is_enabled(),
            "the timeouts end a stalled response; the SDK's throughput checks are off"
        );
    }

    #[test]
    fn a_free_port_is_a_real_port() {
        assert_ne!(free_port().expect("a free port"), 0);
    }
}

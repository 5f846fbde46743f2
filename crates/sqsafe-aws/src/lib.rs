//! AWS SDK configuration shared by sqsafe's crates and functions.
//!
//! The SDK's default features pull two HTTP stacks and the aws-lc C library; sqsafe turns them off and builds one
//! client on hyper 1 with rustls and ring. Everything else comes from the standard environment: `AWS_REGION`,
//! credentials, and `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_<SERVICE>` (how tests and local runs reach moto server).
//!
//! ```no_run
//! # async fn f() {
//! let config = sqsafe_aws::load().await;
//! // let dynamodb = aws_sdk_dynamodb::Client::new(&config);
//! # let _ = config;
//! # }
//! ```
#![forbid(unsafe_code)]

use aws_config::{BehaviorVersion, ConfigLoader, SdkConfig};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

use aws_smithy_runtime_api::client::http::SharedHttpClient;

/// The HTTP client every sqsafe SDK client uses: hyper 1, rustls with ring, connection pooling.
pub fn http_client() -> SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// The standard configuration loader with sqsafe's HTTP client; add overrides before `.load()`.
pub fn config_loader() -> ConfigLoader {
    aws_config::defaults(BehaviorVersion::latest()).http_client(http_client())
}

/// Loads the configuration from the environment.
pub async fn load() -> SdkConfig {
    config_loader().load().await
}

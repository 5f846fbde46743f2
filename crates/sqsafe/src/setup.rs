//! What a consumer is built from: the settings, the environment and the AWS clients.

use crate::error::Error;
use crate::settings::{Env, Settings};

/// What a consumer is built from: the settings, the environment (for settings of its own), and the AWS clients
/// (configured with timeouts, endpoints from the environment).
#[derive(Debug, Clone)]
pub struct Setup {
    /// The common settings.
    pub settings: Settings,
    /// The environment, for the consumer's own variables: `setup.env.url("PAYMENTS_API_URL")?`.
    pub env: Env,
    /// The AWS configuration the clients were built from.
    pub aws: aws_config::SdkConfig,
    /// DynamoDB.
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// SQS.
    pub sqs: aws_sdk_sqs::Client,
}

impl Setup {
    /// Reads the settings from `env` and builds the clients from `aws`.
    pub fn new(env: Env, aws: aws_config::SdkConfig) -> Result<Self, Error> {
        let settings = Settings::from_env(&env)?;
        Ok(Self {
            settings,
            env,
            dynamodb: aws_sdk_dynamodb::Client::new(&aws),
            sqs: aws_sdk_sqs::Client::new(&aws),
            aws,
        })
    }

    /// The process environment and `sqsafe_aws::load()` (timeouts set, endpoints from `AWS_ENDPOINT_URL*`).
    pub async fn from_env() -> Result<Self, Error> {
        Self::new(Env::process(), sqsafe_aws::load().await)
    }
}

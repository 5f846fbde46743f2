//! What a function that is not an SQS consumer (the outbox relay, fed by a DynamoDB stream) shares with the
//! consumers: JSON logging, the environment with checked settings, and AWS clients with timeouts.

use crate::error::Error;
use crate::settings::Env;

/// The environment and the AWS clients, without the consumer settings [`Setup`](crate::Setup) requires
/// (`IDEMPOTENCY_TABLE`, `DLQ_URL`, `QUEUE_URL`). A stream-triggered function's `main`:
///
/// ```no_run
/// # async fn handler(_: lambda_runtime::LambdaEvent<serde_json::Value>) -> Result<serde_json::Value, lambda_runtime::Error> {
/// #     Ok(serde_json::Value::Null)
/// # }
/// #[tokio::main]
/// async fn main() -> Result<(), sqsafe::Error> {
///     let clients = sqsafe::Clients::from_env().await?; // logging first, then the settings and clients
///     let table = clients.env.required("OUTBOX_TABLE")?;
///     # let _ = table;
///     lambda_runtime::run(lambda_runtime::service_fn(handler))
///         .await
///         .map_err(sqsafe::Error::Runtime)
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Clients {
    /// The environment, read with checked errors: `clients.env.required("OUTBOX_TABLE")?`.
    pub env: Env,
    /// The AWS configuration the clients were built from.
    pub aws: aws_config::SdkConfig,
    /// DynamoDB.
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// SQS.
    pub sqs: aws_sdk_sqs::Client,
}

impl Clients {
    /// Builds the clients from `aws` (tests pass the local AWS's configuration and an [`Env`] of pairs).
    pub fn new(env: Env, aws: aws_config::SdkConfig) -> Self {
        Self {
            env,
            dynamodb: aws_sdk_dynamodb::Client::new(&aws),
            sqs: aws_sdk_sqs::Client::new(&aws),
            aws,
        }
    }

    /// Initialises logging as the consumers do (`sqsafe_telemetry::init`: JSON in the Lambda format; a subscriber
    /// already installed is kept), then reads the process environment and `sqsafe_aws::load()` (the consumers'
    /// timeouts, endpoints from `AWS_ENDPOINT_URL*`).
    pub async fn from_env() -> Result<Self, Error> {
        match sqsafe_telemetry::init() {
            Err(e) if !e.is_already_initialised() => return Err(e.into()),
            _ => {}
        }
        Ok(Self::new(Env::process(), sqsafe_aws::load().await))
    }
}

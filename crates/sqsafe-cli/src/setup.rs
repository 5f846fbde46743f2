//! Before the first AWS call: a region and credentials, or one line that says what to set (instead of the SDK's
//! error chain about an instance metadata service the user never meant to use).

use std::time::Duration;

use aws_sdk_sqs::config::ProvideCredentials;

use crate::Error;

/// What to set, said once for both cases.
const WHAT_TO_SET: &str = "set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) and AWS_REGION; for the \
                           local pipeline, the export lines `sqsafe local up` prints (AWS_ENDPOINT_URL=http://127.0.0.1:PORT \
                           and test credentials)";

/// How long resolving credentials may take (a profile's SSO or role chain; an instance's metadata service).
const CREDENTIALS_TIMEOUT: Duration = Duration::from_secs(10);

/// Checks that `config` has a region and that its credentials resolve.
///
/// # Errors
/// [`Error::Setup`] naming what is missing and what to set.
pub async fn check_aws(config: &aws_config::SdkConfig) -> Result<(), Error> {
    if config.region().is_none() {
        return Err(Error::Setup(format!("no AWS region: {WHAT_TO_SET}")));
    }
    let Some(provider) = config.credentials_provider() else {
        return Err(Error::Setup(format!("no AWS credentials: {WHAT_TO_SET}")));
    };
    match tokio::time::timeout(CREDENTIALS_TIMEOUT, provider.provide_credentials()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(_)) | Err(_) => Err(Error::Setup(format!("no AWS credentials: {WHAT_TO_SET}"))),
    }
}

//! `sqsafe local resources`: the template's tables and queues in the moto server the user runs.

use std::path::Path;

use crate::stack::{LocalStack, StackOptions, TemplateSpec};

/// Creates `template`'s tables and queues in the moto server at AWS_ENDPOINT_URL and prints them.
pub(super) async fn resources(template: &Path) -> Result<(), String> {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
    let uri = endpoint.parse::<hyper::Uri>().ok();
    let loopback = uri.as_ref().and_then(hyper::Uri::host).is_some_and(|host| {
        host == "localhost"
            || host
                .trim_matches(['[', ']'])
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    if !loopback || uri.as_ref().and_then(hyper::Uri::scheme_str) != Some("http") {
        return Err(format!(
            "AWS_ENDPOINT_URL must point at the local moto server (got {endpoint:?}): run `make moto` and apply the \
             export lines it prints"
        ));
    }
    let spec = TemplateSpec::read(template).map_err(|e| e.to_string())?;
    let config = sqsafe_aws::local_config_loader(&endpoint).load().await;
    let options = StackOptions {
        template_names: true,
        ..StackOptions::default()
    };
    let stack = LocalStack::create(
        &aws_sdk_sqs::Client::new(&config),
        &aws_sdk_dynamodb::Client::new(&config),
        spec,
        options,
    )
    .await
    .map_err(|e| format!("{e} (is moto server running at {endpoint}?)"))?;
    for (logical, table) in &stack.tables {
        println!("table  {table}  ({logical})");
    }
    for (logical, queue) in &stack.queues {
        println!("queue  {}  ({logical})", queue.url);
    }
    Ok(())
}

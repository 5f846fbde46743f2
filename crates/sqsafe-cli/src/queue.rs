//! Queues as an operator names them: a URL, a name, or an ARN (what the dead-letter context records).

use aws_sdk_sqs::Client;
use sqsafe_aws::HttpUrl;

use crate::error::Error;

/// A queue found in SQS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Queue {
    pub(crate) url: String,
}

impl Queue {
    /// The queue's name: the URL's last segment.
    pub(crate) fn name(&self) -> &str {
        self.url.rsplit('/').next().unwrap_or(&self.url)
    }

    /// FIFO queues' names end in `.fifo`.
    pub(crate) fn is_fifo(&self) -> bool {
        self.name().ends_with(".fifo")
    }
}

/// `arn:<partition>:sqs:<region>:<account>:<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Arn<'a> {
    pub(crate) region: &'a str,
    pub(crate) account: &'a str,
    pub(crate) name: &'a str,
}

pub(crate) fn parse_arn(arn: &str) -> Option<Arn<'_>> {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(_partition), Some("sqs"), Some(region), Some(account), Some(name)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    (!name.is_empty()).then_some(Arn {
        region,
        account,
        name,
    })
}

/// Finds the queue `reference` names: a URL is taken as it is, a name or an ARN is looked up (`GetQueueUrl`, with
/// the ARN's account as owner). An ARN in another region than the client's is refused: the client could not reach it.
pub(crate) async fn resolve(sqs: &Client, reference: &str) -> Result<Queue, Error> {
    let reference = reference.trim();
    if reference.starts_with("https://") || reference.starts_with("http://") {
        return Ok(Queue {
            url: reference.to_owned(),
        });
    }
    let (name, owner) = if reference.starts_with("arn:") {
        let arn = parse_arn(reference).ok_or_else(|| Error::Queue {
            queue: reference.to_owned(),
            reason: "not an SQS queue ARN (arn:aws:sqs:<region>:<account>:<name>)".into(),
        })?;
        if let Some(region) = sqs.config().region()
            && region.as_ref() != arn.region
        {
            return Err(Error::Queue {
                queue: reference.to_owned(),
                reason: format!(
                    "it is in region {}, this command runs against {region}: set AWS_REGION={}",
                    arn.region, arn.region
                ),
            });
        }
        (arn.name, Some(arn.account))
    } else if !reference.is_empty() && !reference.contains('/') {
        (reference, None)
    } else {
        return Err(Error::Queue {
            queue: reference.to_owned(),
            reason: "give a queue URL, name or ARN".into(),
        });
    };
    let found = sqs
        .get_queue_url()
        .queue_name(name)
        .set_queue_owner_aws_account_id(owner.map(str::to_owned))
        .send()
        .await
        .map_err(|e| Error::Queue {
            queue: reference.to_owned(),
            reason: aws_sdk_sqs::error::DisplayErrorContext(e).to_string(),
        })?;
    let url = found.queue_url().ok_or_else(|| Error::Queue {
        queue: reference.to_owned(),
        reason: "SQS answered without a URL".into(),
    })?;
    Ok(Queue {
        url: url.to_owned(),
    })
}

/// The URLs of the queues whose redrive policy names `dlq_url` as their dead-letter queue (ListDeadLetterSourceQueues,
/// every page).
pub(crate) async fn dead_letter_sources(sqs: &Client, dlq_url: &str) -> Result<Vec<String>, Error> {
    let mut urls = Vec::new();
    let mut token = None;
    loop {
        let page = sqs
            .list_dead_letter_source_queues()
            .queue_url(dlq_url)
            .set_next_token(token)
            .max_results(1000)
            .send()
            .await
            .map_err(|e| Error::sqs("ListDeadLetterSourceQueues", e))?;
        urls.extend(page.queue_urls().iter().cloned());
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_owned()),
            _ => return Ok(urls),
        }
    }
}

/// Whether two queue URLs name the same queue: the same account and name (the last two segments of the path), whatever
/// host form each uses (`sqs.<region>.amazonaws.com` or the legacy `<region>.queue.amazonaws.com`).
pub(crate) fn same_queue(a: &str, b: &str) -> bool {
    fn account_and_name(url: &str) -> Option<(&str, &str)> {
        let mut segments = url.trim_end_matches('/').rsplit('/');
        let name = segments.next()?;
        let account = segments.next()?;
        Some((account, name))
    }
    account_and_name(a).is_some_and(|x| Some(x) == account_and_name(b))
}

/// A redrive sends with the operator's credentials: only to an SQS endpoint of the client's region, the endpoint the
/// client is configured with (`AWS_ENDPOINT_URL`, local work), or loopback; never to any other URL a dead letter or a
/// typo names.
pub(crate) fn check_endpoint(
    sqs: &Client,
    endpoint: Option<&str>,
    url: &str,
) -> Result<(), String> {
    let region = sqs.config().region().map(|r| r.as_ref().to_owned());
    let Some(target) = HttpUrl::parse(url) else {
        return Err(format!("{url} is not an http(s) URL"));
    };
    let loopback = target.is_loopback();
    let configured = endpoint
        .and_then(HttpUrl::parse)
        .is_some_and(|e| e.same_authority(&target));
    let host = target.host();
    let regional = region.as_deref().is_some_and(|r| {
        target.is_https()
            && [
                format!("sqs.{r}.amazonaws.com"),
                format!("{r}.queue.amazonaws.com"),
                format!("sqs.{r}.amazonaws.com.cn"),
            ]
            .contains(&host)
    });
    if loopback || configured || regional {
        return Ok(());
    }
    Err(format!(
        "{url} is not an SQS endpoint of region {} (nor the configured endpoint, nor loopback): refused",
        region.as_deref().unwrap_or("(none set)")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arns_name_region_account_and_queue() {
        assert_eq!(
            parse_arn("arn:aws:sqs:eu-west-1:123456789012:ledger.fifo"),
            Some(Arn {
                region: "eu-west-1",
                account: "123456789012",
                name: "ledger.fifo"
            })
        );
        assert_eq!(parse_arn("arn:aws:sns:eu-west-1:123456789012:topic"), None);
        assert_eq!(parse_arn("arn:aws:sqs:eu-west-1:123456789012:"), None);
        assert_eq!(parse_arn("ledger"), None);
    }

    #[test]
    fn the_same_queue_whatever_the_host_form() {
        assert!(same_queue(
            "https://sqs.eu-west-1.amazonaws.com/123456789012/ledger",
            "https://eu-west-1.queue.amazonaws.com/123456789012/ledger"
        ));
        assert!(!same_queue(
            "https://sqs.eu-west-1.amazonaws.com/123456789012/ledger",
            "https://sqs.eu-west-1.amazonaws.com/999999999999/ledger"
        ));
        assert!(!same_queue("ledger", "https://x/123/ledger"));
    }

    fn client(region: &str) -> Client {
        let config = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new(region.to_owned()));
        Client::from_conf(config.build())
    }

    #[test]
    fn a_redrive_sends_only_to_the_regions_sqs_the_configured_endpoint_or_loopback() {
        let aws = client("eu-west-1");
        for ok in [
            "https://sqs.eu-west-1.amazonaws.com/123456789012/ledger",
            "https://eu-west-1.queue.amazonaws.com/123456789012/ledger",
            "http://127.0.0.1:4566/123456789012/ledger",
            "http://localhost:5000/123456789012/ledger",
        ] {
            assert_eq!(check_endpoint(&aws, None, ok), Ok(()), "{ok}");
        }
        for refused in [
            "https://sqs.us-east-1.amazonaws.com/123456789012/ledger",
            "https://attacker.example/123456789012/ledger",
            "http://sqs.eu-west-1.amazonaws.com/123456789012/ledger",
            "https://sqs.eu-west-1.amazonaws.com.attacker.example/1/ledger",
            "http://10.0.0.7:9324/123456789012/ledger",
            "ftp://sqs.eu-west-1.amazonaws.com/1/ledger",
        ] {
            let why = check_endpoint(&aws, None, refused).expect_err(refused);
            assert!(
                why.contains("not an SQS endpoint of region eu-west-1")
                    || why.contains("not an http"),
                "{why}"
            );
        }
        let local = Some("http://sqs.internal:9324");
        assert_eq!(
            check_endpoint(&aws, local, "http://sqs.internal:9324/1/q"),
            Ok(())
        );
        assert!(check_endpoint(&aws, local, "http://sqs.internal:9999/1/q").is_err());
    }

    #[test]
    fn names_and_kinds_come_from_the_url() {
        let q = Queue {
            url: "http://127.0.0.1:5000/123456789012/ledger-dlq.fifo".into(),
        };
        assert_eq!(q.name(), "ledger-dlq.fifo");
        assert!(q.is_fifo());
    }
}

//! Queues as an operator names them: a URL, a name, or an ARN (what the dead-letter context records).

use aws_sdk_sqs::Client;

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
    fn names_and_kinds_come_from_the_url() {
        let q = Queue {
            url: "http://127.0.0.1:5000/123456789012/ledger-dlq.fifo".into(),
        };
        assert_eq!(q.name(), "ledger-dlq.fifo");
        assert!(q.is_fifo());
    }
}

use hyper::Uri;

use super::error::Error;

/// What the [`FaultProxy`](super::FaultProxy) forwards to and which faults it injects into DynamoDB requests.
///
/// Build it from [`FaultProxyConfig::new`] and struct update syntax:
///
/// ```
/// use sqsafe_test_servers::proxy::FaultProxyConfig;
///
/// let config = FaultProxyConfig {
///     seed: 7,
///     throttle_rate: 0.2,
///     operations: Some(vec!["PutItem".into(), "UpdateItem".into()]),
///     ..FaultProxyConfig::new("http://127.0.0.1:5000")
/// };
/// assert!(config.validate().is_ok());
/// ```
///
/// Each DynamoDB request that the [`operations`](Self::operations) filter lets through takes one draw `u`, uniform in
/// `[0, 1)`, from a [`fastrand`] RNG seeded with [`seed`](Self::seed), and gets:
///
/// | `u` in | fault |
/// |---|---|
/// | `[0, t)` | `400 ThrottlingException`, not forwarded |
/// | `[t, t + e)` | `500 InternalServerError`, not forwarded |
/// | `[t + e, t + e + a)` | forwarded (so applied), then answered `500 InternalServerError` anyway |
/// | `[t + e + a, t + e + a + k)` | `BatchGetItem`: `200`, every key unprocessed, not forwarded; others: as the rest |
/// | the rest | forwarded, the upstream's answer returned |
///
/// with `t = throttle_rate`, `e = error_500_rate`, `a = after_write_500_rate`, `k = unprocessed_keys_rate`.
/// Requests the filter excludes, and all requests while faults are [disabled](super::RunningProxy::set_enabled), take
/// no draw: one seed gives one sequence of faults over the sequence of eligible requests, whatever else goes through
/// the proxy.
///
/// # Default
/// [`new`](Self::new) sets seed `0`, every rate `0.0` (a transparent proxy) and no operation filter.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultProxyConfig {
    /// Base URL of the upstream (moto server), `http://host:port`; a trailing `/` is allowed, a path is not.
    pub upstream: String,
    /// Seed of the RNG that decides the faults.
    pub seed: u64,
    /// Probability that an eligible DynamoDB request is throttled (`400 ThrottlingException`) without being forwarded.
    pub throttle_rate: f64,
    /// Probability that an eligible DynamoDB request fails with `500 InternalServerError` without being forwarded.
    pub error_500_rate: f64,
    /// Probability that an eligible DynamoDB request is forwarded, so applied, and answered `500
    /// InternalServerError` instead of the upstream's answer: the client cannot tell that its write happened, and a
    /// retry of a conditional write then fails its condition on its own earlier write.
    pub after_write_500_rate: f64,
    /// Probability that an eligible `BatchGetItem` is answered `200` with no item and every key it asked for
    /// unprocessed (`{"Responses": {<table>: []}, "UnprocessedKeys": <its RequestItems>}`), without being forwarded:
    /// what DynamoDB answers when it throttles a batch read without failing it. Other operations that draw into this
    /// band are forwarded untouched, so the rate does not change how often they fail.
    pub unprocessed_keys_rate: f64,
    /// Operation names (the part of `X-Amz-Target` after `DynamoDB_20120810.`, such as `PutItem`) that faults apply
    /// to; `None` for every DynamoDB operation.
    pub operations: Option<Vec<String>>,
}

impl FaultProxyConfig {
    /// A transparent proxy in front of `upstream`: see "Default" above.
    pub fn new(upstream: impl Into<String>) -> Self {
        Self {
            upstream: upstream.into(),
            seed: 0,
            throttle_rate: 0.0,
            error_500_rate: 0.0,
            after_write_500_rate: 0.0,
            unprocessed_keys_rate: 0.0,
            operations: None,
        }
    }

    /// Checks that every rate is a probability, that they add up to at most 1, that the upstream is an `http://`
    /// base URL and that the operation names look like DynamoDB operations.
    pub fn validate(&self) -> Result<(), Error> {
        let rates = [
            ("throttle_rate", self.throttle_rate),
            ("error_500_rate", self.error_500_rate),
            ("after_write_500_rate", self.after_write_500_rate),
            ("unprocessed_keys_rate", self.unprocessed_keys_rate),
        ];
        for (name, value) in rates {
            // `contains` is false for NaN too.
            if !(0.0..=1.0).contains(&value) {
                return Err(Error::InvalidRate { name, value });
            }
        }
        let sum = self.throttle_rate
            + self.error_500_rate
            + self.after_write_500_rate
            + self.unprocessed_keys_rate;
        // Decimal rates that add up to 1 on paper may not in binary (0.1 + 0.2 + 0.7).
        if sum > 1.0 + 1e-9 {
            return Err(Error::RatesExceedOne { sum });
        }
        parse_upstream(&self.upstream)?;
        for name in self.operations.iter().flatten() {
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(Error::InvalidOperation { name: name.clone() });
            }
        }
        Ok(())
    }
}

/// The upstream's scheme and authority, ready to be joined with a request's path and query.
pub(crate) fn parse_upstream(upstream: &str) -> Result<Uri, Error> {
    let invalid = |reason| Error::InvalidUpstream {
        upstream: upstream.to_owned(),
        reason,
    };
    if !upstream.starts_with("http://") {
        return Err(invalid(
            "must start with http:// (the proxy does not speak TLS)",
        ));
    }
    let uri: Uri = upstream.parse().map_err(|_| invalid("not a valid URL"))?;
    let Some(authority) = uri.authority().filter(|a| !a.host().is_empty()) else {
        return Err(invalid("has no host"));
    };
    if authority.as_str().contains('@') {
        return Err(invalid("must not carry credentials"));
    }
    // Anything after the host is `:port`, and the port must be a number.
    if authority.as_str().len() > authority.host().len() && authority.port_u16().is_none() {
        return Err(invalid("has an invalid port"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(invalid(
            "must be a base URL, http://host:port, without a path or query",
        ));
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> FaultProxyConfig {
        FaultProxyConfig::new("http://127.0.0.1:5000")
    }

    #[test]
    fn the_default_is_valid_and_transparent() {
        let c = config();
        assert!(c.validate().is_ok());
        assert_eq!(
            (
                c.throttle_rate,
                c.error_500_rate,
                c.after_write_500_rate,
                c.unprocessed_keys_rate
            ),
            (0.0, 0.0, 0.0, 0.0)
        );
        assert!(
            FaultProxyConfig::new("http://localhost:5000/")
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn rates_must_be_probabilities() {
        for bad in [-0.1, 1.01, f64::NAN, f64::INFINITY] {
            let cases = [
                (
                    "throttle_rate",
                    FaultProxyConfig {
                        throttle_rate: bad,
                        ..config()
                    },
                ),
                (
                    "error_500_rate",
                    FaultProxyConfig {
                        error_500_rate: bad,
                        ..config()
                    },
                ),
                (
                    "after_write_500_rate",
                    FaultProxyConfig {
                        after_write_500_rate: bad,
                        ..config()
                    },
                ),
                (
                    "unprocessed_keys_rate",
                    FaultProxyConfig {
                        unprocessed_keys_rate: bad,
                        ..config()
                    },
                ),
            ];
            for (expected, c) in cases {
                let err = c.validate().expect_err("rejected");
                assert!(
                    matches!(err, Error::InvalidRate { name, .. } if name == expected),
                    "{err}"
                );
                assert!(err.is_invalid_config());
            }
        }
    }

    #[test]
    fn rates_must_add_up_to_at_most_one() {
        let over = FaultProxyConfig {
            throttle_rate: 0.5,
            error_500_rate: 0.4,
            after_write_500_rate: 0.2,
            ..config()
        };
        assert!(matches!(over.validate(), Err(Error::RatesExceedOne { .. })));
        let over_with_unprocessed = FaultProxyConfig {
            throttle_rate: 0.5,
            unprocessed_keys_rate: 0.6,
            ..config()
        };
        assert!(matches!(
            over_with_unprocessed.validate(),
            Err(Error::RatesExceedOne { .. })
        ));
        let exactly_one = FaultProxyConfig {
            throttle_rate: 0.1,
            error_500_rate: 0.2,
            after_write_500_rate: 0.7,
            ..config()
        };
        assert!(exactly_one.validate().is_ok());
    }

    #[test]
    fn the_upstream_must_be_a_plain_http_base_url() {
        for bad in [
            "",
            "127.0.0.1:5000",
            "https://127.0.0.1:5000",
            "http://",
            "http://127.0.0.1:5000/prefix",
            "http://127.0.0.1:5000/?a=b",
            "http://127.0.0.1:notaport",
            "http://user:pw@127.0.0.1:5000",
        ] {
            let err = FaultProxyConfig::new(bad).validate().expect_err(bad);
            assert!(matches!(err, Error::InvalidUpstream { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn operations_are_bare_names() {
        let ok = FaultProxyConfig {
            operations: Some(vec!["PutItem".into(), "TransactWriteItems".into()]),
            ..config()
        };
        assert!(ok.validate().is_ok());
        for bad in ["", "DynamoDB_20120810.PutItem", "Put Item"] {
            let c = FaultProxyConfig {
                operations: Some(vec![bad.into()]),
                ..config()
            };
            assert!(
                matches!(c.validate(), Err(Error::InvalidOperation { .. })),
                "{bad}"
            );
        }
    }
}

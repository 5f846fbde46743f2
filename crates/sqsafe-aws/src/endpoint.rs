//! What an endpoint URL names: whether it is http(s), its host and port, and whether that host is this machine.
//!
//! One reading of a URL for every check that decides where sqsafe may send (a consumer's configured URLs, a redrive's
//! target queue), parsed as an HTTP client would (the `url` crate: lower-cased domains, IPv4 and IPv6 literals,
//! default ports), so that a check and the request that follows it agree on the host.

use std::net::IpAddr;

use url::{Host, Url};

/// An `http://` or `https://` URL with a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    https: bool,
    host: Host<String>,
    port: u16,
}

impl HttpUrl {
    /// Parses `text`; `None` for anything but an http(s) URL with a host.
    pub fn parse(text: &str) -> Option<Self> {
        let url = Url::parse(text).ok()?;
        let https = match url.scheme() {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let host = url.host()?.to_owned();
        let port = url.port_or_known_default()?;
        Some(Self { https, host, port })
    }

    /// Whether the scheme is `https`.
    pub fn is_https(&self) -> bool {
        self.https
    }

    /// The host as a string: a lower-cased domain, an IPv4 literal, or an IPv6 literal in brackets (`[::1]`).
    pub fn host(&self) -> String {
        self.host.to_string()
    }

    /// The port, the scheme's default when the URL has none.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the host is this machine: `localhost`, `127.0.0.0/8` or `::1`.
    pub fn is_loopback(&self) -> bool {
        match &self.host {
            Host::Domain(domain) => domain == "localhost",
            Host::Ipv4(ip) => IpAddr::V4(*ip).is_loopback(),
            Host::Ipv6(ip) => IpAddr::V6(*ip).is_loopback(),
        }
    }

    /// Whether `other` names the same host and port (the scheme aside).
    pub fn same_authority(&self, other: &HttpUrl) -> bool {
        self.host == other.host && self.port == other.port
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_this_machine_however_it_is_written() {
        for url in [
            "http://localhost:4566/000000000000/q",
            "http://LOCALHOST/",
            "http://127.0.0.1:5000",
            "http://127.8.9.10/x",
            "http://[::1]:8080/",
            "http://user@127.0.0.1:9/",
            "https://localhost",
        ] {
            let parsed = HttpUrl::parse(url).unwrap_or_else(|| panic!("{url} parses"));
            assert!(parsed.is_loopback(), "{url}");
        }
        for url in [
            "http://localhost.evil.example/",
            "http://127.0.0.1.nip.io/",
            "http://10.0.0.1/",
            "http://[::2]/",
            "http://sqs.us-east-1.amazonaws.com/",
            "http://127.0.0.1@attacker.example/",
        ] {
            let parsed = HttpUrl::parse(url).unwrap_or_else(|| panic!("{url} parses"));
            assert!(!parsed.is_loopback(), "{url}");
        }
    }

    #[test]
    fn only_http_urls_with_a_host_parse() {
        for text in [
            "ftp://localhost/",
            "localhost:4566",
            "http://",
            "file:///etc/passwd",
            "",
            "not a url",
        ] {
            assert_eq!(HttpUrl::parse(text), None, "{text}");
        }
        let url = HttpUrl::parse("HTTPS://SQS.us-east-1.AmazonAWS.com/123/q").expect("parses");
        assert!(url.is_https());
        assert_eq!(
            (url.host().as_str(), url.port()),
            ("sqs.us-east-1.amazonaws.com", 443)
        );
    }

    #[test]
    fn the_same_authority_is_host_and_port_with_default_ports_filled_in() {
        let a = HttpUrl::parse("http://sqs.internal:9324/1/q").expect("a");
        assert!(a.same_authority(&HttpUrl::parse("http://SQS.internal:9324").expect("b")));
        assert!(!a.same_authority(&HttpUrl::parse("http://sqs.internal:9999/1/q").expect("c")));
        let https = HttpUrl::parse("https://sqs.us-east-1.amazonaws.com/1/q").expect("d");
        assert!(https.same_authority(
            &HttpUrl::parse("https://sqs.us-east-1.amazonaws.com:443").expect("e")
        ));
    }
}

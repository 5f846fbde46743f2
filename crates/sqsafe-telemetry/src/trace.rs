//! The producer's trace context, as an SQS message carries it: a W3C `traceparent` message attribute (what
//! OpenTelemetry producers set), else the `AWSTraceHeader` system attribute (what SQS sets from the sender's X-Ray
//! trace). The record's span carries the producer's trace id (`producer_trace_id`, 32 lower-case hex digits, the W3C
//! form of an X-Ray trace id too), so a record's lines can be joined with the trace that sent it.

use aws_lambda_events::sqs::SqsMessage;

/// The message attribute a W3C trace context travels in.
pub const TRACEPARENT_ATTRIBUTE: &str = "traceparent";
/// The SQS system attribute SQS fills from the sender's X-Ray trace header.
pub const XRAY_SYSTEM_ATTRIBUTE: &str = "AWSTraceHeader";

/// Which header a [`TraceContext`] was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceOrigin {
    /// A W3C `traceparent` message attribute.
    Traceparent,
    /// The `AWSTraceHeader` system attribute (X-Ray: `Root=1-…;Parent=…;Sampled=…`).
    XRay,
    /// Made here: a span of this function ([`TraceContext::child`]) or a trace it started
    /// ([`TraceContext::new_root`]).
    Local,
}

/// A producer's trace context: its trace id and, when it said, its span and sampling decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    trace_id: String,
    parent_id: Option<String>,
    sampled: Option<bool>,
    origin: TraceOrigin,
}

impl TraceContext {
    /// The message's: its `traceparent` attribute when valid, else its `AWSTraceHeader` when valid. A malformed
    /// header is ignored (the next source is used): a trace header never fails a record.
    pub fn of_message(message: &SqsMessage) -> Option<Self> {
        message
            .message_attributes
            .get(TRACEPARENT_ATTRIBUTE)
            .and_then(|a| a.string_value.as_deref())
            .and_then(Self::from_traceparent)
            .or_else(|| {
                message
                    .attributes
                    .get(XRAY_SYSTEM_ATTRIBUTE)
                    .and_then(|h| Self::from_xray_header(h))
            })
    }

    /// A W3C `traceparent` (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`); `None` unless it is one (an
    /// all-zero id is invalid, as the standard says).
    pub fn from_traceparent(header: &str) -> Option<Self> {
        let mut parts = header.trim().split('-');
        let (version, trace_id, parent_id, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2
            || !is_hex(version)
            || version == "ff"
            || (version == "00" && parts.next().is_some())
        {
            return None;
        }
        if !valid_id(trace_id, 32) || !valid_id(parent_id, 16) || flags.len() != 2 || !is_hex(flags)
        {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(Self {
            trace_id: trace_id.to_ascii_lowercase(),
            parent_id: Some(parent_id.to_ascii_lowercase()),
            sampled: Some(flags & 1 == 1),
            origin: TraceOrigin::Traceparent,
        })
    }

    /// An X-Ray trace header (`Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1`, keys in
    /// any order, others ignored); `None` without a valid `Root`.
    pub fn from_xray_header(header: &str) -> Option<Self> {
        let (mut root, mut parent, mut sampled) = (None, None, None);
        for part in header.split(';') {
            match part.trim().split_once('=') {
                Some(("Root", v)) => root = Some(v),
                Some(("Parent", v)) => parent = Some(v),
                Some(("Sampled", v)) => sampled = Some(v),
                _ => {}
            }
        }
        let (epoch, unique) = root?.strip_prefix("1-")?.split_once('-')?;
        if epoch.len() != 8 || unique.len() != 24 {
            return None;
        }
        let trace_id = format!("{epoch}{unique}");
        if !valid_id(&trace_id, 32) {
            return None;
        }
        Some(Self {
            trace_id: trace_id.to_ascii_lowercase(),
            parent_id: parent
                .filter(|p| valid_id(p, 16))
                .map(str::to_ascii_lowercase),
            sampled: match sampled {
                Some("1") => Some(true),
                Some("0") => Some(false),
                _ => None,
            },
            origin: TraceOrigin::XRay,
        })
    }

    /// The trace id, 32 lower-case hex digits (an X-Ray id `1-5759e988-bd86…` is `5759e988bd86…`).
    pub fn trace_id(&self) -> &str {
        &self.trace_id
    }

    /// The producer's span (X-Ray: its segment), 16 lower-case hex digits, when the header named it.
    pub fn parent_id(&self) -> Option<&str> {
        self.parent_id.as_deref()
    }

    /// Whether the producer sampled the trace, when the header said.
    pub fn sampled(&self) -> Option<bool> {
        self.sampled
    }

    /// The context of a span of this function, from OpenTelemetry's ids (already lower-case hex, valid).
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    pub(crate) fn of_local_span(trace_id: String, span_id: String, sampled: bool) -> Self {
        Self {
            trace_id,
            parent_id: Some(span_id),
            sampled: Some(sampled),
            origin: TraceOrigin::Local,
        }
    }

    /// Which header it came from.
    pub fn origin(&self) -> TraceOrigin {
        self.origin
    }

    /// The trace id in X-Ray's form: `1-<8 hex>-<24 hex>`.
    pub fn xray_trace_id(&self) -> String {
        format!("1-{}-{}", &self.trace_id[..8], &self.trace_id[8..])
    }

    /// A trace started here, for a record whose producer sent none: a random trace id, no parent, sampled.
    pub fn new_root() -> Self {
        Self {
            trace_id: random_trace_id(),
            parent_id: None,
            sampled: Some(true),
            origin: TraceOrigin::Local,
        }
    }

    /// This trace continued from a new span of this function (a random span id): the context a record carries on
    /// when no OpenTelemetry span stands for it.
    pub fn child(&self) -> Self {
        Self {
            trace_id: self.trace_id.clone(),
            parent_id: Some(random_span_id()),
            sampled: self.sampled,
            origin: TraceOrigin::Local,
        }
    }

    /// The W3C `traceparent` to send on (`00-<trace id>-<parent id>-<flags>`): `None` without a parent span. The
    /// sampled flag is the producer's, and set when it said nothing (a downstream that samples decides again).
    pub fn traceparent(&self) -> Option<String> {
        let parent = self.parent_id.as_deref()?;
        let flags = if self.sampled == Some(false) {
            "00"
        } else {
            "01"
        };
        Some(format!("00-{}-{parent}-{flags}", self.trace_id))
    }
}

/// A random trace id: 32 lower-case hex digits, not all zero.
fn random_trace_id() -> String {
    format!("{:032x}", fastrand::u128(1..))
}

/// A random span id: 16 lower-case hex digits, not all zero.
fn random_span_id() -> String {
    format!("{:016x}", fastrand::u64(1..))
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `len` hex digits, not all zero.
fn valid_id(s: &str, len: usize) -> bool {
    s.len() == len && is_hex(s) && s.bytes().any(|b| b != b'0')
}

#[cfg(test)]
mod tests {
    use aws_lambda_events::sqs::SqsMessageAttribute;

    use super::*;

    const XRAY: &str = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    const W3C: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn an_xray_header_gives_the_w3c_trace_id_its_parent_and_sampling() {
        let t = TraceContext::from_xray_header(XRAY).expect("valid");
        assert_eq!(t.trace_id(), "5759e988bd862e3fe1be46a994272793");
        assert_eq!(t.xray_trace_id(), "1-5759e988-bd862e3fe1be46a994272793");
        assert_eq!(t.parent_id(), Some("53995c3f42cd8ad8"));
        assert_eq!(t.sampled(), Some(true));
        assert_eq!(t.origin(), TraceOrigin::XRay);
        let reordered = TraceContext::from_xray_header(
            "Sampled=0;Self=1-x;Root=1-5759E988-BD862E3FE1BE46A994272793",
        )
        .expect("keys in any order, upper case");
        assert_eq!(reordered.trace_id(), "5759e988bd862e3fe1be46a994272793");
        assert_eq!(
            (reordered.parent_id(), reordered.sampled()),
            (None, Some(false))
        );
    }

    #[test]
    fn a_traceparent_gives_its_ids_and_flags() {
        let t = TraceContext::from_traceparent(W3C).expect("valid");
        assert_eq!(t.trace_id(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(t.parent_id(), Some("b7ad6b7169203331"));
        assert_eq!(t.sampled(), Some(true));
        assert_eq!(t.origin(), TraceOrigin::Traceparent);
        let unsampled = TraceContext::from_traceparent(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
        );
        assert_eq!(unsampled.and_then(|t| t.sampled()), Some(false));
    }

    #[test]
    fn malformed_headers_are_ignored() {
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c8031zz-b7ad6b7169203331-01",
        ] {
            assert_eq!(TraceContext::from_traceparent(bad), None, "{bad:?}");
        }
        for bad in [
            "",
            "Parent=53995c3f42cd8ad8",
            "Root=2-5759e988-bd862e3fe1be46a994272793",
            "Root=1-5759e988-short",
        ] {
            assert_eq!(TraceContext::from_xray_header(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_message_s_traceparent_wins_over_its_xray_header() {
        let mut message = SqsMessage::default();
        message
            .attributes
            .insert(XRAY_SYSTEM_ATTRIBUTE.to_owned(), XRAY.to_owned());
        assert_eq!(
            TraceContext::of_message(&message).map(|t| t.origin()),
            Some(TraceOrigin::XRay)
        );
        let mut attribute = SqsMessageAttribute::default();
        attribute.data_type = Some("String".to_owned());
        attribute.string_value = Some(W3C.to_owned());
        message
            .message_attributes
            .insert(TRACEPARENT_ATTRIBUTE.to_owned(), attribute.clone());
        assert_eq!(
            TraceContext::of_message(&message).map(|t| t.trace_id().to_owned()),
            Some("0af7651916cd43dd8448eb211c80319c".to_owned())
        );
        attribute.string_value = Some("garbage".to_owned());
        message
            .message_attributes
            .insert(TRACEPARENT_ATTRIBUTE.to_owned(), attribute);
        assert_eq!(
            TraceContext::of_message(&message).map(|t| t.origin()),
            Some(TraceOrigin::XRay),
            "a bad traceparent falls back to the X-Ray header"
        );
        assert_eq!(TraceContext::of_message(&SqsMessage::default()), None);
    }

    #[test]
    fn a_context_goes_on_as_a_traceparent() {
        let producer = TraceContext::from_traceparent(W3C).expect("valid");
        assert_eq!(producer.traceparent().as_deref(), Some(W3C));
        let child = producer.child();
        assert_eq!(child.trace_id(), producer.trace_id());
        assert_ne!(child.parent_id(), producer.parent_id(), "a span of its own");
        assert_eq!(child.origin(), TraceOrigin::Local);
        let sent = child.traceparent().expect("a parent");
        assert_eq!(
            TraceContext::from_traceparent(&sent),
            Some(child.clone()).map(|c| TraceContext {
                origin: TraceOrigin::Traceparent,
                ..c
            })
        );

        let unsampled = TraceContext::from_traceparent(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
        )
        .expect("valid")
        .child();
        let sent = unsampled.traceparent().expect("a parent");
        assert!(
            sent.starts_with("00-0af7651916cd43dd8448eb211c80319c-") && sent.ends_with("-00"),
            "the producer's decision not to sample goes on: {sent}"
        );
    }

    #[test]
    fn a_new_root_is_a_valid_sampled_trace_without_a_parent() {
        let root = TraceContext::new_root();
        assert!(valid_id(root.trace_id(), 32), "{root:?}");
        assert_eq!((root.parent_id(), root.sampled()), (None, Some(true)));
        assert_eq!(root.traceparent(), None, "no span to name as the parent");
        assert_ne!(TraceContext::new_root().trace_id(), root.trace_id());
        let sent = root.child().traceparent().expect("a parent");
        assert!(TraceContext::from_traceparent(&sent).is_some(), "{sent}");
    }
}

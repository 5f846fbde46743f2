use std::fmt;

use crate::error::{Error, Result};
use crate::fingerprint::sha256_hex;

/// The longest key stored as is, in bytes of UTF-8. DynamoDB allows 2048 bytes for a partition key and 1024 for a sort
/// key; keys longer than the smaller limit are hashed, so one key format works in both table layouts.
pub const MAX_KEY_BYTES: usize = 1024;

/// The name of an intent: the one thing that must happen at most once.
///
/// Built by [`KeyBuilder`] from consumer name, effect version, tenant and an intent id, it reads
/// `charge-payment#v1#acme#payment:p-42`. Keys compare byte for byte (no Unicode normalisation). A key longer than
/// [`MAX_KEY_BYTES`] is replaced by `consumer#vN#sha256:<hex of the whole key>`, deterministically.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// A key taken as is (for keys built elsewhere). Empty is [`Error::MissingKey`]; too long is hashed.
    pub fn from_raw(key: impl Into<String>) -> Result<Self> {
        let key = key.into();
        if key.trim().is_empty() {
            return Err(Error::MissingKey { what: "key" });
        }
        if key.len() > MAX_KEY_BYTES {
            return Ok(Self(format!("sha256:{}", sha256_hex(key.as_bytes()))));
        }
        Ok(Self(key))
    }

    /// The key as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value to send downstream as an `Idempotency-Key` header: SHA-256 (hex) of the key, so it names the
    /// intent (never the attempt), is the same on every redelivery, and is safe in any header whatever the key holds.
    pub fn downstream_key(&self) -> String {
        sha256_hex(self.0.as_bytes())
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for IdempotencyKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Builds an [`IdempotencyKey`] from the parts that name an intent.
///
/// ```
/// use sqsafe_idempotency::KeyBuilder;
///
/// let key = KeyBuilder::new("charge-payment", 1).tenant("acme").intent("payment", "p-42").build()?;
/// assert_eq!(key.as_str(), "charge-payment#v1#acme#payment:p-42");
///
/// // An intent that is not an event: one welcome e-mail per candidate, however many events ask for it.
/// let key = KeyBuilder::new("mailer", 3).intent("welcome-email", "cand-7").build()?;
/// assert_eq!(key.as_str(), "mailer#v3##welcome-email:cand-7");
///
/// // No intent id: an error, unless the SQS message id is allowed as an explicit fallback.
/// assert!(KeyBuilder::new("mailer", 3).build().is_err());
/// let key = KeyBuilder::new("mailer", 3).message_id_fallback("9f1c…").build()?;
/// assert_eq!(key.as_str(), "mailer#v3##msg:9f1c…");
/// # Ok::<(), sqsafe_idempotency::Error>(())
/// ```
///
/// The consumer name and namespaces are limited to ASCII letters, digits, `-`, `_` and `.`, so that code paths and
/// type names never leak into keys (a key must survive a refactor). Tenant and ids may hold any text; `%` and `#` in
/// them are percent-encoded so that no two different part lists give the same key.
#[derive(Debug, Clone)]
pub struct KeyBuilder {
    consumer: String,
    version: u32,
    tenant: Option<String>,
    intent: Option<(String, String)>,
    fallback_message_id: Option<String>,
}

impl KeyBuilder {
    /// Starts a key for `consumer` at `effect_version`. Bump the version when the effect changes meaning, so that old
    /// records do not suppress the new effect.
    pub fn new(consumer: impl Into<String>, effect_version: u32) -> Self {
        Self {
            consumer: consumer.into(),
            version: effect_version,
            tenant: None,
            intent: None,
            fallback_message_id: None,
        }
    }

    /// The verified tenant (never taken from unverified input). Optional; an empty tenant is an error.
    pub fn tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// The event's own id, under the `evt` namespace.
    pub fn event_id(self, id: impl Into<String>) -> Self {
        self.intent("evt", id)
    }

    /// An intent id under a namespace: `intent("order", id)`, `intent("welcome-email", candidate)`.
    pub fn intent(mut self, namespace: impl Into<String>, id: impl Into<String>) -> Self {
        self.intent = Some((namespace.into(), id.into()));
        self
    }

    /// Uses the SQS message id (namespace `msg`) when no intent id was given. Explicit, because a republished event
    /// gets a new message id and would run its effect again.
    pub fn message_id_fallback(mut self, message_id: impl Into<String>) -> Self {
        self.fallback_message_id = Some(message_id.into());
        self
    }

    /// The key, or a typed error: [`Error::Config`] for a bad consumer or namespace, [`Error::MissingKey`] for an
    /// empty part or a missing intent id.
    pub fn build(self) -> Result<IdempotencyKey> {
        use std::fmt::Write as _;

        check_name("consumer name", &self.consumer)?;
        let (namespace, id) = match (self.intent, self.fallback_message_id) {
            (Some((ns, id)), _) => {
                check_name("key namespace", &ns)?;
                (ns, non_empty(id, "intent id")?)
            }
            (None, Some(msg)) => ("msg".to_owned(), non_empty(msg, "message id")?),
            (None, None) => return Err(Error::MissingKey { what: "intent id" }),
        };
        let tenant = match self.tenant {
            Some(t) => Some(non_empty(t, "tenant")?),
            None => None,
        };
        // One buffer for the whole key: `consumer#v<version>#<tenant>#<namespace>:<id>`.
        let tenant = tenant.as_deref().unwrap_or_default();
        let mut full = String::with_capacity(
            self.consumer.len() + tenant.len() + namespace.len() + id.len() + 16,
        );
        full.push_str(&self.consumer);
        full.push_str("#v");
        // Writing to a String cannot fail.
        let _ = write!(full, "{}", self.version);
        full.push('#');
        push_escaped(&mut full, tenant);
        full.push('#');
        full.push_str(&namespace);
        full.push(':');
        push_escaped(&mut full, &id);
        if full.len() <= MAX_KEY_BYTES {
            return Ok(IdempotencyKey(full));
        }
        Ok(IdempotencyKey(format!(
            "{}#v{}#sha256:{}",
            self.consumer,
            self.version,
            sha256_hex(full.as_bytes())
        )))
    }
}

fn check_name(what: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "{what} `{name}` must be 1-128 ASCII letters, digits, `-`, `_` or `.`"
        )))
    }
}

fn non_empty(value: String, what: &'static str) -> Result<String> {
    if value.trim().is_empty() {
        Err(Error::MissingKey { what })
    } else {
        Ok(value)
    }
}

/// Appends `part` with `%` and `#` percent-encoded, so that no two different part lists give the same key.
fn push_escaped(out: &mut String, part: &str) {
    let mut rest = part;
    while let Some(at) = rest.find(['%', '#']) {
        out.push_str(&rest[..at]);
        out.push_str(if rest.as_bytes()[at] == b'%' {
            "%25"
        } else {
            "%23"
        });
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: KeyBuilder) -> String {
        b.build().expect("valid key").as_str().to_owned()
    }

    #[test]
    fn parts_appear_in_a_fixed_order() {
        assert_eq!(
            key(KeyBuilder::new("c", 2).tenant("t").event_id("e")),
            "c#v2#t#evt:e"
        );
        assert_eq!(key(KeyBuilder::new("c", 2).event_id("e")), "c#v2##evt:e");
    }

    #[test]
    fn every_part_changes_the_key() {
        let base = key(KeyBuilder::new("c", 1).tenant("t").intent("order", "1"));
        for other in [
            KeyBuilder::new("d", 1).tenant("t").intent("order", "1"),
            KeyBuilder::new("c", 2).tenant("t").intent("order", "1"),
            KeyBuilder::new("c", 1).tenant("u").intent("order", "1"),
            KeyBuilder::new("c", 1).intent("order", "1"),
            KeyBuilder::new("c", 1).tenant("t").intent("refund", "1"),
            KeyBuilder::new("c", 1).tenant("t").intent("order", "2"),
        ] {
            assert_ne!(key(other), base);
        }
    }

    #[test]
    fn separators_inside_parts_cannot_forge_another_key() {
        let a = key(KeyBuilder::new("c", 1).tenant("a#evt:b").event_id("x"));
        let b = key(KeyBuilder::new("c", 1).tenant("a").intent("evt", "b#evt:x"));
        assert_ne!(a, b);
        assert_eq!(a, "c#v1#a%23evt:b#evt:x");
        assert_ne!(
            key(KeyBuilder::new("c", 1).event_id("%23")),
            key(KeyBuilder::new("c", 1).event_id("#"))
        );
    }

    #[test]
    fn missing_intent_is_an_error_unless_fallback_is_explicit() {
        assert!(matches!(
            KeyBuilder::new("c", 1).build(),
            Err(Error::MissingKey { what: "intent id" })
        ));
        assert_eq!(
            key(KeyBuilder::new("c", 1).message_id_fallback("m-1")),
            "c#v1##msg:m-1"
        );
        // An intent id wins over the fallback: the message id is only used when nothing better exists.
        assert_eq!(
            key(KeyBuilder::new("c", 1)
                .event_id("e")
                .message_id_fallback("m-1")),
            "c#v1##evt:e"
        );
    }

    #[test]
    fn empty_or_blank_parts_are_missing() {
        assert!(matches!(
            KeyBuilder::new("c", 1).event_id("  ").build(),
            Err(Error::MissingKey { .. })
        ));
        assert!(matches!(
            KeyBuilder::new("c", 1).tenant("").event_id("e").build(),
            Err(Error::MissingKey { .. })
        ));
        assert!(matches!(
            KeyBuilder::new("c", 1).message_id_fallback("").build(),
            Err(Error::MissingKey { .. })
        ));
        assert!(matches!(
            IdempotencyKey::from_raw(" "),
            Err(Error::MissingKey { .. })
        ));
    }

    #[test]
    fn names_with_code_paths_or_spaces_are_rejected() {
        for bad in ["", "my consumer", "crate::handler", "a/b", "ü"] {
            assert!(
                matches!(
                    KeyBuilder::new(bad, 1).event_id("e").build(),
                    Err(Error::Config(_))
                ),
                "{bad:?}"
            );
            assert!(
                matches!(
                    KeyBuilder::new("c", 1).intent(bad, "e").build(),
                    Err(Error::Config(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn unicode_ids_are_kept_byte_for_byte() {
        assert_eq!(
            key(KeyBuilder::new("c", 1).tenant("zürich").event_id("注文-1")),
            "c#v1#zürich#evt:注文-1"
        );
        // Composed and decomposed forms are different bytes, hence different keys (documented: no normalisation).
        assert_ne!(
            key(KeyBuilder::new("c", 1).event_id("\u{e9}")),
            key(KeyBuilder::new("c", 1).event_id("e\u{301}"))
        );
    }

    #[test]
    fn the_downstream_key_is_stable_opaque_and_header_safe() {
        let a = KeyBuilder::new("c", 1)
            .tenant("zürich")
            .event_id("注文-1")
            .build()
            .expect("key");
        let b = KeyBuilder::new("c", 1)
            .tenant("zürich")
            .event_id("注文-1")
            .build()
            .expect("key");
        assert_eq!(a.downstream_key(), b.downstream_key());
        assert_eq!(a.downstream_key().len(), 64);
        assert!(a.downstream_key().bytes().all(|c| c.is_ascii_hexdigit()));
        let other = KeyBuilder::new("c", 2)
            .tenant("zürich")
            .event_id("注文-1")
            .build()
            .expect("key");
        assert_ne!(a.downstream_key(), other.downstream_key());
    }

    #[test]
    fn long_keys_are_hashed_deterministically_and_the_limit_counts_bytes() {
        // 400 three-byte characters: 400 chars but 1200 bytes, over the limit.
        let long_id = "注".repeat(400);
        let a = key(KeyBuilder::new("c", 1).event_id(long_id.clone()));
        let b = key(KeyBuilder::new("c", 1).event_id(long_id.clone()));
        assert_eq!(a, b);
        assert!(a.starts_with("c#v1#sha256:"), "{a}");
        assert_eq!(a.len(), "c#v1#sha256:".len() + 64);
        assert_ne!(
            a,
            key(KeyBuilder::new("c", 1).event_id(format!("{long_id}x")))
        );

        let exactly = "x".repeat(MAX_KEY_BYTES - "c#v1##evt:".len());
        assert_eq!(
            key(KeyBuilder::new("c", 1).event_id(exactly.clone())).len(),
            MAX_KEY_BYTES
        );
        assert!(key(KeyBuilder::new("c", 1).event_id(format!("{exactly}x"))).contains("sha256:"));

        let raw = IdempotencyKey::from_raw("k".repeat(MAX_KEY_BYTES + 1)).expect("hashed");
        assert!(raw.as_str().starts_with("sha256:"));
    }
}

use aws_lambda_events::sqs::{SqsMessage, SqsMessageAttribute};

use super::*;

fn message(attribute: Option<(&str, &str)>, body: Option<&str>) -> SqsMessage {
    let mut message = SqsMessage::default();
    message.message_id = Some("m-1".to_owned());
    message.body = body.map(str::to_owned);
    if let Some((name, value)) = attribute {
        let mut attr = SqsMessageAttribute::default();
        attr.data_type = Some("String".to_owned());
        attr.string_value = Some(value.to_owned());
        message.message_attributes.insert(name.to_owned(), attr);
    }
    message
}

fn source() -> CorrelationSource {
    CorrelationSource::new()
        .body_pointer("/correlation_id")
        .generator(|| "generated-1".to_owned())
}

const BODY: &str = r#"{"correlation_id":"from-body","amount":1250}"#;

#[test]
fn attribute_wins_over_body_and_generator() {
    let id = source().extract(&message(Some(("correlationId", "from-attr")), Some(BODY)));
    assert_eq!(id.as_str(), "from-attr");
    assert_eq!(id.origin(), CorrelationOrigin::Attribute);
}

#[test]
fn body_pointer_is_used_when_the_attribute_is_absent() {
    let id = source().extract(&message(None, Some(BODY)));
    assert_eq!(id.as_str(), "from-body");
    assert_eq!(id.origin(), CorrelationOrigin::Body);
}

#[test]
fn generated_when_nothing_carries_one() {
    let id = source().extract(&message(None, Some(r#"{"amount":1250}"#)));
    assert_eq!(id.as_str(), "generated-1");
    assert_eq!(id.origin(), CorrelationOrigin::Generated);
}

#[test]
fn body_is_ignored_without_a_pointer() {
    let id = CorrelationSource::new()
        .generator(|| "g".to_owned())
        .extract(&message(None, Some(BODY)));
    assert_eq!(id.origin(), CorrelationOrigin::Generated);
}

#[test]
fn bad_bodies_fall_through_to_the_generator() {
    for body in [
        None,
        Some(""),
        Some("not json {"),
        Some("[1,2,3]"),
        Some(r#"{"correlation_id":42}"#),
        Some(r#"{"correlation_id":null}"#),
        Some(r#"{"correlation_id":""}"#),
        Some(r#"{"correlation_id":" \n\t "}"#),
    ] {
        let id = source().extract(&message(None, body));
        assert_eq!(id.origin(), CorrelationOrigin::Generated, "{body:?}");
    }
}

#[test]
fn empty_or_blank_attribute_falls_through() {
    for value in ["", "   ", "\u{7}\n"] {
        let id = source().extract(&message(Some(("correlationId", value)), Some(BODY)));
        assert_eq!(id.origin(), CorrelationOrigin::Body, "{value:?}");
    }
}

#[test]
fn attribute_without_string_value_falls_through() {
    let mut msg = message(None, Some(BODY));
    let mut attr = SqsMessageAttribute::default();
    attr.data_type = Some("Binary".to_owned());
    msg.message_attributes
        .insert("correlationId".to_owned(), attr);
    assert_eq!(source().extract(&msg).origin(), CorrelationOrigin::Body);
}

#[test]
fn custom_attribute_name() {
    let msg = message(Some(("traceparent", "t-1")), None);
    let id = source().attribute("traceparent").extract(&msg);
    assert_eq!(id.as_str(), "t-1");
    assert_eq!(
        source().extract(&msg).origin(),
        CorrelationOrigin::Generated
    );
}

#[test]
fn values_are_trimmed_and_stripped_of_control_characters() {
    let id = source().extract(&message(
        Some((
            "correlationId",
            "  abc\r\n{\"level\":\"ERROR\"}\u{1b}[31m\u{0}  ",
        )),
        None,
    ));
    assert_eq!(id.as_str(), "abc{\"level\":\"ERROR\"}[31m");
}

#[test]
fn long_values_are_cut_to_max_chars() {
    let long = "é".repeat(MAX_CHARS + 10);
    let id = source().extract(&message(Some(("correlationId", &long)), None));
    assert_eq!(id.as_str().chars().count(), MAX_CHARS);
    assert!(long.starts_with(id.as_str()));

    let id = source().extract(&message(
        None,
        Some(&format!(r#"{{"correlation_id":"{long}"}}"#)),
    ));
    assert_eq!(id.as_str().chars().count(), MAX_CHARS);
}

#[test]
fn default_generator_makes_uuids() {
    let source = CorrelationSource::default();
    let a = source.extract(&message(None, None));
    let b = source.extract(&message(None, None));
    assert_eq!(a.origin(), CorrelationOrigin::Generated);
    assert!(uuid::Uuid::parse_str(a.as_str()).is_ok(), "{a}");
    assert_ne!(a, b);
}

#[test]
fn new_cleans_and_displays_the_value() {
    let id = CorrelationId::new(" order-7\n");
    assert_eq!(id.as_str(), "order-7");
    assert_eq!(id.to_string(), "order-7");
    assert_eq!(id.origin(), CorrelationOrigin::Attribute);
}

#[test]
fn sqs_attribute_is_a_string() {
    let attr = sqs_attribute(&CorrelationId::new("order-7"));
    assert_eq!(attr.data_type(), "String");
    assert_eq!(attr.string_value(), Some("order-7"));
    assert_eq!(attr.binary_value(), None);
}

#[test]
fn with_correlation_adds_the_default_attribute() {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .build();
    let client = aws_sdk_sqs::Client::from_conf(config);
    let builder = with_correlation(
        client.send_message().message_body("{}"),
        &CorrelationId::new("order-7"),
    );
    let attributes = builder
        .get_message_attributes()
        .as_ref()
        .expect("attributes were set");
    assert_eq!(
        attributes.get(DEFAULT_ATTRIBUTE),
        Some(&sqs_attribute(&CorrelationId::new("order-7")))
    );
}

#[test]
fn http_header_uses_the_header_name() {
    assert_eq!(
        http_header(&CorrelationId::new("order-7")),
        ("x-correlation-id", "order-7".to_owned())
    );
}

#[test]
fn source_debug_does_not_need_the_generator() {
    let debug = format!("{:?}", source());
    assert!(
        debug.contains("correlationId") && debug.contains("/correlation_id"),
        "{debug}"
    );
}

#[test]
fn an_envelopes_id_comes_after_the_sqs_attribute_and_before_the_body() {
    let with_attr = source().extract_with(
        &message(Some(("correlationId", "from-attr")), Some(BODY)),
        Some("from-envelope"),
    );
    assert_eq!(with_attr.as_str(), "from-attr");
    assert_eq!(with_attr.origin(), CorrelationOrigin::Attribute);
    let carried = source().extract_with(&message(None, Some(BODY)), Some("  from-envelope\n"));
    assert_eq!(carried.as_str(), "from-envelope", "cleaned like any other");
    assert_eq!(carried.origin(), CorrelationOrigin::Envelope);
    let blank = source().extract_with(&message(None, Some(BODY)), Some("  "));
    assert_eq!(
        blank.origin(),
        CorrelationOrigin::Body,
        "an empty one does not count"
    );
    let none = source().extract_with(&message(None, None), None);
    assert_eq!(none.origin(), CorrelationOrigin::Generated);
    assert_eq!(source().attribute_name(), "correlationId");
}

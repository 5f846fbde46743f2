//! The harness a consumer's tests start from, on this workspace's template.yaml and moto server (started by
//! `make test`): a probe consumer built as the template's charge-payment function, whose effect keeps the payment id.

use sqsafe::{Consumer, Context, Effect, Intent, Processed, RecordError, Setup};
use sqsafe_local::harness::Harness;

/// Reads any JSON body; the payment id is its intent and its output.
struct Probe;

impl Consumer for Probe {
    const NAME: &'static str = "charge-payment";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/payment_id"];
    type Payload = serde_json::Value;
    type Output = String;

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Self)
    }

    fn intent(p: &serde_json::Value) -> Intent {
        Intent::untenanted("payment", p["payment_id"].as_str().unwrap_or_default())
    }

    fn effect<'a>(
        &'a self,
        p: serde_json::Value,
        _: &'a Context<'a>,
    ) -> Result<Effect<'a, String>, RecordError> {
        let id = p["payment_id"].as_str().unwrap_or_default().to_owned();
        Ok(Effect::call(async move { Ok(id) }))
    }
}

/// A consumer no function of the template is built as.
struct Stray;

impl Consumer for Stray {
    const NAME: &'static str = "no-such-function";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &[];
    type Payload = serde_json::Value;
    type Output = ();

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Self)
    }

    fn intent(_: &serde_json::Value) -> Intent {
        Intent::untenanted("none", "none")
    }

    fn effect<'a>(
        &'a self,
        _: serde_json::Value,
        _: &'a Context<'a>,
    ) -> Result<Effect<'a, ()>, RecordError> {
        Ok(Effect::call(async { Ok(()) }))
    }
}

#[tokio::test]
async fn the_consumer_applies_replays_and_dead_letters_on_the_template_s_resources() {
    let h = Harness::<Probe>::builder()
        .fake_api("PaymentsApiUrl")
        .sample("charge-payment-batch.json")
        .start()
        .await
        .expect("harness");
    let url = h.setup().env.required("PAYMENTS_API_URL").expect("set");
    assert_eq!(url, h.api().url(), "the fake's URL reaches the function");

    let first = h.deliver(h.sample_first()).await;
    assert!(first.all_succeeded(Processed::Applied), "{first:?}");
    let stored = h.stored_results().await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    let again = h.deliver(h.sample_first()).await;
    assert!(again.all_succeeded(Processed::Replayed), "{again:?}");
    assert_eq!(h.stored_results().await, stored);

    let report = h.deliver(h.sample_with_body("not json")).await;
    assert!(report.all_dead_lettered(), "{report:?}");
    let letter = h.dead_letter().await;
    assert_eq!(letter.body, "not json");
    assert_eq!(
        letter.context("consumer").as_deref(),
        Some("charge-payment")
    );
    assert!(h.dead_letters().await.is_empty(), "received once");
}

#[tokio::test]
async fn a_parameter_the_function_does_not_read_is_refused_by_name() {
    let refused = Harness::<Probe>::with_api("NoSuchApiUrl")
        .await
        .expect_err("no variable refers to it");
    let message = refused.to_string();
    assert!(
        message.contains("NoSuchApiUrl") && message.contains("charge-payment"),
        "{message}"
    );
}

#[tokio::test]
async fn a_consumer_the_template_does_not_build_is_refused_by_name() {
    let refused = Harness::<Stray>::start().await.expect_err("no function");
    assert!(refused.is_stack(), "{refused:?}");
    assert!(
        refused.to_string().contains("no-such-function"),
        "{refused}"
    );
}

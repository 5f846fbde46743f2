//! `{{ cookiecutter.consumer_name }}`: the payload, the intent that keys it, and the effect.

use serde::{Deserialize, Serialize};
use sqsafe::{Consumer, Context, Intent, RecordError, Setup};

/// The event, versioned by its `version` tag: a body that does not parse, or an unknown version, is a permanent
/// `bad_payload` error before any effect.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "version")]
pub enum {{ cookiecutter.__consumer_pascal }}Requested {
    /// Version 1.
    #[serde(rename = "1")]
    V1({{ cookiecutter.__consumer_pascal }}V1),
}

/// Version 1 of the event.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct {{ cookiecutter.__consumer_pascal }}V1 {
    /// The tenant, as verified by the publisher.
    pub tenant: String,
    /// The id that names the intent: the same on every redelivery and every republish.
    pub id: String,
    /// What the effect is about.
    pub amount: u64,
}

/// What the effect returns: kept with the idempotency record and replayed to duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The intent's id.
    pub id: String,
}

/// The consumer.
#[derive(Debug)]
pub struct {{ cookiecutter.__consumer_pascal }};

impl Consumer for {{ cookiecutter.__consumer_pascal }} {
    const NAME: &'static str = "{{ cookiecutter.consumer_name }}";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/tenant", "/id", "/amount"];
    type Payload = {{ cookiecutter.__consumer_pascal }}Requested;
    type Output = Applied;

    fn new(_setup: &Setup) -> Result<Self, sqsafe::Error> {
        // Read settings of your own with `_setup.env.required("NAME")?`, build clients from `_setup.aws`.
        Ok(Self)
    }

    fn intent(payload: &{{ cookiecutter.__consumer_pascal }}Requested) -> Intent {
        let {{ cookiecutter.__consumer_pascal }}Requested::V1(p) = payload;
        Intent::new(&p.tenant, "{{ cookiecutter.consumer_name }}", &p.id)
    }

    fn validate(payload: &{{ cookiecutter.__consumer_pascal }}Requested) -> Result<(), RecordError> {
        let {{ cookiecutter.__consumer_pascal }}Requested::V1(p) = payload;
        if p.amount == 0 {
            return Err(RecordError::permanent(
                "invalid_{{ cookiecutter.__consumer_snake }}",
                "amount must be positive",
            ));
        }
        Ok(())
    }

    async fn apply(
        &self,
        payload: {{ cookiecutter.__consumer_pascal }}Requested,
        cx: &Context<'_>,
    ) -> Result<Applied, RecordError> {
        let {{ cookiecutter.__consumer_pascal }}Requested::V1(p) = payload;
        // The effect. Call your API with `Idempotency-Key: cx.downstream_key()` and the correlation id; return
        // `RecordError::transient` for what a retry can fix (5xx, 429, timeouts) and `permanent` for what it cannot.
        tracing::info!(id = %p.id, amount = p.amount, downstream_key = %cx.downstream_key(), "{{ cookiecutter.consumer_name }} applied");
        Ok(Applied { id: p.id })
    }
}

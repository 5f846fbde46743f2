use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// Counts the HTTP requests a client really sends (retries included), by operation name. Install it with the service
/// config builder's `.interceptor(counter.clone())`.
#[derive(Debug, Clone, Default)]
pub struct RequestCounter(Arc<Mutex<Vec<String>>>);

impl RequestCounter {
    /// The operation names sent since the last call, in order.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "RequestCounter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let name = cfg
            .load::<Metadata>()
            .map(|m| m.name().to_owned())
            .unwrap_or_else(|| "?".into());
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(name);
        Ok(())
    }
}

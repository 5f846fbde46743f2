//! Process-wide state: the global subscriber, the function name `init_with` remembers, and the cold-start flag.
//! One test, so nothing else in this binary touches them and the order is fixed.

use std::io;
use std::sync::{Arc, Mutex};

use sqsafe_telemetry::{Error, LogConfig, LogFormat, invocation_span, layer_with_writer};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("capture lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Capture {
    type Writer = Capture;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[test]
fn init_once_then_invocations_carry_function_name_and_cold_start_once() {
    let config = LogConfig {
        level: "info".to_owned(),
        format: LogFormat::Json,
        function_name: Some("charge-payment".to_owned()),
        ..Default::default()
    };
    sqsafe_telemetry::init_with(config.clone()).expect("the first init installs the subscriber");
    let again = sqsafe_telemetry::init_with(config.clone()).expect_err("a second init is refused");
    assert!(matches!(again, Error::AlreadyInitialised), "{again:?}");
    assert!(again.is_already_initialised());

    let out = Capture::default();
    let subscriber = tracing_subscriber::registry().with(layer_with_writer(&config, out.clone()));
    tracing::subscriber::with_default(subscriber, || {
        for request_id in ["r-1", "r-2"] {
            let mut ctx = lambda_runtime::Context::default();
            ctx.request_id = request_id.to_owned();
            let _entered = invocation_span(&ctx).entered();
            tracing::info!("handled");
        }
    });

    let text = String::from_utf8(out.0.lock().expect("capture lock").clone()).expect("UTF-8");
    // The invocation's keys are at the top level of each line.
    let spans: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect();
    assert_eq!(spans.len(), 2, "{text}");
    assert_eq!(spans[0]["request_id"], "r-1");
    assert_eq!(spans[0]["cold_start"], true);
    assert_eq!(spans[1]["request_id"], "r-2");
    assert_eq!(spans[1]["cold_start"], false);
    for span in &spans {
        assert_eq!(span["function_name"], "charge-payment");
    }
}

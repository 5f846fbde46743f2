//! The functions behind an HTTP API in `sqsafe local up`: each in its own local Lambda environment (or under
//! `cargo lambda watch` with `--watch`), served on a loopback port by [`Gateway`].

use std::path::Path;
use std::time::Duration;

use super::watch_mode::{self, Run};
use crate::gateway::{CALLER_HEADER, Gateway, LOCAL_CALLER};
use crate::lambda::{FunctionInstance, FunctionSpec, INIT_TIMEOUT};
use crate::stack::{LocalStack, TemplateSpec};
use crate::watch::{WatchFunction, WatchInvoker, WatchSpec};

/// What a function, consumer or API, needs to reach moto: its endpoint, test credentials, a region.
pub(super) fn aws_env(endpoint: &str) -> Vec<(String, String)> {
    [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

enum Served {
    Emulated(Gateway<FunctionInstance>),
    Watched(Gateway<WatchInvoker>, WatchFunction),
}

impl Served {
    fn url(&self) -> String {
        match self {
            Served::Emulated(gateway) => gateway.url(),
            Served::Watched(gateway, _) => gateway.url(),
        }
    }
}

/// The APIs served: each function's binary, its first route, how it is served.
pub(super) struct Apis(Vec<(String, String, Served)>);

impl Apis {
    /// Starts every API function of `spec`, its environment from `stack` and `aws` (the endpoint and credentials
    /// the consumers get), its logs in `log_dir`; prints where each listens.
    pub(super) async fn start(
        spec: &TemplateSpec,
        stack: &LocalStack,
        aws: &[(String, String)],
        run: &Run<'_>,
        log_dir: &Path,
    ) -> Result<Self, String> {
        let mut apis = Self(Vec::new());
        for api in spec.apis.values() {
            let mut env = stack.function_env(&api.binary);
            env.extend(aws.iter().cloned());
            let served = match run {
                Run::Built(bin_dir) => {
                    Self::emulated(&api.binary, &api.routes, env, bin_dir, log_dir).await
                }
                Run::Watch(shared) => Self::watched(&api.binary, &api.routes, env, shared).await,
            };
            let served = match served {
                Ok(served) => served,
                Err(e) => {
                    apis.shutdown().await;
                    return Err(e);
                }
            };
            let url = served.url();
            println!(
                "{:<16} API   {url}  (routes: {})",
                api.binary,
                api.routes.join(", ")
            );
            let first = api.routes.first().cloned().unwrap_or_default();
            apis.0.push((api.binary.clone(), first, served));
        }
        if !apis.0.is_empty() {
            println!(
                "{:<16} each request is {LOCAL_CALLER}'s (no SigV4 here), or the caller named in {CALLER_HEADER}",
                ""
            );
        }
        Ok(apis)
    }

    async fn emulated(
        binary: &str,
        routes: &[String],
        env: Vec<(String, String)>,
        bin_dir: &Path,
        log_dir: &Path,
    ) -> Result<Served, String> {
        let path = bin_dir.join(binary);
        if !path.exists() {
            return Err(format!(
                "{} is missing: cargo build -p {binary}",
                path.display()
            ));
        }
        let function = FunctionSpec {
            name: binary.to_owned(),
            binary: path,
            env,
            timeout: Duration::from_secs(30),
            log_dir: log_dir.to_path_buf(),
            init_timeout: INIT_TIMEOUT,
        };
        let instance = FunctionInstance::start(function, 0)
            .await
            .map_err(|e| format!("{binary}: {e}"))?;
        Ok(Served::Emulated(
            Gateway::start(binary, routes, instance).await?,
        ))
    }

    async fn watched(
        binary: &str,
        routes: &[String],
        env: Vec<(String, String)>,
        shared: &watch_mode::Shared<'_>,
    ) -> Result<Served, String> {
        let log = shared.log_dir.join(format!("{binary}.watch.log"));
        let spec = WatchSpec::new(binary, shared.workspace, &log).with_env(env);
        let function = WatchFunction::start(spec)
            .await
            .map_err(|e| e.to_string())?;
        let invoker = function
            .invoker(shared.stop.clone())
            .with_saves(shared.saves.latest());
        let gateway = match Gateway::start(binary, routes, invoker).await {
            Ok(gateway) => gateway,
            Err(e) => {
                function.shutdown().await;
                return Err(e);
            }
        };
        // What watch does with it (builds, reloads, exits), told as for a consumer.
        tokio::spawn(watch_mode::report(
            function.status(),
            shared.saves.latest(),
            binary.to_owned(),
            log,
            shared.stop.clone(),
            shared.gone.clone(),
        ));
        Ok(Served::Watched(gateway, function))
    }

    /// The hint for the first API: a request to its first route, to send twice from another terminal.
    pub(super) fn hint(&self) -> Option<String> {
        let (name, route, served) = self.0.first()?;
        let url = served.url();
        let (method, path) = route.split_once(' ').unwrap_or(("POST", "/"));
        let method = if method == "ANY" { "POST" } else { method };
        // A path parameter needs a value: `...` says so.
        let path: Vec<&str> = path
            .split('/')
            .map(|s| if s.starts_with('{') { "..." } else { s })
            .collect();
        Some(format!(
            "curl -si -X {method} {url}{} -H 'Idempotency-Key: k-1' -H 'content-type: application/json' -d '{{...}}'   # {name}: twice, and the second is replayed",
            path.join("/")
        ))
    }

    /// Stops each API and its function; prints what each did.
    pub(super) async fn shutdown(self) {
        for (name, _, served) in self.0 {
            match served {
                Served::Emulated(gateway) => {
                    let Some(instance) = gateway.shutdown().await else {
                        println!("{name}: a request still held its function at the end");
                        continue;
                    };
                    let stats = instance.stats();
                    instance.shutdown().await;
                    println!(
                        "{name}: {} requests answered; cold starts {}, crashes {}, timeouts {}",
                        stats.invocations, stats.cold_starts, stats.crashes, stats.timeouts
                    );
                }
                Served::Watched(gateway, function) => {
                    drop(gateway.shutdown().await);
                    let status = function.status().borrow().clone();
                    let ended = function.shutdown().await;
                    println!(
                        "{name}: under watch, starts {}, builds {}; {ended}",
                        status.starts, status.builds
                    );
                }
            }
        }
    }
}

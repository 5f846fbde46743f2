//! The functions themselves: function-crates, runtime, architecture, build-method, log-group, emf-log-level.

use std::collections::BTreeMap;

use serde_norway::Value;

use super::template::{as_list, get, has, is_empty, is_str, mentions, refs, show};
use super::{Checker, Consumer};

/// The levels at which Lambda keeps EMF lines (they carry no level, and are filed as INFO).
const EMF_LOG_LEVELS: [&str; 3] = ["TRACE", "DEBUG", "INFO"];

impl Checker<'_> {
    /// function-crates: each binary under functions/ deployed by exactly one function, and nothing else deployed.
    pub(super) fn check_crates(
        &mut self,
        functions: &[String],
        crate_binaries: &BTreeMap<String, String>,
    ) {
        let mut deployed: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for f in functions {
            if let Some(binary) = self.t.binary(f).filter(|b| !b.is_empty()) {
                deployed.entry(binary).or_default().push(f.clone());
            }
        }
        for (binary, folder) in crate_binaries {
            match deployed.get(binary) {
                None => self.fail(
                    "function-crates",
                    folder,
                    format!("binary {binary:?} has no AWS::Serverless::Function (add one whose Metadata.BuildProperties.Binary is {binary:?})"),
                ),
                Some(fs) if fs.len() > 1 => self.fail(
                    "function-crates",
                    folder,
                    format!("binary {binary:?} is deployed by {} functions: {}; keep one", fs.len(), fs.join(", ")),
                ),
                Some(_) => {}
            }
        }
        for (binary, fs) in &deployed {
            if !crate_binaries.contains_key(binary) {
                self.fail(
                    "function-crates",
                    &fs[0],
                    format!("builds binary {binary:?}, which no crate under functions/ defines"),
                );
            }
        }
    }

    /// runtime, architecture, build-method, log-group and emf-log-level for one function.
    pub(super) fn check_function(&mut self, c: &Consumer) {
        let f = c.name();
        let p = Some(&c.props);
        let runtime = self.t.default_of(get(p, "Runtime"));
        if !is_str(runtime, "provided.al2023") {
            self.fail(
                "runtime",
                f,
                format!("Runtime is {}, not provided.al2023", show(runtime)),
            );
        }

        let archs: Vec<Option<&Value>> = as_list(get(p, "Architectures"))
            .into_iter()
            .map(|a| self.t.default_of(Some(a)))
            .collect();
        if !(archs.len() == 1 && is_str(archs[0], "arm64")) {
            let shown = if archs.is_empty() {
                "[x86_64 (the default)]".to_owned()
            } else {
                format!(
                    "[{}]",
                    archs
                        .iter()
                        .map(|a| show(*a))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            self.fail(
                "architecture",
                f,
                format!("Architectures resolve to {shown}, not [arm64]"),
            );
        }

        let meta = get(self.t.resource(f), "Metadata");
        if !is_str(get(meta, "BuildMethod"), "rust-cargolambda") {
            self.fail(
                "build-method",
                f,
                format!(
                    "Metadata.BuildMethod is {}, not rust-cargolambda",
                    show(get(meta, "BuildMethod"))
                ),
            );
        }
        if is_empty(get(get(meta, "BuildProperties"), "Binary")) {
            self.fail(
                "build-method",
                f,
                "Metadata.BuildProperties.Binary is missing (which binary of the workspace to build)",
            );
        }
        if !is_str(get(p, "Handler"), "bootstrap") {
            self.fail(
                "build-method",
                f,
                format!("Handler is {}, not bootstrap", show(get(p, "Handler"))),
            );
        }
        let zip = !has(p, "PackageType") || is_str(get(p, "PackageType"), "Zip");
        if !zip || is_empty(get(p, "CodeUri")) {
            self.fail(
                "build-method",
                f,
                "needs a zip package with CodeUri (the cargo workspace)",
            );
        }

        let logging = get(p, "LoggingConfig");
        if !is_str(get(logging, "LogFormat"), "JSON") {
            self.fail(
                "log-group",
                f,
                format!(
                    "LoggingConfig.LogFormat is {}, not JSON",
                    show(get(logging, "LogFormat"))
                ),
            );
        }
        self.check_log_level(c, logging);
        let mut groups: Vec<String> = refs(get(logging, "LogGroup"))
            .into_iter()
            .filter(|x| self.t.is_type(x, "AWS::Logs::LogGroup"))
            .collect();
        if groups.is_empty() {
            // The default group /aws/lambda/<function name>, created by the template so that it has a retention.
            groups = self
                .t
                .of_type("AWS::Logs::LogGroup")
                .into_iter()
                .filter(|g| {
                    let name = self.t.prop(g, "LogGroupName");
                    refs(name).contains(f) && name.is_some_and(|n| mentions(n, "/aws/lambda/"))
                })
                .collect();
        }
        if groups.is_empty() {
            self.fail(
                "log-group",
                f,
                "no log group of the template (LoggingConfig.LogGroup, or an AWS::Logs::LogGroup named /aws/lambda/${Function})",
            );
        }
        for g in groups {
            if self.t.prop(&g, "RetentionInDays").is_none() {
                self.fail(
                    "log-group",
                    &g,
                    format!("log group of {f} has no RetentionInDays (logs would be kept forever); set one"),
                );
            }
        }
    }

    /// emf-log-level: every level the function may log at keeps EMF lines.
    fn check_log_level(&mut self, c: &Consumer, logging: Option<&Value>) {
        let info = Value::from("INFO");
        let level = match logging
            .and_then(Value::as_mapping)
            .and_then(|m| m.get("ApplicationLogLevel"))
        {
            Some(level) => level,
            None => &info,
        };
        let allowed: Vec<String> = match self.t.parameter_of(Some(level)) {
            Some((_, param)) => {
                let values = as_list(get(Some(param), "AllowedValues"));
                if values.is_empty() {
                    vec!["(any value)".to_owned()]
                } else {
                    values.into_iter().map(|v| show(Some(v))).collect()
                }
            }
            None => vec![show(Some(level))],
        };
        let mut dropped: Vec<String> = allowed
            .into_iter()
            .filter(|v| !EMF_LOG_LEVELS.iter().any(|l| *v == format!("{l:?}")))
            .collect();
        dropped.sort();
        dropped.dedup();
        if !dropped.is_empty() {
            self.fail(
                "emf-log-level",
                c.name(),
                format!(
                    "ApplicationLogLevel can be {}: every EMF metric line would be dropped; allow only TRACE, DEBUG or INFO",
                    dropped.join(", ")
                ),
            );
        }
    }
}

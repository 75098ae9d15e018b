//! One tool call after routing, as a value through named steps: validate → compile →
//! judge (the policy on the final argv: a [`Judged`] call) → gates ([`gates`]) → the
//! run's gates, queue, run and result ([`run`]), for the generated tools and
//! `conda_execute`; `conda_cli_command` runs no process. The session-less retry of a
//! confirmed plan enters at the run ([`Server::resume`]).

use std::path::PathBuf;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, InputResponses};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::caller::Caller;
use super::judged::{Confirmation, Judged, Workdir};
use super::ready::Ready;
use super::refuse::{self, Refusal, invalid_arguments, invalid_params};
use super::result::META_WORKDIR;
use super::state::Server;
use super::{confirm, trail};
use crate::model::catalog::canonical_json;
use crate::tools::layout;
use crate::tools::policy::{self, Classification, Origin};
use crate::tools::schema::{Invalid, Keyword, Validator};
use crate::tools::toolset::{Compiler, EXECUTE_TOOL, Tool};
use crate::tools::{argv, completion};

mod bound;
mod envs_dirs;
mod gates;
mod new_targets;
mod run;

/// A call once validated and compiled: its final argv and how it is to run.
struct Compiled<'a> {
    /// The canonical tool name.
    tool: &'a str,
    argv: Vec<String>,
    origin: Origin,
    workdir: Workdir,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
}

impl Server {
    /// A generated tool (`conda_<command path>`), called by its served name.
    pub(super) async fn call_generated(
        &self,
        ready: &Ready,
        served: &str,
        tool: &Tool,
        arguments: &Value,
        caller: &Caller,
    ) -> Result<CallToolResult, Refusal> {
        // Validate.
        let (arguments, own) = split_reserved(arguments);
        self.reserved_validator(&own)
            .map_err(|e| invalid_arguments(&e))?;
        tool.validate(&arguments).map_err(|e| {
            let listed = ready.listed_schema(served);
            invalid_arguments(&refuse::suggest_property(
                e,
                listed.as_ref(),
                Some(&tool.layout),
            ))
        })?;
        // A call the full schema admits is validated against the schema the session was
        // shown; outside it, the policy's refusal (or the schema error, when the policy
        // would admit it) says what else needs which grant.
        if let Some(shown) = ready.restricted.get(&tool.name)
            && let Err(error) = shown.validate(&arguments)
        {
            return Err(self.outside_form(ready, (served, tool), shown, &arguments, error, caller));
        }
        // Compile.
        let input = arguments.as_object().expect("validated as an object");
        let argv = compile(tool, input).map_err(|e| invalid_arguments(&e))?;
        let timeout = self.timeout(own.get(layout::TIMEOUT))?;
        let requested = own.get(layout::WORKDIR).and_then(Value::as_str);
        // Judge, then the gates.
        let origin = Origin::Generated {
            opaque: tool.opaque,
        };
        let compiled = Compiled {
            tool: &tool.name,
            argv,
            origin,
            workdir: Workdir::Requested(requested.map(str::to_owned)),
            stdin: None,
            timeout,
        };
        let mut call = judge(ready, compiled, &caller.audit);
        self.pass_all(gates::GENERATED, ready, &mut call, caller)
            .await?;
        let used = call.cwd().map(|c| c.to_string_lossy().into_owned());
        let mut result = self.execute(ready, call, caller).await?;
        if let Some(used) = used {
            let meta = result.meta.get_or_insert_default();
            meta.0.insert(META_WORKDIR.into(), Value::String(used));
        }
        Ok(result)
    }

    /// Check ccm's own per-call properties (`ccm_cwd`, `ccm_timeout_seconds`).
    fn reserved_validator(&self, own: &Value) -> Result<(), Invalid> {
        let schema = json!({
            "type": "object",
            "properties": layout::reserved_properties(self.shared.config.timeout),
        });
        match Validator::new(&schema) {
            Ok(validator) => validator.validate(own),
            Err(_) => Err(Invalid::at("$", Keyword::Unrepresentable)),
        }
    }

    /// A call's timeout: the server's, or less when the call asks for less.
    fn timeout(&self, requested: Option<&Value>) -> Result<Duration, Refusal> {
        let limit = self.shared.config.timeout;
        match requested.and_then(Value::as_f64) {
            None => Ok(limit),
            Some(seconds) => Duration::try_from_secs_f64(seconds)
                .map(|t| t.min(limit))
                .map_err(|_| {
                    invalid_arguments(&Invalid::at("$.ccm_timeout_seconds", Keyword::Maximum))
                }),
        }
    }

    /// A restricted tool's call outside the form it was listed with (the full schema
    /// admits it): the policy's refusal of its argv, with what the form offers; the
    /// schema error when the policy would admit it.
    fn outside_form(
        &self,
        ready: &Ready,
        (served, tool): (&str, &Tool),
        shown: &crate::tools::listing::Shown,
        arguments: &Value,
        error: Invalid,
        caller: &Caller,
    ) -> Refusal {
        let schema_error = |error: Invalid| {
            let listed = ready.listed_schema(served);
            let error = refuse::suggest_property(error, listed.as_ref(), Some(&tool.layout));
            let mut refusal = invalid_arguments(&error);
            if let Refusal::Arguments(error) = &mut refusal {
                error.message = format!("{} {}", error.message, shown.sentence).into();
            }
            refusal
        };
        let Some(input) = arguments.as_object() else {
            return schema_error(error);
        };
        let Ok(argv) = compile(tool, input) else {
            return schema_error(error);
        };
        let root = ready.discovery.catalog.root.as_ref();
        let origin = Origin::Generated {
            opaque: tool.opaque,
        };
        let class = policy::classify(&ready.toolset.rules, root, &argv, origin);
        let missing = class.missing(super::ready::grants(&self.shared.config));
        if missing.is_empty() {
            return schema_error(error);
        }
        caller.audit.reached(&tool.name, &argv, root);
        let refusal = Classification::refusal(&missing);
        caller.audit.refused(&refusal);
        let mut text = format!("{refusal}. {}", shown.sentence);
        if let Some(why) = &shown.why {
            text.push(' ');
            text.push_str(why);
        }
        refuse::policy(refuse::Reason::Needs(missing), &text)
    }

    /// `conda_execute`: raw argv with its execution options.
    pub(super) async fn call_execute(
        &self,
        ready: &Ready,
        arguments: &Value,
        caller: &Caller,
    ) -> Result<CallToolResult, Refusal> {
        ready.toolset.validate_execute(arguments).map_err(|e| {
            let listed = ready.listed_schema(EXECUTE_TOOL);
            invalid_arguments(&refuse::suggest_property(e, listed.as_ref(), None))
        })?;
        let invalid_options = || Refusal::Arguments(invalid_params("Invalid execution options"));
        let argv = strings(arguments.get("argv"));
        let cwd = match arguments.get("cwd").and_then(Value::as_str) {
            None => None,
            Some(text) => {
                let path = if text.is_empty() {
                    PathBuf::from(".")
                } else {
                    PathBuf::from(text)
                };
                if !path.is_dir() {
                    return Err(invalid_options());
                }
                if !crate::host::sandbox::of_this_namespace(&path) {
                    let text = gates::FOREIGN_WORKDIR;
                    return Err(Refusal::Arguments(invalid_params(text)));
                }
                Some(path)
            }
        };
        let stdin = match arguments.get("stdin").and_then(Value::as_str) {
            None => None,
            Some(text) if text.len() > self.shared.config.stdin_limit => {
                return Err(invalid_options());
            }
            Some(text) => Some(text.as_bytes().to_vec()),
        };
        let timeout = match arguments.get("timeout_seconds").and_then(Value::as_f64) {
            None => self.shared.config.timeout,
            Some(seconds) => Duration::try_from_secs_f64(seconds)
                .map_err(|_| invalid_options())?
                .min(self.shared.config.timeout),
        };
        let compiled = Compiled {
            tool: EXECUTE_TOOL,
            argv,
            origin: Origin::Raw,
            workdir: Workdir::Resolved(cwd),
            stdin,
            timeout,
        };
        let mut call = judge(ready, compiled, &caller.audit);
        self.pass_all(gates::RAW, ready, &mut call, caller).await?;
        self.execute(ready, call, caller).await
    }

    /// The session-less retry of an input-required result: the parked plan (judged,
    /// passed its gates, confirmed) runs when the person accepted; nothing runs otherwise.
    pub(super) async fn resume(
        &self,
        ready: &Ready,
        reference: &str,
        responses: Option<&InputResponses>,
        caller: &Caller,
    ) -> Result<CallToolResult, Refusal> {
        let root = ready.discovery.catalog.root.as_ref();
        let call = confirm::resume(
            &self.shared.parked,
            reference,
            responses,
            &caller.audit,
            root,
        )?;
        self.execute(ready, call, caller).await
    }

    pub(super) async fn call_completion(
        &self,
        ready: &Ready,
        arguments: &Value,
        ct: CancellationToken,
    ) -> Result<CallToolResult, Refusal> {
        ready.toolset.validate_completion(arguments).map_err(|e| {
            let listed = ready.listed_schema(crate::tools::toolset::COMPLETION_TOOL);
            invalid_arguments(&refuse::suggest_property(e, listed.as_ref(), None))
        })?;
        let requested = strings(arguments.get("command_path"));
        let timeout = self.shared.config.timeout;
        let document = (self.shared.completion)
            .document(&self.shared.host.exec, ready, &self.capacity, &ct, timeout)
            .await?;
        let payload = completion::answer(&document, &requested).map_err(|e| match e {
            completion::QueryError::UnknownCommand => {
                Refusal::Arguments(invalid_params("Unknown conda command path"))
            }
            completion::QueryError::InvalidMetadata => Refusal::from(ErrorData::invalid_request(
                "Conda completion returned invalid metadata",
                None,
            )),
        })?;
        let text = canonical_json(&payload);
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(payload);
        Ok(result)
    }
}

/// The final argv of a generated tool's (validated) input.
fn compile(tool: &Tool, input: &Map<String, Value>) -> Result<Vec<String>, Invalid> {
    match tool.compiler {
        Compiler::Generic => argv::compile(&tool.layout, input),
        Compiler::Baked(baked) => (baked.compile)(input),
    }
}

/// Judge a compiled call: the policy's verdict on its final argv (the call reaches the
/// audit log here), and what progress needs to know of it.
fn judge(ready: &Ready, compiled: Compiled, audit: &trail::Record) -> Judged {
    let Compiled {
        tool,
        argv,
        origin,
        workdir,
        stdin,
        timeout,
    } = compiled;
    let root = ready.discovery.catalog.root.as_ref();
    let class = policy::classify(&ready.toolset.rules, root, &argv, origin);
    audit.reached(tool, &argv, root);
    Judged {
        tool: tool.to_owned(),
        fetch_records: policy::writes_fetch_records(root, &argv),
        argv,
        class,
        workdir,
        stdin,
        timeout,
        sandbox: None,
        targets: Vec::new(),
        envs_dirs: Vec::new(),
        confirmation: Confirmation::Pending,
    }
}

/// The input without ccm's own per-call properties, and those properties on their own.
fn split_reserved(arguments: &Value) -> (Value, Value) {
    let Some(map) = arguments.as_object() else {
        return (arguments.clone(), json!({}));
    };
    let (own, conda): (Map<String, Value>, Map<String, Value>) = map
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .partition(|(k, _)| layout::is_reserved(k));
    (Value::Object(conda), Value::Object(own))
}

/// The strings of a (validated) JSON array; empty when absent.
fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

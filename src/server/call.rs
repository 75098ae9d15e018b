//! One tool call after routing: validate → compile → policy (grants, path confinement)
//! → capacity → execute → result, for the generated tools, `conda_execute` and
//! `conda_cli_command`.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::audit;
use super::result::{META_WORKDIR, execution_result};
use super::roots::Caller;
use super::{Ready, Refusal, Server, internal, invalid_arguments, invalid_params, refuse};
use crate::host::exec;
use crate::host::sandbox;
use crate::model::catalog::canonical_json;
use crate::tools::layout;
use crate::tools::policy::{self, Classification, Origin};
use crate::tools::schema::{Invalid, Keyword, Validator};
use crate::tools::toolset::{Compiler, Tool};
use crate::tools::{argv, completion};

/// `conda_execute` with an argv whose command is not a selected tool (never echoes it).
pub const NOT_SELECTED: &str = "Operation names a command whose tool is not selected (see --tools)";

impl Server {
    /// A generated tool (`conda_<command path>`), called by its served name.
    pub(super) async fn call_generated(
        &self,
        ready: &Ready,
        served: &str,
        tool: &Tool,
        arguments: &Value,
        caller: &Caller,
        ct: CancellationToken,
    ) -> Result<CallToolResult, Refusal> {
        let name = tool.name.as_str();
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
            return Err(self.outside_form(ready, served, tool, shown, &arguments, error));
        }
        let input = arguments.as_object().expect("validated as an object");
        let argv = match tool.compiler {
            Compiler::Generic => argv::compile(&tool.layout, input),
            Compiler::Baked(baked) => (baked.compile)(input),
        }
        .map_err(|e| invalid_arguments(&e))?;
        let root = ready.discovery.catalog.root.as_ref();
        let mut class = policy::classify(
            &ready.toolset.rules,
            root,
            &argv,
            Origin::Generated {
                opaque: tool.opaque,
            },
        );
        if sandbox::forced_read_only(name) {
            class.read_only = true;
            class.requires_write = false;
            class.requires_exec = false;
        }
        audit::reached(name, &argv);
        self.enforce(&class)?;
        let cwd = self
            .workdir(
                ready,
                caller,
                own.get(layout::WORKDIR).and_then(Value::as_str),
            )
            .await?;
        self.confine(ready, &class, &argv, cwd.as_deref())?;
        self.scope(ready, &class, &argv, cwd.as_deref()).await?;
        let timeout = self.timeout(own.get(layout::TIMEOUT))?;
        let used = cwd.as_ref().map(|c| c.to_string_lossy().into_owned());
        let mut result = self
            .execute(ready, argv, cwd, None, timeout, class, caller, ct)
            .await?;
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

    /// The working directory of a generated tool's call. Without roots: the one asked
    /// for (relative to the server's), else the server's. With the client's roots: a
    /// relative one (or none) is in the first root, and it must lie inside one of them.
    ///
    /// Where the directory is confined (roots, `--allow-paths`), a missing directory gets
    /// the answer an outside one gets, so that the refusal tells nothing about what exists
    /// outside. A client that declared roots none of which is a local directory (or that
    /// did not answer) gets no working directory of the agent's choosing: fail closed.
    async fn workdir(
        &self,
        ready: &Ready,
        caller: &Caller,
        requested: Option<&str>,
    ) -> Result<Option<PathBuf>, Refusal> {
        let outside_roots = || Refusal::from(ErrorData::invalid_request(OUTSIDE_ROOTS, None));
        let roots = self.roots.get(caller).await;
        let Some(first) = roots.first() else {
            let Some(text) = requested else {
                return Ok(None);
            };
            if caller.roots_peer.is_some() {
                return Err(outside_roots());
            }
            let path = PathBuf::from(if text.is_empty() { "." } else { text });
            return if path.is_dir() {
                Ok(Some(path))
            } else if !ready.confinement.is_unrestricted() {
                Err(refuse::policy(
                    refuse::Reason::OutsideAllowedPaths,
                    OUTSIDE_ALLOWED,
                ))
            } else {
                Err(invalid_arguments(&Invalid::at(
                    "$.ccm_cwd",
                    Keyword::Directory,
                )))
            };
        };
        let path = first.join(requested.unwrap_or(""));
        match std::fs::canonicalize(&path) {
            Ok(canonical)
                if canonical.is_dir() && roots.iter().any(|root| canonical.starts_with(root)) =>
            {
                Ok(Some(canonical))
            }
            _ => Err(outside_roots()),
        }
    }

    fn enforce(&self, class: &Classification) -> Result<(), Refusal> {
        let missing = class.missing(super::ready::grants(&self.shared.config));
        if missing.is_empty() {
            Ok(())
        } else {
            let refusal = Classification::refusal(&missing);
            audit::refused(&refusal);
            Err(refuse::policy(refuse::Reason::Needs(missing), &refusal))
        }
    }

    /// A restricted tool's call outside the form it was listed with (the full schema
    /// admits it): the policy's refusal of its argv, with what the form offers; the
    /// schema error when the policy would admit it.
    fn outside_form(
        &self,
        ready: &Ready,
        served: &str,
        tool: &Tool,
        shown: &crate::tools::listing::Shown,
        arguments: &Value,
        error: Invalid,
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
        let argv = match tool.compiler {
            Compiler::Generic => argv::compile(&tool.layout, input),
            Compiler::Baked(baked) => (baked.compile)(input),
        };
        let Ok(argv) = argv else {
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
        audit::reached(&tool.name, &argv);
        let refusal = Classification::refusal(&missing);
        audit::refused(&refusal);
        let mut text = format!("{refusal}. {}", shown.sentence);
        if let Some(why) = &shown.why {
            text.push(' ');
            text.push_str(why);
        }
        refuse::policy(refuse::Reason::Needs(missing), &text)
    }

    pub(super) async fn call_execute(
        &self,
        ready: &Ready,
        arguments: &Value,
        caller: &Caller,
        ct: CancellationToken,
    ) -> Result<CallToolResult, Refusal> {
        ready.toolset.validate_execute(arguments).map_err(|e| {
            let listed = ready.listed_schema(crate::tools::toolset::EXECUTE_TOOL);
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
        let root = ready.discovery.catalog.root.as_ref();
        audit::reached(crate::tools::toolset::EXECUTE_TOOL, &argv);
        // `--tools`: raw argv reaches only the commands of selected tools.
        if !ready
            .shaping
            .admits_path(policy::command_path(root, &argv).as_deref())
        {
            audit::refused(NOT_SELECTED);
            return Err(refuse::policy(refuse::Reason::NotSelected, NOT_SELECTED));
        }
        let class = policy::classify(&ready.toolset.rules, root, &argv, Origin::Raw);
        self.enforce(&class)?;
        self.confine(ready, &class, &argv, cwd.as_deref())?;
        self.scope(ready, &class, &argv, cwd.as_deref()).await?;
        self.execute(ready, argv, cwd, stdin, timeout, class, caller, ct)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn execute(
        &self,
        ready: &Ready,
        argv: Vec<String>,
        cwd: Option<PathBuf>,
        stdin: Option<Vec<u8>>,
        timeout: Duration,
        class: Classification,
        caller: &Caller,
        ct: CancellationToken,
    ) -> Result<CallToolResult, Refusal> {
        let sandbox = match self.shared.sandbox.get() {
            Some(sandbox)
                if sandbox::applies(&class, self.shared.config.allow_write)
                    && *sandbox.state() == sandbox::State::Active =>
            {
                // Fail closed: an active sandbox that cannot be planned runs nothing.
                let plan = sandbox.plan(ready.discovery.prefix.as_deref());
                if plan.is_none() {
                    tracing::error!("the sandbox could not be prepared for a read-only call");
                    return Err(internal().into());
                }
                plan
            }
            _ => None,
        };
        let spec = exec::Spec {
            program: self.shared.config.conda_exe.clone(),
            args: argv.into_iter().map(Into::into).collect(),
            cwd,
            stdin,
            timeout,
            stdout_limit: self.shared.config.output_limit,
            stderr_limit: self.shared.config.output_limit,
            env_remove: Vec::new(),
            limits: exec::Limits::current(),
            sandbox,
        };
        // Refused before anything spawns (and before it takes a place in the queue).
        exec::check_size(&spec).map_err(size_refusal)?;
        // Asked before the slot is taken: waiting for the person holds no slot.
        let confirm = self.confirm(ready, &spec, &class, &ct);
        let binding =
            super::progress::waiting_for(caller, &ct, "Waiting for the user to confirm", confirm)
                .await?;
        // A confirmed plan runs bound to what was shown (`host::bind`).
        let run = match &binding {
            Some(binding) => {
                let run = binding.run_spec(&spec);
                exec::check_size(&run).map_err(size_refusal)?;
                run
            }
            None => spec.clone(),
        };
        let _admitted = self.admitted(ready, &class, &spec, caller, &ct).await?;
        let outcome = match super::progress::run(caller, ready, &run, &spec.args, &ct).await {
            Ok(outcome) => outcome,
            Err(error) => {
                let why = exec::plain_os_error(&error);
                tracing::error!(%why, "conda could not be started");
                return Err(ErrorData::internal_error("conda could not be started", None).into());
            }
        };
        audit::outcome(&outcome);
        if outcome.cancelled {
            return Err(Refusal::Cancelled);
        }
        if let Some(changed) = binding.as_ref().and_then(|b| b.changed(outcome.exit_code)) {
            return Err(Refusal::Busy(super::confirm::plan_changed(&changed)));
        }
        let succeeded = outcome.exit_code == Some(0) && !outcome.timed_out;
        if succeeded && !class.read_only && !self.restart_required() {
            self.check_restart(ready).await;
        }
        // A program's output (calls that need --allow-exec) stays in stdout as printed:
        // parsing it may lose what JSON does not promise to keep (duplicate keys, digits
        // beyond f64). conda's own documents (json.dumps) lose nothing and move.
        let restart = self.restart_required();
        Ok(execution_result(&outcome, restart, !class.requires_exec))
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
        let document = self.completion_document(ready, &ct).await?;
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

/// The refusal of a working directory that is not an existing directory inside the
/// client's roots (never the path).
pub const OUTSIDE_ROOTS: &str =
    "The working directory is not an existing directory inside the client's roots";
/// The refusal of a path outside `--allow-paths` (never the path).
pub const OUTSIDE_ALLOWED: &str =
    "Operation names a path outside the allowed directories (see --allow-paths)";

/// The refusal of a command over the argv + environment cap.
fn size_refusal(why: exec::TooLarge) -> Refusal {
    let message = match why {
        exec::TooLarge::Argument => format!(
            "Invalid arguments: one argument is longer than {} bytes",
            exec::MAX_ARG_BYTES
        ),
        exec::TooLarge::Total(_) => format!(
            "Invalid arguments: the command line and environment would exceed {} bytes",
            exec::MAX_COMMAND_BYTES
        ),
    };
    Refusal::Arguments(ErrorData::invalid_params(
        message,
        Some(json!({"limit": exec::MAX_COMMAND_BYTES})),
    ))
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

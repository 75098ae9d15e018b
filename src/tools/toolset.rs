//! The tools a server offers, built once from the catalog: names, schemas, annotations,
//! `_meta`, validators (compiled on a tool's first call), and each tool's compiler.
//!
//! Order of the list: `conda_execute` (only with `--allow-exec`), `conda_cli_command`
//! (only when the target has conda-completion), then one tool per representable terminal
//! command in catalog order (depth-first, built-ins before plugins). The descriptors are
//! plain MCP JSON; the server serializes them once. Pure; no I/O.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::model::catalog::{Catalog, Command, Diagnostic, Plugin, normalize_distribution};
use crate::tools::execution_result;
use crate::tools::layout::{self, Layout};
use crate::tools::policy::{self, Classification};
use crate::tools::schema::{self, Invalid, LazyValidator, MAX_ITEMS, MAX_STRING};

pub const EXECUTE_TOOL: &str = "conda_execute";
pub const COMPLETION_TOOL: &str = "conda_cli_command";
pub const WRITE_SENTENCE: &str = " May modify environments or files.";
pub const EXEC_SENTENCE: &str = " Runs an arbitrary subprocess command.";
pub const META_PATH: &str = "conda-cli-mcp/path";
pub const META_ALIASES: &str = "conda-cli-mcp/aliases";
pub const META_HIDDEN: &str = "conda-cli-mcp/hidden_arguments";

/// A compiler: validated input → argv.
pub type CompileFn = fn(&Map<String, Value>) -> Result<Vec<String>, schema::Invalid>;

/// One command of a baked snapshot (the registry of baked snapshots fills these).
#[derive(Debug)]
pub struct BakedCommand {
    /// Canonical command path.
    pub path: &'static [&'static str],
    /// Digest of everything in the command's branch that shapes its schema and argv.
    pub signature: &'static str,
    /// The typed argv compiler (deserializes into the generated input struct).
    pub compile: CompileFn,
    /// The input schema the snapshot yields (for review and the tests; schemas are built
    /// from the live catalog at runtime, so only the `test-snapshots` feature bakes it).
    #[cfg(feature = "test-snapshots")]
    pub schema: &'static str,
}

/// How a tool turns input into argv.
#[derive(Clone, Copy, Debug)]
pub enum Compiler {
    /// The generic interpreter over the live catalog ([`crate::tools::argv`]).
    Generic,
    /// A typed compiler baked from a snapshot whose signature matches the live command.
    Baked(&'static BakedCommand),
}

impl Compiler {
    pub fn label(&self) -> &'static str {
        match self {
            Compiler::Generic => "generic",
            Compiler::Baked(_) => "baked",
        }
    }
}

/// One generated tool.
#[derive(Clone, Debug)]
pub struct Tool {
    pub name: String,
    pub path: Vec<String>,
    pub layout: Layout,
    /// Compiled from the layout's schema on the first call ([`Tool::validate`]).
    validator: LazyValidator,
    /// Tool-level classification (annotations, description sentences).
    pub class: Classification,
    /// Takes uninspected input: needs `--allow-exec`.
    pub opaque: bool,
    pub compiler: Compiler,
    /// The MCP descriptor (name, title, description, schemas, annotations, `_meta`).
    pub descriptor: Value,
}

/// What the tool list depends on besides the catalog.
#[derive(Clone, Debug)]
pub struct ToolsetSettings {
    pub allow_exec: bool,
    /// The operator's `--classify TOOL=read|write|exec`, by canonical tool name.
    pub classify: Vec<(String, policy::Access)>,
    /// The server's `--timeout` (the maximum of `timeout_seconds`).
    pub timeout: Duration,
    /// Read-only calls run in the read-only sandbox (it is active): the policy admits a
    /// few more read-only forms ([`policy::Rules::set_sandboxed`]).
    pub sandboxed: bool,
}

/// Every tool of one server.
#[derive(Clone, Debug)]
pub struct Toolset {
    pub generated: Vec<Tool>,
    /// The policy's rules for this target (plugin tables, the operator's classifications).
    pub rules: policy::Rules,
    /// `--classify` names that match no generated tool.
    pub unknown_classified: Vec<String>,
    by_name: HashMap<String, usize>,
    /// Commands that could not become tools although discovery represented them.
    pub diagnostics: Vec<Diagnostic>,
    pub execute: Option<Value>,
    pub completion: Option<Value>,
    /// The server's `--timeout`: the bound in `conda_execute`'s schema.
    timeout: Duration,
    execute_validator: LazyValidator,
    completion_validator: LazyValidator,
}

impl Tool {
    /// Check a call's input against the tool's full input schema (the listed one may
    /// hide parameters), compiling the validator on the first call.
    pub fn validate(&self, input: &Value) -> Result<(), Invalid> {
        self.validator.validate(input, || {
            // The layout made a schema when the tool was built, so it makes one now.
            schema::input_schema(&self.layout).map_or(Value::Null, Value::Object)
        })
    }
}

/// Whether the target has conda-completion (any spelling of its name).
pub fn has_completion(plugins: &[Plugin]) -> bool {
    plugins
        .iter()
        .any(|p| normalize_distribution(&p.distribution) == "conda-completion")
}

impl Toolset {
    /// Build with the generic interpreter for every tool.
    pub fn build(catalog: &Catalog, plugins: &[Plugin], settings: &ToolsetSettings) -> Toolset {
        Self::build_with(catalog, plugins, settings, |_, _| Compiler::Generic)
    }

    /// Build, choosing each tool's compiler with `pick(path, branch)`.
    pub fn build_with(
        catalog: &Catalog,
        plugins: &[Plugin],
        settings: &ToolsetSettings,
        pick: impl Fn(&[String], &[&Command]) -> Compiler,
    ) -> Toolset {
        let mut diagnostics = Vec::new();
        let candidates = candidates(catalog, &mut diagnostics);
        let paths: Vec<Vec<String>> = candidates.iter().map(|c| c.0.clone()).collect();
        let names = schema::tool_names(&paths);
        let mut rules = policy::Rules::new(plugins);
        rules.set_sandboxed(settings.sandboxed);
        let mut unknown_classified = Vec::new();
        for (tool, access) in &settings.classify {
            match names.iter().position(|n| n == tool) {
                Some(i) => rules.classify_as(paths[i].clone(), *access),
                None => unknown_classified.push(tool.clone()),
            }
        }
        let output = Arc::new(execution_result::output_schema());
        let generated: Vec<Tool> = candidates
            .into_iter()
            .zip(names)
            .map(|((path, branch, layout, mut input), name)| {
                layout::add_reserved(&mut input, settings.timeout);
                let opaque = Layout::branch_is_opaque(&branch);
                let class = policy::describe(&rules, &path, opaque);
                let compiler = pick(&path, &branch);
                let descriptor = descriptor(&name, &path, &branch, &layout, input, &output, &class);
                Tool {
                    name,
                    path,
                    layout,
                    validator: LazyValidator::default(),
                    class,
                    opaque,
                    compiler,
                    descriptor,
                }
            })
            .collect();
        let by_name = generated
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let execute_schema = execute_input_schema(settings.timeout);
        let completion_schema = completion_input_schema();
        Toolset {
            rules,
            unknown_classified,
            execute: settings
                .allow_exec
                .then(|| execute_descriptor(execute_schema, &output)),
            completion: has_completion(plugins).then(|| completion_descriptor(completion_schema)),
            timeout: settings.timeout,
            execute_validator: LazyValidator::default(),
            completion_validator: LazyValidator::default(),
            generated,
            by_name,
            diagnostics,
        }
    }

    /// Check `conda_execute`'s input.
    pub fn validate_execute(&self, input: &Value) -> Result<(), Invalid> {
        self.execute_validator
            .validate(input, || execute_input_schema(self.timeout))
    }

    /// Check `conda_cli_command`'s input.
    pub fn validate_completion(&self, input: &Value) -> Result<(), Invalid> {
        self.completion_validator
            .validate(input, completion_input_schema)
    }

    /// The server's `--timeout` (the bound of every `timeout_seconds`).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&i| &self.generated[i])
    }

    /// The listed descriptors, in tools/list order.
    pub fn descriptors(&self) -> Vec<Value> {
        self.execute
            .iter()
            .chain(self.completion.iter())
            .cloned()
            .chain(self.generated.iter().map(|t| t.descriptor.clone()))
            .collect()
    }

    /// The listed descriptors, moved out (the generated tools keep `null` descriptors):
    /// for a server that converts them once and keeps only its own copy.
    pub fn take_descriptors(&mut self) -> Vec<Value> {
        self.execute
            .iter()
            .chain(self.completion.iter())
            .cloned()
            .chain(
                self.generated
                    .iter_mut()
                    .map(|t| std::mem::take(&mut t.descriptor)),
            )
            .collect()
    }

    /// Generated tool names in list order.
    pub fn generated_names(&self) -> Vec<String> {
        self.generated.iter().map(|t| t.name.clone()).collect()
    }
}

/// One representable command: its path, branch, layout and input schema.
type Candidate<'a> = (Vec<String>, Vec<&'a Command>, Layout, Map<String, Value>);

/// The commands that become tools; a diagnostic for each that has no schema.
fn candidates<'a>(catalog: &'a Catalog, diagnostics: &mut Vec<Diagnostic>) -> Vec<Candidate<'a>> {
    let mut candidates: Vec<Candidate> = Vec::new();
    for (branch, path) in catalog.commands() {
        if !is_tool(catalog, &branch, &path) {
            continue;
        }
        let layout = Layout::new(&branch);
        match schema::input_schema(&layout) {
            Ok(input) => candidates.push((path, branch, layout, input)),
            Err(why) => diagnostics.push(Diagnostic {
                path,
                reason: why.to_string(),
                action_type: None,
                blocking: true,
            }),
        }
    }
    candidates
}

/// A node becomes a tool iff it is terminal, nothing on its branch is raw-only, and no
/// blocking diagnostic covers its path.
fn is_tool(catalog: &Catalog, branch: &[&Command], path: &[String]) -> bool {
    let Some(last) = branch.last() else {
        return false;
    };
    !path.is_empty()
        && last.terminal
        && branch.iter().all(|c| !c.raw_only)
        && branch.iter().skip(1).all(|c| c.name.is_some())
        && !catalog
            .diagnostics
            .iter()
            .any(|d| d.blocking && path.starts_with(&d.path))
}

fn annotations(class: &Classification) -> Value {
    json!({
        "readOnlyHint": class.read_only,
        "destructiveHint": !class.read_only,
        "idempotentHint": class.read_only,
        "openWorldHint": class.open_world,
    })
}

fn descriptor(
    name: &str,
    path: &[String],
    branch: &[&Command],
    layout: &Layout,
    input: Map<String, Value>,
    output: &Map<String, Value>,
    class: &Classification,
) -> Value {
    let terminal = branch.last().copied();
    let help = terminal
        .and_then(|c| c.summary.clone().or_else(|| c.help.clone()))
        .filter(|s| !s.trim().is_empty());
    let mut description = schema::command_description(help.as_deref(), path, layout);
    if class.requires_write {
        description.push_str(WRITE_SENTENCE);
    }
    if class.requires_exec {
        description.push_str(EXEC_SENTENCE);
    }
    let aliases: Vec<Value> = branch
        .iter()
        .skip(1)
        .filter(|c| !c.aliases.is_empty())
        .map(|c| json!({"command": c.name, "aliases": c.aliases}))
        .collect();
    let mut meta = json!({META_PATH: path, META_ALIASES: aliases});
    let hidden: Vec<&str> = layout
        .properties
        .iter()
        .filter(|p| p.argument.hidden)
        .map(|p| p.id.as_str())
        .collect();
    if !hidden.is_empty() {
        meta[META_HIDDEN] = json!(hidden);
    }
    json!({
        "name": name,
        "title": format!("conda {}", path.join(" ")),
        "description": description,
        "inputSchema": input,
        "outputSchema": output,
        "annotations": annotations(class),
        "_meta": meta,
    })
}

/// The `conda_execute` descriptor.
fn execute_descriptor(input: Value, output: &Map<String, Value>) -> Value {
    json!({
        "name": EXECUTE_TOOL,
        "description": "Run raw conda argv with arbitrary arguments. Mutations also require --allow-write.",
        "inputSchema": input,
        "outputSchema": output,
        "annotations": annotations(&Classification::STRICT),
    })
}

/// The `conda_cli_command` descriptor.
fn completion_descriptor(input: Value) -> Value {
    json!({
        "name": COMPLETION_TOOL,
        "title": "Conda completion command metadata",
        "description": "Read one command from conda-completion's generated metadata.",
        "inputSchema": input,
        "outputSchema": completion_output_schema(),
        "annotations": {
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false,
        },
    })
}

fn execute_input_schema(timeout: Duration) -> Value {
    json!({
        "type": "object",
        "properties": {
            "argv": {
                "type": "array",
                "items": {"type": "string", "maxLength": MAX_STRING},
                "maxItems": MAX_ITEMS,
                "description": "Arguments passed directly to conda.",
            },
            "cwd": {
                "type": "string",
                "maxLength": 4096,
                "description": "Working directory for the conda process.",
            },
            "stdin": {
                "type": "string",
                "description": "Bounded non-interactive input for the conda process.",
            },
            "timeout_seconds": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": timeout.as_secs_f64(),
                "description": "Per-command timeout no greater than the server limit.",
            },
        },
        "required": ["argv"],
        "additionalProperties": false,
    })
}

fn completion_input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command_path": {
                "type": "array",
                "items": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 256,
                    "pattern": "^(?!-)(?!.*\\s).+$",
                },
                "maxItems": 32,
                "description": "Canonical conda command path without the executable.",
                "default": [],
            },
        },
        "additionalProperties": false,
    })
}

fn completion_output_schema() -> Value {
    let path = json!({"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]});
    json!({
        "type": "object",
        "properties": {
            "availability": {
                "type": "string",
                "enum": ["available", "not_installed", "not_generated", "unavailable"],
            },
            "requested_command_path": path,
            "resolved_command_path": path,
            "alias_target": path,
            "command": {"type": ["object", "null"]},
            "manifest": {"type": ["object", "null"]},
            "hint": {"type": ["string", "null"]},
        },
        "required": [
            "availability", "requested_command_path", "resolved_command_path", "alias_target",
            "command", "manifest", "hint"
        ],
        "additionalProperties": false,
    })
}

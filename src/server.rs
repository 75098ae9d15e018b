//! The MCP server: the rmcp handler and the routing of its requests.
//!
//! The tools are obtained in the background from the start ([`startup`]) and every
//! request that needs them waits for them — `initialize` too, whose [`instructions`] name
//! the listed tools (at once from a baked snapshot). The tool list and the
//! capabilities document ([`capabilities`]) are built once. A tool call goes validate →
//! compile → policy → queue → execute → result ([`call`], [`result`]); requests that run
//! no process (lists, reads, ping, refused calls) never wait behind a running execution.
//! Processes are started only through [`crate::host::exec`] and [`crate::host::discovery`].
//!
//! The served list applies the operator's [`Surface`](crate::tools::surface::Surface)
//! (hidden tools, overrides) once; calls are routed by served name and validated against
//! the full schema. Capacity
//! ([`capacity`]): one execution at a time server-wide behind a bounded queue
//! (`no_capacity`), and at most `--max-session-calls` executions running or waiting per
//! session (`session_busy`); a session is one [`Server`] value made by
//! [`Server::for_session`] (one stdio connection, one HTTP MCP session). Restart
//! detection: [`restart`]; the `conda_cli_command` cache: [`completion_cache`].

use std::borrow::Cow;
use std::sync::Arc;

use futures::FutureExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, DiscoverResult, Implementation,
    InitializeRequestParams, InitializeResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ResourceContents, ResourcesCapability, ServerCapabilities, ServerConfig,
    Tool as McpTool, ToolsCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::watch;

mod call;
mod caller;
pub(crate) mod capabilities;
mod capacity;
mod compare;
mod completion_cache;
mod confirm;
mod instructions;
mod judged;
mod parking;
mod progress;
mod ready;
mod refuse;
mod restart;
pub(crate) mod result;
mod roots;
pub mod startup;
mod state;
mod trail;

pub use capabilities::CAPABILITIES_URI;
pub use ready::{BuildError, Ready, Served, served, settings};
pub use result::{NOT_CONFIRMED, execution_result};
pub use state::Server;

use refuse::{Refusal, internal, invalid_params};

use capacity::Capacity;
use completion_cache::Completion;
use parking::Parking;
use state::{Shared, session_id};

use crate::config::Config;
use crate::host::Host;
use crate::host::exec::{self, Executor};
use crate::tools::toolset::{COMPLETION_TOOL, EXECUTE_TOOL};

pub const SERVER_NAME: &str = "conda-cli-mcp";
/// The protocol revisions offered.
pub const SUPPORTED_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2024_11_05,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

impl Server {
    /// Start obtaining the tools in the background and return the server at once (as the
    /// first session's handler); the server owns `host` from now on.
    pub fn start(config: Config, host: Host) -> Server {
        let (sender, ready) = watch::channel(None);
        let executor = Executor::new(config.max_queue);
        let max_session_calls = config.max_session_calls;
        let start = Arc::new(startup::State::default());
        startup::spawn(Arc::clone(&start), config.clone(), host.clone(), sender);
        let shared = Arc::new(Shared {
            executor: Arc::clone(&executor),
            ready,
            start,
            completion: Completion::default(),
            parked: Parking::default(),
            planning: Arc::new(tokio::sync::Semaphore::new(1)),
            host,
            config,
        });
        Server {
            shared,
            capacity: Arc::new(Capacity::new(&executor, max_session_calls)),
            roots: Arc::default(),
            session_id: session_id(),
        }
    }

    /// A handler for a new session: same server, its own per-session execution count.
    pub fn for_session(&self) -> Server {
        Server {
            shared: Arc::clone(&self.shared),
            capacity: Arc::new(Capacity::new(
                &self.shared.executor,
                self.shared.config.max_session_calls,
            )),
            roots: Arc::default(),
            session_id: session_id(),
        }
    }

    /// The longest frame (stdio line, HTTP body) the server reads: room for the largest
    /// command that may run ([`exec::MAX_COMMAND_BYTES`]) and the largest stdin, each byte
    /// JSON-escaped at worst (`\u00XX`, 6 bytes), plus the envelope.
    pub fn max_frame(&self) -> usize {
        6 * (exec::MAX_COMMAND_BYTES + self.shared.config.stdin_limit) + 64 * 1024
    }

    /// Cancel every execution and refuse new ones (the transport is stopping); `main`
    /// waits for their sweeps ([`Server::executions`]).
    pub fn begin_shutdown(&self) {
        self.shared.host.exec.begin_shutdown();
    }

    /// The server's executions (`main` shuts them down once the transport stops).
    pub fn executions(&self) -> exec::Executions {
        self.shared.host.exec.clone()
    }

    /// A value that must never reach the audit log (a token made at startup).
    pub fn withhold(&self, secret: &str) {
        self.shared.host.audit.withhold(secret);
    }

    /// Resolves when the server cannot serve its tools (the reason, one line); the
    /// transport then stops and `ccm` exits with status 2.
    pub async fn failed(&self) -> startup::Fatal {
        let mut receiver = self.shared.start.fatal.subscribe();
        loop {
            if let Some(reason) = receiver.borrow_and_update().as_ref() {
                return reason.clone();
            }
            if receiver.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Wait for the tools.
    pub async fn ready(&self) -> Arc<Ready> {
        let mut receiver = self.shared.ready.clone();
        loop {
            if let Some(ready) = receiver.borrow_and_update().clone() {
                return ready;
            }
            if receiver.changed().await.is_err() {
                if self.shared.start.fatal.borrow().is_some() {
                    // The list cannot be served: the transport is stopping the server.
                    return std::future::pending().await;
                }
                // The startup task died (it cannot, short of a panic): report an empty
                // catalog rather than hanging every request.
                return Arc::new(ready::unavailable(&self.shared.config));
            }
        }
    }

    /// The tools a client is listed: every listed tool, or with `--confirm-writes` only the
    /// read-only ones for a client that cannot be asked.
    fn listed_for(&self, ready: &Ready, can_ask: bool) -> Vec<McpTool> {
        if self.shared.config.confirm_writes && !can_ask {
            confirm::read_only(&ready.tools)
        } else {
            ready.tools.clone()
        }
    }

    /// The instructions for the session behind `context`: naming the tools it is listed.
    async fn instructions_for(&self, context: &RequestContext<RoleServer>) -> String {
        let ready = self.ready().await;
        let listed = self.listed_for(&ready, caller::Asker::of(context).can_ask());
        instructions::text(&self.shared.config, &listed)
    }

    /// Route a tool call by served name.
    async fn call(
        &self,
        request: CallToolRequestParams,
        caller: &caller::Caller,
    ) -> Result<CallToolResult, Refusal> {
        let ready = self.ready().await;
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let can_ask = caller.asker.can_ask();
        let unknown = || refuse::unknown_tool(&request.name, &self.listed_for(&ready, can_ask));
        let Some(name) = ready.routes.get(request.name.as_ref()) else {
            return Err(unknown());
        };
        let name = name.as_str();
        if let Some(reference) = request.request_state.as_deref() {
            let responses = request.input_responses.as_ref();
            return self.resume(&ready, reference, responses, caller).await;
        }
        if name == EXECUTE_TOOL && ready.toolset.execute.is_some() {
            return self.call_execute(&ready, &arguments, caller).await;
        }
        if name == COMPLETION_TOOL && ready.toolset.completion.is_some() {
            return self
                .call_completion(&ready, &arguments, caller.ct.clone())
                .await;
        }
        let Some(tool) = ready.toolset.get(name) else {
            return Err(unknown());
        };
        self.call_generated(&ready, &request.name, tool, &arguments, caller)
            .await
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        // Advertised as false, not left out: the tool list and the resource never change.
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(false);
        let mut resources = ResourcesCapability::default();
        resources.list_changed = Some(false);
        resources.subscribe = Some(false);
        let capabilities = ServerCapabilities::builder()
            .enable_tools_with(tools)
            .enable_resources_with(resources)
            .build();
        // Before the tools are obtained the instructions name none (`initialize` and
        // `server/discover` wait for them and name the listed ones).
        let ready = self.shared.ready.borrow().clone();
        let listed = ready.as_ref().map_or(&[][..], |r| r.tools.as_slice());
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions::text(&self.shared.config, listed))
    }

    /// As rmcp's, once the tools are obtained: the instructions name the listed tools.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let instructions = self.instructions_for(&context).await;
        let mut result = self.negotiate_initialize(&request)?;
        result.instructions = Some(instructions);
        Ok(result)
    }

    /// As rmcp's (session-less clients), with the instructions of [`Self::initialize`].
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let instructions = self.instructions_for(&context).await;
        let versions = self.supported_protocol_versions().into_owned();
        let mut result = DiscoverResult::from_server_info(versions, self.get_info());
        result.instructions = Some(instructions);
        Ok(result)
    }

    /// Every revision rmcp knows except 2025-03-26, the only one with JSON-RPC batches
    /// (which `ccm` does not implement; a batch is answered element by element with
    /// `-32600`). A client asking for it is offered the newest revision with a handshake.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SUPPORTED_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let ready = self.ready().await;
        if self.shared.config.confirm_writes && !caller::Asker::of(&context).can_ask() {
            // Every write and exec call of this client is refused: list none.
            return Ok(ListToolsResult::with_all_items(confirm::read_only(
                &ready.tools,
            )));
        }
        Ok(ListToolsResult::with_all_items(ready.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<McpTool> {
        let ready = self.shared.ready.borrow().clone()?;
        ready
            .tools
            .iter()
            .chain(&ready.unlisted)
            .find(|t| t.name == name)
            .cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let trail = trail::Trail::begin(
            &self.shared.host.audit,
            &self.session_id,
            context.client_info(),
            &request.name,
        );
        let record = trail.as_ref().map(trail::Trail::record).unwrap_or_default();
        let caller = caller::Caller::of(&context, record);
        let outcome = std::panic::AssertUnwindSafe(self.call(request, &caller))
            .catch_unwind()
            .await;
        if let Some(trail) = &trail {
            trail.finish();
        }
        match outcome {
            Ok(Ok(result)) | Ok(Err(Refusal::Busy(result))) => Ok(result.into()),
            Ok(Err(Refusal::Arguments(error))) if caller.arguments_as_results() => {
                Ok(result::invalid_arguments(error).into())
            }
            Ok(Err(Refusal::Policy { reason, error })) if caller.arguments_as_results() => {
                Ok(refuse::as_result(&reason, error).into())
            }
            Ok(Err(
                Refusal::Protocol(error)
                | Refusal::Arguments(error)
                | Refusal::Policy { error, .. },
            )) => Err(error),
            // The client cancelled: rmcp drops whatever is returned for this request.
            Ok(Err(Refusal::InputRequired(question))) => Ok(question.into()),
            Ok(Err(Refusal::Cancelled)) => {
                Err(ErrorData::internal_error("Request cancelled", None))
            }
            Err(_) => {
                tracing::error!("a tool call panicked");
                Err(internal())
            }
        }
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        self.roots.forget().await;
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let ready = self.ready().await;
        let text = self.shared.capabilities_text(&ready);
        Ok(ListResourcesResult::with_all_items(vec![
            capabilities::resource(text.len()),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != CAPABILITIES_URI {
            return Err(invalid_params("Unknown resource"));
        }
        let ready = self.ready().await;
        let text = self.shared.capabilities_text(&ready);
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, CAPABILITIES_URI).with_mime_type("application/json"),
        ])
        .into())
    }
}

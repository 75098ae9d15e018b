//! Who called, and what one tool call's request carries past routing ([`Caller`]): the
//! revision it runs under, the peer to ask for roots, its progress target, whom its
//! confirmation is asked of ([`Asker`]), its audit record and its cancellation. Every
//! step of a call reads these from the value it is given; nothing rides in a task-local.

use rmcp::RoleServer;
use rmcp::model::ProtocolVersion;
use rmcp::service::{ElicitationMode, Peer, RequestContext};
use tokio_util::sync::CancellationToken;

use super::progress::Progress;
use super::trail;

/// Who called: what a tool call needs to know about its request and session.
pub(super) struct Caller {
    /// The revision the request runs under (`None`: not negotiated, taken as the oldest).
    pub revision: Option<ProtocolVersion>,
    /// The peer to ask for roots, when the client declared them and can be asked.
    pub roots_peer: Option<Peer<RoleServer>>,
    /// Where the call's progress goes, when the request carries a `progressToken`.
    pub progress: Option<Progress>,
    /// Whom the call's confirmation is asked of (`--confirm-writes`).
    pub asker: Asker,
    /// The call's audit record (filled as the call goes; inert without an audit log).
    pub audit: trail::Record,
    /// The request's cancellation.
    pub ct: CancellationToken,
}

impl Caller {
    pub(super) fn of(context: &RequestContext<RoleServer>, audit: trail::Record) -> Caller {
        let revision = context.protocol_version();
        // Roots belong to a handshake session: asked when its `initialize` declared them,
        // whatever a request's own `_meta` says (a session-less request has no session,
        // hence no initialize, and nobody to ask).
        let declared = context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        Caller {
            revision,
            roots_peer: declared.then(|| context.peer.clone()),
            progress: Progress::of(context),
            asker: Asker::of(context),
            audit,
            ct: context.ct.clone(),
        }
    }

    /// Whether invalid arguments are a tool result the model reads (2025-11-25 on), not
    /// a JSON-RPC error.
    pub(super) fn arguments_as_results(&self) -> bool {
        self.revision
            .as_ref()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2025_11_25.as_str())
    }
}

/// Whom a call's confirmation is asked of.
#[derive(Clone)]
pub(super) struct Asker {
    /// The peer, when the client declared elicitation in form mode in a handshake.
    pub(super) peer: Option<Peer<RoleServer>>,
    /// A session-less (2026-07-28) request whose client declared elicitation in form
    /// mode: asked with an input-required result.
    pub(super) input_required: bool,
}

impl Asker {
    pub(super) fn of(context: &RequestContext<RoleServer>) -> Asker {
        // A handshake session (stdio, or an HTTP session) is asked only as its
        // `initialize` declared, whatever a request's own `_meta` claims: the revision
        // that decides is the one the peer runs under (negotiated, or for a session-less
        // request its own), never one a request in a handshake session claims.
        let revision = |v: &ProtocolVersion| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str();
        let session_less = context
            .peer
            .peer_info()
            .is_none_or(|info| revision(&info.protocol_version))
            && context.protocol_version().is_some_and(|v| revision(&v));
        let form = !session_less
            && context
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form);
        // In the request's own capabilities (the revision puts them in `_meta`): no form
        // and no url means form.
        let declared = context
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        Asker {
            peer: (form && !session_less).then(|| context.peer.clone()),
            input_required: session_less && declared,
        }
    }

    /// Whether this client can be asked (the listing shows it writes only then).
    pub(super) fn can_ask(&self) -> bool {
        self.peer.is_some() || self.input_required
    }
}

//! The integration test binary: one module per area (see ARCHITECTURE.md, "Testing").

/// Building the fixture conda, finding a real conda, driving the binary.
mod support;

/// The generic argv interpreter (pure).
mod argv;
/// `--audit-log`: lines, redaction, refusals.
mod audit;
/// `--confirm-writes`: the confirmed plan is what runs; the question shows what decides it.
mod binding;
/// A confirmed run checks the hash of every package it fetches (attack 17 A17-4).
mod binding_hashes;
/// The write bound's walls: metadata, devices, hard links, sockets, signals, TMPDIR (real conda).
mod bound_walls;
/// Caches by trust domain: what a sandboxed call writes, no later write trusts (real conda).
mod cache_trust;
/// No caller code in any child: modules planted in working directories never run.
mod caller_code;
/// Capacity limits: the execution queue and the per-session limit.
mod capacity;
/// The command line: flags, exit codes, messages.
mod cli;
/// Real MCP clients (the official Python SDK).
mod clients;
/// Baked typed compilers against the generic interpreter (pure).
mod codegen;
/// The compact tool surface: group encoding, descriptions, names for every client.
mod compact;
/// `--confirm-writes`: the Python SDK answers the elicitation.
mod confirm;
/// Sandboxed children reach no host device node and no unix socket outside their call.
mod devices;
/// Live discovery against the fixture conda (and a real conda with CCM_TEST_CONDA).
mod discovery;
/// Agent fit: descriptions that earn their bytes, one form per option (pure).
mod fit;
/// A working directory on a mount of another mount namespace is refused (attack 16).
mod foreign_mounts;
/// House rules: the layer order of `src/`, files and functions that fit one sitting.
mod house;
/// `ccm --http`: authentication, methods and paths, sessions, the Python SDK over HTTP.
mod http;
/// Valid inputs generated from tool layouts.
mod inputs;
/// The test kit: helpers several test files share (/proc, `--classify` lists, confirmation).
mod kit;
/// The `conda mcp` launcher plugin.
mod launcher;
/// Limits on every child, no surviving descendants, secrets withheld from children.
mod limits;
/// The policy-shaped listing (pure).
mod listing;
/// A minimal MCP client over stdio, for the end-to-end tests.
mod mcp;
/// The policy proven by conda's own code: argv oracle (real conda).
mod oracle;
/// The safety policy on final argv (pure).
mod policy;
/// Sandboxed children hold no capabilities and run with no_new_privs.
mod privileges;
/// Long operations: progress notifications, heartbeats, fetch records.
mod progress;
/// Hostile JSON-RPC frames over stdio: every frame answered.
mod protocol;
/// The embedded Python programs tested directly (`tests/python/`, Python's unittest).
mod python;
/// Concurrent sandboxed calls cannot reach into each other, the servers or the zygotes.
mod reach;
/// The README's client configurations, started as pasted.
mod readme;
/// Repeated keys in a request: refused before anything runs, stdio and HTTP, every revision.
mod repeated_keys;
/// Restart detection and its cost.
mod restart;
/// What a tool call answers under each protocol revision (invalid arguments, results).
mod revisions;
/// The argv round trip through the target's own parser.
mod roundtrip;
/// The read-only sandbox: children of read-only calls cannot write.
mod sandbox;
/// `--write-envs`: writes only into the environments the operator names (hostile spellings).
mod scope;
/// The MCP server end to end over stdio.
mod server;
/// Both result shapes complete alone: text content and structured content.
mod shapes;
/// Every tool through the server on a copy of a real conda: no writes outside the caches.
mod side_effects;
/// A call naming a FIFO, socket, device or /proc entry is refused before anything runs.
mod special_files;
/// Instant start from a baked snapshot, confirmed by live discovery.
mod startup;
/// The operator's tool surface: hidden tools, overrides, collisions.
mod surface;
/// A confirmed write runs and deletes only what the target's packages put there.
mod target_code;
/// Tool names, schemas, annotations and validation (pure), with golden tool lists.
mod tools;
/// Toolsets (`--tools`), folded commands and tools left out of the listing.
mod toolsets;
/// Hard links lead outside: named, or where conda writes in place in a target.
mod trust_links;
/// Paths judged where they lead: bare words, symlink swaps while a person decides, the audit log.
mod trust_paths;
/// `--warm`: calls forked from the zygote match cold calls byte for byte.
mod warm;
/// Warm reads by default: the zygote inside the sandbox, hostile preloads, no leaks.
mod warm_contained;
/// `--warm` under attack: limits, cgroup, secrets, the zygote's reach, stale conda, exit.
mod warm_hostile;
/// Where a generated tool's call runs: `ccm_cwd`, `ccm_timeout_seconds`, the reserved prefix.
mod workdir;
/// The write bound: a write nobody confirms writes only where its gates admitted, for the run's whole life.
mod write_bound;

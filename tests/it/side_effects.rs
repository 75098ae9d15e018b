//! The side-effect test: every tool the server lists, called through the real `ccm`
//! binary on a private copy of a real conda, under the default policy and under
//! `--allow-exec` alone, must leave the file system as it found it — apart from the private
//! TMPDIR: what conda writes to its repodata and notices caches on a read lands in the
//! sandbox's overlays and is discarded with the call.
//!
//! Each server runs with a private HOME (XDG dirs inside, a condarc naming a local
//! channel), TMPDIR and working directory, on its own copy of the target prefix (`cp -a`,
//! scripts re-pointed), so that a failure cannot harm `$CCM_TEST_CONDA` (whose prefix is
//! hashed too). Before the first and after the last call the test hashes the copied prefix
//! (rc file, `envs/`, `pkgs/`, `conda-meta/`, site-packages), HOME, the working directory
//! and the files handed to conda: every file's content, mode and link target, every
//! directory's entries; around each call a cheaper metadata snapshot names the call that
//! wrote. Each tool gets a sensible input (the existing environment `t1`, files and a
//! package that exist, a flag that makes the call admissible) and schema-drawn inputs
//! (`inputs`). The `--allow-exec` phase repeats the calls the default policy refused (the
//! others are the same argv under the same sandbox) and adds raw argv; refused calls write
//! nothing by construction and are counted apart. Dry runs of install and update that name
//! their target, one of them a directory holding trash that conda empties before a solve,
//! run under the default policy where the sandbox is active (and must change nothing).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ccm::model::catalog::{ActionKind, Nargs, ValueType};
use ccm::tools::toolset::Tool;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::inputs;
use crate::inputs::{seed, seeded_runner};
use crate::mcp::Session;
use crate::oracle::Throwaway;
use crate::support;

/// Schema-drawn inputs per tool, besides the sensible one.
const DRAWN: usize = 3;
/// Servers run side by side (each executes one conda at a time).
const SERVERS: usize = 2;

/// Every file, directory and link below `root`: path → digest of what it is.
fn tree(root: &Path, out: &mut BTreeMap<PathBuf, String>) {
    let Ok(meta) = std::fs::symlink_metadata(root) else {
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode();
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(root).unwrap_or_default();
        out.insert(
            root.to_owned(),
            format!("link {mode:o} {}", target.display()),
        );
    } else if meta.is_dir() {
        let mut names: Vec<String> = std::fs::read_dir(root)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        out.insert(
            root.to_owned(),
            format!("dir {mode:o} [{}]", names.join("/")),
        );
        for name in names {
            tree(&root.join(name), out);
        }
    } else if meta.is_file() {
        let digest = std::fs::read(root)
            .map(|b| format!("{:x}", Sha256::digest(&b)))
            .unwrap_or_else(|e| format!("unreadable {e}"));
        out.insert(root.to_owned(), format!("file {mode:o} {digest}"));
    } else {
        out.insert(root.to_owned(), format!("special {mode:o}"));
    }
}

fn snapshot(roots: &[PathBuf]) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    for root in roots {
        tree(root, &mut out);
    }
    out
}

/// The cheap snapshot taken around every call: metadata only.
fn quick(root: &Path, out: &mut BTreeMap<PathBuf, String>) {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(root) else {
        return;
    };
    let kind = if meta.file_type().is_symlink() {
        "link"
    } else if meta.is_dir() {
        "dir"
    } else {
        "file"
    };
    let mut line = format!(
        "{kind} {:o} {} {}.{}",
        meta.mode(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    );
    if meta.file_type().is_symlink() {
        line.push_str(&format!(
            " -> {}",
            std::fs::read_link(root).unwrap_or_default().display()
        ));
    }
    out.insert(root.to_owned(), line);
    if meta.is_dir() {
        for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
            quick(&entry.path(), out);
        }
    }
}

fn quick_snapshot(roots: &[PathBuf]) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    for root in roots {
        quick(root, &mut out);
    }
    out
}

/// Changes between two snapshots outside the allowed directories. Directories present
/// in both count only by their mode (what they gained or lost is listed entry by entry),
/// and the directories on the way to an allowed one may appear.
fn changes(
    before: &BTreeMap<PathBuf, String>,
    after: &BTreeMap<PathBuf, String>,
    allowed: &[PathBuf],
) -> Vec<String> {
    let inside = |p: &Path| allowed.iter().any(|a| p.starts_with(a));
    let ancestor = |p: &Path| allowed.iter().any(|a| a.starts_with(p));
    let dir_mode = |v: &String| -> Option<String> {
        let mut words = v.split(' ');
        match words.next() {
            Some("dir") => words.next().map(str::to_owned),
            _ => None,
        }
    };
    let mut out = Vec::new();
    let mut keys: Vec<&PathBuf> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    for path in keys {
        if inside(path) {
            continue;
        }
        let (b, a) = (before.get(path), after.get(path));
        if b == a {
            continue;
        }
        if let (Some(b), Some(a)) = (b, a)
            && dir_mode(b).is_some()
            && dir_mode(b) == dir_mode(a)
        {
            continue;
        }
        if b.is_none() && a.is_some_and(|a| dir_mode(a).is_some()) && ancestor(path) {
            continue;
        }
        out.push(match (b, a) {
            (None, Some(a)) => format!("created {} ({a})", path.display()),
            (Some(_), None) => format!("removed {}", path.display()),
            (Some(b), Some(a)) => format!("changed {} ({b} -> {a})", path.display()),
            (None, None) => unreachable!(),
        });
    }
    out
}

/// A value a caller who knows the machine would send for this property.
fn sensible_scalar(id: &str, argument: &ccm::model::catalog::Argument, world: &World) -> Value {
    if let Some(choice) = argument.choices.first() {
        return match argument.value_type {
            ValueType::String => json!(choice),
            _ => choice.parse::<f64>().map(|n| json!(n)).unwrap_or(json!(1)),
        };
    }
    match argument.value_type {
        ValueType::Integer | ValueType::Number => return json!(1),
        ValueType::String => {}
    }
    let id = id.to_lowercase();
    let text = if id.contains("prefix") {
        world.prefix.join("envs/t1").display().to_string()
    } else if id.contains("executable") || id.contains("call") {
        "true".into()
    } else if id.contains("shell") {
        "bash".into()
    } else if id.contains("package") || id.contains("spec") || id.contains("pkg") {
        "demo".into()
    } else if id.contains("name") && !id.contains("command") {
        "t1".into()
    } else if id.contains("file") || id.contains("path") {
        world
            .throwaway
            .path("files/environment.yml")
            .display()
            .to_string()
    } else if id.contains("key") || id.contains("get") || id.contains("show") {
        "channels".into()
    } else if id.contains("package") || id.contains("spec") || id.contains("pkg") {
        "demo".into()
    } else {
        "x".into()
    };
    json!(text)
}

fn sensible_value(property: &ccm::tools::layout::Property, world: &World) -> Value {
    let a = &property.argument;
    let one = || sensible_scalar(&property.id, a, world);
    match a.action {
        ActionKind::StoreTrue
        | ActionKind::StoreConst
        | ActionKind::StoreFalse
        | ActionKind::Boolean => json!(true),
        ActionKind::Count | ActionKind::AppendConst => json!(1),
        ActionKind::ExtendConst => json!([one()]),
        ActionKind::Append | ActionKind::Extend => match a.nargs {
            Nargs::Exactly(n) => json!([vec![one(); n as usize]]),
            _ => json!([one()]),
        },
        ActionKind::Store => match a.nargs {
            Nargs::Exactly(n) => json!(vec![one(); n as usize]),
            Nargs::ZeroOrMore | Nargs::OneOrMore | Nargs::Remainder | Nargs::Parser => {
                json!([one()])
            }
            _ => one(),
        },
    }
}

/// Whether the default policy admits this input of this tool.
fn admitted(tool: &Tool, input: &Map<String, Value>, exec: bool) -> bool {
    let found = support::real_discovery();
    let rules = ccm::tools::policy::Rules::new(&found.plugins);
    let grants = ccm::tools::policy::Grants {
        exec,
        ..Default::default()
    };
    ccm::tools::argv::compile(&tool.layout, input).is_ok_and(|argv| {
        let origin = ccm::tools::policy::Origin::Generated {
            opaque: tool.opaque,
        };
        let v = ccm::tools::policy::classify(&rules, found.catalog.root.as_ref(), &argv, origin);
        v.missing(grants).is_empty()
    })
}

/// Inputs a caller who knows the machine would send, best first (up to three): the
/// required properties, the environment `t1` when the tool selects one, one or two flags
/// that make the call admissible (`--dry-run`, `--untracked`, `--dry-run --all`, …).
/// Only admitted ones when there are any.
pub(crate) fn sensible_inputs(tool: &Tool, world: &World, exec: bool) -> Vec<Map<String, Value>> {
    let mut base = Map::new();
    for property in &tool.layout.properties {
        if ccm::tools::schema::is_required(&property.argument) {
            base.insert(property.id.clone(), sensible_value(property, world));
        }
    }
    let valid = |i: &Map<String, Value>| tool.validate(&Value::Object(i.clone())).is_ok();
    // The existing environment, a new one (for commands that make one), none; each with
    // and without a package of the local channel.
    let mut starts = Vec::new();
    let name = tool
        .layout
        .properties
        .iter()
        .find(|p| p.id == "name" && !p.argument.is_positional());
    if let Some(p) = name {
        for env in ["t1", "fresh"] {
            let mut i = base.clone();
            i.insert(p.id.clone(), json!(env));
            starts.push(i);
        }
    }
    starts.push(base);
    if let Some(p) = tool
        .layout
        .properties
        .iter()
        .find(|p| p.argument.is_positional() && p.id.contains("package"))
    {
        let with: Vec<Map<String, Value>> = starts
            .iter()
            .map(|s| {
                let mut i = s.clone();
                i.insert(p.id.clone(), sensible_value(p, world));
                i
            })
            .collect();
        starts = with.into_iter().chain(starts).collect();
    }
    let flags: Vec<&String> = tool
        .layout
        .properties
        .iter()
        .filter(|p| !p.argument.hidden && matches!(p.argument.action, ActionKind::StoreTrue))
        .filter(|p| p.id != "no_plugins")
        .map(|p| &p.id)
        .collect();
    let mut candidates = starts.clone();
    for one in &flags {
        for start in &starts {
            let mut i = start.clone();
            i.insert((*one).clone(), json!(true));
            candidates.push(i);
        }
    }
    for one in flags.iter().filter(|f| f.as_str() == "dry_run") {
        for other in flags.iter().filter(|f| f != &one) {
            for start in &starts {
                let mut i = start.clone();
                i.insert((*one).clone(), json!(true));
                i.insert((*other).clone(), json!(true));
                candidates.push(i);
            }
        }
    }
    let valid: Vec<Map<String, Value>> = candidates.into_iter().filter(|i| valid(i)).collect();
    let admitted: Vec<Map<String, Value>> = valid
        .iter()
        .filter(|i| admitted(tool, i, exec))
        .take(3)
        .cloned()
        .collect();
    if admitted.is_empty() {
        valid.into_iter().take(1).collect()
    } else {
        admitted
    }
}

pub(crate) struct World {
    pub(crate) throwaway: Throwaway,
    conda: PathBuf,
    prefix: PathBuf,
}

impl World {
    /// The real conda itself (nothing copied) with a private HOME, package cache and
    /// local channel: for tests that write nothing (`crate::caller_code`).
    pub(crate) fn in_place(label: &str) -> World {
        World {
            throwaway: Throwaway::new(label),
            conda: support::real_conda(),
            prefix: support::real_discovery()
                .prefix
                .clone()
                .expect("the target's prefix"),
        }
    }

    fn new(k: usize) -> World {
        let original = support::real_discovery()
            .prefix
            .clone()
            .expect("the target's prefix");
        let throwaway = Throwaway::new(&format!("side-effects-{k}"));
        let prefix = throwaway.path("conda");
        let conda = crate::kit::prefix::copy(&original, &prefix);
        // A package cache, as any conda that has installed something has.
        std::fs::create_dir_all(prefix.join("pkgs/cache")).unwrap();
        std::fs::write(prefix.join("pkgs/urls.txt"), "").unwrap();
        std::fs::write(prefix.join("pkgs/urls"), "").unwrap();
        // The notices cache the server makes at startup when it is missing.
        std::fs::create_dir_all(throwaway.path("home/.cache/conda/notices")).unwrap();
        // `t1` and the root have the local channel's package installed (its record; it has
        // no files).
        let record = json!({"name": "demo", "version": "1.0", "build": "0",
            "build_number": 0, "channel": format!("file://{}", throwaway.path("channel").display()),
            "subdir": "noarch", "noarch": "generic", "depends": [], "files": [],
            "paths_data": {"paths": [], "paths_version": 1},
            "md5": "00000000000000000000000000000000", "size": 1,
            "fn": "demo-1.0-0.tar.bz2"});
        for env in ["envs/t1", "."] {
            std::fs::write(
                prefix.join(env).join("conda-meta/demo-1.0-0.json"),
                record.to_string(),
            )
            .unwrap();
        }
        World {
            throwaway,
            conda,
            prefix,
        }
    }

    /// The server's environment: the throwaway's, but conda's own rc and package caches.
    fn env(&self) -> Vec<(String, String)> {
        self.throwaway
            .env()
            .into_iter()
            .filter(|(k, _)| k != "CONDA_PKGS_DIRS" && k != "CONDARC")
            .collect()
    }

    /// What is hashed: the copied prefix, HOME (XDG dirs inside), the working directory,
    /// the files and channel handed to conda.
    fn roots(&self) -> Vec<PathBuf> {
        vec![
            self.prefix.clone(),
            self.throwaway.path("home"),
            self.throwaway.path("cwd"),
            self.throwaway.path("files"),
            self.throwaway.path("channel"),
            self.throwaway.path("pkgs"),
        ]
    }

    /// Where a sandboxed call may leave anything: TMPDIR (unused: children get the call's
    /// tmpfs). The repodata caches of both package caches and the notices cache are
    /// written on reads, in the call's overlays only.
    fn allowed(&self) -> Vec<PathBuf> {
        vec![self.throwaway.path("tmp")]
    }

    fn session(&self, flags: &[&str]) -> Session {
        let mut command = support::ccm();
        command
            .arg("--conda-exe")
            .arg(&self.conda)
            .args(["--timeout", "60"])
            .args(flags)
            .env_clear()
            .envs(self.env())
            .current_dir(self.throwaway.path("cwd"));
        let mut session = Session::spawn(command);
        session.initialize = session.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "ccm-side-effects", "version": "1"}}),
        );
        session.notify("notifications/initialized", json!({}));
        session
    }
}

#[derive(Clone, Copy, Default, Debug)]
struct Counts {
    calls: usize,
    refused: usize,
    ran: usize,
    exit_zero: usize,
    failed: usize,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.calls += o.calls;
        self.refused += o.refused;
        self.ran += o.ran;
        self.exit_zero += o.exit_zero;
        self.failed += o.failed;
    }
}

/// One tool call's fate.
enum Fate {
    Refused,
    Ran { exit_zero: bool, stderr: String },
}

fn call(session: &mut Session, tool: &str, input: &Map<String, Value>) -> Fate {
    let shown = Value::Object(input.clone());
    let id = session.send("tools/call", json!({"name": tool, "arguments": shown}));
    let response = session
        .wait(id, Duration::from_secs(120))
        .unwrap_or_else(|| panic!("{tool}: no answer to {shown}"));
    if let Some(error) = response.get("error") {
        assert_eq!(
            error["code"], -32600,
            "{tool}: a schema-valid input {shown} was refused: {error}"
        );
        return Fate::Refused;
    }
    let result = &response["result"];
    let stderr = result["structuredContent"]["stderr"].as_str().unwrap_or("");
    let tail: String = stderr
        .chars()
        .rev()
        .take(300)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Fate::Ran {
        exit_zero: result["structuredContent"]["exit_code"] == 0 && result["isError"] != true,
        stderr: tail,
    }
}

/// A tool's inputs; `true` marks the sensible ones, of which only the first that exits 0
/// is kept running.
type Plan = Vec<(String, Vec<(Map<String, Value>, bool)>)>;

/// Each tool's inputs: the sensible one first, then schema-drawn ones.
fn plan(worlds: &[World], seed: u64) -> Plan {
    let found = support::real_discovery();
    let tools = support::toolset(&found.catalog, &found.plugins, true);
    let mut runner = seeded_runner(seed);
    let mut out = Vec::new();
    for tool in &tools.generated {
        let mut list: Vec<(Map<String, Value>, bool)> = sensible_inputs(tool, &worlds[0], false)
            .into_iter()
            .map(|i| (i, true))
            .collect();
        let mut drawn = Vec::new();
        for _ in 0..50 {
            if drawn.len() >= DRAWN {
                break;
            }
            // Inputs the compiler cannot express are refused before the policy: not a case.
            drawn.extend(
                inputs::valid_inputs(tool, &mut runner, DRAWN - drawn.len())
                    .into_iter()
                    .filter(|i| ccm::tools::argv::compile(&tool.layout, i).is_ok()),
            );
        }
        assert!(drawn.len() >= DRAWN, "{}: too few valid inputs", tool.name);
        list.extend(drawn.into_iter().map(|i| (i, false)));
        out.push((tool.name.clone(), list));
    }
    out
}

/// Raw argv for `conda_execute` under `--allow-exec` alone: a reader, and writers the
/// policy must refuse or the sandbox must stop.
fn raw_plan() -> Plan {
    let raw = |argv: &[&str]| {
        let mut m = Map::new();
        m.insert("argv".into(), json!(argv));
        (m, false)
    };
    vec![(
        "conda_execute".into(),
        vec![
            raw(&["info", "--json"]),
            raw(&["config"]),
            raw(&["config", "--set", "channel_priority", "strict"]),
        ],
    )]
}

/// Dry runs that name their target, which the default policy admits where the read-only
/// sandbox is active: into the environment `t1`, and into a directory that is not an
/// environment and holds trash (`files/notenv`), which conda empties before it solves —
/// the sandbox must keep it (the final hash comparison proves it kept).
fn trash_plan(world: &World) -> Plan {
    let notenv = world.throwaway.path("files/notenv").display().to_string();
    let input = |v: Value| (v.as_object().unwrap().clone(), false);
    vec![
        (
            "conda_install".into(),
            vec![
                input(json!({"prefix": notenv, "packages": ["demo"], "dry_run": true})),
                input(json!({"name": "t1", "packages": ["demo"], "dry_run": true})),
            ],
        ),
        (
            "conda_update".into(),
            vec![input(
                json!({"prefix": notenv, "packages": ["demo"], "dry_run": true, "json": true}),
            )],
        ),
    ]
}

/// What happened on one server: counts, which tools exited 0, attributed writes.
#[derive(Default)]
struct Outcome {
    /// The server's read-only sandbox was active.
    sandboxed: bool,
    counts: Counts,
    zero: BTreeMap<String, bool>,
    writes: Vec<String>,
    refused: Plan,
    slowest: Vec<(f64, String)>,
}

fn run_calls(world: &World, flags: &[&str], work: &Plan, label: &str) -> Outcome {
    let mut session = world.session(flags);
    let sandbox = session.capabilities()["sandbox"].clone();
    eprintln!(
        "{label}: sandbox {}",
        sandbox.get("status").unwrap_or(&sandbox)
    );
    let roots = world.roots();
    let allowed = world.allowed();
    let mut out = Outcome {
        sandboxed: sandbox["state"] == "active",
        ..Outcome::default()
    };
    // Nothing changes between calls: the state after one call is the state before the next.
    let mut state = quick_snapshot(&roots);
    for (tool, list) in work {
        let mut refused = Vec::new();
        for (input, sensible) in list {
            if *sensible && out.zero.get(tool) == Some(&true) {
                continue; // a sensible input of this tool already exited 0
            }
            out.counts.calls += 1;
            let clock = Instant::now();
            let fate = call(&mut session, tool, input);
            out.slowest.push((
                clock.elapsed().as_secs_f64(),
                format!("{tool} {}", Value::Object(input.clone())),
            ));
            match fate {
                // Nothing ran (the final full comparison would show it otherwise).
                Fate::Refused => {
                    out.counts.refused += 1;
                    refused.push((input.clone(), *sensible));
                }
                Fate::Ran { exit_zero, stderr } => {
                    if *sensible && !exit_zero {
                        eprintln!(
                            "{label}: sensible input {tool} {} failed: {}",
                            Value::Object(input.clone()),
                            stderr.replace('\n', " | ")
                        );
                    }
                    out.counts.ran += 1;
                    if exit_zero {
                        out.counts.exit_zero += 1;
                    } else {
                        out.counts.failed += 1;
                    }
                    *out.zero.entry(tool.clone()).or_default() |= exit_zero;
                    let now = quick_snapshot(&roots);
                    for change in changes(&state, &now, &allowed) {
                        out.writes.push(format!(
                            "{label}: {tool} {} -> {change}",
                            Value::Object(input.clone())
                        ));
                    }
                    state = now;
                }
            }
        }
        if !refused.is_empty() {
            out.refused.push((tool.clone(), refused));
        }
    }
    out
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_side_effects() {
    let started = Instant::now();
    let original = support::real_conda();
    let original_prefix = support::real_discovery().prefix.clone().unwrap();
    let clock = Instant::now();
    let original_before = snapshot(std::slice::from_ref(&original_prefix));
    eprintln!(
        "hashing the original prefix: {:.1} s",
        clock.elapsed().as_secs_f64()
    );
    let seed = seed("side effects");
    let clock = Instant::now();
    let worlds: Vec<World> = (0..SERVERS).map(World::new).collect();
    eprintln!("copying: {:.1} s", clock.elapsed().as_secs_f64());
    let work = plan(&worlds, seed);
    let chunk = work.len().div_ceil(SERVERS);
    let results: Vec<(Outcome, Outcome, Vec<String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = worlds
            .iter()
            .zip(work.chunks(chunk))
            .enumerate()
            .map(|(k, (world, part))| {
                scope.spawn(move || {
                    let roots = world.roots();
                    let before = snapshot(&roots);
                    // --list-all: every schema-valid input reaches the policy, which is
                    // what this test measures (the default listing refuses some earlier).
                    let mut part = part.to_vec();
                    if k == 0 {
                        part.extend(trash_plan(world));
                    }
                    let default = run_calls(world, &["--list-all"], &part, "default policy");
                    // Where the sandbox is active, the dry runs naming a target ran.
                    if k == 0 && default.sandboxed {
                        for (tool, inputs) in trash_plan(world) {
                            let refused = default
                                .refused
                                .iter()
                                .filter(|(t, _)| *t == tool)
                                .flat_map(|(_, list)| list)
                                .any(|(i, _)| inputs.iter().any(|(j, _)| i == j));
                            assert!(!refused, "{tool}: a dry run naming its target was refused");
                        }
                    }
                    let mut again = default.refused.clone();
                    if k == 0 {
                        again.extend(raw_plan());
                    }
                    let exec = run_calls(
                        world,
                        &["--allow-exec", "--list-all"],
                        &again,
                        "--allow-exec",
                    );
                    let after = snapshot(&roots);
                    let total = changes(&before, &after, &world.allowed());
                    (default, exec, total)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (mut default, mut exec) = (Counts::default(), Counts::default());
    let mut zero: BTreeMap<String, bool> = BTreeMap::new();
    let mut writes = Vec::new();
    let mut totals = Vec::new();
    let mut slowest = Vec::new();
    for (d, e, total) in results {
        slowest.extend(d.slowest);
        slowest.extend(e.slowest);
        default += d.counts;
        exec += e.counts;
        for (tool, ok) in d.zero.into_iter().chain(e.zero) {
            *zero.entry(tool).or_default() |= ok;
        }
        writes.extend(d.writes);
        writes.extend(e.writes);
        totals.extend(total);
    }
    slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (seconds, what) in slowest.iter().take(5) {
        eprintln!("slowest call: {seconds:.1} s {what}");
    }
    let succeeded = zero.values().filter(|ok| **ok).count();
    let never: Vec<&String> = zero
        .iter()
        .filter(|(_, ok)| !**ok)
        .map(|(t, _)| t)
        .collect();
    eprintln!(
        "side effects on {} ({} tools, {} private copies): default policy {:?}; \
         --allow-exec (the refused calls again, and raw argv) {:?}; {} of {} tools that ran \
         exited 0 on some input (never: {:?}); {} attributed writes, {} changed paths; {:.1} s",
        original.display(),
        work.len(),
        SERVERS,
        default,
        exec,
        succeeded,
        zero.len(),
        never,
        writes.len(),
        totals.len(),
        started.elapsed().as_secs_f64()
    );
    let original_after = snapshot(std::slice::from_ref(&original_prefix));
    assert!(
        original_before == original_after,
        "the original prefix changed: {:?}",
        changes(&original_before, &original_after, &[])
    );
    assert!(
        writes.is_empty() && totals.is_empty(),
        "writes outside TMPDIR:\n{}\nall changed paths:\n{}",
        writes.join("\n"),
        totals.join("\n")
    );
    assert!(
        succeeded * 10 >= zero.len() * 8,
        "only {succeeded} of {} tools the policy admits exited 0 on some input; the inputs \
         must reach conda's code (never: {never:?})",
        zero.len()
    );
}

//! The policy's argv oracle: conda's own code decides what an argv does, and the policy
//! must never call read-only an argv that writes, nor let an argv that runs a program pass
//! without `--allow-exec`.
//!
//! Argvs come from the catalog: every generated tool's compiler on inputs drawn from its
//! schema (`inputs`), and token soups drawn straight from the parser tree (abbreviations,
//! `--opt=value`, short clusters, `--`, options of the wrong level, realistic and hostile
//! values). `tests/oracle/oracle.py` runs each one through `conda.cli.main.main_subshell`
//! in a long-lived process under the target's interpreter, with a private HOME, XDG dirs,
//! condarc, package cache, TMPDIR and working directory, offline, and with every file
//! write and process start intercepted by an audit hook: the first forbidden one is
//! recorded and stopped before it happens. Writes into the cache directories conda updates
//! on reads ([`Throwaway::allowed`]) and TMPDIR are allowed and recorded.
//!
//! Seeded (`CCM_PROPTEST_SEED`, printed); `CCM_ORACLE_ARGVS` sets the number of argvs
//! (default 10 000), each distinct one run through conda once and every one judged; every
//! mismatch is written to a JSON-lines file whose path is printed.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use ccm::model::catalog::{Argument, Command as CatalogCommand, Nargs};
use ccm::tools::policy::{self, Classification, Origin};
use ccm::tools::toolset::Toolset;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};

use crate::inputs::{self, seed, seeded_runner};
use crate::support;

/// Per-argv time budget inside the harness.
const BUDGET_SECONDS: f64 = 5.0;
/// Harness processes run side by side.
const WORKERS: usize = 2;
/// Programs conda and its plugins run for themselves, never chosen by the caller (a
/// program name or path, then the leading arguments). The harness reports them missing,
/// as on a system without them, and conda goes on.
const INTERNAL_PROGRAMS: &[&[&str]] = &[
    // distro (conda info, the user agent): distro.py `_lsb_release_info`, `_uname_info`.
    &["lsb_release", "-a"],
    &["uname", "-rs"],
    // conda init: core/initialize.py `_get_python_info` asks its own interpreter.
    &["python", "--version"],
    // conda init: core/initialize.py `find_powershell_paths` asks PowerShell for $PROFILE.
    &["powershell", "-NoProfile", "-Command"],
    &["pwsh", "-NoProfile", "-Command"],
    &["pwsh-preview", "-NoProfile", "-Command"],
    // conda-completion: shell/__init__.py `detect_parent_shell` reads the process table.
    &["ps", "-ww", "-o", "pid=", "-o", "ppid=", "-o", "comm="],
];
/// Writes conda makes only to learn whether a directory is writable, or as housekeeping
/// it gives up on when the file system refuses: functions that treat an OSError as "no"
/// or "skip". gateways/disk/create.py `create_envs_directory` and
/// `create_package_cache_directory` (a marker file; EACCES/EPERM/EROFS mean "not
/// writable"), gateways/disk/test.py `file_path_is_writable` (OSError means "no"),
/// core/envs_manager.py `_rewrite_environments_txt` (pruning stale entries of
/// `environments.txt` while listing environments, for every user's home when run as root;
/// OSError is logged as "File not cleaned"). The harness refuses their writes with EROFS,
/// as the read-only sandbox does, and counts them; the oracle then judges what conda does
/// next. Without the sandbox these writes happen (docs/security.md, known effects).
const PROBES: &[(&str, &[&str])] = &[
    (
        "conda/gateways/disk/create.py",
        &["create_envs_directory", "create_package_cache_directory"],
    ),
    ("conda/gateways/disk/test.py", &["file_path_is_writable"]),
    ("conda/core/envs_manager.py", &["_rewrite_environments_txt"]),
];

/// Writes only the read-only sandbox keeps from having effect: housekeeping that deletes
/// and treats an OSError as "skip" — gateways/disk/delete.py `delete_trash` (:238-253,
/// each `os.unlink` in `try … except OSError`), which install/update run on a target that
/// is not an environment before they solve (cli/install.py:256-263). The harness refuses
/// them with EROFS, as the sandbox does, and reports them apart: a verdict that is
/// read-only without the sandbox must not let one happen (policy::Rules::set_sandboxed).
const CONTAINED: &[(&str, &[&str])] = &[("conda/gateways/disk/delete.py", &["delete_trash"])];

/// A private home for conda: HOME, XDG dirs, condarc, package cache, TMPDIR, cwd.
pub(crate) struct Throwaway {
    pub dir: tempfile::TempDir,
}

impl Throwaway {
    pub(crate) fn new(label: &str) -> Throwaway {
        let dir = tempfile::Builder::new()
            .prefix(&format!("ccm-{label}-"))
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("temporary directory");
        let t = Throwaway { dir };
        for sub in [
            "home/.config",
            "home/.local/share",
            "home/.cache",
            "pkgs",
            "tmp",
            "cwd",
            "files",
        ] {
            std::fs::create_dir_all(t.path(sub)).unwrap();
        }
        // Files a caller might name: an environment file, a spec list, a condarc.
        std::fs::write(
            t.path("files/environment.yml"),
            "name: fromfile\ndependencies: []\n",
        )
        .unwrap();
        std::fs::write(t.path("files/specs.txt"), "demo\n").unwrap();
        // A directory that is not an environment, with trash in it (conda empties it
        // before a solve into it).
        std::fs::create_dir_all(t.path("files/notenv/sub")).unwrap();
        std::fs::write(t.path("files/notenv/old.conda_trash"), "").unwrap();
        std::fs::write(t.path("files/notenv/sub/x.conda_trash"), "").unwrap();
        std::fs::write(t.path("files/condarc.yml"), "channels:\n  - defaults\n").unwrap();
        std::fs::write(
            t.path("cwd/environment.yml"),
            "name: incwd\ndependencies: []\n",
        )
        .unwrap();
        // A local channel with one package, the user's only channel: searches and dry-run
        // solves succeed offline.
        let repodata = |subdir: &str, packages: Value| {
            let dir = t.path("channel").join(subdir);
            std::fs::create_dir_all(&dir).unwrap();
            let doc =
                json!({"info": {"subdir": subdir}, "packages": packages, "packages.conda": {}});
            std::fs::write(dir.join("repodata.json"), doc.to_string()).unwrap();
        };
        repodata(
            "noarch",
            json!({"demo-1.0-0.tar.bz2": {"name": "demo", "version": "1.0", "build": "0",
                "build_number": 0, "depends": [], "noarch": "generic", "subdir": "noarch",
                "md5": "00000000000000000000000000000000", "size": 1}}),
        );
        repodata("linux-64", json!({}));
        std::fs::write(
            t.path("home/.condarc"),
            format!("channels:\n  - file://{}\n", t.path("channel").display()),
        )
        .unwrap();
        // A workspace with a task, so that the task runners have something to run.
        std::fs::write(
            t.path("cwd/conda.toml"),
            "[workspace]\nname = \"oracle\"\nchannels = [\"conda-forge\"]\n\
             platforms = [\"linux-64\"]\n\n[dependencies]\n\n[tasks]\nhello = \"echo hello\"\n",
        )
        .unwrap();
        t
    }

    pub(crate) fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// The environment conda runs with: nothing of the caller's, offline, private dirs.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let p = |s: &str| self.path(s).display().to_string();
        vec![
            (
                "PATH".into(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
            ),
            ("LANG".into(), "C.UTF-8".into()),
            ("HOME".into(), p("home")),
            ("XDG_CONFIG_HOME".into(), p("home/.config")),
            ("XDG_DATA_HOME".into(), p("home/.local/share")),
            ("XDG_CACHE_HOME".into(), p("home/.cache")),
            ("CONDARC".into(), p("home/.condarc")),
            ("CONDA_PKGS_DIRS".into(), p("pkgs")),
            ("TMPDIR".into(), p("tmp")),
            ("CONDA_OFFLINE".into(), "1".into()),
            // GPU detection starts a child interpreter; it is no part of any command.
            ("CONDA_OVERRIDE_CUDA".into(), String::new()),
        ]
    }

    /// The directories conda may write to while the policy calls a command read-only:
    /// the repodata cache of the package cache (`<pkgs_dir>/cache`, `conda search`,
    /// `--dry-run` solves), the notices cache (`$XDG_CACHE_HOME/conda/notices`,
    /// `conda notices` and the notices shown after commands) and the private TMPDIR. Kept
    /// tight: anything else written by a read-only verdict is a failure.
    pub(crate) fn allowed(&self) -> Vec<PathBuf> {
        vec![
            self.path("pkgs/cache"),
            self.path("home/.cache/conda/notices"),
            self.path("tmp"),
        ]
    }
}

/// One harness process: lock-step requests and answers.
struct Harness {
    child: Child,
    stdin: ChildStdin,
    answers: Receiver<String>,
}

impl Harness {
    fn start(interpreter: &Path, throwaway: &Throwaway) -> Harness {
        let mut command = Command::new(interpreter);
        command
            .args(["-I", "-B"])
            .arg(support::repo().join("tests/oracle/oracle.py"))
            .env_clear()
            .envs(throwaway.env())
            .env("CONDA_ALWAYS_YES", "true")
            .current_dir(throwaway.path("cwd"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if std::env::var_os("CCM_ORACLE_VERBOSE").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        if std::env::var_os("CCM_ORACLE_VERBOSE").is_some() {
            command.env("CCM_ORACLE_VERBOSE", "1");
        }
        let mut child = command.spawn().expect("start the oracle harness");
        let mut stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, answers) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let config = json!({
            "allowed": throwaway.allowed(),
            "internal_programs": INTERNAL_PROGRAMS,
            "probes": PROBES
                .iter()
                .map(|(file, functions)| json!({"file": file, "functions": functions}))
                .collect::<Vec<_>>(),
            "contained": CONTAINED
                .iter()
                .map(|(file, functions)| json!({"file": file, "functions": functions}))
                .collect::<Vec<_>>(),
            "budget": BUDGET_SECONDS,
        });
        writeln!(stdin, "{config}").unwrap();
        let mut harness = Harness {
            child,
            stdin,
            answers,
        };
        let ready = harness
            .answer(Duration::from_secs(120))
            .expect("the oracle harness starts");
        assert_eq!(ready["ready"], true, "oracle harness: {ready}");
        harness
    }

    fn answer(&mut self, timeout: Duration) -> Option<Value> {
        match self.answers.recv_timeout(timeout) {
            Ok(line) => Some(serde_json::from_str(&line).expect("the harness answers JSON")),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    fn ask(&mut self, argv: &[String]) -> Option<Value> {
        let request = json!({"argv": argv});
        writeln!(self.stdin, "{request}").ok()?;
        self.stdin.flush().ok()?;
        self.answer(Duration::from_secs_f64(BUDGET_SECONDS + 60.0))
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What conda did with every argv, in order, on `WORKERS` harness processes.
pub(crate) fn observe(
    interpreter: &Path,
    throwaway: &Throwaway,
    argvs: &[Vec<String>],
) -> Vec<Value> {
    let chunk = argvs.len().div_ceil(WORKERS).max(1);
    let mut out = vec![Value::Null; argvs.len()];
    std::thread::scope(|scope| {
        let handles: Vec<_> = argvs
            .chunks(chunk)
            .enumerate()
            .map(|(k, part)| {
                scope.spawn(move || {
                    let mut answers = Vec::with_capacity(part.len());
                    let mut harness = Harness::start(interpreter, throwaway);
                    for argv in part {
                        match harness.ask(argv) {
                            Some(answer) => answers.push(answer),
                            None => {
                                answers.push(json!({"outcome": "crash"}));
                                harness = Harness::start(interpreter, throwaway);
                                continue;
                            }
                        }
                        // The harness exits after an argv it cannot undo (plugins disabled).
                        if harness.child.try_wait().ok().flatten().is_some()
                            || harness.answers_closed()
                        {
                            harness = Harness::start(interpreter, throwaway);
                        }
                    }
                    (k * chunk, answers)
                })
            })
            .collect();
        for handle in handles {
            let (start, answers) = handle.join().expect("oracle worker");
            for (i, answer) in answers.into_iter().enumerate() {
                out[start + i] = answer;
            }
        }
    });
    out
}

impl Harness {
    /// The harness closed its answers (it exited on purpose after the last one).
    fn answers_closed(&mut self) -> bool {
        std::thread::sleep(Duration::from_millis(0));
        match self.answers.try_recv() {
            Err(std::sync::mpsc::TryRecvError::Disconnected) => true,
            Ok(line) => panic!("unexpected harness output: {line}"),
            Err(std::sync::mpsc::TryRecvError::Empty) => false,
        }
    }
}

/// An argv and the origin the policy judges it under.
pub(crate) struct Case {
    pub argv: Vec<String>,
    pub origin: Origin,
    /// The tool it was compiled by, or `None` for a token soup.
    pub tool: Option<String>,
}

/// Values a caller might really send: names and paths that exist in the throwaway world,
/// condarc keys, specs, booleans; mixed with the hostile ones of `inputs`.
fn value_pool(throwaway: &Throwaway, prefix: &Path) -> Vec<String> {
    let p = |s: &str| throwaway.path(s).display().to_string();
    let mut pool: Vec<String> = [
        "t1",
        "base",
        "x",
        "numpy",
        "demo",
        "demo=1.0",
        "python=3.11",
        "channels",
        "defaults",
        "conda-forge",
        "solver",
        "classic",
        "auto_update_conda",
        "channel_priority",
        "always_yes",
        "true",
        "false",
        "1",
        "0",
        ".",
        "./new-env",
        "env.yml",
        "environment.yml",
        "/dev/null",
        "echo",
        "sh",
        "-c",
        "json",
        "bash",
        "pip",
        "hello",
        "conda.toml",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    pool.extend([
        p("files/environment.yml"),
        p("files/specs.txt"),
        p("files/condarc.yml"),
        p("files/new.yml"),
        p("files"),
        p("files/notenv"),
        p("home/.condarc"),
        prefix.display().to_string(),
        prefix.join("envs/t1").display().to_string(),
        prefix.join(".condarc").display().to_string(),
    ]);
    pool
}

fn pick<'a, T>(r: &mut TestRunner, items: &'a [T]) -> &'a T {
    &items[r.rng().random_range(0..items.len())]
}

/// A value for one slot of `argument`.
fn soup_value(r: &mut TestRunner, argument: &Argument, pool: &[String]) -> String {
    if !argument.choices.is_empty() && r.rng().random_bool(0.8) {
        return pick(r, &argument.choices).clone();
    }
    match r.rng().random_range(0..10) {
        0 => inputs::text().new_tree(r).unwrap().current(),
        1 => r.rng().random_range(-2i64..50).to_string(),
        _ => pick(r, pool).clone(),
    }
}

/// How many values one occurrence of `argument` takes in a soup.
fn soup_arity(r: &mut TestRunner, argument: &Argument) -> usize {
    if argument.action.is_flag() {
        return 0;
    }
    match argument.nargs {
        Nargs::One => 1,
        Nargs::Optional => r.rng().random_range(0..2),
        Nargs::Exactly(n) => n as usize,
        Nargs::ZeroOrMore => r.rng().random_range(0..3),
        Nargs::OneOrMore => r.rng().random_range(1..3),
        Nargs::Remainder | Nargs::Parser => r.rng().random_range(0..4),
    }
}

/// The spelling of an option: full, abbreviated, `--opt=value`, or attached short value.
fn option_tokens(
    r: &mut TestRunner,
    argument: &Argument,
    values: Vec<String>,
    siblings: &[&Argument],
) -> Vec<String> {
    let flag = pick(r, &argument.flags).clone();
    let long = flag.starts_with("--");
    let mut spelled = flag.clone();
    if long && r.rng().random_bool(0.3) {
        // An abbreviation argparse may accept (unique) or refuse (ambiguous).
        let cut = r.rng().random_range(3.min(flag.len())..=flag.len());
        spelled = flag[..cut].to_owned();
    }
    if values.len() == 1 && r.rng().random_bool(0.3) {
        return if long {
            vec![format!("{spelled}={}", values[0])]
        } else {
            vec![format!("{flag}{}", values[0])]
        };
    }
    if !long && values.is_empty() && r.rng().random_bool(0.3) {
        // A short cluster: this flag then other short flags of the level.
        let shorts: Vec<&&Argument> = siblings
            .iter()
            .filter(|a| {
                a.action.is_flag() && a.flags.iter().any(|f| f.len() == 2 && !f.starts_with("--"))
            })
            .collect();
        let mut token = flag.clone();
        for _ in 0..r.rng().random_range(1..3) {
            if shorts.is_empty() {
                break;
            }
            let other = pick(r, &shorts);
            if let Some(short) = other
                .flags
                .iter()
                .find(|f| f.len() == 2 && !f.starts_with("--"))
            {
                token.push_str(&short[1..]);
            }
        }
        return vec![token];
    }
    let mut out = vec![spelled];
    out.extend(values);
    out
}

/// A random command path from the root (possibly stopping at a parent).
fn walk<'a>(r: &mut TestRunner, root: &'a CatalogCommand) -> Vec<&'a CatalogCommand> {
    let mut levels = vec![root];
    let mut level = root;
    while !level.children.is_empty() {
        if level.terminal && r.rng().random_bool(0.2) {
            break;
        }
        if r.rng().random_bool(0.03) {
            break; // a parent without its subcommand
        }
        level = pick(r, &level.children);
        levels.push(level);
    }
    levels
}

/// One token soup from the catalog.
pub(crate) fn soup(r: &mut TestRunner, root: &CatalogCommand, pool: &[String]) -> Vec<String> {
    let levels = walk(r, root);
    let mut argv = Vec::new();
    for (depth, level) in levels.iter().enumerate() {
        if depth > 0 {
            let names: Vec<&String> = level.name.iter().chain(level.aliases.iter()).collect();
            argv.push(pick(r, &names).to_string());
        }
        let options: Vec<&Argument> = level
            .arguments
            .iter()
            .filter(|a| !a.is_positional())
            .collect();
        let positionals: Vec<&Argument> = level
            .arguments
            .iter()
            .filter(|a| a.is_positional())
            .collect();
        let last = depth + 1 == levels.len();
        let count = if last {
            r.rng().random_range(0..5)
        } else {
            usize::from(r.rng().random_bool(0.2))
        };
        let mut tokens: Vec<Vec<String>> = Vec::new();
        for _ in 0..count.min(options.len()) {
            let argument = *pick(r, &options);
            let values = (0..soup_arity(r, argument))
                .map(|_| soup_value(r, argument, pool))
                .collect();
            tokens.push(option_tokens(r, argument, values, &options));
        }
        if last {
            for argument in &positionals {
                if matches!(argument.nargs, Nargs::Remainder | Nargs::Parser) {
                    continue;
                }
                let n = match argument.nargs {
                    Nargs::Optional | Nargs::ZeroOrMore => r.rng().random_range(0..2),
                    _ => soup_arity(r, argument).max(1),
                };
                for _ in 0..n {
                    tokens.push(vec![soup_value(r, argument, pool)]);
                }
            }
            // Interleave options and positionals as a caller might.
            for i in (1..tokens.len()).rev() {
                let j = r.rng().random_range(0..=i);
                tokens.swap(i, j);
            }
        }
        argv.extend(tokens.into_iter().flatten());
        if last {
            if let Some(rest) = positionals
                .iter()
                .find(|a| matches!(a.nargs, Nargs::Remainder | Nargs::Parser))
            {
                for _ in 0..r.rng().random_range(0..3) {
                    argv.push(soup_value(r, rest, pool));
                }
            }
            if r.rng().random_bool(0.1) {
                argv.push("--".into());
                for _ in 0..r.rng().random_range(0..3) {
                    argv.push(pick(r, pool).clone());
                }
            }
        }
    }
    // Now and then a token out of place: an option of the wrong level, a repeat.
    if !argv.is_empty() && r.rng().random_bool(0.1) {
        let i = r.rng().random_range(0..argv.len());
        let token = argv[i].clone();
        let j = r.rng().random_range(0..=argv.len());
        argv.insert(j, token);
    }
    argv
}

/// The cases: a third compiled from tool inputs, the rest token soups.
pub(crate) fn cases(
    seed: u64,
    tools: &Toolset,
    root: &CatalogCommand,
    pool: &[String],
    count: usize,
) -> Vec<Case> {
    let mut runner = seeded_runner(seed);
    let mut out = Vec::with_capacity(count);
    let per_tool = (count / 3 / tools.generated.len().max(1)).max(1);
    for tool in &tools.generated {
        for input in inputs::valid_inputs(tool, &mut runner, per_tool) {
            if let Ok(argv) = ccm::tools::argv::compile(&tool.layout, &input) {
                out.push(Case {
                    argv,
                    origin: Origin::Generated {
                        opaque: tool.opaque,
                    },
                    tool: Some(tool.name.clone()),
                });
            }
        }
    }
    while out.len() < count {
        out.push(Case {
            argv: soup(&mut runner, root, pool),
            origin: Origin::Generated { opaque: false },
            tool: None,
        });
    }
    out.truncate(count);
    out
}

/// The policy's verdict on an argv (the rules for the target's plugins, no operator
/// classification).
pub(crate) fn verdict(rules: &policy::Rules, root: &CatalogCommand, case: &Case) -> Classification {
    policy::classify(rules, Some(root), &case.argv, case.origin)
}

/// A read-only verdict: what the server runs without any `--allow-*` option.
pub(crate) fn is_read_only(v: &Classification) -> bool {
    v.read_only && !v.requires_write && !v.requires_exec
}

/// The command words of an argv (catalog names followed from the root, options skipped).
fn command_words(root: &CatalogCommand, argv: &[String]) -> Vec<String> {
    let mut words = Vec::new();
    let mut level = root;
    for token in argv {
        if token.starts_with('-') {
            continue;
        }
        match level
            .children
            .iter()
            .find(|c| c.name.as_deref() == Some(token) || c.aliases.contains(token))
        {
            Some(child) => {
                words.push(child.name.clone().unwrap_or_default());
                level = child;
            }
            None => break,
        }
    }
    words
}

#[derive(Default)]
struct Tally {
    outcomes: BTreeMap<String, usize>,
    parsed: usize,
    allowed_writes: usize,
    internal_execs: usize,
    probes: usize,
    contained: usize,
    network: usize,
    exec_only_writes: usize,
}

fn run_oracle(label: &str, default_count: usize) {
    let started = Instant::now();
    let conda = support::real_conda();
    let found = support::real_discovery();
    let interpreter = found
        .interpreter
        .as_ref()
        .expect("the target's interpreter");
    let prefix = found.prefix.clone().expect("the target's prefix");
    let root = found.catalog.root.as_ref().expect("a parser tree");
    let tools = support::toolset(&found.catalog, &found.plugins, true);
    let rules = policy::Rules::new(&found.plugins);
    let mut sandboxed = rules.clone();
    sandboxed.set_sandboxed(true);
    let count = std::env::var("CCM_ORACLE_ARGVS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_count);
    let seed = seed(label);
    let throwaway = Throwaway::new("oracle");
    let pool = value_pool(&throwaway, &prefix);
    let mut cases = cases(seed, &tools, root, &pool, count);
    // Dry runs into a directory that is not an environment and holds trash: conda empties
    // it first (contained by the sandbox, a write without it).
    let notenv = throwaway.path("files/notenv").display().to_string();
    for argv in [
        vec!["install", "--dry-run", "-p", &notenv, "demo"],
        vec!["update", "-d", &format!("--prefix={notenv}"), "demo"],
        vec!["install", "--dry-run", "-n", "t1", "demo"],
    ] {
        cases.push(Case {
            argv: argv.into_iter().map(str::to_owned).collect(),
            origin: Origin::Generated { opaque: false },
            tool: None,
        });
    }
    // Conda is asked once per distinct argv (about a sixth of the drawn ones repeat
    // another, mostly bare command words); every case, repeats too, is judged on the
    // answer of its argv.
    let mut distinct: Vec<Vec<String>> = Vec::new();
    let mut slot: HashMap<&[String], usize> = HashMap::new();
    let slots: Vec<usize> = cases
        .iter()
        .map(|c| {
            *slot.entry(&c.argv).or_insert_with(|| {
                distinct.push(c.argv.clone());
                distinct.len() - 1
            })
        })
        .collect();
    let observed = observe(interpreter, &throwaway, &distinct);
    let answers: Vec<Value> = slots.iter().map(|&i| observed[i].clone()).collect();

    if let Some(dump) = std::env::var_os("CCM_ORACLE_DUMP") {
        let lines: Vec<String> = cases
            .iter()
            .zip(&answers)
            .map(|(c, a)| json!({"argv": c.argv, "tool": c.tool, "answer": a}).to_string())
            .collect();
        std::fs::write(dump, lines.join("\n")).unwrap();
    }
    let mut tally = Tally::default();
    let mut mismatches: Vec<Value> = Vec::new();
    let mut classes: HashMap<String, usize> = HashMap::new();
    let mut order: Vec<(String, Value)> = Vec::new();
    for (case, answer) in cases.iter().zip(&answers) {
        let outcome = answer["outcome"].as_str().unwrap_or("crash").to_owned();
        *tally.outcomes.entry(outcome.clone()).or_default() += 1;
        tally.parsed += usize::from(answer["parsed"] == true);
        tally.allowed_writes += usize::from(answer.get("allowed_writes").is_some());
        tally.internal_execs += usize::from(answer.get("internal_execs").is_some());
        tally.probes += usize::from(answer.get("probes").is_some());
        tally.network += usize::from(answer.get("network").is_some());
        let v = verdict(&rules, root, case);
        // Where read-only calls run in the sandbox, the policy admits more: an effect the
        // sandbox does not stop must be refused there too; one only the sandbox stops
        // (`contained`) must be refused where it is not active.
        let in_sandbox = verdict(&sandboxed, root, case);
        tally.contained += usize::from(answer.get("contained").is_some());
        let wrong = match outcome.as_str() {
            "write" if is_read_only(&in_sandbox) => Some("read-only verdict, conda wrote"),
            "exec" if !in_sandbox.requires_exec => {
                Some("no --allow-exec needed, conda ran a program")
            }
            _ if answer.get("contained").is_some() && is_read_only(&v) => {
                Some("read-only verdict without the sandbox, conda emptied trash")
            }
            _ => None,
        };
        if outcome == "write" && !v.requires_write && v.requires_exec {
            tally.exec_only_writes += 1;
        }
        let Some(what) = wrong else { continue };
        let record = json!({
            "problem": what,
            "argv": case.argv,
            "tool": case.tool,
            "verdict": format!("{v:?}"),
            "event": answer["event"],
            "path": answer["path"],
            "program": answer["program"],
            "target": answer["target"],
            "where": answer["where"],
        });
        let class = format!(
            "{what} | {} | {}",
            command_words(root, &case.argv).join(" "),
            answer["where"][0].as_str().unwrap_or("?")
        );
        let seen = classes.entry(class.clone()).or_default();
        if *seen == 0 {
            order.push((class, record.clone()));
        }
        *seen += 1;
        mismatches.push(record);
    }
    let elapsed = started.elapsed();
    let parse_rate = tally.parsed as f64 / cases.len().max(1) as f64;
    eprintln!(
        "policy oracle on {label} ({}): {} argvs ({} distinct; {} compiled from tools, {} token soups), \
         {:.1} % parsed by conda, outcomes {:?}, {} with allowed cache/tmp writes, {} with \
         internal platform probes, {} with refused probe/housekeeping writes, {} emptied trash (contained), {} tried the network, {} write under an exec-only verdict, \
         {} mismatches in {} classes, {:.1} s",
        conda.display(),
        cases.len(),
        distinct.len(),
        cases.iter().filter(|c| c.tool.is_some()).count(),
        cases.iter().filter(|c| c.tool.is_none()).count(),
        parse_rate * 100.0,
        tally.outcomes,
        tally.allowed_writes,
        tally.internal_execs,
        tally.probes,
        tally.contained,
        tally.network,
        tally.exec_only_writes,
        mismatches.len(),
        order.len(),
        elapsed.as_secs_f64()
    );
    let report = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("oracle-{}-{seed}.jsonl", label.replace(' ', "-")));
    let lines: Vec<String> = mismatches.iter().map(Value::to_string).collect();
    std::fs::write(&report, lines.join("\n")).unwrap();
    let crashes = tally.outcomes.get("crash").copied().unwrap_or(0)
        + tally.outcomes.get("error").copied().unwrap_or(0);
    assert_eq!(
        crashes,
        0,
        "the harness failed on some argvs (see {})",
        report.display()
    );
    assert!(
        tally.contained > 0,
        "no argv emptied trash: the sandbox-dependent verdicts were not exercised"
    );
    assert!(
        parse_rate >= 0.30,
        "only {:.1} % of the argvs parse; the generators must reach conda's code",
        parse_rate * 100.0
    );
    assert!(
        mismatches.is_empty(),
        "{} argvs where the policy is wrong ({} classes; all in {}); first of each class:\n{}",
        mismatches.len(),
        order.len(),
        report.display(),
        order
            .iter()
            .take(25)
            .map(|(class, record)| format!("[{}x] {class}\n    {record}", classes[class]))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_policy_oracle() {
    run_oracle("real conda", 10_000);
}

//! No caller code in any child: Python files planted in a working directory (the
//! server's, or a call's `ccm_cwd`) never run in anything a call starts, cold or warm.
//!
//! Every name of the target interpreter's `sys.stdlib_module_names` is planted, as a
//! module (`NAME.py`) in one directory and as a package (`NAME/__init__.py`) in another.
//! A planted file that runs writes one line into a FIFO the test holds open, which the
//! servers' sandboxed children may open for writing (`CCM_TEST_REPORT_FIFO`, a
//! debug-build grant: no other host FIFO opens in the sandbox), so the sandbox does not
//! hide a planted run from the test. conda's CUDA probe (and the fixture's copy of it) starts a
//! `multiprocessing` *spawn* child, `python -c 'from multiprocessing.spawn import …'`,
//! whose `sys.path[0]` is the working directory until `spawn.prepare()` runs.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value, json};

use crate::mcp::{Session, structured};
use crate::side_effects::{self, World};
use crate::support;

/// The planted directories and the FIFO every planted file reports to.
pub(crate) struct Planted {
    dir: tempfile::TempDir,
    fifo: std::fs::File,
}

/// How a name is planted.
#[derive(Clone, Copy)]
enum Form {
    Module,
    Package,
}

impl Planted {
    /// Plant every standard-library module name of `python` in `modules/` and
    /// `packages/`, reporting to `report.fifo`.
    pub(crate) fn new(python: &Path) -> Planted {
        let dir = tempfile::Builder::new()
            .prefix("ccm-planted-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let open = |path: &Path| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        open(dir.path());
        let fifo_path = dir.path().join("report.fifo");
        // Held open for reading for the whole test: writers can open it.
        let fifo = crate::kit::fifo::with_reader(&fifo_path);
        let names = stdlib_names(python);
        assert!(names.len() > 200, "too few names: {}", names.len());
        for (sub, form) in [("modules", Form::Module), ("packages", Form::Package)] {
            let root = dir.path().join(sub);
            std::fs::create_dir(&root).unwrap();
            open(&root);
            for name in &names {
                plant(&root, name, form, &fifo_path);
            }
        }
        Planted { dir, fifo }
    }

    /// The directory of planted modules (`NAME.py`).
    pub(crate) fn modules(&self) -> PathBuf {
        self.dir.path().join("modules")
    }

    /// The directory of planted packages (`NAME/__init__.py`).
    pub(crate) fn packages(&self) -> PathBuf {
        self.dir.path().join("packages")
    }

    /// The FIFO's path (also for reports from the fixture's probe).
    pub(crate) fn fifo(&self) -> PathBuf {
        self.dir.path().join("report.fifo")
    }

    /// Every line written into the FIFO since the last call.
    pub(crate) fn lines(&mut self) -> Vec<String> {
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            match self.fifo.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("reading the FIFO: {e}"),
            }
        }
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// `sys.stdlib_module_names` of `python`, sorted.
fn stdlib_names(python: &Path) -> Vec<String> {
    let output = Command::new(python)
        .args([
            "-I",
            "-c",
            "import sys; print('\\n'.join(sorted(sys.stdlib_module_names)))",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// One planted file: it reports its name and pid to `fifo` through `posix` (a built-in
/// module, which no file can shadow), without blocking and whatever else fails.
fn plant(root: &Path, name: &str, form: Form, fifo: &Path) {
    let body = format!(
        "import posix as _p\n\
         try:\n    \
             _fd = _p.open({fifo:?}, _p.O_WRONLY | _p.O_NONBLOCK)\n    \
             _p.write(_fd, ('planted %s ran in %d\\n' % (__name__, _p.getpid())).encode())\n    \
             _p.close(_fd)\n\
         except BaseException:\n    \
             pass\n",
        fifo = fifo.to_str().unwrap()
    );
    let path = match form {
        Form::Module => root.join(format!("{name}.py")),
        Form::Package => {
            std::fs::create_dir(root.join(name)).unwrap();
            root.join(name).join("__init__.py")
        }
    };
    std::fs::write(path, body).unwrap();
}

/// Lines of planted files among `lines`.
fn planted_runs(lines: &[String]) -> Vec<&String> {
    lines.iter().filter(|l| l.starts_with("planted ")).collect()
}

/// A fixture server in `cwd` (cold, or `--warm` and ready) whose children report the
/// fixture's spawn probe to the FIFO.
fn fixture_server(cwd: &Path, home: &Path, planted: &Planted, warm: bool) -> Session {
    let mut command = support::ccm();
    command
        .arg("--conda-exe")
        .arg(&support::fixture().conda)
        .args(if warm {
            &["--warm"][..]
        } else {
            &["--no-warm"][..]
        })
        .current_dir(cwd)
        .env("HOME", home)
        .env("CCM_FIXTURE_PROBE_REPORT", planted.fifo())
        .env("CCM_TEST_REPORT_FIFO", planted.fifo())
        .env_remove("CONDA_OVERRIDE_CUDA");
    let mut session = Session::spawn_initialized(command);
    if warm {
        crate::warm::wait_ready(&mut session);
    }
    session
}

/// The fixture's `info` starts a spawn child as conda's CUDA probe does: in the server's
/// working directory and in a `ccm_cwd`, cold and warm, the child runs (it reports) and
/// no planted module or package does.
#[test]
fn planted_modules_never_run_in_the_fixtures_spawn_child() {
    let fixture = support::fixture();
    let mut planted = Planted::new(&fixture.prefix.join("bin/python"));
    let home = crate::kit::users::home();
    let (modules, packages) = (planted.modules(), planted.packages());
    for (warm, server_cwd, call_cwd) in [(false, &modules, &packages), (true, &packages, &modules)]
    {
        let mut s = fixture_server(server_cwd, home.path(), &planted, warm);
        let before = planted.lines();
        assert!(
            planted_runs(&before).is_empty(),
            "warm {warm}: planted code ran while the server started: {before:?}"
        );
        for arguments in [
            json!({"json": true}),
            json!({"json": true, "ccm_cwd": call_cwd}),
            json!({}),
            json!({"ccm_cwd": call_cwd}),
        ] {
            let result = s.call("conda_info", arguments.clone());
            assert_eq!(
                structured(&result)["exit_code"],
                0,
                "warm {warm} {arguments}: {result}"
            );
            let lines = planted.lines();
            assert!(
                lines.iter().any(|l| l == "probe ran"),
                "warm {warm} {arguments}: the spawn probe did not run: {lines:?} {}",
                structured(&result)["stderr"]
            );
            let runs = planted_runs(&lines);
            assert!(
                runs.is_empty(),
                "warm {warm} {arguments}: planted code ran: {runs:?}"
            );
        }
        if warm {
            let caps = s.capabilities();
            assert_eq!(caps["warm"]["cold_calls"], 0, "{}", caps["warm"]);
            assert_eq!(caps["warm"]["warm_calls"], 4, "{}", caps["warm"]);
        }
    }
}

/// A real-conda server in `cwd` with the side-effect test's private world (HOME,
/// package cache, a local channel) — but the CUDA probe on (no `CONDA_OVERRIDE_CUDA`) —
/// whose sandboxed children may report to `planted`'s FIFO.
fn real_server(world: &World, cwd: &Path, planted: &Planted, flags: &[&str]) -> Session {
    let mut command = support::ccm();
    command
        .arg("--conda-exe")
        .arg(support::real_conda())
        .args(["--timeout", "120"])
        .args(flags)
        .env_clear()
        .envs(
            world
                .throwaway
                .env()
                .into_iter()
                .filter(|(k, _)| k != "CONDA_OVERRIDE_CUDA"),
        )
        .env("CCM_TEST_REPORT_FIFO", planted.fifo())
        .current_dir(cwd);
    let mut session = Session::spawn_initialized(command);
    if flags.contains(&"--warm") {
        crate::warm::wait_ready(&mut session);
    }
    session
}

/// Every tool a read-only server lists, with the side-effect test's first sensible input
/// the policy admits (`conda_cli_command` for the completion helper).
fn read_only_calls(world: &World, listed: &[String]) -> Vec<(String, Map<String, Value>)> {
    let found = support::real_discovery();
    let tools = support::toolset(&found.catalog, &found.plugins, false);
    let mut calls = Vec::new();
    for tool in &tools.generated {
        if !listed.contains(&tool.name) {
            continue;
        }
        // `create` of the existing `t1` stops before the solve: a new name.
        let inputs = side_effects::sensible_inputs(tool, world, false);
        if let Some(input) = inputs
            .iter()
            .find(|i| tool.name != "conda_create" || i.get("name") != Some(&json!("t1")))
            .or(inputs.first())
            .cloned()
        {
            calls.push((tool.name.clone(), input));
        }
    }
    if listed.iter().any(|t| t == "conda_cli_command") {
        let mut input = Map::new();
        input.insert("command_path".into(), json!(["list"]));
        calls.push(("conda_cli_command".into(), input));
    }
    calls
}

/// One server's calls, each in the server's working directory and in `call_cwd`; the
/// planted runs seen, and the tools of the calls that exited 0.
fn run_all(
    s: &mut Session,
    calls: &[(String, Map<String, Value>)],
    call_cwd: &Path,
    planted: &mut Planted,
    label: &str,
) -> (Vec<String>, Vec<String>) {
    let mut seen = Vec::new();
    let mut zero = Vec::new();
    for (tool, input) in calls {
        let mut inputs = vec![input.clone()];
        if tool != "conda_cli_command" {
            let mut elsewhere = input.clone();
            elsewhere.insert("ccm_cwd".into(), json!(call_cwd));
            inputs.push(elsewhere);
        }
        for input in inputs {
            let shown = Value::Object(input);
            let response = s.request("tools/call", json!({"name": tool, "arguments": shown}));
            if response["result"]["structuredContent"]["exit_code"] == 0
                || (tool == "conda_cli_command" && response.get("result").is_some())
            {
                zero.push(tool.clone());
            } else {
                eprintln!("{label}: {tool} {shown} did not exit 0: {response:.300}");
            }
            let lines = planted.lines();
            seen.extend(
                planted_runs(&lines)
                    .into_iter()
                    .map(|l| format!("{label}: {tool} {shown}: {l}")),
            );
        }
    }
    (seen, zero)
}

/// The hostile test on a real conda: every read-only tool, in a planted server working
/// directory and with a planted `ccm_cwd`, cold and `--warm`: nothing planted runs. The
/// control shows a planted file reporting from inside the sandbox when a program imports
/// it on purpose (`conda run` under `--allow-exec`).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_planted_modules_never_run_in_read_only_calls() {
    let found = support::real_discovery();
    let prefix = found.prefix.clone().expect("the target's prefix");
    let mut planted = Planted::new(&prefix.join("bin/python"));
    let (modules, packages) = (planted.modules(), planted.packages());
    let world = World::in_place("caller-code");
    // A workspace manifest and an environment file, as a project has: the workspace and
    // task commands read them.
    for dir in [&modules, &packages] {
        for file in ["conda.toml", "environment.yml"] {
            std::fs::copy(world.throwaway.path("cwd").join(file), dir.join(file)).unwrap();
        }
    }

    // The control: detection works from inside the sandbox.
    let mut exec = real_server(&world, &modules, &planted, &["--allow-exec"]);
    let control = exec.call(
        "conda_run",
        json!({"prefix": prefix, "executable_call":
            ["python", "-c", "import sys; sys.path.insert(0, ''); import json"]}),
    );
    let lines = planted.lines();
    assert!(
        lines.iter().any(|l| l.starts_with("planted json ran")),
        "the control did not report: {lines:?} {control}"
    );
    drop(exec);

    let mut cold = real_server(&world, &modules, &planted, &["--no-warm"]);
    let mut warm = real_server(&world, &packages, &planted, &["--warm"]);
    assert!(
        planted_runs(&planted.lines()).is_empty(),
        "planted code ran while the servers started"
    );
    let listed: Vec<String> = cold
        .tools()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    let calls = read_only_calls(&world, &listed);
    assert!(calls.len() >= 8, "too few read-only calls: {calls:?}");
    // One after the other: a line in the FIFO belongs to the call just made.
    let (mut seen, cold_zero) = run_all(&mut cold, &calls, &packages, &mut planted, "cold");
    let (warm_seen, warm_zero) = run_all(&mut warm, &calls, &modules, &mut planted, "warm");
    seen.extend(warm_seen);
    let caps = warm.capabilities();
    eprintln!(
        "{} read-only calls, each twice (server cwd, ccm_cwd), cold ({} exited 0) and warm \
         ({} exited 0; {})",
        calls.len(),
        cold_zero.len(),
        warm_zero.len(),
        caps["warm"]
    );
    assert!(seen.is_empty(), "planted code ran:\n{}", seen.join("\n"));
    assert!(
        caps["warm"]["warm_calls"].as_u64().unwrap() * 2 >= calls.len() as u64,
        "too few calls ran warm: {}",
        caps["warm"]
    );
    // The commands that run conda's CUDA probe (virtual packages) did run, both ways.
    for probing in [
        "conda_info",
        "conda_doctor",
        "conda_create",
        "conda_install",
    ] {
        for (zero, how) in [(&cold_zero, "cold"), (&warm_zero, "warm")] {
            let n = zero.iter().filter(|t| *t == probing).count();
            assert_eq!(n, 2, "{how}: {probing} exited 0 {n} times of 2");
        }
    }
    assert!(
        cold_zero.len() * 2 >= calls.len() * 2,
        "only {} of {} cold calls exited 0: the inputs must reach conda's code",
        cold_zero.len(),
        calls.len() * 2
    );
}

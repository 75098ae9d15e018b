//! No caller code in any child: Python files planted in a working directory (the
//! server's, or a call's `ccm_cwd`) never run in anything a call starts, cold or warm.
//!
//! Every name of the target interpreter's `sys.stdlib_module_names` is planted, as a
//! module (`NAME.py`) in one directory and as a package (`NAME/__init__.py`) in another.
//! A planted file that runs writes one line into a FIFO the test holds open: opening a
//! FIFO for writing works on a read-only mount, so the sandbox does not hide a planted
//! run from the test. conda's CUDA probe (and the fixture's copy of it) starts a
//! `multiprocessing` *spawn* child, `python -c 'from multiprocessing.spawn import …'`,
//! whose `sys.path[0]` is the working directory until `spawn.prepare()` runs.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::mcp::{Session, structured};
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
        let c_path = std::ffi::CString::new(fifo_path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o666) }, 0);
        std::fs::set_permissions(&fifo_path, std::fs::Permissions::from_mode(0o666)).unwrap();
        // Held open for reading (without blocking) for the whole test: writers can open it.
        use std::os::unix::fs::OpenOptionsExt;
        let fifo = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo_path)
            .unwrap();
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
        .args(if warm { &["--warm"][..] } else { &[][..] })
        .current_dir(cwd)
        .env("HOME", home)
        .env("CCM_FIXTURE_PROBE_REPORT", planted.fifo())
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
    let home = tempfile::Builder::new()
        .prefix("ccm-home-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
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

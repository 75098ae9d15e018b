"""The zygote as ccm drives it, without ccm: the whole program (as the binary embeds it)
started under this Python with a socket pair as its descriptor 3 and a small conda-shaped
package on its path; requests sent and answers read as the wire format says
(zygote/start.py): "ready", "pid", "exit"/"signal", "reap", "stale", "error"."""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from pathlib import Path

import programs
from zygote_client import Lines, run_fields, send_request

FAKE_CONDA = {
    "conda/__init__.py": """
        import os, sys
        # As conda does: CONDA_ROOT when unset (the zygote replays it on each call).
        os.environ.setdefault("CONDA_ROOT", sys.prefix)
    """,
    "conda/cli/__init__.py": "from .main import main\n",
    "conda/cli/main.py": """
        import json, os, sys, time

        def main(*args):
            command, rest = (sys.argv[1:2] or [""])[0], sys.argv[2:]
            if command == "list":
                # The survey's `list --help`: what conda's parser build would import.
                import ccm_t_clean, ccm_t_environ
            elif command == "report":
                import ctypes, resource
                report = {
                    "argv": sys.argv,
                    "orig_argv": sys.orig_argv,
                    "cwd": os.getcwd(),
                    "env": dict(os.environ),
                    "pid": os.getpid(),
                    "ppid": os.getppid(),
                    "pgid": os.getpgid(0),
                    "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
                    "as": resource.getrlimit(resource.RLIMIT_AS)[0],
                    "fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[0],
                    "stdin": sys.stdin.read(),
                    "preloaded": [m for m in ("ccm_t_clean", "ccm_t_environ") if m in sys.modules],
                    # PR_GET_DUMPABLE: the zygote's flag, inherited.
                    "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),
                }
                json.dump(report, sys.stdout)
            elif command == "exit":
                return int(rest[0])
            elif command == "message":
                sys.exit(rest[0])
            elif command == "raise":
                raise RuntimeError("conda failed")
            elif command == "signal":
                os.kill(os.getpid(), 15)
                time.sleep(10)
            elif command == "orphan":
                pid = os.fork()
                if pid == 0:
                    # Out of the call's process group, holding none of its streams.
                    os.setsid()
                    null = os.open("/dev/null", os.O_RDWR)
                    for fd in (0, 1, 2):
                        os.dup2(null, fd)
                    time.sleep(120)
                    os._exit(0)
                print(pid)
            return 0
    """,
    "ccm_t_clean.py": "VALUE = 1\n",
    "ccm_t_environ.py": "import os\nHOME = os.environ.get('HOME')\n",
}


def alive(pid):
    """Whether `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        return fields[0], int(fields[1])
    except OSError:
        return None


def writers_gone(read, seconds=10):
    """Whether every writer of the pipe `read` reads from closed (end of file in time)."""
    ready, _, _ = select.select([read], [], [], seconds)
    return bool(ready) and os.read(read, 1) == b""


def eventually(condition, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


class ZygoteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        cls.site = root / "site"
        for name, text in FAKE_CONDA.items():
            path = cls.site / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip())
        cls.bin = root / "bin"
        cls.bin.mkdir()
        cls.entry = cls.bin / "conda"
        cls.entry.write_text("#!/bin/sh\n")
        cls.workdir = root / "work"
        cls.workdir.mkdir()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.stderr = tempfile.TemporaryFile()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(self.site),
            # No __pycache__ appearing in the site directory (a change the zygote watches).
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self.process = subprocess.Popen(
            [sys.executable, "-c", programs.source("zygote"), str(self.entry), str(self.bin)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            env=env,
            cwd="/",
            # Descriptor 3, as ccm gives it (dup2 leaves it inheritable; every other
            # descriptor of this process is close-on-exec).
            close_fds=False,
            preexec_fn=lambda: os.dup2(theirs.fileno(), 3),
            start_new_session=True,
        )
        theirs.close()
        ours.settimeout(60)
        self.sock = ours
        self.lines = Lines(ours)
        self.ready = self.lines.next()

    def tearDown(self):
        self.sock.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.stderr.close()

    def zygote_stderr(self):
        self.stderr.seek(0)
        return self.stderr.read().decode()

    def call(self, argv, env=(), cwd=None, stdin=b"", **fields):
        """One call: request, "pid", status line, then "reap". (pid, status line, stdout,
        stderr)."""
        stdin_read, stdin_write = os.pipe()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        os.write(stdin_write, stdin)
        os.close(stdin_write)
        cwd = str(cwd or self.workdir).encode()
        send_request(
            self.sock,
            run_fields([a.encode() for a in argv], env, cwd=cwd, **fields),
            [stdin_read, out_write, err_write],
        )
        for fd in (stdin_read, out_write, err_write):
            os.close(fd)
        pid = int(self.lines.next().removeprefix("pid "))
        status = self.lines.next()
        # Until "reap", the child stays the zygote's zombie: its pid cannot be reused.
        self.assertEqual(state(pid), ("Z", self.process.pid))
        self.sock.sendall(b"reap\n")
        self.assertTrue(eventually(lambda: state(pid) is None), "the child was not reaped")
        with os.fdopen(out_read, "rb") as out, os.fdopen(err_read, "rb") as err:
            return pid, status, out.read(), err.read()

    def report(self, argv=("report",), **kwargs):
        pid, status, out, err = self.call(list(argv), **kwargs)
        self.assertEqual(status, "exit 0", err)
        return pid, json.loads(out)

    def test_ready_after_the_preloading(self):
        # ccm_t_clean preloaded, ccm_t_environ refused (it reads the environment).
        self.assertEqual(self.ready, "ready 1 1")
        self.assertIn("not preloaded: ccm_t_environ", self.zygote_stderr())
        _, report = self.report()
        self.assertEqual(report["preloaded"], ["ccm_t_clean"])

    def test_a_call_is_what_its_request_says(self):
        env = [(b"PATH", b"/usr/bin"), (b"CCM_T", b"a=b"), (b"EMPTY", b"")]
        pid, report = self.report(["report", "a b", "é", ""], env=env, stdin=b"input")
        self.assertEqual(report["argv"], [str(self.entry), "report", "a b", "é", ""])
        self.assertEqual(report["orig_argv"], [sys.executable] + report["argv"])
        self.assertEqual(report["cwd"], str(self.workdir))
        self.assertEqual(
            report["env"],
            {"PATH": "/usr/bin", "CCM_T": "a=b", "EMPTY": "", "CONDA_ROOT": sys.prefix},
        )
        self.assertEqual((report["pid"], report["pgid"]), (pid, pid))
        self.assertEqual(report["ppid"], self.process.pid)
        self.assertEqual(report["stdin"], "input")
        # Only the three streams (and the listing's own descriptor).
        self.assertEqual(report["fds"][:3], [0, 1, 2])
        self.assertLessEqual(len(report["fds"]), 4)

    def test_the_calls_own_conda_root_is_kept(self):
        _, report = self.report(env=[(b"CONDA_ROOT", b"/elsewhere")])
        self.assertEqual(report["env"], {"CONDA_ROOT": "/elsewhere"})

    def test_limits(self):
        _, report = self.report(memory=b"4294967296", file_size=b"1048576")
        self.assertEqual((report["as"], report["fsize"]), (4294967296, 1048576))
        _, report = self.report()
        self.assertEqual(report["fsize"], -1)

    def test_cgroup_files_get_the_process(self):
        read, write = os.pipe()
        stdin_read, stdin_write = os.pipe()
        os.close(stdin_write)
        out_read, out_write = os.pipe()
        send_request(
            self.sock,
            run_fields([b"exit", b"0"], [], cwd=str(self.workdir).encode()),
            [stdin_read, out_write, out_write, write],
        )
        for fd in (stdin_read, out_write, write):
            os.close(fd)
        self.lines.next()
        self.assertEqual(self.lines.next(), "exit 0")
        self.sock.sendall(b"reap\n")
        self.assertEqual(os.read(read, 16), b"0")
        os.close(read)
        os.close(out_read)

    def test_exit_statuses(self):
        cases = [
            (["exit", "3"], "exit 3", b""),
            (["exit", "261"], "exit 5", b""),
            (["message", "no such environment"], "exit 1", b"no such environment\n"),
            (["raise"], "exit 1", b"RuntimeError: conda failed"),
            (["signal"], "signal 15", b""),
        ]
        for argv, expected, stderr in cases:
            with self.subTest(argv=argv):
                _, status, _, err = self.call(argv)
                self.assertEqual(status, expected)
                self.assertIn(stderr, err)

    def test_a_working_directory_it_cannot_enter(self):
        _, status, _, err = self.call(["report"], cwd="/nonexistent/ccm")
        self.assertEqual(status, "exit 126")
        self.assertEqual(
            err, b"ccm warm: cannot enter the working directory: No such file or directory\n"
        )

    def test_a_request_the_child_cannot_read_exits_127(self):
        read, write = os.pipe()
        send_request(self.sock, [b"run", b"/", b"none", b"", b"", b"many"], [read, write, write])
        os.close(read)
        os.close(write)
        self.assertRegex(self.lines.next(), r"^pid \d+$")
        self.assertEqual(self.lines.next(), "exit 127")
        self.sock.sendall(b"reap\n")
        self.assertEqual(self.report()[1]["argv"][1], "report")

    def test_malformed_requests(self):
        read, write = os.pipe()
        for fields, fds in (([b"walk"], [read, write, write]), (run_fields([], []), [read])):
            with self.subTest(fields=fields, fds=len(fds)):
                send_request(self.sock, fields, fds)
                self.assertEqual(self.lines.next(), "error malformed request")
        # The zygote closed what it was sent: the pipe's last writer is ours.
        os.close(write)
        self.assertTrue(writers_gone(read), "the zygote kept a descriptor it was sent")
        os.close(read)
        self.assertEqual(self.report()[1]["argv"][1], "report")

    def test_a_changed_module_file_answers_stale(self):
        self.report()
        module = self.site / "conda/cli/main.py"
        stat = module.stat()
        try:
            os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1000))
            read, write = os.pipe()
            for _ in range(2):
                send_request(self.sock, run_fields([b"report"], []), [read, write, write])
                self.assertEqual(self.lines.next(), "stale")
            os.close(write)
            self.assertTrue(writers_gone(read), "the zygote kept a descriptor it was sent")
            os.close(read)
        finally:
            os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    def test_what_a_call_leaves_behind_is_killed_at_reap(self):
        started = time.monotonic()
        _, status, out, _ = self.call(["orphan"])
        self.assertEqual(status, "exit 0")
        orphan = int(out)
        self.assertTrue(eventually(lambda: not alive(orphan), 5), "the orphan survived")
        self.assertLess(time.monotonic() - started, 60)

    def test_the_end_of_the_connection_ends_the_zygote(self):
        self.report()
        self.sock.close()
        self.assertEqual(self.process.wait(timeout=10), 0)

    def test_nothing_can_read_the_zygotes_memory_or_its_childrens(self):
        _, report = self.report()
        self.assertEqual(report["dumpable"], 0)


if __name__ == "__main__":
    unittest.main()

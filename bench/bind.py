#!/usr/bin/env python3
"""The cost of plan binding (`--confirm-writes`) on a confirmed `create` from a local
channel: conda run directly against conda run through ccm's binding wrapper
(`src/host/bind/program/`), the preview (`--dry-run --json`) and the real run, interleaved
round by round so that both see the same machine.

    python3 bench/bind.py --conda /path/to/bin/conda [--rounds 7] [--packages 3]

Prints one JSON object: the median seconds of each step, direct and bound, and their
ratios. Everything conda writes goes to a temporary directory (HOME, CONDARC, a package
cache per run, environments); the channel comes from tests/fixtures/make_channel.py. Pure
standard library.
"""

import argparse
import base64
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRAPPER = os.path.join(REPO, "src", "host", "bind", "bind.py")


def interpreter(conda):
    with open(conda, "rb") as handle:
        first = handle.readline().decode().strip()
    return first[2:].split()[0]


def timed(command, env, cwd):
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit("failed: {}\n{}".format(" ".join(command[-6:]), done.stderr.decode()[-2000:]))
    return elapsed, done.stdout


def keep_plan(stdout, nonce, directory):
    """What the server does with a preview's document: the copies and plan.json; the
    plan's sha256."""
    marker = ("\n" + nonce + " ").encode()
    document = json.loads(stdout[stdout.rindex(marker) + len(marker) :])
    for index, entry in enumerate(document.get("files", [])):
        content = entry.pop("content", None)
        if content is not None:
            folder = os.path.join(directory, "files", str(index))
            os.makedirs(folder)
            copy = os.path.join(folder, os.path.basename(entry["path"]))
            with open(copy, "wb") as handle:
                handle.write(base64.b64decode(content))
            entry["copy"] = copy
    data = json.dumps(document).encode()
    with open(os.path.join(directory, "plan.json"), "wb") as handle:
        handle.write(data)
    return hashlib.sha256(data).hexdigest()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--conda", required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--packages", type=int, default=3)
    options = parser.parse_args()
    conda = os.path.abspath(options.conda)
    python = interpreter(conda)
    with open(WRAPPER) as handle:
        source = handle.read()
    work = tempfile.mkdtemp(prefix="ccm-bench-bind-")
    names = [f"pkg{i}={i + 1}.0" for i in range(options.packages)]
    channel = os.path.join(work, "channel")
    subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "tests", "fixtures", "make_channel.py"),
            channel,
            *names,
        ],
        check=True,
        capture_output=True,
    )
    for sub in ("home", "pkgs", "tmp", "plans"):
        os.makedirs(os.path.join(work, sub))
    condarc = os.path.join(work, "condarc")
    with open(condarc, "w") as handle:
        handle.write(f"channels:\n  - file://{channel}\n")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.path.join(work, "home"),
        "CONDARC": condarc,
        "CONDA_PKGS_DIRS": os.path.join(work, "pkgs"),
        "TMPDIR": os.path.join(work, "tmp"),
        "CONDA_OFFLINE": "1",
        "CONDA_OVERRIDE_CUDA": "",
    }
    packages = [n.split("=")[0] for n in names]
    steps = {key: [] for key in ("preview_direct", "preview_bound", "run_direct", "run_bound")}
    for round_ in range(options.rounds):
        for bound in (False, True) if round_ % 2 == 0 else (True, False):
            prefix = os.path.join(work, f"env-{round_}-{int(bound)}")
            # A package cache of its own: every run copies, checks and extracts.
            pkgs = os.path.join(work, f"pkgs-{round_}-{int(bound)}")
            env = dict(env, CONDA_PKGS_DIRS=pkgs)
            argv = ["create", "-y", "--json", "-p", prefix, *packages]
            dry = [*argv, "--dry-run", "--json"]
            if bound:
                nonce = f"bench-{round_}"
                wrapper = [python, "-I", "-c", source]
                seconds, stdout = timed([*wrapper, "preview", nonce, conda, "--", *dry], env, work)
                steps["preview_bound"].append(seconds)
                plan = os.path.join(work, "plans", str(round_))
                os.makedirs(plan)
                digest = keep_plan(stdout, nonce, plan)
                seconds, _ = timed([*wrapper, "run", plan, conda, digest, "--", *argv], env, work)
                steps["run_bound"].append(seconds)
            else:
                steps["preview_direct"].append(timed([conda, *dry], env, work)[0])
                steps["run_direct"].append(timed([conda, *argv], env, work)[0])
    medians = {key: round(statistics.median(values), 3) for key, values in steps.items()}
    direct = medians["preview_direct"] + medians["run_direct"]
    bound = medians["preview_bound"] + medians["run_bound"]
    print(
        json.dumps(
            {
                "conda": conda,
                "rounds": options.rounds,
                "packages": options.packages,
                "median_seconds": medians,
                "preview_ratio": round(medians["preview_bound"] / medians["preview_direct"], 2),
                "run_ratio": round(medians["run_bound"] / medians["run_direct"], 2),
                "confirmed_create_ratio": round(bound / direct, 2),
                "added_seconds": round(bound - direct, 3),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

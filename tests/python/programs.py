"""The Python programs the binary embeds, read the way the binary reads them.

A program is the concatenation, in order, of the files a Rust constant lists with
`concat!(include_str!(...), ...)`; the order is read from that Rust file, so these tests
always see what the binary runs.
"""

import ast
import re
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# name -> (the Rust file, the constant holding the program)
PROGRAMS = {
    "helper": ("src/host/discovery/helper.rs", "HELPER_SOURCE"),
    "zygote": ("src/host/exec/warm/zygote.rs", "SCRIPT"),
    "bind": ("src/host/bind.rs", "SOURCE"),
}


def parts(name):
    """The program's part files, in the order the binary concatenates them."""
    rust_file, constant = PROGRAMS[name]
    rust = REPO / rust_file
    text = rust.read_text()
    found = re.search(
        r"const\s+" + constant + r"\s*:\s*&str\s*=\s*concat!\((.*?)\);", text, re.DOTALL
    )
    if found is None:
        raise AssertionError(f"{rust_file}: no `const {constant}: &str = concat!(...)`")
    paths = re.findall(r'include_str!\(\s*"([^"]+)"\s*\)', found.group(1))
    if not paths:
        raise AssertionError(f"{rust_file}: {constant} includes no file")
    return [rust.parent / path for path in paths]


def source(name):
    """The program's whole source, as the interpreter receives it."""
    return "".join(path.read_text() for path in parts(name))


def load(name):
    """The program as a module, its definitions made and nothing run (it is not
    `__main__`). Each call makes a fresh module."""
    module = types.ModuleType(f"ccm_{name}")
    code = compile(source(name), f"<ccm {name}>", "exec")
    exec(code, module.__dict__)
    return module


def top_level_names(tree):
    """Names a module binds at its top level, imports and `if False:` blocks aside."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
    return names


def declared_names(tree):
    """(part, name) pairs of the `if False:` import block: names taken from other parts."""
    pairs = []
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Constant)
            and node.test.value is False
        ):
            for statement in node.body:
                if not isinstance(statement, ast.ImportFrom):
                    raise AssertionError("an `if False:` block holds only `from PART import`")
                for alias in statement.names:
                    pairs.append((statement.module, alias.name))
    return pairs

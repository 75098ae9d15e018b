"""ccm discovery helper: runs under the target conda's own interpreter.

The server embeds this program and runs it as ``python -I -c <this source> <mode> [json]``,
so nothing from the server's environment (PYTHONPATH, user site-packages, the current
directory) can shadow the target's modules. It inspects the target's real argparse parser
and plugin inventory and turns them into plain JSON.

One program in several parts (this one first): ``helper.rs`` concatenates the files of
``helper/`` in order into one source, so the parts share one namespace; a part names what
it takes from the others in an ``if False:`` import block (see ARCHITECTURE.md, "Python in
src/"). Only the last part runs anything, and only as ``__main__``.

Output framing: the JSON document is written to a private duplicate of the original
standard output; file descriptor 1 itself is pointed at standard error before conda is
imported, so anything conda or a plugin prints (from Python or from C) lands on stderr and
cannot corrupt the document. The document is one line of ASCII JSON.

Modes:
  catalog          the parser tree, the plugin inventory and interpreter facts
  plugins          the plugin inventory only (restart checks)
  parse   <json>   parse each argv of a batch with the target's parser (round-trip tests)
  completion       conda-completion's manifest, converted, with its file identity
  targets  <json>  the environments one argv targets, by conda's own context (scoped writes)
"""

import json
import os
import sys

PROTOCOL = 1


def _take_stdout():
    """Keep the real stdout for the document and send fd 1 to stderr from now on."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _emit(out, document, code=0):
    """Write `document` (with the protocol number) as one line of ASCII JSON to `out`, then
    end the process with `code` at once (`os._exit`: no exit handler runs after it)."""
    document["protocol"] = PROTOCOL
    data = json.dumps(
        document, ensure_ascii=True, sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    out.write(data.encode("ascii"))
    out.write(b"\n")
    out.flush()
    sys.stderr.flush()
    os._exit(code)

"""Bytes of one `conda_info {"json": true}` tools/call response, per `ccm` binary.

Usage: python bench/result_bytes.py CONDA CCM [CCM...]

Starts each `ccm --conda-exe CONDA` over stdio (protocol revision 2025-11-25), calls
`conda_info {"json": true}` once and prints the byte count of the whole JSON-RPC response
line and of its text content. Compare a build before a change with one after it.
"""

import json
import subprocess
import sys


def measure(binary, conda):
    child = subprocess.Popen(
        [binary, "--conda-exe", conda],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )

    def send(message):
        child.stdin.write((json.dumps(message) + "\n").encode())
        child.stdin.flush()

    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "result-bytes", "version": "1"},
            },
        }
    )
    child.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "conda_info", "arguments": {"json": True}},
        }
    )
    line = child.stdout.readline().rstrip(b"\n")
    child.stdin.close()
    child.wait()
    content = json.loads(line)["result"]["content"]
    return len(line), sum(len(block["text"].encode()) for block in content)


def main():
    conda = sys.argv[1]
    for binary in sys.argv[2:]:
        response, text = measure(binary, conda)
        print(json.dumps({"ccm": binary, "response_bytes": response, "text_bytes": text}))


if __name__ == "__main__":
    main()

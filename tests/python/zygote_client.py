"""ccm's side of the zygote's wire format, written from its description (zygote/start.py),
not from the zygote's code: what these tests send."""

import array
import socket
import struct


def send_request(sock, fields, fds=()):
    """One request: a 4-byte big-endian length with `fds` attached to it, then the fields
    NUL-separated."""
    body = b"\0".join(fields)
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([struct.pack(">I", len(body))], ancillary)
    sock.sendall(body)


def run_fields(argv, env, cwd=b"/", ns=b"none", memory=b"", file_size=b""):
    """The fields of a "run" request."""
    fields = [b"run", cwd, ns, memory, file_size, str(len(argv)).encode()]
    fields += list(argv)
    fields += [name + b"=" + value for name, value in env]
    return fields


class Lines:
    """The zygote's answers, one line at a time."""

    def __init__(self, sock):
        self.sock = sock
        self.pending = b""

    def next(self):
        while b"\n" not in self.pending:
            data = self.sock.recv(4096)
            if not data:
                raise EOFError(f"the zygote closed the connection (pending {self.pending!r})")
            self.pending += data
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode()

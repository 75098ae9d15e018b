# Part of the zygote (see start.py): the wire format on the socket, ccm -> zygote: a
# request (its length, NUL-separated fields, descriptors over SCM_RIGHTS) and the "reap"
# line. The zygote's answers are single lines written where they are decided (serve.py).
import socket
import struct

# Descriptors one request may carry: stdio, two namespaces, cgroup.procs files.
MAX_FDS = 64


def recv_request(sock):
    """One request: its fields and descriptors; None at end of file (ccm is gone)."""
    fds = []
    head = b""
    while len(head) < 4:
        data, anc, _flags, _addr = sock.recvmsg(4 - len(head), socket.CMSG_SPACE(MAX_FDS * 4))
        if not data:
            return None
        head += data
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(payload) - len(payload) % 4
                fds.extend(struct.unpack(f"{usable // 4}i", payload[:usable]))
    (length,) = struct.unpack(">I", head)
    body = bytearray()
    while len(body) < length:
        data = sock.recv(min(1 << 20, length - len(body)))
        if not data:
            return None
        body += data
    return bytes(body).split(b"\0"), fds


def recv_reap(sock):
    """Wait for ccm's "reap" line (or the end of the connection). Exactly "reap\\n" is
    read: what follows is the next request, its descriptors attached."""
    line = b""
    while len(line) < 5:
        data = sock.recv(5 - len(line))
        if not data:
            break
        line += data

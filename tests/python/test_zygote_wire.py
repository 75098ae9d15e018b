"""The zygote's wire format and request, piece by piece (zygote/wire.py, child.py): framing
over a socket pair, descriptors passed with SCM_RIGHTS, the "reap" line, a request's fields
and descriptors, and the exit status of a call."""

import io
import os
import socket
import struct
import threading
import unittest
from contextlib import redirect_stderr

import programs
from zygote_client import run_fields, send_request

zygote = programs.load("zygote")


def same_file(a, b):
    one, other = os.fstat(a), os.fstat(b)
    return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


class WireTest(unittest.TestCase):
    def setUp(self):
        self.ours, self.theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.theirs.settimeout(10)
        self.pipes = [os.pipe() for _ in range(3)]
        self.received = []

    def tearDown(self):
        self.ours.close()
        self.theirs.close()
        for fd in [fd for pair in self.pipes for fd in pair] + self.received:
            try:
                os.close(fd)
            except OSError:
                pass

    def receive(self):
        request = zygote.recv_request(self.theirs)
        if request is not None:
            self.received.extend(request[1])
        return request

    def test_a_request_and_its_descriptors(self):
        fds = [read for read, _ in self.pipes]
        send_request(self.ours, [b"run", b"/tmp", b"none", b"", b"7", b"1", b"list"], fds)
        fields, received = self.receive()
        self.assertEqual(fields, [b"run", b"/tmp", b"none", b"", b"7", b"1", b"list"])
        self.assertEqual(len(received), 3)
        for sent, got in zip(fds, received, strict=True):
            self.assertNotEqual(sent, got)
            self.assertTrue(same_file(sent, got))

    def test_a_header_that_arrives_byte_by_byte(self):
        body = b"run\0x"
        head = struct.pack(">I", len(body))
        fd = self.pipes[0][1]
        self.ours.sendmsg(
            [head[:1]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))]
        )
        for byte in head[1:]:
            self.ours.send(bytes([byte]))
        self.ours.sendall(body)
        fields, received = self.receive()
        self.assertEqual(fields, [b"run", b"x"])
        self.assertEqual(len(received), 1)
        self.assertTrue(same_file(fd, received[0]))

    def test_a_long_body(self):
        # Longer than one read (1 MiB) and than the socket's buffer: sent from a thread.
        argument = os.urandom(3 << 20).replace(b"\0", b"a")
        sender = threading.Thread(target=send_request, args=(self.ours, [b"run", argument]))
        sender.start()
        fields, received = self.receive()
        sender.join()
        self.assertEqual(fields, [b"run", argument])
        self.assertEqual(received, [])

    def test_requests_back_to_back_keep_their_own_descriptors(self):
        send_request(self.ours, [b"first"], [self.pipes[0][0]])
        send_request(self.ours, [b"second"], [self.pipes[1][0], self.pipes[2][0]])
        first, second = self.receive(), self.receive()
        self.assertEqual((first[0], len(first[1])), ([b"first"], 1))
        self.assertEqual((second[0], len(second[1])), ([b"second"], 2))
        self.assertTrue(same_file(self.pipes[0][0], first[1][0]))
        self.assertTrue(same_file(self.pipes[2][0], second[1][1]))

    def test_the_end_of_the_connection(self):
        for sent in (b"", b"\0\0", struct.pack(">I", 10) + b"short"):
            with self.subTest(sent=sent):
                ours, theirs = socket.socketpair()
                with ours, theirs:
                    ours.sendall(sent)
                    ours.shutdown(socket.SHUT_WR)
                    self.assertIsNone(zygote.recv_request(theirs))

    def test_reap_reads_exactly_its_line(self):
        self.ours.sendall(b"reap\n")
        send_request(self.ours, [b"next"], [self.pipes[0][0]])
        zygote.recv_reap(self.theirs)
        fields, received = self.receive()
        self.assertEqual((fields, len(received)), ([b"next"], 1))

    def test_reap_waits_for_its_whole_line(self):
        self.ours.sendall(b"reap")
        waiting = threading.Thread(target=zygote.recv_reap, args=(self.theirs,))
        waiting.start()
        waiting.join(0.3)
        self.assertTrue(waiting.is_alive(), "recv_reap returned before its newline")
        self.ours.sendall(b"\n")
        send_request(self.ours, [b"next"])
        waiting.join(10)
        self.assertFalse(waiting.is_alive())
        self.assertEqual(self.receive(), ([b"next"], []))

    def test_reap_at_the_end_of_the_connection_returns(self):
        self.ours.close()
        zygote.recv_reap(self.theirs)


class RequestTest(unittest.TestCase):
    ENV = [(b"PATH", b"/usr/bin"), (b"EMPTY", b""), (b"EQ", b"a=b")]

    def test_fields(self):
        fields = run_fields([b"list", b"--json"], self.ENV, cwd=b"/w", memory=b"9", file_size=b"")
        request = zygote.Request(fields, [10, 11, 12])
        self.assertEqual((request.cwd, request.memory, request.file_size), (b"/w", b"9", b""))
        self.assertEqual(request.argv, [b"list", b"--json"])
        self.assertEqual(request.env, [b"PATH=/usr/bin", b"EMPTY=", b"EQ=a=b"])
        self.assertEqual(request.stdio, [10, 11, 12])
        self.assertEqual((request.held, request.cgroup_procs), ({}, []))

    def test_an_argument_that_looks_like_an_environment_entry(self):
        fields = run_fields([b"A=B", b""], [(b"X", b"1")])
        request = zygote.Request(fields, [0, 1, 2])
        self.assertEqual((request.argv, request.env), ([b"A=B", b""], [b"X=1"]))

    def test_descriptors_by_namespace(self):
        cases = [
            (b"none", [3, 4], ({}, [3, 4])),
            (b"mnt,ipc", [3, 4], ({"mnt": 3, "ipc": 4}, [])),
            (b"mnt,ipc,landlock", [3, 4, 5, 6], ({"mnt": 3, "ipc": 4, "landlock": 5}, [6])),
            (b"user,mnt,ipc", [3, 4, 5, 6], ({"user": 3, "mnt": 4, "ipc": 5}, [6])),
            (
                b"user,mnt,ipc,landlock",
                [3, 4, 5, 6, 7],
                ({"user": 3, "mnt": 4, "ipc": 5, "landlock": 6}, [7]),
            ),
        ]
        for ns, rest, expected in cases:
            with self.subTest(ns=ns, rest=rest):
                request = zygote.Request(run_fields([], [], ns=ns), [0, 1, 2] + rest)
                self.assertEqual((request.held, request.cgroup_procs), expected)

    def test_a_request_it_cannot_read(self):
        cases = [
            ([b"run", b"/", b"none"], [0, 1, 2], ValueError),
            ([b"run", b"/", b"none", b"", b"", b"two"], [0, 1, 2], ValueError),
            (run_fields([], [], ns=b"user,mnt,ipc"), [0, 1, 2, 3], ValueError),
            (run_fields([], [], ns=b"mnt,ipc"), [0, 1, 2], ValueError),
        ]
        for fields, fds, error in cases:
            with self.subTest(fields=fields, fds=fds):
                with self.assertRaises(error):
                    zygote.Request(fields, fds)


class ExitStatusTest(unittest.TestCase):
    def test_as_the_interpreter_exits(self):
        for code, status in ((None, 0), (0, 0), (3, 3), (256, 0), (261, 5), (-1, 255), (True, 1)):
            with self.subTest(code=code):
                self.assertEqual(zygote.exit_status(code), status)

    def test_a_message_is_printed_and_exits_1(self):
        stderr = io.StringIO()
        with redirect_stderr(stderr):
            self.assertEqual(zygote.exit_status("no such environment"), 1)
        self.assertEqual(stderr.getvalue(), "no such environment\n")


if __name__ == "__main__":
    unittest.main()

"""The warm zygote: runs under the target's interpreter (with the flags of the `conda`
entry script's #! line), inside the read-only sandbox (joined before exec: no privilege,
every mount read-only, the unix-socket filter, which its children inherit), imports
conda's CLI modules once, then forks one child per call. It talks only over the socket
inherited as file descriptor 3; it never opens a path of its own.

argv: -c <this program> <entry script> <sys.path[0] of a cold run>

One program in several parts (this one first): `zygote.rs` concatenates the files of
`zygote/` in order into one source, so the parts share one namespace; a part names what it
takes from the others in an `if False:` import block (see ARCHITECTURE.md, "Python in
src/"). Only this part's path fix and the last part's `main()` run on their own, and only
as `__main__` (which `python -c` is).

Requests (ccm -> zygote), each a 4-byte big-endian length and a payload of NUL-separated
fields, the call's file descriptors attached to the first byte:
  run, cwd, ns ("none", or the comma-separated kinds of the call's sandbox's
  descriptors in their order: [user,]mnt,ipc[,landlock][,seccomp]; ccm sends
  user,mnt,ipc[,landlock]: the call's namespaces are nested in the zygote's user
  namespace, and the filter is the zygote's own, inherited), memory limit (or ""), file-size
  limit (or ""),
  argument count, arguments..., environment entries (NAME=VALUE)...
  descriptors: stdin, stdout, stderr, the sandbox's (user, mount and IPC namespaces, the
  Landlock ruleset, the memfd of the seccomp program), cgroup.procs...
Answers (zygote -> ccm), one line each: "ready PRELOADED REFUSED", "pid N", "stale" (a
module file changed since import: replace the zygote), "exit CODE" / "signal N", "error
WORDS". After "exit"/"signal" the zygote waits for "reap" (the child stays a zombie until
ccm's sweep is over, so its pid and process group cannot be reused).
"""

import sys

# A cold run's sys.path[0] is the entry script's directory; `-c` put "" (the working
# directory) there instead. Replaced before anything else is imported: every other part's
# imports come after this one. Under PYTHONSAFEPATH (every child's environment, Python >=
# 3.11) neither run has either.
if __name__ == "__main__" and not getattr(sys.flags, "safe_path", False):
    sys.path[0] = sys.argv[2]

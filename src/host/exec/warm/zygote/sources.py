# Part of the zygote (see start.py): what the zygote's code came from, recorded as it was
# when loaded, and whether any of it changed since (then the zygote answers "stale" and is
# replaced).
import os
import sys


def signature(path):
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def signature_or_none(path):
    try:
        return signature(path)
    except OSError:
        return None


class Sources:
    """Files: path -> (device, inode, size, modification and change time), or None for a
    path that must stay missing; mapped libraries: path -> (device, inode) of the mapping."""

    def __init__(self):
        self.watched = {}
        self.mapped = {}
        self.seen_modules = set()

    def watch(self, path):
        """Record `path` as it is now (also when missing: it must stay missing)."""
        if path not in self.watched:
            self.watched[path] = signature_or_none(path)

    def watch_new_modules(self):
        """Record the files of modules imported since the last call (right after import)."""
        import types

        for name, module in list(sys.modules.items()):
            if name not in self.seen_modules:
                self.seen_modules.add(name)
                # Through the dict: an attribute lookup could run a lazy module's code.
                try:
                    namespace = types.ModuleType.__getattribute__(module, "__dict__")
                except TypeError:
                    continue
                path = namespace.get("__file__")
                if isinstance(path, str) and path not in self.watched:
                    signature_now = signature_or_none(path)
                    if signature_now is not None:
                        self.watched[path] = signature_now

    def watch_paths(self):
        """The directories and archives on sys.path: a module installed there later (an
        optional dependency a module fell back without) changes them."""
        for entry in sys.path:
            if entry:
                self.watch(entry)

    def watch_mappings(self, maps="/proc/self/maps"):
        """Shared libraries mapped by extension modules (libssl, libsqlite3...): a replaced
        file is a different inode than the one mapped."""
        try:
            with open(maps) as listing:
                lines = listing.read().splitlines()
        except OSError:
            return
        for line in lines:
            fields = line.split(None, 5)
            if len(fields) < 6 or not fields[5].startswith("/") or fields[4] == "0":
                continue
            path = fields[5]
            major, _, minor = fields[3].partition(":")
            mapped = (os.makedev(int(major, 16), int(minor, 16)), int(fields[4]))
            try:
                st = os.stat(path)
            except OSError:
                continue
            # Only a file still at its path (not a deleted one, a memfd or a device).
            if (st.st_dev, st.st_ino) == mapped:
                self.mapped[path] = mapped

    def stale(self):
        """Whether any file the zygote's code came from changed since it was loaded (an
        update from outside that the target's stamp does not cover, e.g. a plugin's
        dependency or a library)."""
        for path, seen in self.watched.items():
            if signature_or_none(path) != seen:
                return True
        for path, (device, inode) in self.mapped.items():
            try:
                st = os.stat(path)
            except OSError:
                return True
            if (st.st_dev, st.st_ino) != (device, inode):
                return True
        return False

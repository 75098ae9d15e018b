# Part of the discovery helper (see document.py): the `completion` mode, conda-completion's
# manifest read through its public API and converted to plain JSON.
import os
import stat as stat_mode

if False:  # Names from the other parts of this program (one namespace; see document.py).
    from document import _emit


def mode_completion(out):
    """Read the completion manifest through conda-completion's public API only."""
    from importlib import metadata

    newer = "Use conda-completion 0.3 or newer in the target environment."
    regenerate = "Regenerate completion.msgpack in the target environment."

    def reply(availability, hint, **extra):
        extra.update({"availability": availability, "hint": hint})
        _emit(out, extra)

    try:
        from conda_completion import exceptions as cc_exceptions
        from conda_completion import manifest as cc_manifest
        from conda_completion import paths as cc_paths
        from conda_completion import plugin as cc_plugin
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "conda_completion":
            reply("not_installed", "Install conda-completion in the target conda environment.")
        reply("unavailable", "Repair the conda-completion installation in the target environment.")
    except ImportError:
        reply("unavailable", "Use a conda-completion version with the public manifest API.")
    try:
        version = metadata.version("conda-completion")
    except Exception:
        version = None
    if version:
        try:
            release = tuple(int(part) for part in version.split(".", 2)[:2])
        except ValueError:
            release = ()
        if release and release < (0, 3):
            reply("unavailable", newer)
    read_manifest = getattr(cc_manifest, "read_manifest", None)
    manifest_path = getattr(cc_paths, "manifest_path", None)
    if not callable(read_manifest) or not callable(manifest_path):
        reply("unavailable", newer)
    manifest_error = getattr(cc_exceptions, "ManifestError", OSError)
    path = manifest_path()
    try:
        stat = os.stat(path)
        # A FIFO or a device there would block the read (and the server's queue with it).
        if not stat_mode.S_ISREG(stat.st_mode):
            raise OSError("the manifest is not a regular file")
        manifest = read_manifest(path)
    except FileNotFoundError:
        reply(
            "not_generated",
            "Run 'conda completion generate' in the target environment.",
            manifest_path=str(path),
        )
    except (manifest_error, OSError):
        reply("unavailable", regenerate, manifest_path=str(path))
    try:
        converted = _convert_manifest(manifest)
    except (AttributeError, TypeError, ValueError):
        reply("unavailable", newer)
    try:
        current_hash = cc_plugin.plugin_entry_point_hash()
    except Exception:
        current_hash = None
    reply(
        "available",
        None,
        manifest_path=str(path),
        identity=[stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns],
        conda_completion_version=version,
        current_plugin_hash=current_hash,
        manifest=converted,
    )


def _to_dict(obj):
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return _plain_dict(to_dict())
    raise TypeError("manifest object without to_dict")


def _plain_dict(value, depth=0):
    if isinstance(value, dict) and depth < 16:
        return {str(k): _plain_dict(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and depth < 16:
        return [_plain_dict(v, depth + 1) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    return str(value)


def _convert_command(spec):
    return {
        "summary": getattr(spec, "summary", None),
        "options": [
            dict({"name": flag}, **_to_dict(option))
            for flag, option in (getattr(spec, "options", None) or {}).items()
        ],
        "positionals": [_to_dict(p) for p in (getattr(spec, "positionals", None) or [])],
        "subcommands": {
            name: _convert_command(child)
            for name, child in (getattr(spec, "subcommands", None) or {}).items()
        },
        "exclusive_groups": [list(g) for g in (getattr(spec, "exclusive_groups", None) or [])],
    }


def _convert_manifest(manifest):
    for attribute in (
        "aliases",
        "commands",
        "generated_at",
        "plugin_hash",
        "root_options",
        "runtime_sources",
        "version",
    ):
        if not hasattr(manifest, attribute):
            raise TypeError("manifest lacks " + attribute)
    return {
        "version": _plain_dict(manifest.version),
        "generated_at": _plain_dict(manifest.generated_at),
        "plugin_hash": manifest.plugin_hash or None,
        "aliases": {
            name: list(getattr(alias, "target", alias) or [])
            for name, alias in (manifest.aliases or {}).items()
        },
        "root_options": [
            dict({"name": flag}, **_to_dict(option))
            for flag, option in (manifest.root_options or {}).items()
        ],
        "commands": {
            name: _convert_command(spec) for name, spec in (manifest.commands or {}).items()
        },
        "runtime_sources": {
            name: _to_dict(source) for name, source in (manifest.runtime_sources or {}).items()
        },
    }

# Part of the discovery helper (see document.py), the last one: the mode dispatch, and the
# only code of the program that runs on its own (as `__main__`, which `python -c` is).
import json
import sys

if False:  # Names from the other parts of this program (one namespace; see document.py).
    from catalog import mode_catalog, mode_plugins
    from completion import mode_completion
    from document import _emit, _take_stdout
    from roundtrip import mode_parse
    from targets import mode_targets


def main():
    out = _take_stdout()
    mode = sys.argv[1] if len(sys.argv) > 1 else "catalog"
    try:
        if mode == "catalog":
            mode_catalog(out)
        elif mode == "plugins":
            mode_plugins(out)
        elif mode == "parse":
            mode_parse(out, json.loads(sys.argv[2]) if len(sys.argv) > 2 else json.load(sys.stdin))
        elif mode == "completion":
            mode_completion(out)
        elif mode == "targets":
            mode_targets(out, json.load(sys.stdin))
        else:
            _emit(out, {"error": "mode", "detail": mode}, 2)
    except SystemExit:
        raise
    except BaseException as exc:  # never a traceback instead of a document
        _emit(out, {"error": "internal", "detail": type(exc).__name__}, 3)


if __name__ == "__main__":
    main()

use super::*;
use std::io::Write;

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(body.as_bytes()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn shebang(path: &Path) -> Option<PathBuf> {
    Conda::resolve(path.to_path_buf()).shebang
}

fn kernel(path: &Path) -> Option<(PathBuf, Option<OsString>)> {
    Conda::resolve(path.to_path_buf())
        .script
        .map(|s| (s.interpreter, s.argument))
}

#[test]
fn shebang_forms() {
    let dir = tempfile::tempdir().unwrap();
    let plain = script(dir.path(), "a", "#!/opt/conda/bin/python -E\nimport x\n");
    assert_eq!(shebang(&plain), Some("/opt/conda/bin/python".into()));
    let tramp = script(
        dir.path(),
        "b",
        "#!/bin/sh\n'''exec' \"/very/long/path/bin/python\" \"$0\" \"$@\"\n' '''\n",
    );
    assert_eq!(shebang(&tramp), Some("/very/long/path/bin/python".into()));
    let binary = script(dir.path(), "c", "\x7fELF....");
    assert_eq!(shebang(&binary), None);
}

#[test]
fn the_shebang_is_read_as_the_kernel_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let plain = script(dir.path(), "a", "#!/opt/py/bin/python\nimport sys\n");
    assert_eq!(
        kernel(&plain).unwrap(),
        (PathBuf::from("/opt/py/bin/python"), None)
    );
    // One argument, everything after the interpreter (as Linux passes it).
    let flagged = script(dir.path(), "b", "#! /opt/py/bin/python -s -E \nx\n");
    assert_eq!(
        kernel(&flagged).unwrap(),
        (PathBuf::from("/opt/py/bin/python"), Some("-s -E".into()))
    );
    for bad in ["import sys\n", "#!python\n", "#!/opt/py/bin/python"] {
        let path = script(dir.path(), "c", bad);
        assert_eq!(kernel(&path), None, "{bad:?}");
    }
    assert_eq!(kernel(&dir.path().join("missing")), None);
}

#[test]
fn the_kernel_reads_one_short_line_only() {
    // A `#!` line longer than the kernel's read has no newline in it: not a script the
    // zygote may start, though discovery still reads the interpreter from it.
    let dir = tempfile::tempdir().unwrap();
    let long = format!("#!/opt/py/bin/python {}\nimport sys\n", "x".repeat(300));
    let path = script(dir.path(), "long", &long);
    assert_eq!(kernel(&path), None);
    assert_eq!(shebang(&path), Some("/opt/py/bin/python".into()));
}

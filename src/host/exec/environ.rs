//! What every child's environment says about where code comes from: nothing a child
//! starts may load code from the working directory or another place a caller can write.
//!
//! The working directory is the caller's (the server's is the user's project, where an
//! agent has file tools; a call's `ccm_cwd` is any allowed directory), so:
//!
//! - `PYTHONSAFEPATH=1` (Python ≥ 3.11): no interpreter a call starts prepends the working
//!   directory (`-c`, `-m`, stdin) or a script's directory to `sys.path`. conda's CUDA
//!   probe starts a `multiprocessing` *spawn* child, `python -c 'from multiprocessing.spawn
//!   import spawn_main…'`, whose `sys.path[0]` would be the working directory until
//!   `spawn.prepare()` runs (conda/plugins/virtual_packages/cuda.py:49-69); the variable is
//!   inherited by every descendant that does not ignore the environment, and an
//!   interpreter that does (`-E`, `-I`) and is itself a `multiprocessing` parent passes
//!   `-P`/`-I` on (`subprocess._args_from_interpreter_flags`).
//! - `PYTHONNOUSERSITE=1`: no user site directory (`~/.local/lib/pythonX.Y/site-packages`)
//!   and so none of its `.pth` files or `usercustomize`: a write call can make conda put
//!   files there (an environment created at `~/.local`), and a `.pth` file is code that
//!   every later interpreter runs at startup.
//! - `PATH`, `PYTHONPATH` and `LD_LIBRARY_PATH` keep only absolute entries: an empty or
//!   relative entry (a common `PATH=$PATH:…` slip on an empty variable) names the working
//!   directory, from which a program conda runs by name (`uname`, `lsb_release`, `ps`), a
//!   module or a shared library would then be taken.
//!
//! The values are applied after the withheld variables are removed (a withheld path list
//! stays withheld), identically for cold children ([`super::spawn`]), warm children and
//! the zygote ([`super::warm`]), and in the size check ([`super::check_size`]).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// Variables every child gets with these values, whatever the server's environment says.
pub(crate) const SET: [(&str, &str); 2] = [("PYTHONSAFEPATH", "1"), ("PYTHONNOUSERSITE", "1")];

/// Path lists whose empty and relative entries are dropped.
pub(crate) const PATH_LISTS: [&str; 3] = ["PATH", "PYTHONPATH", "LD_LIBRARY_PATH"];

/// One change to the inherited environment: set the variable, or remove it (`None`).
pub(crate) type Change = (&'static str, Option<OsString>);

/// The changes every child's inherited environment gets, after the variables for which
/// `withheld` is true were removed; read from this process's environment.
pub(crate) fn changes(withheld: impl Fn(&str) -> bool) -> Vec<Change> {
    changes_of(|name| std::env::var_os(name), withheld)
}

/// [`changes`] over the environment `lookup` reads (pure).
pub(crate) fn changes_of(
    lookup: impl Fn(&str) -> Option<OsString>,
    withheld: impl Fn(&str) -> bool,
) -> Vec<Change> {
    let mut out: Vec<Change> = SET
        .iter()
        .map(|(name, value)| (*name, Some(OsString::from(value))))
        .collect();
    for name in PATH_LISTS {
        if withheld(name) {
            continue;
        }
        let Some(value) = lookup(name) else { continue };
        let kept = absolute_entries(&value);
        // An empty value is one empty entry: the working directory.
        if kept != value || value.is_empty() {
            out.push((name, (!kept.is_empty()).then_some(kept)));
        }
    }
    out
}

/// The absolute entries of a `:`-separated path list, in order.
pub(crate) fn absolute_entries(value: &OsStr) -> OsString {
    let kept: Vec<&[u8]> = value
        .as_bytes()
        .split(|b| *b == b':')
        .filter(|entry| entry.starts_with(b"/"))
        .collect();
    OsString::from_vec(kept.join(&b':'))
}

/// Apply `changes` to an environment held as a map.
pub(crate) fn apply(env: &mut std::collections::BTreeMap<OsString, OsString>, changes: &[Change]) {
    for (name, value) in changes {
        match value {
            Some(value) => env.insert(OsString::from(name), value.clone()),
            None => env.remove(OsStr::new(name)),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(env: &[(&str, &str)], withheld: &[&str]) -> Vec<(String, Option<String>)> {
        changes_of(
            |name| {
                env.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            },
            |name| withheld.contains(&name),
        )
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.map(|v| v.to_string_lossy().into_owned())))
        .collect()
    }

    fn set() -> Vec<(String, Option<String>)> {
        vec![
            ("PYTHONSAFEPATH".into(), Some("1".into())),
            ("PYTHONNOUSERSITE".into(), Some("1".into())),
        ]
    }

    #[test]
    fn python_never_takes_the_working_directory_or_the_user_site() {
        // Whatever the server's environment says.
        assert_eq!(
            run(&[("PYTHONSAFEPATH", ""), ("PYTHONNOUSERSITE", "")], &[]),
            set()
        );
        // Withholding them does not take the guard away.
        assert_eq!(run(&[], &["PYTHONSAFEPATH", "PYTHONNOUSERSITE"]), set());
    }

    #[test]
    fn path_lists_keep_only_absolute_entries() {
        let mut expected = set();
        expected.push(("PATH".into(), Some("/usr/bin:/bin".into())));
        expected.push(("PYTHONPATH".into(), None));
        expected.push(("LD_LIBRARY_PATH".into(), Some("/opt/lib".into())));
        assert_eq!(
            run(
                &[
                    ("PATH", ":/usr/bin:.:bin::/bin:"),
                    ("PYTHONPATH", "src:"),
                    ("LD_LIBRARY_PATH", "/opt/lib:"),
                ],
                &[]
            ),
            expected
        );
        // Unchanged lists are not touched; a withheld one stays withheld.
        assert_eq!(
            run(
                &[("PATH", "/usr/bin:/bin"), ("PYTHONPATH", ":x")],
                &["PYTHONPATH"]
            ),
            set()
        );
        // An empty value is an empty entry: the working directory.
        let mut empty = set();
        empty.push(("PATH".into(), None));
        assert_eq!(run(&[("PATH", "")], &[]), empty);
    }
}

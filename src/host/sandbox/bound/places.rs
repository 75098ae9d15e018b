//! What a bounded write writes besides the call's own places, by conda's source: the
//! run's private package cache (the operator's read-only behind it), the operator's
//! caches, conda's user registry, the places conda itself writes and those a call names
//! by name rather than by path.

use std::path::{Path, PathBuf};

use super::Writable;

/// The largest `environments.txt` the server reads to settle it (a line per environment:
/// 16 MiB is some hundred thousand of them).
const MAX_REGISTRY: u64 = 16 << 20;

/// The run's own user cache (`XDG_CACHE_HOME`), `cache/` in its temporary directory:
/// conda's notices cache and conda-completion's manifest, discarded after the run.
pub const USER_CACHE: &str = "cache";

/// conda's package caches by environment (conda/base/context.py:793-800 `pkgs_dirs`; the
/// variable's caches come first, before any a condarc file names).
pub const PKGS_DIRS: &str = "CONDA_PKGS_DIRS";

/// The run's own package cache, `pkgs/` in its temporary directory `tmpdir`, made with
/// the file by which conda knows a writable cache (`urls.txt`,
/// conda/core/package_cache_data.py:347-356 `_check_writable`), and the child's
/// `CONDA_PKGS_DIRS`: this cache first, then the operator's `caches`. No shared package
/// cache is a place of a bounded write (an environment made by conda is hard links to its
/// cache: a write there is a write to every environment linked from it, and the next
/// install of a changed extracted package runs what was added), so the operator's caches
/// are read-only to the run: conda links (under the walls: copies) from the packages
/// already extracted there and downloads and extracts the others into the first writable
/// cache, this one (:600-700 `make_actions_for_record`, :218-239 `first_writable`). Its
/// repodata cache (conda/gateways/repodata/__init__.py:988-991 `create_cache_dir`: the
/// first writable cache's `cache/`) is seeded with a copy of the first operator cache's
/// (its regular files; a copy, so nothing the run writes there reaches the operator's).
/// Removed with the temporary directory after the run.
pub fn private_cache(
    tmpdir: &Path,
    inputs: &crate::host::sandbox::Inputs,
    root_prefix: Option<&Path>,
) -> std::io::Result<(PathBuf, std::ffi::OsString)> {
    let caches = pkgs_dirs(inputs, root_prefix);
    std::fs::create_dir(tmpdir.join(USER_CACHE))?;
    let private = tmpdir.join("pkgs");
    std::fs::create_dir(&private)?;
    std::fs::write(private.join("urls.txt"), b"")?;
    let seeded = private.join("cache");
    std::fs::create_dir(&seeded)?;
    if let Some(Ok(entries)) = caches
        .iter()
        .find(|c| c.join("cache").is_dir())
        .map(|c| std::fs::read_dir(c.join("cache")))
    {
        for entry in entries.flatten() {
            // Regular files only, not followed through a symlink (`file_type` is lstat's).
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::copy(entry.path(), seeded.join(entry.file_name()));
            }
        }
    }
    // conda splits the variable at commas (a `SequenceParameter`'s `string_delimiter`,
    // conda/common/configuration.py:1104; conda/base/context.py:331-334).
    let mut joined = private.clone().into_os_string();
    if joined.as_encoded_bytes().contains(&b',') {
        return Err(std::io::Error::other("a package cache path holds a comma"));
    }
    // The operator's value as conda reads it (`~`, `$VAR`), else conda's defaults, which
    // the variable replaces (conda/base/context.py:793-800).
    match &inputs.conda_pkgs_dirs {
        Some(value) => {
            joined.push(",");
            joined.push(value);
        }
        None => {
            for cache in &caches {
                joined.push(",");
                joined.push(cache);
            }
        }
    }
    Ok((private, joined))
}

/// Package caches: tarballs, extracted packages, `urls.txt`, the repodata cache
/// `<pkgs_dir>/cache`, the trash. `CONDA_PKGS_DIRS` replaces `<root>/pkgs` and
/// `~/.conda/pkgs` (conda/base/context.py:793-800 `pkgs_dirs`;
/// conda/gateways/repodata/__init__.py `create_cache_dir`).
pub fn pkgs_dirs(
    inputs: &crate::host::sandbox::Inputs,
    root_prefix: Option<&Path>,
) -> Vec<PathBuf> {
    match &inputs.conda_pkgs_dirs {
        // Split at commas, as conda does (conda/common/configuration.py:1104, :234).
        Some(dirs) => dirs
            .to_string_lossy()
            .split(',')
            .map(|p| PathBuf::from(p.trim()))
            .filter(|p| p.is_absolute())
            .collect(),
        None => {
            let dot_conda = inputs.home.as_ref().map(|h| h.join(".conda"));
            root_prefix
                .map(|r| r.join("pkgs"))
                .into_iter()
                .chain(dot_conda.map(|d| d.join("pkgs")))
                .collect()
        }
    }
}

/// conda's user registry of environments, `~/.conda/environments.txt`
/// (conda/core/envs_manager.py:26 `get_user_environments_txt_file`), kept by the server
/// for a bounded write rather than by the run: a run that could write it rewrote it
/// (dropping the operator's environments, so the sandbox no longer overlaid them and
/// every preview into them failed) or flooded it (attack 5 V4, V6). The run reads it;
/// conda's own registration fails there with a warning (:84-92, `EACCES`/`EROFS`). After
/// the run, each target the call judged is registered as conda would have (`register_env`,
/// :58-92: its normalized path appended once, `~/.conda` made when missing) when it is an
/// environment now (`conda-meta` a directory) and the run succeeded, and unregistered
/// (`unregister_env`, :95-110: its line removed) when it no longer exists. Nothing is
/// done when `HOME` is not a directory; neither `~/.conda` nor the file is followed
/// through a symlink, and a target whose path is not one line (a newline in it) is left
/// out.
pub fn settle_registry(
    inputs: &crate::host::sandbox::Inputs,
    targets: &[PathBuf],
    succeeded: bool,
) {
    use rustix::fs::{Mode, OFlags, mkdirat, openat};
    use std::io::{Read, Write};
    let Some(home) = inputs.home.as_ref().filter(|h| h.is_dir()) else {
        return;
    };
    // A path that would not be one line of the registry is never written there
    // (a newline in a target made lines of its own: attack 6).
    let targets: Vec<&PathBuf> = targets
        .iter()
        .filter(|t| t.to_str().is_some_and(|t| !t.contains(['\n', '\r'])))
        .collect();
    let Ok(home) = rustix::fs::open(
        home,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    // `~/.conda` and the registry opened without following a symlink in either: a run
    // that could swap `~/.conda` for a link would have the server write elsewhere.
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dot_conda = || openat(&home, ".conda", dir, Mode::empty());
    let registry = |flags: OFlags| -> Option<std::fs::File> {
        let at = dot_conda().ok()?;
        // Without blocking, a regular file only (a FIFO there would hold the server's
        // thread for good: attack 8; `host::files`).
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = openat(&at, "environments.txt", flags, Mode::from_raw_mode(0o644)).ok()?;
        crate::host::files::regular(fd)
    };
    let mut text = String::new();
    if let Some(file) = registry(OFlags::RDONLY) {
        let _ = file.take(MAX_REGISTRY + 1).read_to_string(&mut text);
    }
    // A registry larger than any conda writes is left as it is (rewriting what was read
    // of it would drop the rest).
    if text.len() as u64 > MAX_REGISTRY {
        return;
    }
    let listed = |text: &str, target: &Path| text.lines().any(|l| Path::new(l.trim()) == target);
    let gone: Vec<&&PathBuf> = targets
        .iter()
        .filter(|t| std::fs::symlink_metadata(t).is_err() && listed(&text, t))
        .collect();
    if !gone.is_empty() {
        let kept: String = text
            .lines()
            .filter(|l| !gone.iter().any(|t| Path::new(l.trim()) == t.as_path()))
            .map(|l| format!("{l}\n"))
            .collect();
        rewrite(registry(OFlags::WRONLY), &kept);
    }
    if !succeeded {
        return;
    }
    let made: Vec<&&PathBuf> = targets
        .iter()
        .filter(|t| t.join("conda-meta").is_dir() && !listed(&text, t))
        .collect();
    if made.is_empty() {
        return;
    }
    if dot_conda().is_err() && mkdirat(&home, ".conda", Mode::from_raw_mode(0o755)).is_err() {
        return;
    }
    let lines: String = made.iter().map(|t| format!("{}\n", t.display())).collect();
    if let Some(mut file) = registry(OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE) {
        let _ = file.write_all(lines.as_bytes());
    }
}

/// What conda itself writes for a bounded write, besides the call's own places (conda
/// 26.7.1's source cited for each). `named`: the call was not narrowed to its target
/// environments by `--write-envs`, so the places a call may name by name rather than by
/// path stay writable too (`--allow-paths` judges paths only): [`named_places`].
pub fn conda_places(
    inputs: &crate::host::sandbox::Inputs,
    root_prefix: Option<&Path>,
    named: bool,
) -> Vec<Writable> {
    // No package cache: the run has its own ([`private_cache`], in its temporary
    // directory), the operator's are read-only to it.
    let mut places: Vec<PathBuf> = Vec::new();
    // Not the environment registry: the server keeps it for the run ([`settle_registry`]).
    // Not conda's user cache (the notices cache, conda/notices/cache.py:83-86,
    // platformdirs' `user_cache_dir`: `$XDG_CACHE_HOME/conda`; conda-completion's
    // manifest): the operator's own conda later trusts what is there (a notices answer,
    // and a symlink as its cache file, which `mark_channel_notices_as_viewed` rewrites,
    // cache.py:141-155), and the server's completion helper reads the manifest. The run's
    // `XDG_CACHE_HOME` is a directory of its own ([`USER_CACHE`], `install`).
    // Temporary files: link scripts run through a wrapper script (conda/utils.py:288
    // `Utf8NamedTemporaryFile`), `.pyc` compilation lists
    // (conda/gateways/disk/create.py:408 `tempfile.mkstemp`).
    places.push(inputs.temp_dir.clone());
    // `subprocess.DEVNULL` opens `/dev/null` for writing (conda/core/portability.py:149).
    places.push(PathBuf::from("/dev/null"));
    // POSIX semaphores of the extraction pool's `multiprocessing` queues
    // (conda/core/package_cache_data.py:874 `ProcessPoolExecutor`); under the walls a
    // private tmpfs, not the host's (`walls.rs`).
    places.push(PathBuf::from("/dev/shm"));
    if named {
        places.extend(
            named_places(inputs, root_prefix)
                .into_iter()
                .map(|w| w.path),
        );
    }
    places.dedup();
    places
        .into_iter()
        .map(|path| Writable {
            path,
            judged: false,
        })
        .collect()
}

/// The places a call names by name rather than by path, which `--allow-paths` does not
/// judge (conda 26.7.1), for a command without targets: the envs directories (`-n
/// NAME`), the user's `.condarc` (`conda config` without `--file`) and the root prefix's
/// `.condarc` (`--system`); never the root prefix as a whole.
pub fn named_places(
    inputs: &crate::host::sandbox::Inputs,
    root_prefix: Option<&Path>,
) -> Vec<Writable> {
    let dot_conda = inputs.home.as_ref().map(|h| h.join(".conda"));
    let mut places: Vec<PathBuf> = Vec::new();
    // Never the root prefix as a whole (code planted there, a `.pth` file, runs in the
    // server's helpers): its `.condarc`, which `conda config --system` writes
    // (conda/base/context.py `sys_rc_path`).
    places.extend(root_prefix.map(|r| r.join(".condarc")));
    // Environments named by `-n` (conda/base/context.py:787 `envs_dirs`: the
    // configured ones, `<root>/envs`, `~/.conda/envs`).
    places.extend(
        inputs
            .conda_envs_dirs
            .iter()
            .flat_map(std::env::split_paths),
    );
    places.extend(root_prefix.map(|r| r.join("envs")));
    places.extend(dot_conda.as_ref().map(|d| d.join("envs")));
    // `conda config` without `--file` (conda/base/context.py:135 `user_rc_path`).
    places.extend(inputs.home.as_ref().map(|h| h.join(".condarc")));
    places
        .into_iter()
        .map(|path| Writable {
            path,
            judged: false,
        })
        .collect()
}

/// Empty the registry `file` and write `text`, once it is known to be a regular file of
/// one link (never through a hard link to a file elsewhere).
fn rewrite(file: Option<std::fs::File>, text: &str) {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    if let Some(mut file) = file.filter(|f| f.metadata().is_ok_and(|m| m.nlink() == 1)) {
        let _ = file
            .set_len(0)
            .and_then(|()| file.write_all(text.as_bytes()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(home: &Path) -> crate::host::sandbox::Inputs {
        crate::host::sandbox::Inputs {
            home: Some(home.to_path_buf()),
            xdg_cache_home: None,
            conda_pkgs_dirs: None,
            conda_envs_dirs: Vec::new(),
            temp_dir: home.to_path_buf(),
        }
    }

    /// The server registers a made target once; never through a `~/.conda` swapped for a
    /// symlink, never a target with a newline in its path (attack 6).
    #[test]
    fn the_registry_is_kept_by_its_own_names_only() {
        let temp = tempfile::tempdir().unwrap();
        let (home, outside) = (temp.path().join("home"), temp.path().join("outside"));
        std::fs::create_dir_all(home.join(".conda")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let env = temp.path().join("env");
        let odd = temp.path().join("x\n/etc");
        for made in [&env, &odd] {
            std::fs::create_dir_all(made.join("conda-meta")).unwrap();
        }
        let registry = home.join(".conda/environments.txt");
        settle_registry(&inputs(&home), &[env.clone(), odd.clone()], true);
        settle_registry(&inputs(&home), std::slice::from_ref(&env), true);
        let listed = std::fs::read_to_string(&registry).unwrap();
        assert_eq!(listed, format!("{}\n", env.display()));
        // Gone: unregistered.
        std::fs::remove_dir_all(&env).unwrap();
        settle_registry(&inputs(&home), std::slice::from_ref(&env), false);
        assert_eq!(std::fs::read_to_string(&registry).unwrap(), "");
        // `~/.conda` a symlink to elsewhere: nothing written there.
        std::fs::remove_dir_all(home.join(".conda")).unwrap();
        std::os::unix::fs::symlink(&outside, home.join(".conda")).unwrap();
        std::fs::create_dir_all(env.join("conda-meta")).unwrap();
        settle_registry(&inputs(&home), std::slice::from_ref(&env), true);
        assert!(!outside.join("environments.txt").exists());
    }
}

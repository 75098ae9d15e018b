//! The environment registries (`~/.conda/environments.txt`) a sandboxed child reads,
//! each replaced by the server's own bounded copy.
//!
//! conda lists every known environment from the registry of the server's home and, as
//! root, from that of every home of the password database (`list_all_known_prefixes`,
//! conda/core/envs_manager.py:117-160: `isfile()`, then every line through
//! `_clean_environments_txt` and `yield_lines`, unbounded). Any local user (or an agent
//! with file tools in the server's home) may plant that file: a sparse 64 GiB file pinned
//! each read-only call at the memory limit until conda failed (`CondaMemoryError`),
//! 8 million one-character lines held each for two minutes, a symlink to a kernel file
//! that blocks held it until `--timeout` (attack 9, A9-2 and A9-3).
//!
//! So the server reads each registry itself ([`environments`]: a regular file, not
//! through a symlink, without blocking, at most [`MAX_REGISTRY`] bytes, each absolute
//! entry once, at most [`MAX_ENTRIES`] of them; anything else reads as no entries) and
//! every sandboxed child sees that reading in its place:
//!
//! - another user's home (a root server's) that a user other than root may write (its
//!   owner; a group or everyone, as `/var/mail`) gets a read-only overlay whose top layer
//!   holds `.conda/environments.txt`, the copy: conda sees the copy whatever the user does
//!   meanwhile (renaming or removing the file under a mount point detaches that mount in
//!   every namespace: a rename loop defeated a copy attached over the file, attack 10
//!   A10-1; the home's own entry lies in a directory the user cannot write). Their
//!   `~/.conda` as conda sees it is their directory with the copy in it, or (a symlink or
//!   a file there) the copy alone; mounts below the home are hidden from the call. Not
//!   for a home holding the server's home, the root prefix, a configured package cache
//!   or envs directory or the call's tmpfs (judged on canonical paths), and at most
//!   [`MAX_HOMES`], those with a `~/.conda` first (attack 11 A11-1): those, and a home
//!   whose overlay the kernel refuses, get the copy attached over the file, as below;
//! - every other registry (the server's home's, homes only root may write) gets the copy
//!   attached over the file (`move_mount`, never following the final name; the server's
//!   own `~/.conda` is followed as conda follows it, another's `~/.conda` that is not a
//!   directory gets an empty file attached over it). A registry that does not exist when
//!   the child starts gets nothing: one planted after that, or removed and planted again
//!   while the call runs, is read by conda as it is — for that call only, within its
//!   `--timeout` and memory limit.

use std::collections::HashSet;
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The largest registry read (a line per environment: 16 MiB is some hundred thousand).
const MAX_REGISTRY: u64 = 16 << 20;

/// The most entries kept of one registry (conda writes one line per environment): the
/// rest of a longer file is not read.
pub(super) const MAX_ENTRIES: usize = 4096;

/// Most other users' homes overlaid for one call (each a mount); the rest get the copy
/// attached over the file.
const MAX_HOMES: usize = 512;

/// The registries each child sees replaced: the copies to write in the call's tmpfs (the
/// first is always empty) and the registries each is attached over. The homes overlaid
/// are the plan's (`home_overlays`).
#[derive(Debug, Default)]
pub(super) struct Registries {
    pub(super) copies: Vec<Copy>,
    pub(super) attached: Vec<Attached>,
    /// For each home overlaid, in order: the copy attached over its file instead where
    /// the overlay cannot be mounted.
    pub(super) fallbacks: Vec<Attached>,
}

/// A copy attached over a registry: the home, which copy, whether it is the server's.
#[derive(Debug)]
pub(super) struct Attached {
    pub(super) home: CString,
    pub(super) copy: usize,
    pub(super) own: bool,
}

/// One copy, a file of the call's tmpfs.
#[derive(Debug)]
pub(super) struct Copy {
    pub(super) path: CString,
    pub(super) bytes: Vec<u8>,
}

/// One registry conda reads: its home, the copy's text, and whether it is the server's.
#[derive(Debug)]
pub(super) struct Read {
    pub(super) home: PathBuf,
    pub(super) copy: Vec<u8>,
    pub(super) own: bool,
}

/// The entries of every registry conda reads (the server's home's; every user's when the
/// server is root), in conda's order, and each registry with its copy.
pub(super) fn environments(home: Option<&Path>, root: bool) -> (Vec<PathBuf>, Vec<Read>) {
    let mut read = Vec::new();
    let mut envs = Vec::new();
    if let Some(home) = home {
        // The server's own: `~/.conda` followed, as conda follows it (a home directory
        // often links it elsewhere); the file itself not.
        let text = crate::host::files::read(&home.join(".conda/environments.txt"), MAX_REGISTRY);
        let text = text.unwrap_or_default();
        let (kept, copy) = copy(&text, |_| true);
        envs.extend(kept.into_iter().map(PathBuf::from));
        read.push(Read {
            home: home.to_path_buf(),
            copy,
            own: true,
        });
    }
    if root {
        for other in password_homes()
            .into_iter()
            .filter(|h| Some(h.as_path()) != home)
        {
            let text = registry(&other).unwrap_or_default();
            // Of another user's environments, only those no user but root can change:
            // conda reads files inside each one it lists, unbounded (`conda info`'s and
            // `env list --json`'s `conda-meta/created_at`, `--size`'s every record), and
            // a FIFO planted there held every listing call until `--timeout`, and the
            // server's other calls behind it (attack 13 A13-1).
            let (kept, copy) = copy(&text, |entry| root_held(Path::new(entry)));
            envs.extend(kept.into_iter().map(PathBuf::from));
            read.push(Read {
                home: other,
                copy,
                own: false,
            });
        }
    }
    (envs, read)
}

/// A registry's entries ([`entries`]) that `keep` keeps, and the copy's text.
fn copy(text: &[u8], keep: impl Fn(&str) -> bool) -> (Vec<&str>, Vec<u8>) {
    let mut kept = entries(text);
    kept.retain(|entry| keep(entry));
    let mut copy = Vec::new();
    for entry in &kept {
        copy.extend_from_slice(entry.as_bytes());
        copy.push(b'\n');
    }
    (kept, copy)
}

/// The most lines of one registry looked at (conda writes one per environment): a
/// registry of millions of short lines costs no more than one of this many.
const MAX_LINES: usize = 16 * MAX_ENTRIES;

/// The absolute entries of a registry's text, each once, in order, at most
/// [`MAX_ENTRIES`] of its first [`MAX_LINES`] lines (conda's `yield_lines` strips each
/// line and skips comments).
fn entries(text: &[u8]) -> Vec<&str> {
    let mut seen = HashSet::new();
    let mut kept = Vec::new();
    // Split where conda splits (text mode's universal newlines: `\n`, `\r`, `\r\n`; a
    // `\r\n` is one more empty line here, which is no entry): a registry of lines ending
    // in `\r` was one entry here and millions to conda (attack 12 A12-1).
    for line in text.split(|b| *b == b'\n' || *b == b'\r').take(MAX_LINES) {
        let Ok(line) = std::str::from_utf8(line).map(str::trim) else {
            continue;
        };
        if line.starts_with('/') && seen.insert(line) {
            kept.push(line);
            if kept.len() == MAX_ENTRIES {
                break;
            }
        }
    }
    kept
}

/// Whether no user but root can change what conda finds at the environment `entry`:
/// every directory from `/` down to its `conda-meta`, as written (no symlink, no `..`),
/// is root's and writable by no one else; an ancestor may be writable by all with the
/// sticky bit (`/tmp`: its entries are their owners'). Looked at from `/` down, stopping
/// at the first that fails: nothing below a directory a user holds is touched (a user's
/// own FUSE mount there could hold the look).
fn root_held(entry: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    use std::path::Component;
    let normal = entry
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !normal || !entry.is_absolute() {
        return false;
    }
    let meta = entry.join("conda-meta");
    let mut path = PathBuf::new();
    for component in meta.components() {
        path.push(component);
        let Ok(found) = std::fs::symlink_metadata(&path) else {
            return false;
        };
        let open = found.mode() & 0o022 != 0;
        let sticky = found.mode() & 0o1000 != 0;
        let below = path.starts_with(entry);
        if !found.is_dir() || found.uid() != 0 || (open && (below || !sticky)) {
            return false;
        }
    }
    true
}

/// The bytes of `<home>/.conda/environments.txt`, read as [`crate::host::files`] reads
/// what others plant, and `.conda` not through a symlink either.
fn registry(home: &Path) -> Option<Vec<u8>> {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let home = openat(CWD, home, dir, Mode::empty()).ok()?;
    let conda = openat(&home, ".conda", dir | OFlags::NOFOLLOW, Mode::empty()).ok()?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = openat(&conda, "environments.txt", flags, Mode::empty()).ok()?;
    crate::host::files::read_from(file, MAX_REGISTRY)
}

/// The home directories of the password database, each once, in its order: every
/// source `/etc/nsswitch.conf` names (`files`, LDAP, sssd, `extrausers`…), as conda's
/// `getpwall()` lists them (`setpwent`/`getpwent`/`endpwent`). Reading `/etc/passwd`
/// alone left the registries of every user from another source as conda reads them.
fn password_homes() -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    // The enumeration's position is the process's: one at a time.
    static ENUMERATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ENUMERATING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut seen = HashSet::new();
    let mut homes = Vec::new();
    let mut buffer = vec![0 as libc::c_char; 1 << 14];
    // SAFETY: the enumeration is this function's alone (the lock above).
    unsafe { libc::setpwent() };
    loop {
        let null = std::ptr::null_mut();
        let mut entry = libc::passwd {
            pw_name: null,
            pw_passwd: null,
            pw_uid: 0,
            pw_gid: 0,
            pw_gecos: null,
            pw_dir: null,
            pw_shell: null,
        };
        let mut found = std::ptr::null_mut();
        // SAFETY: the enumeration is this function's alone (the lock above);
        // `getpwent_r` writes the entry's strings into `buffer`, whose length it is
        // given, and `entry` and `found` are valid for writes. The home is read only of
        // an entry found: then `pw_dir`, not null, points into `buffer`, NUL-terminated,
        // and it is copied before `buffer` is written again.
        let (status, home) = unsafe {
            let status =
                libc::getpwent_r(&mut entry, buffer.as_mut_ptr(), buffer.len(), &mut found);
            let home = if status == 0 && !found.is_null() && !entry.pw_dir.is_null() {
                Some(std::ffi::CStr::from_ptr(entry.pw_dir).to_bytes().to_vec())
            } else {
                None
            };
            (status, home)
        };
        if status == libc::ERANGE && buffer.len() < 1 << 24 {
            // (the entry is not consumed: the next call returns it again)
            buffer.resize(buffer.len() * 2, 0);
            continue;
        }
        let Some(home) = home else {
            break;
        };
        // (bytes: a home that is not UTF-8 is still a home, attack 12 A12-2)
        if home.starts_with(b"/") && home != b"/" && seen.insert(home.clone()) {
            homes.push(PathBuf::from(std::ffi::OsStr::from_bytes(&home)));
        }
    }
    // SAFETY: ends this function's enumeration (the lock is still held).
    unsafe { libc::endpwent() };
    homes
}

/// What the plan makes of the registries: the copies to attach, the homes to overlay
/// (mounted before every other overlay) and the directories of their top layers.
pub(super) struct Planned {
    pub(super) registries: Registries,
    pub(super) homes: Vec<super::Overlay>,
    pub(super) mkdirs: Vec<CString>,
}

impl Registries {
    /// The copies of `read` (see [`environments`]) as files of the call's tmpfs at
    /// `base`; `keep_clear` the directories no home overlay may hold (the root prefix, the
    /// server's home, the tmpfs, the configured package caches and envs directories).
    /// `None` when a path cannot be passed to the kernel.
    pub(super) fn plan(read: Vec<Read>, base: &Path, keep_clear: &[&Path]) -> Option<Planned> {
        let keep_clear: Vec<PathBuf> = keep_clear
            .iter()
            .map(|k| std::fs::canonicalize(k).unwrap_or_else(|_| k.to_path_buf()))
            .collect();
        // The homes of users who have a `~/.conda` first: the cap goes to them.
        let mut read = read;
        read.sort_by_key(|r| r.home.join(".conda").symlink_metadata().is_err());
        let cstring = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).ok();
        let mut planned = Planned {
            registries: Registries {
                copies: vec![Copy {
                    path: cstring(&base.join("r0"))?,
                    bytes: Vec::new(),
                }],
                attached: Vec::new(),
                fallbacks: Vec::new(),
            },
            homes: Vec::new(),
            mkdirs: Vec::new(),
        };
        for read in read {
            let copies = &mut planned.registries.copies;
            let overlay = (!read.own && planned.homes.len() < MAX_HOMES)
                .then(|| overlaid(&read.home, &keep_clear))
                .flatten();
            if let Some(canonical) = overlay {
                let layer = base.join(format!("h{}", planned.homes.len()));
                planned
                    .mkdirs
                    .extend([cstring(&layer)?, cstring(&layer.join(".conda"))?]);
                copies.push(Copy {
                    path: cstring(&layer.join(".conda/environments.txt"))?,
                    bytes: read.copy,
                });
                // Where the overlay cannot be mounted, the copy goes over the file.
                planned.registries.fallbacks.push(Attached {
                    home: cstring(&read.home)?,
                    copy: copies.len() - 1,
                    own: false,
                });
                let above = format!("{}:", layer.to_str()?);
                planned.homes.push(super::Overlay {
                    // (a home that is a symlink is overlaid where it leads: conda follows it)
                    target: cstring(&canonical)?,
                    above: CString::new(above).ok()?,
                    // No index: with it, a lower layer in use by another overlay (one its
                    // user may mount on their home in a namespace of their own) refuses the
                    // mount (attack 12 A12-5).
                    layers: None,
                    index_off: true,
                });
                continue;
            }
            let copy = match copies.iter().position(|c| c.bytes == read.copy) {
                Some(index) => index,
                None => {
                    copies.push(Copy {
                        path: cstring(&base.join(format!("r{}", copies.len())))?,
                        bytes: read.copy,
                    });
                    copies.len() - 1
                }
            };
            planned.registries.attached.push(Attached {
                home: cstring(&read.home)?,
                copy,
                own: read.own,
            });
        }
        outer_first(&mut planned);
        Some(planned)
    }
}

/// The home overlays (with their fallbacks) in mounting order, outer homes first: an
/// overlay mounted on a home after the overlay of a home inside it covered that one with
/// the raw directory (a lab account's home that holds its members' homes), and conda read
/// the inner user's own registry (attack 15 A15-2). An inner home's overlay then lands on
/// the outer overlay.
fn outer_first(planned: &mut Planned) {
    let homes = std::mem::take(&mut planned.homes);
    let fallbacks = std::mem::take(&mut planned.registries.fallbacks);
    let mut paired: Vec<_> = homes.into_iter().zip(fallbacks).collect();
    let depth = |path: &CString| path.as_bytes().iter().filter(|b| **b == b'/').count();
    paired.sort_by_key(|(home, _)| depth(&home.target));
    (planned.homes, planned.registries.fallbacks) = paired.into_iter().unzip();
}

/// Whether another user's `home` gets a home overlay, and where: its canonical path (a
/// home that is a symlink, as homes moved to another disk are, is judged and overlaid
/// where it leads). A directory some user other than root may write (its owner, or a
/// group or everyone: `/var/mail`), or whose `.conda` is a directory such a user may
/// write (a home root made, with `~/.conda` handed over): renaming a file over the
/// registry in a directory its user may write detaches a copy attached over it (attack
/// 10 A10-1; attack 14 A14-1 for these two). Not a home holding one of `keep_clear`.
/// The overlay hides the mounts below the home (the user's own FUSE mount, an encrypted
/// `~/Private`) from the call: environments there are not listed to a root server's
/// read-only calls. Re-attaching them would mean mounting, by a path its user controls,
/// a file system its user may have made.
fn overlaid(home: &Path, keep_clear: &[PathBuf]) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let writable = |m: &std::fs::Metadata| m.uid() != 0 || m.mode() & 0o022 != 0;
    let home = std::fs::canonicalize(home).ok()?;
    let theirs =
        std::fs::symlink_metadata(home.join(".conda")).is_ok_and(|m| m.is_dir() && writable(&m));
    let fits = std::fs::symlink_metadata(&home)
        .is_ok_and(|m| m.is_dir() && (writable(&m) || theirs))
        && home != Path::new("/")
        && !keep_clear.iter().any(|k| k.starts_with(&home));
    fits.then_some(home)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each absolute entry once, in order; relative lines and comments dropped; at most
    /// [`MAX_ENTRIES`] entries of the first [`MAX_LINES`] lines.
    #[test]
    fn entries_are_absolute_distinct_and_bounded() {
        let text = b"/a\n  /b \n# c\nrelative\n/a\n\n/c";
        assert_eq!(entries(text), ["/a", "/b", "/c"]);
        // conda's universal newlines: `\r` and `\r\n` end a line too.
        assert_eq!(entries(b"/a\r/b\r\n/c\r"), ["/a", "/b", "/c"]);
        let many: Vec<u8> = (0..2 * MAX_ENTRIES)
            .flat_map(|i| format!("/e{i}\n").into_bytes())
            .collect();
        let kept = entries(&many);
        assert_eq!(kept.len(), MAX_ENTRIES);
        assert_eq!(
            kept.last().copied(),
            Some(&*format!("/e{}", MAX_ENTRIES - 1))
        );
        let mut late = b"/\n".repeat(MAX_LINES);
        late.extend(b"/late\n");
        assert_eq!(entries(&late), ["/"]);
    }

    /// The password database's homes include every home of `/etc/passwd` (`files` is
    /// a source of every `nsswitch.conf` this runs on), each once; the homes of other
    /// sources are `sandbox::real_conda_a_planted_registry_is_read_as_the_servers_bounded_copy`'s
    /// (a user of `extrausers` alone).
    #[test]
    fn the_homes_of_the_password_database_hold_those_of_etc_passwd() {
        let homes = password_homes();
        let text = std::fs::read_to_string("/etc/passwd").unwrap();
        let listed = text.lines().filter_map(|line| line.split(':').nth(5));
        for home in listed.filter(|h| h.starts_with('/') && *h != "/") {
            assert!(homes.contains(&PathBuf::from(home)), "{home}: {homes:?}");
        }
        let distinct: HashSet<_> = homes.iter().collect();
        assert_eq!(distinct.len(), homes.len(), "{homes:?}");
    }

    /// Another user's environment is kept only where no user but root can change it:
    /// root's directories all the way (a sticky `/tmp`-like one on the way is fine), no
    /// symlink, no `..`; as any other user, nothing is (their own directories are theirs).
    #[test]
    fn only_environments_root_holds_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let root = rustix::process::geteuid().is_root();
        let base = tempfile::tempdir().unwrap();
        let sticky = base.path().join("sticky");
        let env = sticky.join("env");
        std::fs::create_dir_all(env.join("conda-meta")).unwrap();
        let mode = |path: &Path, mode| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        mode(base.path(), 0o755);
        mode(&sticky, 0o1777);
        assert_eq!(root_held(&env), root, "{env:?}");
        assert!(!root_held(&sticky.join("missing")));
        assert!(!root_held(&sticky.join("env/../env")));
        std::os::unix::fs::symlink(&env, sticky.join("link")).unwrap();
        assert!(!root_held(&sticky.join("link")));
        mode(&env, 0o777);
        assert!(!root_held(&env), "the environment writable by all");
        mode(&env, 0o755);
        mode(&env.join("conda-meta"), 0o1777);
        assert!(
            !root_held(&env),
            "conda-meta writable by all, sticky or not"
        );
        mode(&env.join("conda-meta"), 0o755);
        mode(&sticky, 0o777);
        assert!(!root_held(&env), "an ancestor writable by all, not sticky");
        mode(&sticky, 0o755);
        assert_eq!(root_held(&env), root);
        if root {
            std::os::unix::fs::chown(&env, Some(4242), None).unwrap();
            assert!(!root_held(&env), "the environment another user's");
        }
    }
}

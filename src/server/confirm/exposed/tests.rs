use super::*;

fn places(roots: &[&Path], workdir: Option<&Path>, bounded: bool) -> Places {
    let roots = roots.iter().map(|r| (r.to_path_buf(), "the client's root"));
    let workdir = workdir.map(|d| (d.to_path_buf(), "the server's working directory"));
    Places {
        places: roots
            .chain(workdir)
            .map(|(path, what)| Place {
                id: identity(&path),
                path,
                what,
            })
            .collect(),
        uid: rustix::process::geteuid().as_raw(),
        gid: rustix::process::getegid().as_raw(),
        bounded,
    }
}

fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

#[test]
fn an_environment_in_a_root_or_the_working_directory_is_named_with_its_place() {
    let dir = private_dir();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(project.join("env/bin")).unwrap();
    let env = project.join("env").display().to_string();
    let uid = rustix::process::geteuid().as_raw();
    let user = if uid == 0 {
        "root".to_owned()
    } else {
        format!("uid {uid}, the server's user")
    };

    let in_root = places(&[&project], None, false).caution(&env).unwrap();
    assert_eq!(
        in_root,
        format!(
            "  Caution: this environment lies inside the client's root {}, where the agent \
             can change files. Its own programs and scripts (bin/, etc/conda/activate.d/, its \
             Python) run as {user} during this change, and only its packages' link scripts \
             and records are checked: nothing limits what they read or write.",
            project.display()
        )
    );
    // The working directory, bounded; a target that does not exist yet, named through a
    // symlink to the project, is judged where it leads.
    let link = base.join("link");
    std::os::unix::fs::symlink(&project, &link).unwrap();
    let new = link.join("new/env").display().to_string();
    let in_workdir = places(&[], Some(&project), true).caution(&new).unwrap();
    assert!(
        in_workdir.contains(&format!(
            "lies inside the server's working directory {}, where the agent can change files.",
            project.display()
        )) && in_workdir.ends_with(": their writes stay within the places this call may write."),
        "{in_workdir}"
    );
    // Elsewhere, or named relative or through `..` past what exists: no caution.
    let elsewhere = base.join("operator/envs/x").display().to_string();
    assert_eq!(
        places(&[&project], Some(&project), false).caution(&elsewhere),
        None
    );
    assert_eq!(
        places(&[&project], None, false).caution("project/env"),
        None
    );
    let climbing = format!("{}/missing/../../project/env", base.display());
    assert_eq!(places(&[], None, false).caution(&climbing), None);
}

#[test]
fn an_environment_another_user_can_change_is_named_with_the_directory() {
    let dir = private_dir();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let shared = base.join("shared");
    std::fs::create_dir_all(shared.join("env")).unwrap();
    let env = shared.join("env").display().to_string();
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };

    // Every user may write the directory that holds it.
    mode(&shared, 0o777);
    let caution = places(&[], None, false).caution(&env).unwrap();
    assert!(
        caution.contains(&format!(
            "lies in {}, which every user may write.",
            shared.display()
        )),
        "{caution}"
    );
    // With the sticky bit, nobody else can replace the existing environment; but one that
    // does not exist yet anyone could make first.
    mode(&shared, 0o1777);
    assert_eq!(places(&[], None, false).caution(&env), None);
    let new = shared.join("new").display().to_string();
    assert!(places(&[], None, false).caution(&new).is_some());
    // A group the server is not in may write it; a user other than the server's (and
    // root) owns it. As root the directories are given to such ids; otherwise the server
    // is seen as of other ids.
    let root = rustix::process::geteuid().is_root();
    let (uid, gid) = if root {
        std::os::unix::fs::chown(&shared, None, Some(4243)).unwrap();
        std::os::unix::fs::chown(shared.join("env"), Some(4242), None).unwrap();
        (4242, 4243)
    } else {
        let meta = std::fs::metadata(&shared).unwrap();
        (meta.uid(), meta.gid())
    };
    // The server as of the same user but another group, or of another user.
    let of_ids = |other_user: bool| {
        let mut server = places(&[], None, false);
        if !root {
            server.gid = gid.wrapping_add(1);
            if other_user {
                server.uid = uid.wrapping_add(1);
            }
        }
        server
    };
    mode(&shared, 0o770);
    let caution = of_ids(false).caution(&new).unwrap();
    assert!(
        caution.contains(&format!(
            "lies in {}, which group {gid} may write.",
            shared.display()
        )),
        "{caution}"
    );
    mode(&shared, 0o755);
    let caution = of_ids(true).caution(&env).unwrap();
    assert!(
        caution.contains(&format!(
            "lies in {}/env, which uid {uid} owns.",
            shared.display()
        )),
        "{caution}"
    );
}

/// A project, and an environment of the operator's elsewhere (with the directories conda
/// finds code in); the server working in the project.
struct Layout {
    _dir: tempfile::TempDir,
    base: PathBuf,
    project: PathBuf,
    operator: PathBuf,
    server: Places,
}

fn layout() -> Layout {
    let dir = private_dir();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let project = base.join("project");
    let operator = base.join("operator/env");
    std::fs::create_dir_all(&project).unwrap();
    for sub in [
        "bin",
        "etc/conda/activate.d",
        "lib/python3.12/site-packages",
    ] {
        std::fs::create_dir_all(operator.join(sub)).unwrap();
    }
    let server = places(&[], Some(&project), false);
    assert_eq!(server.caution(&named(&operator)), None);
    Layout {
        _dir: dir,
        base,
        project,
        operator,
        server,
    }
}

fn named(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn a_target_named_through_the_agents_place_is_cautioned() {
    let Layout {
        _dir,
        base,
        project,
        operator,
        server,
    } = layout();
    // Named through a symlink in the project (the agent may turn it elsewhere).
    std::os::unix::fs::symlink(&operator, project.join("lnk")).unwrap();
    let caution = server.caution(&named(&project.join("lnk"))).unwrap();
    assert!(
        caution.contains(&format!(
            "lies inside the server's working directory {}, where",
            project.display()
        )),
        "{caution}"
    );
    // The project reached another way (a link to it elsewhere; a bind mount alike): the
    // same directory by device and inode.
    std::os::unix::fs::symlink(&project, base.join("alias")).unwrap();
    let caution = server.caution(&named(&base.join("alias/env"))).unwrap();
    assert!(
        caution.contains("lies inside the server's working directory"),
        "{caution}"
    );
}

#[test]
fn a_target_holding_code_others_can_change_is_cautioned() {
    let Layout {
        _dir,
        operator,
        server,
        ..
    } = layout();
    let python = operator.join("bin/python3.12");
    std::fs::write(&python, "").unwrap();
    for (path, mode) in [
        (operator.join("etc/conda/activate.d"), 0o777),
        (operator.join("lib/python3.12/site-packages"), 0o777),
        (operator.join("bin"), 0o777),
        (python.clone(), 0o666),
    ] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let caution = server.caution(&named(&operator)).unwrap();
        assert!(
            caution.contains(&format!(
                "holds {}, which every user may write.",
                path.display()
            )),
            "{caution}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    assert_eq!(server.caution(&named(&operator)), None);
}

/// An access ACL (`system.posix_acl_access`) granting `user` write, with a mask that
/// lets it.
fn acl(user: u32) -> Vec<u8> {
    let mut bytes = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, 7u16, u32::MAX),
        (0x02, 7, user),
        (0x04, 5, u32::MAX),
        (0x10, 7, u32::MAX),
        (0x20, 5, u32::MAX),
    ] {
        bytes.extend(tag.to_le_bytes());
        bytes.extend(perm.to_le_bytes());
        bytes.extend(id.to_le_bytes());
    }
    bytes
}

#[test]
fn a_directory_an_acl_lets_another_user_write_is_named() {
    let Layout {
        _dir,
        base,
        operator,
        server,
        ..
    } = layout();
    let holder = base.join("operator");
    let flags = rustix::fs::XattrFlags::empty();
    rustix::fs::setxattr(&holder, "system.posix_acl_access", &acl(4242), flags).unwrap();
    let caution = server.caution(&named(&operator)).unwrap();
    assert!(
        caution.contains(&format!(
            "lies in {}, which uid 4242 may write (an ACL).",
            holder.display()
        )),
        "{caution}"
    );
    rustix::fs::removexattr(&holder, "system.posix_acl_access").unwrap();
    assert_eq!(server.caution(&named(&operator)), None);
}

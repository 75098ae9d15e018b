use super::*;

fn places(roots: &[&Path], workdir: Option<&Path>, bounded: bool) -> Places {
    Places {
        roots: roots.iter().map(|r| r.to_path_buf()).collect(),
        workdir: workdir.map(Path::to_path_buf),
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

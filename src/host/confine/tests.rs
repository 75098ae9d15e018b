use super::*;

/// [`super::foreign_links`] without a deadline (a walk that fails counts as links).
fn foreign_links(prefix: &Path, pkgs_dirs: &[PathBuf]) -> bool {
    super::foreign_links(prefix, pkgs_dirs, None).unwrap_or(true)
}

fn argv(tokens: &[&str]) -> Vec<String> {
    tokens.iter().map(|s| s.to_string()).collect()
}

/// A temporary directory holding `work` (the allowed one) and `secret` (outside it).
fn work_and_secret() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let (allowed, outside) = (root.path().join("work"), root.path().join("secret"));
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    (root, allowed, outside)
}

#[test]
fn paths_outside_are_refused_however_spelled() {
    let root = tempfile::tempdir().unwrap();
    let allowed = root.path().join("work");
    let outside = root.path().join("secret");
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, allowed.join("link")).unwrap();
    // Bare words the agent's file tools planted in the working directory.
    for word in ["rc", "envlink", "envfile.yml", ".hidden"] {
        std::os::unix::fs::symlink(outside.join(word), allowed.join(word)).unwrap();
    }
    // Dangling links that lead outside through another dangling link, and a loop.
    std::os::unix::fs::symlink("hop", allowed.join("twice")).unwrap();
    std::os::unix::fs::symlink(outside.join("new"), allowed.join("hop")).unwrap();
    std::os::unix::fs::symlink("loop-b", allowed.join("loop-a")).unwrap();
    std::os::unix::fs::symlink("loop-a", allowed.join("loop-b")).unwrap();
    std::fs::write(allowed.join("env.yml"), "name: x\n").unwrap();
    // A directory whose name ends in `:`, so a path reads like a URL (attack 39 U2).
    std::os::unix::fs::symlink(&outside, allowed.join("out:")).unwrap();
    std::fs::create_dir_all(allowed.join("x:")).unwrap();
    let scope = Confinement::to(std::slice::from_ref(&allowed));
    let home = root.path().join("home");
    let ok = |tokens: &[&str]| scope.check(&argv(tokens), &allowed, Some(&home));
    for inside in [
        &["compare", "env.yml"][..],
        &["install", "numpy", "conda-forge::scipy"],
        &["create", "-p", "./envs/new", "--file=specs/a.txt"],
        &["install", "-c", "https://conda.anaconda.org/x", "numpy"],
        &["list", "-p", "new/../sub"],
        &["search", "x[channel=./chan]", "numpy>=1.26,<2"],
    ] {
        assert_eq!(ok(inside), Ok(()), "{inside:?}");
    }
    let secret = outside.join("f").to_str().unwrap().to_owned();
    let file_url = format!("file://{}", outside.display());
    let p_attached = format!("-p{}", outside.display());
    let opt_eq = format!("--file={secret}");
    for bad in [
        &["compare", secret.as_str()][..],
        &["compare", "/etc/shadow"],
        &["compare", "/proc/self/environ"],
        &["compare", "link/f"],
        &["compare", "./link/../link/f"],
        &["compare", "../secret/f"],
        &["compare", "sub/../../secret"],
        &["compare", ".."],
        &["install", "-c", file_url.as_str(), "x"],
        &["list", p_attached.as_str()],
        &["export", opt_eq.as_str()],
        &["compare", "~/x"],
        &["compare", "~root/x"],
        &["compare", "$HOME/x"],
        &["list", "-p", "${OLDPWD}"],
        &["list", "-p$HOME"],
        &["search", "x[channel=/etc]"],
        &["search", "x[channel=../../secret]"],
        &["search", "x[url='file:///etc/x.conda']"],
        &["search", "x[channel=\"/etc\"]"],
        &["config", "--file", "rc"],
        &["config", "--file=rc"],
        &["create", "-p", "envlink"],
        &["create", "-penvlink"],
        &["compare", "envfile.yml"],
        &["install", ".hidden"],
        &["config", "--file", "twice"],
        &["export", "--file=twice/sub/x.yml"],
        &["config", "--file", "loop-a"],
        &["export", "--file", "out://passwd"],
        &["compare", "x://../../secret/f"],
    ] {
        assert_eq!(ok(bad), Err(Outside), "{bad:?}");
    }
    assert_eq!(
        Confinement::unrestricted().check(&argv(&["compare", "/etc/shadow"]), &allowed, None),
        Ok(())
    );
}

/// A URL whose scheme names the agent's symlink in the working directory is a path too:
/// conda opens some values as written (`export --file https://passwd` is `passwd` in
/// `https:`; attack 40 V2), so both readings are judged, a channel's URL included.
#[test]
fn a_url_whose_scheme_names_an_entry_here_is_a_path_too() {
    let (_root, allowed, outside) = work_and_secret();
    let scope = Confinement::to(std::slice::from_ref(&allowed));
    let check = |tokens: &[&str]| scope.check(&argv(tokens), &allowed, None);
    let channel = ["install", "-c", "https://conda.anaconda.org/x", "numpy"];
    assert_eq!(check(&channel), Ok(()));
    assert_eq!(check(&["export", "--file", "https://passwd"]), Ok(()));
    std::os::unix::fs::symlink(&outside, allowed.join("https:")).unwrap();
    for bad in [
        &["export", "--file", "https://passwd"][..],
        &["export", "--file=https://passwd"],
        &["export", "-fhttps://passwd"],
        &channel,
    ] {
        assert_eq!(check(bad), Err(Outside), "{bad:?}");
    }
}

#[test]
fn hard_links_lead_outside_however_named() {
    let root = tempfile::tempdir().unwrap();
    let (allowed, outside) = (root.path().join("work"), root.path().join("secret"));
    std::fs::create_dir_all(allowed.join("env/conda-meta")).unwrap();
    std::fs::create_dir_all(allowed.join("clean/conda-meta")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("rc"), "# the user's rc\n").unwrap();
    std::fs::write(allowed.join("own.yml"), "x\n").unwrap();
    std::fs::write(allowed.join("clean/conda-meta/history"), "").unwrap();
    // The agent's file tools: hard links to outside files, named and inside a prefix.
    std::fs::hard_link(outside.join("rc"), allowed.join("x.yml")).unwrap();
    std::fs::hard_link(outside.join("rc"), allowed.join("env/conda-meta/history")).unwrap();
    std::os::unix::fs::symlink("x.yml", allowed.join("to-link")).unwrap();
    std::fs::create_dir_all(allowed.join("env2")).unwrap();
    std::os::unix::fs::symlink(outside.join("rc"), allowed.join("env2/.condarc")).unwrap();
    let scope = Confinement::to(std::slice::from_ref(&allowed));
    let ok = |tokens: &[&str]| scope.check(&argv(tokens), &allowed, None);
    for bad in [
        &["config", "--file", "x.yml"][..],
        &["config", "--file=./x.yml"],
        &["compare", "to-link"],
        &["install", "-p", "env", "x"],
        &["install", "-penv", "x"],
        &["config", "--prefix", "env2", "--set", "a", "b"],
    ] {
        assert_eq!(ok(bad), Err(Outside), "{bad:?}");
    }
    for inside in [
        &["config", "--file", "own.yml"][..],
        &["install", "-p", "clean", "x"],
        &["export", "--file", "new.yml"],
    ] {
        assert_eq!(ok(inside), Ok(()), "{inside:?}");
    }
    assert!(scope.target_escapes(&allowed.join("env")));
    assert!(!scope.target_escapes(&allowed.join("clean")));
    assert!(linked_in_place(&allowed.join("env")));
    // Nothing is outside `--allow-paths /`, nor without a scope.
    let whole = Confinement::to(&[PathBuf::from("/")]);
    assert_eq!(
        whole.check(&argv(&["config", "--file", "x.yml"]), &allowed, None),
        Ok(())
    );
    assert!(!Confinement::unrestricted().target_escapes(&allowed.join("env")));
}

#[test]
fn the_http_default_scope_is_the_working_directory_prefix_and_user_envs() {
    let prefix = tempfile::tempdir().unwrap();
    let scope = Confinement::default_scope(Some(prefix.path()));
    let cwd = std::fs::canonicalize(std::env::current_dir().unwrap()).unwrap();
    assert!(scope.dirs().contains(&cwd));
    assert!(
        scope
            .dirs()
            .contains(&std::fs::canonicalize(prefix.path()).unwrap())
    );
    let argv = argv(&["compare", "/proc/self/environ"]);
    assert_eq!(scope.check(&argv, &cwd, None), Err(Outside));
}

/// A bounded write writes the operator's allowed directories whole; of the default
/// scope, never conda's root prefix (its `envs/` instead), nor a directory holding it.
#[test]
fn the_default_scope_never_writes_the_root_prefix_whole() {
    let cwd = std::fs::canonicalize(std::env::current_dir().unwrap()).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(elsewhere.path()).unwrap();
    std::fs::create_dir(root.join("envs")).unwrap();
    let scope = Confinement::default_scope(Some(&root));
    assert!(scope.dirs().contains(&root));
    let written = scope.write_dirs();
    assert!(written.contains(&cwd), "{written:?}");
    assert!(written.contains(&root.join("envs")), "{written:?}");
    assert!(!written.iter().any(|d| root.starts_with(d)), "{written:?}");
    // A root prefix below the working directory: the working directory is no such place.
    let below = tempfile::tempdir_in(&cwd).unwrap();
    let root = std::fs::canonicalize(below.path()).unwrap();
    let written = Confinement::default_scope(Some(&root)).write_dirs();
    assert!(!written.iter().any(|d| root.starts_with(d)), "{written:?}");
    // The operator's own scope is written as given, the root prefix in it or not.
    let given = Confinement::to(std::slice::from_ref(&cwd));
    assert_eq!(given.write_dirs(), vec![cwd]);
}

/// conda's own hard links from a package cache are accepted; a link to a file elsewhere
/// is not, nor one whose record names a `link.source` outside every package cache (an
/// agent can write its environment's `conda-meta`).
#[test]
fn foreign_hard_links_in_a_prefix_are_found() {
    let root = tempfile::tempdir().unwrap();
    let (pkgs, prefix, outside) = (
        root.path().join("pkgs"),
        root.path().join("env"),
        root.path().join("outside"),
    );
    let source = pkgs.join("pkg-1.0-0");
    for dir in [
        source.join("bin"),
        prefix.join("bin"),
        prefix.join("conda-meta"),
        outside.clone(),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(source.join("bin/tool"), b"tool").unwrap();
    std::fs::hard_link(source.join("bin/tool"), prefix.join("bin/tool")).unwrap();
    let record = |source: &Path| {
        let json = serde_json::json!({"name": "pkg", "link": {"source": source, "type": 1}});
        std::fs::write(prefix.join("conda-meta/pkg-1.0-0.json"), json.to_string()).unwrap();
    };
    record(&source);
    let caches = [pkgs.clone()];
    assert!(!foreign_links(&prefix, &caches));
    std::fs::write(outside.join("bashrc"), b"rc").unwrap();
    std::fs::hard_link(outside.join("bashrc"), prefix.join("bin/evilcmd")).unwrap();
    assert!(foreign_links(&prefix, &caches));
    std::fs::remove_file(prefix.join("bin/evilcmd")).unwrap();
    assert!(!foreign_links(&prefix, &caches));
    // The agent's own record claiming the file outside as conda's.
    std::fs::hard_link(outside.join("bashrc"), prefix.join("bin/evilcmd")).unwrap();
    record(&outside);
    assert!(foreign_links(&prefix, &caches));
    // Without the package cache among conda's, its links are foreign too.
    std::fs::remove_file(prefix.join("bin/evilcmd")).unwrap();
    record(&source);
    assert!(foreign_links(&prefix, &[]));
}

/// A prefix the walk cannot see whole hides nothing: a link below directories whose path
/// is past PATH_MAX is refused (the check fails closed), as is one below a directory it
/// cannot list; a prefix that does not exist yet holds no link.
#[test]
fn a_prefix_the_walk_cannot_see_whole_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let (prefix, outside) = (root.path().join("env"), root.path().join("outside"));
    assert!(!foreign_links(&prefix, &[]));
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("bashrc"), b"rc").unwrap();
    // 20 levels of 250-character names, made one level at a time (relative to a
    // descriptor each, so the whole path is never passed to the kernel).
    let name = "d".repeat(250);
    let mut dir = rustix::fs::open(
        root.path(),
        rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    rustix::fs::mkdirat(&dir, "env", rustix::fs::Mode::from_raw_mode(0o755)).unwrap();
    dir = rustix::fs::openat(
        &dir,
        "env",
        rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    for _ in 0..20 {
        rustix::fs::mkdirat(&dir, name.as_str(), rustix::fs::Mode::from_raw_mode(0o755)).unwrap();
        dir = rustix::fs::openat(
            &dir,
            name.as_str(),
            rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
    }
    let outside_dir = rustix::fs::open(
        &outside,
        rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    rustix::fs::linkat(
        &outside_dir,
        "bashrc",
        &dir,
        "evil",
        rustix::fs::AtFlags::empty(),
    )
    .unwrap();
    assert!(foreign_links(&prefix, &[]));
}

/// Attack 4 U2: a chain of 2 000 directories in a prefix (as deep as `PATH_MAX` lets a
/// path go) is refused (the walk did not see it whole: too deep), on a small stack that a
/// walk recursing once per level would overflow.
#[test]
fn a_deep_chain_in_a_prefix_is_refused_without_overflowing_the_stack() {
    let root = tempfile::tempdir().unwrap();
    let prefix = root.path().join("env");
    std::fs::create_dir(&prefix).unwrap();
    crate::host::sandbox::shared::tests::chain(&prefix, 2000);
    let walked = prefix.clone();
    let linked = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || foreign_links(&walked, &[]))
        .unwrap()
        .join()
        .unwrap();
    assert!(linked, "a prefix too deep to walk is refused");
    crate::host::sandbox::shared::tests::unchain(&prefix);
}

/// Attack 7: a FIFO the agent made as a record in its own environment's `conda-meta`
/// (beside a hard link, so that the records are read) held the gate in `open` forever,
/// every session with it; a symlink to `/dev/zero` as a record would grow the server
/// without bound. Neither is read: the gate answers, and the record's links stay foreign.
#[test]
fn a_record_that_is_no_regular_file_is_not_read() {
    let root = tempfile::tempdir().unwrap();
    let (pkgs, prefix) = (root.path().join("pkgs"), root.path().join("env"));
    let source = pkgs.join("pkg-1.0-0");
    for dir in [
        source.join("bin"),
        prefix.join("bin"),
        prefix.join("conda-meta"),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(source.join("bin/tool"), b"tool").unwrap();
    std::fs::hard_link(source.join("bin/tool"), prefix.join("bin/tool")).unwrap();
    let record = serde_json::json!({"name": "pkg", "link": {"source": &source, "type": 1}});
    let records = prefix.join("conda-meta");
    std::fs::write(records.join("pkg-1.0-0.json"), record.to_string()).unwrap();
    rustix::fs::mkfifoat(rustix::fs::CWD, records.join("zz.json"), 0o600.into()).unwrap();
    std::os::unix::fs::symlink("/dev/zero", records.join("zero.json")).unwrap();
    let caches = [pkgs.clone()];
    let (done, finished) = std::sync::mpsc::channel();
    let walked = prefix.clone();
    std::thread::spawn(move || done.send(foreign_links(&walked, &caches)));
    let linked = finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the gate answered");
    assert!(!linked, "conda's own link is still accepted beside them");
    // A record conda wrote as a symlink to the real one is not taken as conda's.
    std::fs::remove_file(records.join("pkg-1.0-0.json")).unwrap();
    std::fs::write(root.path().join("elsewhere.json"), record.to_string()).unwrap();
    std::os::unix::fs::symlink(
        root.path().join("elsewhere.json"),
        records.join("pkg-1.0-0.json"),
    )
    .unwrap();
    assert!(foreign_links(&prefix, &[pkgs]));
}

/// Attack 9 A9-4: the walk of a prefix stops at its deadline and says so (a prefix of
/// millions of entries held a bounded write's gate outside `--timeout`); before it, the
/// same prefix is walked whole.
#[test]
fn the_walk_stops_at_its_deadline() {
    let root = tempfile::tempdir().unwrap();
    let prefix = root.path().join("env");
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::fs::write(prefix.join("bin/tool"), b"tool").unwrap();
    let past = std::time::Instant::now();
    assert_eq!(
        super::foreign_links(&prefix, &[], Some(past)),
        Err(super::links::OutOfTime)
    );
    let later = past + std::time::Duration::from_secs(600);
    assert_eq!(super::foreign_links(&prefix, &[], Some(later)), Ok(false));
}

/// A token argparse hands on as a value though it starts with `-` (Lib/argparse.py 3.11
/// `_parse_optional`): one that looks like a negative number, `-` alone, one with a
/// space, any after `--`. `clean --tempfiles -1` walks the agent's symlink `-1` and
/// deletes in it (attack 41 W1), so each is judged where it leads.
#[test]
fn a_value_that_starts_with_a_dash_is_judged_as_argparse_reads_it() {
    let (_root, allowed, outside) = work_and_secret();
    let scope = Confinement::to(std::slice::from_ref(&allowed));
    let check = |tokens: &[&str]| scope.check(&argv(tokens), &allowed, None);
    let cases: [&[&str]; 8] = [
        &["clean", "--tempfiles", "-1"],
        &["clean", "--tempfiles", "-12"],
        &["env", "create", "--file", "-.5"],
        &["compare", "-1.5"],
        &["compare", "-\u{0663}"],
        &["export", "--file", "-"],
        &["export", "--file", "-a b"],
        &["run", "--", "-x"],
    ];
    for bad in cases {
        assert_eq!(check(bad), Ok(()), "nothing planted yet: {bad:?}");
    }
    for name in ["-1", "-12", "-.5", "-1.5", "-\u{0663}", "-", "-a b", "-x"] {
        std::os::unix::fs::symlink(&outside, allowed.join(name)).unwrap();
    }
    for bad in cases {
        assert_eq!(check(bad), Err(Outside), "{bad:?}");
    }
    // An option stays an option: `-x` before `--` is not the entry `-x`.
    assert_eq!(check(&["list", "-x"]), Ok(()));
}

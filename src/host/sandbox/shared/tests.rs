use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// A file of the place hard-linked to a file outside becomes a copy of its own (bytes
/// and mode kept, the outside file untouched by a later write); under `Refuse` the
/// same place is refused naming the file relative to it; a symlink is left alone.
#[test]
fn shared_files_are_copied_or_refused() {
    let root = tempfile::tempdir().unwrap();
    let (place, outside) = (root.path().join("env"), root.path().join("outside"));
    std::fs::create_dir_all(place.join("bin/deep")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("bashrc"), b"rc\n").unwrap();
    std::fs::set_permissions(
        outside.join("bashrc"),
        std::fs::Permissions::from_mode(0o751),
    )
    .unwrap();
    std::fs::hard_link(outside.join("bashrc"), place.join("bin/deep/evil")).unwrap();
    std::os::unix::fs::symlink(outside.join("bashrc"), place.join("bin/link")).unwrap();
    std::fs::write(place.join("plain"), b"x").unwrap();
    let mut done = Unshared::default();
    match settle(&place, Rule::Refuse, &mut done) {
        Err(Shared::File(rel)) => assert_eq!(rel, Path::new("bin/deep/evil")),
        other => panic!("{other:?}"),
    }
    settle(&place, Rule::Unshare, &mut done).unwrap();
    assert_eq!(done, Unshared { files: 1, bytes: 3 });
    let meta = std::fs::metadata(place.join("bin/deep/evil")).unwrap();
    assert_eq!((meta.nlink(), meta.mode() & 0o7777), (1, 0o751));
    std::fs::write(place.join("bin/deep/evil"), b"changed\n").unwrap();
    assert_eq!(std::fs::read(outside.join("bashrc")).unwrap(), b"rc\n");
    assert_eq!(
        std::fs::metadata(outside.join("bashrc")).unwrap().nlink(),
        1
    );
    let mut again = Unshared::default();
    settle(&place, Rule::Refuse, &mut again).unwrap();
    assert_eq!(again, Unshared::default());
    assert!(settle(&root.path().join("missing"), Rule::Refuse, &mut again).is_ok());
    // A place that is itself a shared file.
    std::fs::hard_link(outside.join("bashrc"), root.path().join("registry")).unwrap();
    assert!(settle(&root.path().join("registry"), Rule::Refuse, &mut again).is_err());
    settle(&root.path().join("registry"), Rule::Unshare, &mut again).unwrap();
    assert_eq!(
        std::fs::metadata(outside.join("bashrc")).unwrap().nlink(),
        1
    );
}
/// Two names of one file in `dir`: `name` and `name.bak`.
fn twice(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
    let file = dir.join(name);
    std::fs::write(&file, bytes).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
    std::fs::hard_link(&file, dir.join(format!("{name}.bak"))).unwrap();
    file
}

/// A chain of `depth` directories `d/d/…` below `dir`, made by descriptors (deeper
/// than `PATH_MAX`).
pub(crate) fn chain(dir: &Path, depth: usize) {
    use rustix::fs::{Mode, OFlags, mkdirat, open, openat};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut at = open(dir, flags, Mode::empty()).unwrap();
    for _ in 0..depth {
        mkdirat(&at, "d", Mode::from_raw_mode(0o755)).unwrap();
        at = openat(&at, "d", flags, Mode::empty()).unwrap();
    }
}

/// Remove a chain made by [`chain`], one level at a time from the top.
pub(crate) fn unchain(dir: &Path) {
    use rustix::fs::{AtFlags, Mode, OFlags, open, renameat, unlinkat};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let at = open(dir, flags, Mode::empty()).unwrap();
    while renameat(&at, "d/d", &at, "x").is_ok() {
        unlinkat(&at, "d", AtFlags::REMOVEDIR).unwrap();
        renameat(&at, "x", &at, "d").unwrap();
    }
    let _ = unlinkat(&at, "d", AtFlags::REMOVEDIR);
}

/// Attack 4 U1: a set-user-ID file of another user with two links in a place is
/// copied without its set-user-ID/set-group-ID/sticky bits and stays its owner's (a
/// root server's copy of it would otherwise be a set-user-ID-root program).
#[test]
fn an_unshared_copy_keeps_no_special_bits_and_its_owner() {
    let root = tempfile::tempdir().unwrap();
    let place = root.path().join("proj");
    std::fs::create_dir(&place).unwrap();
    let tool = twice(&place, "tool", b"#!/bin/sh\n", 0o755);
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o6755)).unwrap();
    let root_server = rustix::process::geteuid().is_root();
    if root_server {
        std::os::unix::fs::chown(&tool, Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o6755)).unwrap();
    }
    let mut done = Unshared::default();
    settle_judged(&place, &mut done).unwrap();
    assert_eq!(done.files, 1, "{done:?}");
    for name in ["tool", "tool.bak"] {
        let meta = std::fs::metadata(place.join(name)).unwrap();
        assert_eq!(meta.nlink(), 1, "{name}");
        if root_server {
            assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{name}");
        }
    }
    // The copy (whichever name it took) has no special bit.
    let modes: Vec<u32> = ["tool", "tool.bak"]
        .iter()
        .map(|n| std::fs::metadata(place.join(n)).unwrap().mode() & 0o7777)
        .collect();
    assert!(modes.contains(&0o755), "{modes:?}");
}

/// Attack 4 U4: a judged place whose missing parent is a symlink to elsewhere (swapped
/// in after the gates' check) is refused, and nothing elsewhere is rewritten.
#[test]
fn a_symlink_in_a_judged_places_path_is_never_followed() {
    let root = tempfile::tempdir().unwrap();
    let (proj, outside) = (root.path().join("proj"), root.path().join("outside"));
    std::fs::create_dir_all(outside.join("openv")).unwrap();
    std::fs::create_dir(&proj).unwrap();
    let data = twice(&outside.join("openv"), "data.txt", b"data\n", 0o644);
    let before = std::fs::metadata(&data).unwrap().ino();
    std::os::unix::fs::symlink(&outside, proj.join("a")).unwrap();
    let mut done = Unshared::default();
    let refused = settle_judged(&proj.join("a/openv"), &mut done);
    assert!(matches!(refused, Err(Shared::Changed)), "{refused:?}");
    let refused = settle_judged(&proj.join("a/openv/data.txt"), &mut done);
    assert!(matches!(refused, Err(Shared::Changed)), "{refused:?}");
    let refused = settle_judged(&proj.join("a/missing/env"), &mut done);
    assert!(matches!(refused, Err(Shared::Changed)), "{refused:?}");
    let meta = std::fs::metadata(&data).unwrap();
    assert_eq!((meta.ino(), meta.nlink()), (before, 2));
    assert_eq!(done, Unshared::default());
    // The place itself, un-shared; a missing one settles at its nearest directory.
    let inside = twice(&proj, "x", b"x", 0o644);
    settle_judged(&proj.join("new/env"), &mut done).unwrap();
    assert_eq!(std::fs::metadata(&inside).unwrap().nlink(), 1);
}

/// Attack 4 U2: a chain of 10 000 directories in a place is refused (too deep), on a
/// test thread's ordinary stack, never overflowing it; `MAX_DEPTH` levels are read.
#[test]
fn a_deep_chain_is_refused_without_overflowing_the_stack() {
    let root = tempfile::tempdir().unwrap();
    let place = root.path().join("proj");
    std::fs::create_dir(&place).unwrap();
    chain(&place, 10_000);
    let mut done = Unshared::default();
    let refused = settle_judged(&place, &mut done);
    assert!(matches!(refused, Err(Shared::TooDeep(_))), "{refused:?}");
    assert!(refused.unwrap_err().to_string().contains("nested too deep"));
    unchain(&place);
    chain(&place, MAX_DEPTH - 1);
    settle_judged(&place, &mut done).unwrap();
    unchain(&place);
}

/// Attack 4 U5: a 2 GiB sparse file with two links is copied with its holes (no more
/// blocks than before); shared data past [`MAX_BYTES`] per call is refused.
#[test]
fn unsharing_keeps_holes_and_copies_at_most_its_budget() {
    let root = tempfile::tempdir().unwrap();
    let place = root.path().join("proj");
    std::fs::create_dir(&place).unwrap();
    let big = place.join("big");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(2 << 30).unwrap();
    std::os::unix::fs::FileExt::write_at(&file, b"tail", (2 << 30) - 4).unwrap();
    drop(file);
    std::fs::hard_link(&big, place.join("big2")).unwrap();
    let blocks = std::fs::metadata(&big).unwrap().blocks();
    let mut done = Unshared::default();
    settle_judged(&place, &mut done).unwrap();
    let meta = std::fs::metadata(&big).unwrap();
    assert_eq!((meta.nlink(), meta.len()), (1, 2 << 30));
    assert!(meta.blocks() <= blocks + 8, "{} > {blocks}", meta.blocks());
    assert!(done.bytes < 1 << 20, "{done:?}");
    let mut tail = [0u8; 4];
    std::os::unix::fs::FileExt::read_exact_at(
        &std::fs::File::open(place.join("big2")).unwrap(),
        &mut tail,
        (2 << 30) - 4,
    )
    .unwrap();
    assert_eq!(&tail, b"tail");
    // Over the budget: refused, the file still shared.
    twice(&place, "more", &[7u8; 100], 0o644);
    let mut spent = Unshared {
        files: 0,
        bytes: MAX_BYTES - 10,
    };
    let refused = settle_judged(&place, &mut spent);
    assert!(matches!(refused, Err(Shared::TooMuch(_))), "{refused:?}");
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("too much shared data")
    );
    assert_eq!(std::fs::metadata(place.join("more")).unwrap().nlink(), 2);
}

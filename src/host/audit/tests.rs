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

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
        // Any case; prefixes and suffixes; `&` and `;` separators; other parameters stay.
        (
            "https://s3.example/c/repodata.json?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA%2F1&X-Amz-Signature=f00d&X-Amz-Security-Token=zz",
            "https://s3.example/c/repodata.json?X-Amz-Algorithm=AWS4&X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]&X-Amz-Security-Token=[redacted]",
        ),
        (
            "https://blob.example/c?sv=2020&sig=AbC%3D;se=2030&x-api-key=K1",
            "https://blob.example/c?sv=2020&sig=[redacted];se=2030&x-api-key=[redacted]",
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
        // The fragment too (OAuth's implicit grant puts tokens there).
        (
            "https://h/cb#access_token=abc&state=s",
            "https://h/cb#access_token=[redacted]&state=s",
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

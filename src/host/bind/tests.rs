use super::*;

fn outcome(stdout: &[u8]) -> exec::Outcome {
    exec::Outcome {
        exit_code: Some(0),
        stdout: stdout.to_vec(),
        ..exec::Outcome::default()
    }
}

#[test]
fn the_plan_is_the_last_line_with_the_nonce_and_conda_keeps_the_rest() {
    let nonce = nonce();
    // conda's own output may even carry something that looks like a document.
    let conda = "{\"success\": true}\nccm-plan-0000 {\"protocol\":1}".to_owned();
    let document = r#"{"protocol":1,"packages":true,"prefix":"/envs/x","transactions":[[{"prefix":"/envs/x","link":[{"name":"a","version":"1","build":"0","md5":"m"}]}]]}"#;
    let mut run = outcome(format!("{conda}\n{nonce} {document}\n").as_bytes());
    let plan = split_preview(&mut run, &nonce).unwrap();
    assert_eq!(run.stdout, conda.as_bytes());
    assert_eq!(plan.prefix.as_deref(), Some("/envs/x"));
    assert!(plan.packages);
    assert_eq!(plan.transactions[0][0].link[0].md5.as_deref(), Some("m"));
}

#[test]
fn no_document_a_truncated_one_or_a_refusal_binds_nothing() {
    let nonce = nonce();
    let mut run = outcome(b"{\"success\": true}\n");
    assert_eq!(
        split_preview(&mut run, &nonce).unwrap_err(),
        Unbound::NoDocument
    );
    // Another nonce is not this preview's.
    let mut run = outcome(format!("x\n{} {{\"protocol\":1}}\n", super::nonce()).as_bytes());
    assert_eq!(
        split_preview(&mut run, &nonce).unwrap_err(),
        Unbound::NoDocument
    );
    let mut run = outcome(format!("x\n{nonce} {{\"protocol\":1}}\n").as_bytes());
    run.stdout_truncated = true;
    assert_eq!(
        split_preview(&mut run, &nonce).unwrap_err(),
        Unbound::TooLarge
    );
    let mut run =
        outcome(format!("\n{nonce} {{\"protocol\":1,\"unbound\":\"too big\"}}\n").as_bytes());
    assert_eq!(
        split_preview(&mut run, &nonce).unwrap_err(),
        Unbound::Refused("too big".into())
    );
}

fn binding_with_one_file() -> Binding {
    let plan = Plan {
        protocol: 1,
        files: vec![InputFile {
            value: "environment.yml".into(),
            path: Some("/project/environment.yml".into()),
            bound: true,
            size: Some(5),
            sha256: Some("x".into()),
            content: Some(base64::engine::general_purpose::STANDARD.encode(b"a: 1\n")),
            copy: None,
            bytes: None,
        }],
        ..Plan::default()
    };
    Binding::new(plan, Path::new("/usr/bin/python3"), None).unwrap()
}

#[test]
fn a_binding_keeps_copies_of_exactly_the_previewed_bytes() {
    use std::os::unix::fs::PermissionsExt;
    let binding = binding_with_one_file();
    let copy = binding.plan.files[0].copy.clone().unwrap();
    assert!(copy.ends_with("/files/0/environment.yml"), "{copy}");
    assert_eq!(std::fs::read(&copy).unwrap(), b"a: 1\n");
    assert_eq!(binding.plan.files[0].bytes.as_deref(), Some(&b"a: 1\n"[..]));
    let mode = std::fs::metadata(&copy).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
    let dir = binding.dir.path().to_owned();
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
    // The plan the run reads names the copy and carries no bytes.
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap();
    assert_eq!(written["files"][0]["copy"], copy.as_str());
    assert!(written["files"][0].get("content").is_none(), "{written}");
    drop(binding);
    assert!(!dir.exists());
}

#[test]
fn the_run_is_the_shown_argv_behind_the_wrapper_and_only_its_exit_says_it_stopped() {
    let binding = binding_with_one_file();
    let dir = binding.dir.path().to_owned();
    let spec = exec::Spec {
        program: "/opt/conda/bin/conda".into(),
        args: vec!["env".into(), "create".into()],
        cwd: None,
        stdin: None,
        timeout: std::time::Duration::from_secs(1),
        stdout_limit: 1,
        stderr_limit: 1,
        env_remove: Vec::new(),
        limits: exec::Limits::defaults(),
        sandbox: None,
        write_bound: None,
    };
    let run = binding.run_spec(&spec);
    assert_eq!(run.program, Path::new("/usr/bin/python3"));
    let args: Vec<String> = run
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(args[..2], ["-I", "-c"]);
    assert_eq!(args[3], "run");
    assert_eq!(args[4], dir.to_string_lossy());
    // The plan's digest: a plan changed on disk is refused by the run.
    let digest: String = sha2::Sha256::digest(std::fs::read(dir.join("plan.json")).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        args[5..],
        [
            "/opt/conda/bin/conda",
            digest.as_str(),
            "--",
            "env",
            "create"
        ]
    );
    assert_eq!(
        binding.changed(Some(CHANGED_EXIT)),
        Some(Stopped {
            why: "the run stopped before it began".into(),
            reached: Reached::Nothing
        })
    );
    std::fs::write(
        dir.join("changed.json"),
        r#"{"changed":"the configuration changed"}"#,
    )
    .unwrap();
    // Only the wrapper's exit status says the run stopped; the file only says why.
    assert_eq!(binding.changed(Some(0)), None);
    assert_eq!(
        binding.changed(Some(CHANGED_EXIT)),
        Some(Stopped {
            why: "the configuration changed".into(),
            reached: Reached::Nothing
        })
    );
    // How far the run got, as the wrapper says it; anything else, the least that is sure.
    for (reached, said) in [
        ("null", Reached::Nothing),
        ("\"fetched\"", Reached::Fetched),
        ("\"extracted\"", Reached::Extracted),
        ("\"removed\"", Reached::Removed),
        ("\"linked\"", Reached::Unknown),
    ] {
        std::fs::remove_file(dir.join("changed.json")).unwrap();
        let text = format!(r#"{{"changed":"x","reached":{reached}}}"#);
        std::fs::write(dir.join("changed.json"), text).unwrap();
        let stopped = binding.changed(Some(CHANGED_EXIT)).unwrap();
        assert_eq!(stopped.reached, said, "{reached}");
    }
}

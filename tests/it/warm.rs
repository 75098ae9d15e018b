//! The warm differential test: the same calls through a cold server and a `--warm` one
//! (same conda, same environment, same working directory), compared field by field.
//!
//! Every tool listed under the default policy gets an empty input and schema-drawn inputs
//! (`inputs`, seeded); the environment carries what conda reads (`HOME`, `XDG_*`,
//! `CONDARC`, `CONDA_PKGS_DIRS`, `CONDA_ENVS_PATH`, `CONDA_OFFLINE`, `PYTHONPATH`...), and
//! calls run in a working directory given per call (`ccm_cwd`), so a warm child that kept
//! the zygote's directory, environment or temporary directory would show. Results are
//! compared after masking what legitimately varies between two runs of one call:
//! `duration_ms` (wall time), the random names of temporary files and directories
//! (`tempfile`'s `tmp` + 8 characters) and object addresses in Python reprs (`at 0x…`:
//! address-space layout is randomized per process). `PYTHONHASHSEED=0` makes the order of Python's
//! string sets the same in every process (otherwise it varies from one cold run to the
//! next). Where conda itself varies between two cold runs of one call (its threads order
//! some debug lines), a differing call is run again on both servers and passes only if a
//! warm result equals a cold one; with conda's DEBUG log on, stderr is not compared (see
//! `logs_debug`). The warm server must have run every call warm (its
//! capabilities count them; calls without plugins run cold by design), or the comparison
//! would prove nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::inputs::{seed, seeded_runner, valid_inputs};
use crate::mcp::Session;
use crate::oracle::Throwaway;
use crate::support;

/// Schema-drawn inputs per tool, besides the empty one.
const DRAWN: usize = 2;
/// How long the zygote may take to become ready (importing conda on a loaded machine).
const READY_WITHIN: Duration = Duration::from_secs(180);

/// The environment of both servers: the throwaway's, plus variables conda or Python read.
fn environment(throwaway: &Throwaway) -> Vec<(String, String)> {
    std::fs::create_dir_all(throwaway.path("envs")).unwrap();
    std::fs::create_dir_all(throwaway.path("pythonpath")).unwrap();
    std::fs::create_dir_all(throwaway.path("cwd/sub")).unwrap();
    let mut env = throwaway.env();
    env.push((
        "CONDA_ENVS_PATH".into(),
        throwaway.path("envs").display().to_string(),
    ));
    env.push((
        "PYTHONPATH".into(),
        throwaway.path("pythonpath").display().to_string(),
    ));
    env.push(("CONDA_CHANGEPS1".into(), "false".into()));
    env.push(("PYTHONHASHSEED".into(), "0".into()));
    env
}

fn session(conda: &Path, throwaway: &Throwaway, flags: &[&str]) -> Session {
    let mut command = support::ccm();
    command
        .arg("--conda-exe")
        .arg(conda)
        .args(["--timeout", "120"])
        .args(flags)
        .env_clear()
        .envs(environment(throwaway))
        .current_dir(throwaway.path("cwd"));
    let mut session = Session::spawn(command);
    session.initialize = session.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "ccm-warm", "version": "1"}}),
    );
    session.notify("notifications/initialized", json!({}));
    session
}

/// Wait until the server's zygote is ready; panics with the reason when it is not.
pub(crate) fn wait_ready(session: &mut Session) {
    let end = Instant::now() + READY_WITHIN;
    loop {
        let warm = session.capabilities()["warm"].clone();
        match warm["state"].as_str() {
            Some("ready") => return,
            Some("unavailable") => panic!("no warm zygote: {warm}"),
            _ if Instant::now() > end => panic!("the zygote is not ready: {warm}"),
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// `text` with every random temporary name (`/tmp` + 8 of `tempfile`'s characters, then
/// the end of the name) replaced by `/tmpXXXXXXXX`.
fn mask_temporary_names(text: &str) -> String {
    let name = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_';
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(found) = text[at..].find("/tmp") {
        let start = at + found + 4;
        let end = start + 8;
        let random = bytes.len() >= end
            && bytes[start..end].iter().all(|b| name(*b))
            && bytes.get(end).is_none_or(|b| !name(*b));
        out.push_str(&text[at..start]);
        if random {
            out.push_str("XXXXXXXX");
            at = end;
        } else {
            at = start;
        }
    }
    out.push_str(&text[at..]);
    out
}

/// `text` with every object address of a Python repr (` at 0x` + hex digits) replaced.
fn mask_addresses(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find(" at 0x") {
        let start = found + " at 0x".len();
        let digits = rest[start..]
            .bytes()
            .take_while(u8::is_ascii_hexdigit)
            .count();
        out.push_str(&rest[..start]);
        if digits > 0 {
            out.push_str("ADDR");
        }
        rest = &rest[start + digits..];
    }
    out.push_str(rest);
    out
}

/// What a call's response says, less what legitimately varies.
fn masked(response: &Value) -> Value {
    let text = unmasked(response).to_string();
    serde_json::from_str(&mask_addresses(&mask_temporary_names(&text))).unwrap()
}

fn unmasked(response: &Value) -> Value {
    if let Some(error) = response.get("error") {
        return json!({ "error": error });
    }
    let result = &response["result"];
    let mut structured = result["structuredContent"].clone();
    if let Some(fields) = structured.as_object_mut() {
        fields.remove("duration_ms");
        return json!({"isError": result["isError"], "structured": structured});
    }
    json!({"isError": result["isError"], "content": result["content"]})
}

/// Whether `input` turns conda's DEBUG log on (`-vvv`, `--debug`, `--trace`). That log
/// prints the iteration order of sets whose members hash by object address, and records
/// cache hits that depend on it: two cold runs of one call differ there (seen with
/// `create --dry-run -vvv`: the virtual packages listed in another order, one more
/// "Retrieving packages" block). For such calls stderr is not compared; everything else is.
/// The level counts every `-v` of the argv: `verbose`, and `verbose_2` for those given
/// before the subcommand (seen: `verbose_2: 3` alone logged DEBUG, and the repodata
/// fetch's `Elapsed:` line differed).
fn logs_debug(input: &Value) -> bool {
    let level: u64 = ["verbose", "verbose_2"]
        .iter()
        .filter_map(|name| input[name].as_u64())
        .sum();
    level >= 3 || input["debug"] == json!(true) || input["trace"] == json!(true)
}

/// `masked(response)`, less stderr when `input` turns the DEBUG log on.
fn compared(response: &Value, input: &Value) -> Value {
    let mut value = masked(response);
    if logs_debug(input)
        && let Some(stderr) = value.pointer_mut("/structured/stderr")
    {
        *stderr = json!("(the DEBUG log: not compared)");
    }
    value
}

/// Whether a response is a conda execution (not a refusal).
fn executed(response: &Value) -> bool {
    response["result"]["structuredContent"]["exit_code"].is_number()
}

fn call(session: &mut Session, tool: &str, arguments: &Value) -> Value {
    session.request("tools/call", json!({"name": tool, "arguments": arguments}))
}

/// The calls: every listed tool, empty and drawn inputs, each in the working directory
/// and in a subdirectory of it.
fn corpus(conda: &Path, listed: &[String], seed: u64) -> Vec<(String, Value)> {
    let found = support::discover(conda);
    let toolset = support::toolset(&found.catalog, &found.plugins, false);
    let mut runner = seeded_runner(seed);
    let mut calls = Vec::new();
    for tool in &toolset.generated {
        if !listed.contains(&tool.name) {
            continue;
        }
        let mut inputs = vec![Map::new()];
        inputs.extend(valid_inputs(tool, &mut runner, DRAWN));
        for (n, mut input) in inputs.into_iter().enumerate() {
            if n % 2 == 1 {
                input.insert("ccm_cwd".into(), json!("sub"));
            }
            calls.push((tool.name.clone(), Value::Object(input)));
        }
    }
    calls
}

/// How many more times a call whose cold and warm results differ runs on each server.
const RERUNS: usize = 4;

/// Run `calls` through both servers; returns the number executed, those without plugins
/// (which run cold on the warm server too) apart, and the differences. conda itself is
/// not deterministic everywhere (its threads fetch channel data concurrently, so the
/// order and number of some `--verbose` debug lines vary from one cold run to the next):
/// when the first two results differ, the call runs again on both servers, and it
/// differs only if no warm result equals any cold result — a warm call must produce
/// what some cold run produces. The cold and the warm call of a pair run side by side
/// (two servers, reads only, each sandboxed: neither writes anything the other reads).
fn compare(
    cold: &mut Session,
    warm: &mut Session,
    calls: &[(String, Value)],
) -> (usize, usize, Vec<String>) {
    let (mut ran, mut without_plugins) = (0, 0);
    let mut differences = Vec::new();
    for (tool, input) in calls {
        // A call without plugins runs cold on the warm server too (compared all the same).
        let counted = input["no_plugins"] != json!(true);
        let (mut colds, mut warms) = (Vec::new(), Vec::new());
        for run in 0..=RERUNS {
            if run > 0 && warms.iter().any(|w| colds.contains(w)) {
                break;
            }
            let (a, b) = std::thread::scope(|scope| {
                let cold_call = scope.spawn(|| call(cold, tool, input));
                let b = call(warm, tool, input);
                (cold_call.join().unwrap(), b)
            });
            ran += usize::from(executed(&b) && counted);
            without_plugins += usize::from(executed(&b) && !counted);
            colds.push(compared(&a, input));
            warms.push(compared(&b, input));
        }
        if !warms.iter().any(|w| colds.contains(w)) {
            differences.push(format!(
                "{tool} {input} ({} runs each):\n  cold: {}\n  warm: {}",
                colds.len(),
                colds[0],
                warms[0]
            ));
        }
    }
    (ran, without_plugins, differences)
}

/// The warm server's counters: (warm calls, cold calls).
fn counters(warm: &mut Session) -> (u64, u64) {
    let caps = warm.capabilities();
    (
        caps["warm"]["warm_calls"].as_u64().unwrap(),
        caps["warm"]["cold_calls"].as_u64().unwrap(),
    )
}

fn differential(conda: &Path, label: &str) -> (Throwaway, Session, Session) {
    let throwaway = Throwaway::new(&format!("warm-{label}"));
    // Warm reads are the default: the cold server opts out.
    let mut cold = session(conda, &throwaway, &["--no-warm"]);
    let mut warm = session(conda, &throwaway, &["--warm"]);
    assert_eq!(cold.capabilities()["warm"], Value::Null);
    wait_ready(&mut warm);
    let listed: Vec<String> = warm
        .tools()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    let calls = corpus(
        conda,
        &listed,
        seed(&format!("warm differential ({label})")),
    );
    let (ran, without_plugins, differences) = compare(&mut cold, &mut warm, &calls);
    assert!(
        differences.is_empty(),
        "{} of {} calls differ cold vs warm:\n{}",
        differences.len(),
        calls.len(),
        differences.join("\n")
    );
    assert!(ran >= listed.len() / 2, "only {ran} calls executed");
    let (warm_calls, cold_calls) = counters(&mut warm);
    assert_eq!(
        cold_calls as usize, without_plugins,
        "calls with plugins ran cold on the warm server"
    );
    assert_eq!(warm_calls as usize, ran, "not every execution was warm");
    (throwaway, cold, warm)
}

#[test]
fn temporary_names_and_addresses_are_masked_and_nothing_else() {
    assert_eq!(
        mask_temporary_names("/dev/shm/tmp/tmp4gql29jy/x and /tmp/tmpnk9apxwc"),
        "/dev/shm/tmp/tmpXXXXXXXX/x and /tmp/tmpXXXXXXXX"
    );
    for kept in [
        "/tmp/tmp4gql29jyz",
        "/tmp/tmp4gql29j",
        "/tmp/tmpABCDEFGH",
        "/tmpfile",
    ] {
        assert_eq!(mask_temporary_names(kept), kept);
    }
    assert_eq!(
        mask_addresses("(<X object at 0x7fe54ca75b10>,) at 0x and at 0xg"),
        "(<X object at 0xADDR>,) at 0x and at 0xg"
    );
}

#[test]
fn warm_calls_match_cold_calls_on_the_fixture() {
    let conda = &support::fixture().conda;
    let (_throwaway, mut cold, mut warm) = differential(conda, "fixture");
    // conda_info reports the environment it ran with, the temporary directory and HOME's
    // rc file: the same, call after call.
    let info = json!({"json": true});
    for _ in 0..2 {
        let (a, b) = (
            call(&mut cold, "conda_info", &info),
            call(&mut warm, "conda_info", &info),
        );
        assert_eq!(masked(&a), masked(&b));
        let parsed = &b["result"]["structuredContent"]["parsed_json"];
        assert!(
            parsed["env_vars"]["CONDA_ENVS_PATH"].is_string(),
            "{parsed}"
        );
        assert!(parsed["env_vars"]["CCM_EXECUTION"].is_null(), "{parsed}");
    }
}

/// A setting written by one call is what the next warm call sees (nothing stale).
fn config_is_never_stale(conda: &Path) {
    let throwaway = Throwaway::new("warm-config");
    let mut warm = session(
        conda,
        &throwaway,
        &["--warm", "--allow-write", "--allow-exec"],
    );
    wait_ready(&mut warm);
    let show = json!({"show": ["channel_priority"], "json": true});
    let before = call(&mut warm, "conda_config", &show);
    let set = json!({"set": [["channel_priority", "strict"]]});
    let written = call(&mut warm, "conda_config", &set);
    assert_eq!(written["result"]["structuredContent"]["exit_code"], 0);
    let after = call(&mut warm, "conda_config", &show);
    let mut cold = session(conda, &throwaway, &["--no-warm"]);
    let fresh = call(&mut cold, "conda_config", &show);
    assert_eq!(masked(&after), masked(&fresh));
    assert_ne!(
        masked(&before),
        masked(&after),
        "the setting did not change"
    );
    assert_eq!(
        after["result"]["structuredContent"]["parsed_json"]["channel_priority"],
        "strict"
    );
    // The two reads were forked; the write started cold (writes always do) and is not
    // counted.
    assert_eq!(counters(&mut warm), (2, 0));
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_warm_calls_match_cold_calls() {
    let conda = support::real_conda();
    let (throwaway, mut cold, mut warm) = differential(&conda, "real");
    // A path relative to the call's working directory.
    std::fs::write(
        throwaway.path("cwd/sub/environment.yml"),
        "name: sub\ndependencies:\n  - python\n",
    )
    .unwrap();
    for cwd in [".", "sub"] {
        let input = json!({"name": "base", "file": "environment.yml", "ccm_cwd": cwd});
        let (a, b) = (
            call(&mut cold, "conda_compare", &input),
            call(&mut warm, "conda_compare", &input),
        );
        assert!(executed(&b), "{b}");
        assert_eq!(masked(&a), masked(&b));
    }
    config_is_never_stale(&conda);
}

/// What the fixture's `imprint` modules kept from their import, and what the same call
/// reads when it runs (working directory, then `CCM_EXECUTION`).
fn imprinted(session: &mut Session) -> (Value, String, Value) {
    let input = json!({"imprint": true, "cwd": true, "env": ["CCM_EXECUTION"], "ccm_cwd": "sub"});
    let response = call(session, "conda_behave", &input);
    let stdout = response["result"]["structuredContent"]["stdout"]
        .as_str()
        .unwrap_or_else(|| panic!("{response}"));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    let imprint: Value = serde_json::from_str(lines[1]).unwrap();
    let env: Value = serde_json::from_str(lines[2]).unwrap();
    (imprint, lines[0].to_owned(), env["CCM_EXECUTION"].clone())
}

/// The hostile case for preloading: modules that keep, at import, the call's environment,
/// working directory, command line and configuration (read through conda's context), as
/// a plugin's module may. The zygote must not have imported them ahead of the call: a
/// warm call shows its own values, never the zygote's, and the configuration as it is
/// now (changed after the zygote started).
#[test]
fn modules_that_read_per_call_state_at_import_are_not_preloaded() {
    let conda = &support::fixture().conda;
    let throwaway = Throwaway::new("warm-imprint");
    let rc = throwaway.path("home/.condarc");
    std::fs::create_dir_all(rc.parent().unwrap()).unwrap();
    std::fs::write(&rc, "imprint: when-the-zygote-started\n").unwrap();
    // conda_behave classified read: it runs in the sandbox, forked from the zygote.
    let mut warm = session(
        conda,
        &throwaway,
        &["--warm", "--classify", "conda_behave=read"],
    );
    wait_ready(&mut warm);
    let state = warm.capabilities()["warm"].clone();
    // imprint_{argv,cwd,env,rc} read per-call state; imprint imports them.
    assert!(
        state["zygote_refused_modules"].as_u64().unwrap() >= 5,
        "{state}"
    );
    assert!(
        state["zygote_preloaded_modules"].as_u64().unwrap() >= 1,
        "nothing was preloaded: {state}"
    );
    std::fs::write(&rc, "imprint: now\n").unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (imprint, cwd, execution) = imprinted(&mut warm);
        assert!(execution.is_string(), "{execution}");
        assert_eq!(imprint["execution"], execution, "{imprint}");
        assert_eq!(imprint["cwd"], cwd, "{imprint}");
        assert!(cwd.ends_with("/cwd/sub"), "{cwd}");
        assert_eq!(imprint["rc"], "now", "{imprint}");
        let argv = imprint["argv"].as_array().unwrap();
        assert!(argv.contains(&json!("--imprint")), "{imprint}");
        seen.push(execution);
    }
    assert_ne!(seen[0], seen[1], "two calls, one execution marker");
    assert_eq!(counters(&mut warm), (2, 0));
}

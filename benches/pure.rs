//! In-process benchmarks of the pure hot paths (`cargo bench --bench pure`).
//!
//! Figures are medians of repeated runs, reported next to a baseline measured in the same
//! run (the machine is shared and noisy, so ratios are what matter):
//!
//! * building every tool (schemas; validators are compiled on first use) for a catalog;
//! * one call's validate + compile + classify, for the generic and the typed compiler;
//! * serializing the tools/list result;
//! * judging large incoming frames (`transport::frame::inspect`: syntax, ids, repeated
//!   keys at any depth) next to serde's own parse of the same text.
//!
//! The catalog is the live discovery of `CCM_BENCH_CONDA` when set (e.g. a conda with
//! plugins), else the checked-in `snapshots/conda-26.7.json`.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::hint::black_box;
use std::time::{Duration, Instant};

use ccm::model::catalog::{Catalog, Plugin};
use ccm::tools::policy::{self, Origin};
use ccm::tools::toolset::{Compiler, ToolsetSettings};
use serde_json::{Value, json};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Median time of `f`, timing batches of `batch` calls `rounds` times.
fn measure(rounds: usize, batch: u32, mut f: impl FnMut()) -> Duration {
    for _ in 0..batch {
        f(); // warm up
    }
    let samples = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                f();
            }
            start.elapsed() / batch
        })
        .collect();
    median(samples)
}

fn catalog() -> (Catalog, Vec<Plugin>, String) {
    if let Some(conda) = std::env::var_os("CCM_BENCH_CONDA") {
        let conda = std::fs::canonicalize(conda).expect("CCM_BENCH_CONDA exists");
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let executions = ccm::host::exec::Executions::new(ccm::host::exec::Limits::defaults());
        let found = runtime.block_on(ccm::host::discovery::discover(
            &executions,
            &ccm::host::target::Conda::resolve(conda.clone()),
            Duration::from_secs(120),
        ));
        (
            found.catalog,
            found.plugins,
            format!("live discovery of {}", conda.display()),
        )
    } else {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/snapshots/conda-26.7.json"
        ))
        .unwrap();
        let snapshot = ccm::model::snapshot::Snapshot::from_text(&text).unwrap();
        (
            snapshot.catalog,
            snapshot.plugins,
            "snapshots/conda-26.7.json".into(),
        )
    }
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let (catalog, plugins, source) = catalog();
    let settings = ToolsetSettings {
        allow_exec: true,
        classify: Vec::new(),
        timeout: Duration::from_secs(900),
        sandboxed: false,
    };
    println!("catalog: {source}");
    frames();
    if std::env::var_os("CCM_BENCH_PROFILE").is_some() {
        for _ in 0..3 {
            profile(&catalog);
        }
    }

    // The target stamp (instant start): files only, no process.
    if let Some(conda) = std::env::var_os("CCM_BENCH_CONDA") {
        let conda = std::fs::canonicalize(conda).expect("CCM_BENCH_CONDA exists");
        let stamp = measure(30, 5, || {
            let located = ccm::host::target::Conda::resolve(conda.clone())
                .locate()
                .expect("site-packages found");
            black_box(ccm::host::site_scan::stamp(&located.site_dirs));
        });
        println!("target stamp: {}", ms(stamp));
    }

    // Startup: every schema (validators are compiled on a tool's first call).
    let mut tools = None;
    let build = measure(15, 1, || {
        tools = Some(ccm::baked::toolset(&catalog, &plugins, &settings))
    });
    let tools = tools.unwrap();
    let baked = tools
        .generated
        .iter()
        .filter(|t| matches!(t.compiler, Compiler::Baked(_)))
        .count();
    println!(
        "build all tools: {} for {} tools ({} baked), {} per tool",
        ms(build),
        tools.generated.len(),
        baked,
        us(build / tools.generated.len() as u32)
    );

    // tools/list payload: serialize the descriptors.
    let descriptors = Value::Array(tools.descriptors());
    let mut size = 0;
    let list = measure(30, 5, || {
        size = black_box(serde_json::to_vec(&descriptors).unwrap()).len()
    });
    println!("serialize tools/list: {} ({} bytes)", ms(list), size);

    // One call: validate + compile + classify.
    let root = catalog.root.as_ref();
    let calls = [
        (
            "conda_config",
            json!({"show": ["channels", "solver"], "json": true}),
        ),
        (
            "conda_install",
            json!({"name": "t1", "packages": ["numpy>=2", "scipy"], "channel": ["conda-forge"], "dry_run": true, "json": true}),
        ),
        ("conda_info", json!({"json": true})),
    ];
    println!(
        "| call | validate | compile (generic) | compile (typed) | classify | total (typed path) |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, input) in calls {
        let Some(tool) = tools.get(name) else {
            continue;
        };
        let map = input.as_object().unwrap().clone();
        let validate = measure(30, 200, || {
            black_box(tool.validate(black_box(&input)).is_ok());
        });
        let generic = measure(30, 200, || {
            black_box(ccm::tools::argv::compile(&tool.layout, black_box(&map)).unwrap());
        });
        let typed = match tool.compiler {
            Compiler::Baked(command) => Some(measure(30, 200, || {
                black_box((command.compile)(black_box(&map)).unwrap());
            })),
            Compiler::Generic => None,
        };
        let argv = ccm::tools::argv::compile(&tool.layout, &map).unwrap();
        let classify = measure(30, 200, || {
            black_box(policy::classify(
                &tools.rules,
                root,
                black_box(&argv),
                Origin::Generated {
                    opaque: tool.opaque,
                },
            ));
        });
        let compile = typed.unwrap_or(generic);
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            us(validate),
            us(generic),
            typed.map(us).unwrap_or_else(|| "—".into()),
            us(classify),
            us(validate + compile + classify)
        );
    }
}

/// Frames of about 1 MiB: one long string (a `conda_execute` stdin), many small objects
/// (a long package list of objects), one object with many keys (the hashing worst case).
fn frames() {
    let call = |arguments: String| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"conda_execute","arguments":{arguments}}}}}"#
        )
    };
    let string = call(format!(
        r#"{{"argv":["info"],"stdin":"{}"}}"#,
        "x".repeat(1 << 20)
    ));
    let objects = call(format!(
        r#"{{"items":[{}]}}"#,
        (0..25_000)
            .map(|i| format!(r#"{{"name":"pkg{i}","version":"1.0","build":"0"}}"#))
            .collect::<Vec<_>>()
            .join(",")
    ));
    let keys = call(format!(
        "{{{}}}",
        (0..50_000)
            .map(|i| format!(r#""key{i}":{i}"#))
            .collect::<Vec<_>>()
            .join(",")
    ));
    println!(
        "| frame | bytes | inspect (scan, repeated keys, serde, rmcp) | scan alone | serde_json::from_str alone |"
    );
    println!("|---|---|---|---|---|");
    for (name, text) in [
        ("one 1 MiB string", &string),
        ("25,000 objects", &objects),
        ("50,000 keys in one object", &keys),
    ] {
        let inspect = measure(15, 3, || {
            black_box(ccm::transport::frame::inspect(black_box(text.as_bytes())));
        });
        let scan = measure(15, 3, || {
            black_box(ccm::transport::frame::scan(black_box(text.as_bytes())));
        });
        let serde = measure(15, 3, || {
            black_box(serde_json::from_str::<Value>(black_box(text)).unwrap());
        });
        println!(
            "| {name} | {} | {} | {} | {} |",
            text.len(),
            ms(inspect),
            ms(scan),
            ms(serde)
        );
    }
}

#[allow(dead_code)]
fn profile(catalog: &Catalog) {
    use ccm::tools::layout::Layout;
    let commands = catalog.commands();
    let t = Instant::now();
    let mut layouts = Vec::new();
    for (branch, _) in &commands {
        layouts.push(Layout::new(branch));
    }
    println!("layouts: {:?}", t.elapsed());
    let t = Instant::now();
    let mut schemas = Vec::new();
    for l in &layouts {
        if let Ok(s) = ccm::tools::schema::input_schema(l) {
            schemas.push(s);
        }
    }
    println!("schemas: {:?}", t.elapsed());
    let t = Instant::now();
    for s in &schemas {
        black_box(ccm::tools::schema::Validator::new(&Value::Object(s.clone())).unwrap());
    }
    println!("validators: {:?}", t.elapsed());
    let t = Instant::now();
    for (branch, _) in &commands {
        black_box(ccm::model::snapshot::signature(branch));
    }
    println!("signatures: {:?}", t.elapsed());
}

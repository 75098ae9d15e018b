use super::*;

fn completion_plugin() -> Plugin {
    Plugin {
        distribution: "conda-completion".into(),
        version: "0.3.2".into(),
        entry_point: "conda-completion".into(),
        value: "conda_completion.plugin".into(),
        hooks: vec!["conda_subcommands".into(), "conda_post_commands".into()],
    }
}

#[test]
fn fingerprint_test_vectors() {
    assert_eq!(
        discovery_fingerprint("26.7.1", &[]),
        "86570dff874ee4985cbcada9590e8b5acd2418ca5947f9d038b125168c133f1a"
    );
    assert_eq!(
        discovery_fingerprint("unknown", &[]),
        "6f80ebe3e1cef5d43607204bc92ca714b0ddd72ce3d1e884be25609c1460f1b4"
    );
    assert_eq!(
        discovery_fingerprint("26.7.1", &[completion_plugin()]),
        "c155acdc2b5c04710826478fb5063bd41c2b2ec7555c5206eb2856b613acd0ca"
    );
}

#[test]
fn fingerprint_ignores_plugin_and_hook_order() {
    let a = completion_plugin();
    let mut b = a.clone();
    b.entry_point = "zzz".into();
    let mut a_rev = a.clone();
    a_rev.hooks.reverse();
    assert_eq!(
        discovery_fingerprint("1", &[a.clone(), b.clone()]),
        discovery_fingerprint("1", &[b, a_rev])
    );
}

#[test]
fn struct_serialization_is_canonical() {
    let text = include_str!("../../../snapshots/conda-0.99.json");
    let snapshot: serde_json::Value = serde_json::from_str(text).unwrap();
    let catalog: Catalog = serde_json::from_value(snapshot["catalog"].clone()).unwrap();
    assert_eq!(
        serde_json::to_string(&catalog).unwrap(),
        canonical_json(&catalog)
    );
    let plugins: Vec<Plugin> = serde_json::from_value(snapshot["plugins"].clone()).unwrap();
    assert_eq!(
        serde_json::to_string(&plugins).unwrap(),
        canonical_json(&plugins)
    );
}

#[test]
fn pep503_normalisation() {
    assert_eq!(
        normalize_distribution("conda_completion"),
        "conda-completion"
    );
    assert_eq!(
        normalize_distribution("Conda.-_Completion"),
        "conda-completion"
    );
    assert_eq!(
        normalize_distribution("conda-completion"),
        "conda-completion"
    );
}

#[test]
fn nargs_round_trips_through_json() {
    for (nargs, text) in [
        (Nargs::One, "null"),
        (Nargs::Exactly(2), "2"),
        (Nargs::Optional, "\"?\""),
        (Nargs::ZeroOrMore, "\"*\""),
        (Nargs::OneOrMore, "\"+\""),
        (Nargs::Remainder, "\"remainder\""),
        (Nargs::Parser, "\"parser\""),
    ] {
        assert_eq!(serde_json::to_string(&nargs).unwrap(), text);
        assert_eq!(serde_json::from_str::<Nargs>(text).unwrap(), nargs);
    }
    assert!(serde_json::from_str::<Nargs>("\"==SUPPRESS==\"").is_err());
    assert!(serde_json::from_str::<Nargs>("-1").is_err());
}

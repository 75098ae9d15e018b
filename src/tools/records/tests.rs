use serde_json::json;

use super::*;

fn record(name: &str, progress: &str, finished: bool) -> Vec<u8> {
    format!(
        "{{\"fetch\":\"{name:<20.20} | 7.6 MB    | \",\"finished\":{finished},\"maxval\":1,\"progress\":{progress}}}\n\0"
    )
    .into_bytes()
}

const DOCUMENT: &str =
    "{\n  \"success\": true,\n  \"actions\": {\"LINK\": [], \"PREFIX\": \"/p\"}\n}\n";

#[test]
fn records_are_read_as_conda_writes_them() {
    let bytes = record("numpy-2.3.1", "0.420000", false);
    let found = parse_record(&bytes[..bytes.len() - 1]).expect("a record");
    assert_eq!(
        found,
        FetchRecord {
            package: "numpy-2.3.1".into(),
            size: Some("7.6 MB".into()),
            progress: 0.42,
            finished: false,
        }
    );
    assert_eq!(found.label(), "numpy-2.3.1 (7.6 MB)");
    let long = record("a-very-long-package-name-2.0", "1", true);
    let found = parse_record(&long[..long.len() - 1]).unwrap();
    assert_eq!(found.package, "a-very-long-package-");
    assert!(found.finished);
    for not_a_record in [
        &b"{\"success\": true}\n"[..],
        b"plain text",
        b"[1]",
        b"{\"fetch\": 1}",
    ] {
        assert_eq!(parse_record(not_a_record), None);
    }
}

#[test]
fn the_filter_leaves_the_document_whatever_the_chunks() {
    let mut stream = Vec::new();
    for (name, progress, finished) in [
        ("a-1", "0.5", false),
        ("a-1", "1", true),
        ("b-2", "1", true),
    ] {
        stream.extend(record(name, progress, finished));
    }
    stream.extend_from_slice(DOCUMENT.as_bytes());
    for size in [1, 2, 7, 64, stream.len()] {
        let mut filter = Filter::default();
        let mut out = Vec::new();
        let mut seen = Vec::new();
        for chunk in stream.chunks(size) {
            filter.push(chunk, &mut out, &mut |r| seen.push(r));
        }
        filter.finish(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            DOCUMENT,
            "chunks of {size}"
        );
        let names: Vec<(&str, bool)> = seen
            .iter()
            .map(|r| (r.package.as_str(), r.finished))
            .collect();
        assert_eq!(
            names,
            [("a-1", false), ("a-1", true), ("b-2", true)],
            "chunks of {size}"
        );
    }
}

#[test]
fn what_is_not_a_record_passes_untouched() {
    // NUL-terminated output that is no record keeps its NUL; a long segment is output.
    let mut stream = b"text\0".to_vec();
    stream.extend(vec![b'x'; RECORD_MAX + 10]);
    stream.push(0);
    stream.extend(record("c-3", "1", true));
    stream.extend_from_slice(b"tail");
    for size in [3, 1000, stream.len()] {
        let mut filter = Filter::default();
        let mut out = Vec::new();
        let mut count = 0;
        for chunk in stream.chunks(size) {
            filter.push(chunk, &mut out, &mut |_| count += 1);
        }
        filter.finish(&mut out);
        let mut expected = b"text\0".to_vec();
        expected.extend(vec![b'x'; RECORD_MAX + 10]);
        expected.push(0);
        expected.extend_from_slice(b"tail");
        assert_eq!(out, expected, "chunks of {size}");
        assert_eq!(count, 1);
    }
    assert_eq!(strip(b"no records"), (b"no records".to_vec(), 0));
    // Output before a record on its line stays output.
    let mut line = b"before ".to_vec();
    line.extend(record("d-4", "1", true));
    line.extend_from_slice(b"{}");
    assert_eq!(strip(&line), (b"before {}".to_vec(), 1));
}

#[test]
fn transactions_in_one_line() {
    let document = json!({"success": true, "actions": {
        "FETCH": [{}], "LINK": [{}, {}, {}], "UNLINK": [{}], "PREFIX": "/envs/x\u{7}y"}});
    assert_eq!(
        transaction_summary(&document).as_deref(),
        Some("LINK 3, UNLINK 1 in /envs/xy")
    );
    let dry = json!({"dry_run": true, "actions": {"LINK": [{}]}, "prefix": "/e"});
    assert_eq!(
        transaction_summary(&dry).as_deref(),
        Some("dry run: LINK 1, UNLINK 0 in /e")
    );
    assert_eq!(transaction_summary(&json!({"conda_version": "1"})), None);
    assert_eq!(clean("a\u{1b}[31mb", 3), "a[3…");
}

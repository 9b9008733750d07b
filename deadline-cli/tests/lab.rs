//! `deadline lab`: the preset sample's figures, extra candidates, and the SVG.

mod common;

use common::{json, num, temp_dir, texts};
use serde_json::Value;

/// The row for timeout `t` and `retries`.
fn row(v: &Value, t: f64, retries: u64) -> Value {
    v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| num(&r["timeout_ms"]) == t && r["retries"].as_u64() == Some(retries))
        .unwrap_or_else(|| panic!("no row for {t} ms with {retries} retries"))
        .clone()
}

#[test]
fn percentiles_and_mean_of_the_preset() {
    let v = json(&["lab", "--json"]);
    assert_eq!(num(&v["alloc_ms"]), 250.0);
    assert_eq!(num(&v["p50_ms"]), 11.0);
    assert_eq!(num(&v["p95_ms"]), 45.0);
    assert_eq!(num(&v["p99_ms"]), 90.0);
    assert_eq!(num(&v["mean_ms"]), 18.27);
}

#[test]
fn p99_with_one_retry_fits_and_two_do_not() {
    let v = json(&["lab", "--json"]);
    let one = row(&v, 90.0, 1);
    assert_eq!(num(&one["worst_case_ms"]), 180.0);
    assert_eq!(one["fits"], Value::Bool(true));
    assert_eq!(num(&one["kill_fraction"]), 0.01);
    assert_eq!(num(&one["failure_probability"]), 0.0001);
    let none = row(&v, 90.0, 0);
    assert_eq!(num(&none["failure_probability"]), 0.01);
    let two = row(&v, 90.0, 2);
    assert_eq!(num(&two["worst_case_ms"]), 270.0);
    assert_eq!(two["fits"], Value::Bool(false));
}

#[test]
fn the_mean_kills_fifteen_percent() {
    let v = json(&["lab", "--json"]);
    let mean = num(&v["mean_ms"]);
    assert_eq!(num(&row(&v, mean, 0)["kill_fraction"]), 0.15);
}

#[test]
fn a_given_125_ms_uses_the_whole_allocation_and_kills_the_same_one_percent() {
    let v = json(&["lab", "--json", "--timeout", "125", "--retries", "1"]);
    let r = row(&v, 125.0, 1);
    assert_eq!(num(&r["worst_case_ms"]), 250.0);
    assert_eq!(r["fits"], Value::Bool(true));
    assert_eq!(r["kill_fraction"], row(&v, 90.0, 1)["kill_fraction"]);
    // --retries 1: rows for 0 and 1 retries only.
    assert!(
        v["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .all(|r| r["retries"].as_u64() <= Some(1))
    );
}

#[test]
fn faded_rehearsal_at_150_ms() {
    let v = json(&["lab", "--json", "--alloc", "150", "--timeout", "45"]);
    // At the p99, floor(150 / 90) = 1 attempt: no retry fits.
    assert_eq!(row(&v, 90.0, 1)["fits"], Value::Bool(false));
    let r = row(&v, 45.0, 1);
    assert_eq!(num(&r["worst_case_ms"]), 90.0);
    assert_eq!(r["fits"], Value::Bool(true));
    assert_eq!(num(&r["kill_fraction"]), 0.03);
    assert_eq!(num(&r["failure_probability"]), 0.0009);
    let p99 = v["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .find(|c| c["label"] == "p99")
        .expect("p99")
        .clone();
    assert_eq!(p99["attempts_that_fit"], 1);
}

#[test]
fn a_sample_file_is_read() {
    let dir = temp_dir("lab-sample");
    let file = common::write(
        &dir,
        "s.txt",
        "# ten calls\n1, 2, 3 4 5\n6\n7\n8\n9\n100 ms\n",
    );
    let v = json(&["lab", "--json", &file]);
    assert_eq!(num(&v["p50_ms"]), 5.0);
    assert_eq!(num(&v["p99_ms"]), 100.0);
    assert_eq!(num(&v["mean_ms"]), 14.5);
}

#[test]
fn svg_marks_every_candidate_and_the_allocation() {
    let dir = temp_dir("lab-svg");
    let path = dir.join("lab.svg");
    let path = path.to_string_lossy();
    let (code, out, err) = texts(&["lab", "--svg", &path, "--timeout", "125"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("p99"), "{out}");
    let svg = std::fs::read_to_string(&*path).expect("the SVG is written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for label in [
        "median 11 ms",
        "p95 45 ms",
        "p99 90 ms",
        "mean 18.27 ms",
        "given 125 ms",
        "allocation 250 ms",
    ] {
        assert!(svg.contains(label), "the SVG lacks `{label}`");
    }
    // One bar per distinct latency of the preset.
    assert_eq!(svg.matches(" calls at ").count(), 7);
}

/// An allocation so large that the count of attempts stops at `u32::MAX` says so, instead
/// of "any number" (which is for a zero timeout).
#[test]
fn a_count_of_attempts_that_saturates_says_or_more() {
    let (code, out, err) = texts(&["lab", "--alloc", "1e12", "--timeout", "0.001"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("median = ") && l.contains(": 4294967295 or more attempts fit")),
        "{out}"
    );
}

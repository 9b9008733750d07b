//! `deadline plan`: the checkout example's replays through the core's plan, the budget table,
//! and a table with measured latencies, parallel calls, retries and hedging.

mod common;

use common::{data, json, num, temp_dir, texts, write};
use serde_json::Value;

/// auth's `backoff_ms` in data/example.toml.
const AUTH_BACKOFF_MS: f64 = 5.0;

/// The steps of a trace as (name, start, timeout, outcome).
fn steps(trace: &Value) -> Vec<(String, f64, Option<f64>, String)> {
    trace["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().expect("name").to_owned(),
                num(&s["start_ms"]),
                s["timeout_ms"].as_f64(),
                s["outcome"].as_str().expect("outcome").to_owned(),
            )
        })
        .collect()
}

fn step(
    name: &str,
    start: f64,
    timeout: Option<f64>,
    outcome: &str,
) -> (String, f64, Option<f64>, String) {
    (name.to_owned(), start, timeout, outcome.to_owned())
}

#[test]
fn checkout_b_is_slow_and_the_response_goes_out_at_160() {
    let v = json(&["plan", "--json"]);
    let trace = &v["traces"][0];
    assert_eq!(
        steps(trace),
        vec![
            step("A", 0.0, Some(50.0), "ok"),
            step("B", 10.0, Some(110.0), "ok"),
            step("C", 115.0, Some(60.0), "ok"),
        ]
    );
    assert_eq!(num(&trace["respond_ms"]), 160.0);
    assert_eq!(trace["answered"], Value::Bool(true));
}

#[test]
fn checkout_a_and_b_slow_c_gets_24_ms_under_its_floor_and_is_skipped_at_176() {
    let v = json(&["plan", "--json"]);
    let trace = &v["traces"][1];
    assert_eq!(
        steps(trace),
        vec![
            step("A", 0.0, Some(50.0), "ok"),
            step("B", 48.0, Some(110.0), "ok"),
            step("C", 156.0, None, "skipped"),
        ]
    );
    // A skipped step has an explicit null timeout.
    assert!(trace["steps"][2]["timeout_ms"].is_null());
    assert_eq!(num(&trace["respond_ms"]), 176.0);
}

#[test]
fn checkout_budget_table_slices_and_the_whole_request() {
    let v = json(&["plan", "--json"]);
    let deps = v["dependencies"].as_array().expect("dependencies");
    let slices: Vec<f64> = deps.iter().map(|d| num(&d["slice_ms"])).collect();
    // A: 200 - 20 own work - B's floor 30; B at A's p50 (10): 200 - 10 - 20;
    // C at 10 + 30: 200 - 40 - 20.
    assert_eq!(slices, vec![150.0, 170.0, 140.0]);
    let reasons: Vec<&str> = deps
        .iter()
        .map(|d| d["reason"].as_str().expect("reason"))
        .collect();
    assert!(
        reasons[1].starts_with("p99.9 = 90 ms, cap 110 ms, floor 30 ms"),
        "{}",
        reasons[1]
    );
    assert!(reasons[2].contains("below the p99.9"), "{}", reasons[2]);
    // The caps (50 + 110 + 60) and own work (20) exceed the 200 ms budget; the floors fit.
    assert_eq!(num(&v["whole"]["worst_case_ms"]), 240.0);
    assert_eq!(v["whole"]["fits"], Value::Bool(false));
    assert_eq!(v["whole"]["floors_fit"], Value::Bool(true));
    // Little's law at the table's 100 requests/s: 200 ms deadline -> 20 in flight.
    assert_eq!(num(&v["whole"]["in_flight_worst"]), 20.0);
    let v = json(&["plan", "--json", "--rate", "1000"]);
    assert_eq!(num(&v["whole"]["in_flight_worst"]), 200.0);
}

#[test]
fn checkout_text_shows_the_table_and_both_replays() {
    let (code, out, _) = texts(&["plan"]);
    assert_eq!(code, 0);
    assert!(out.contains("response at 160 ms"), "{out}");
    assert!(out.contains("response at 176 ms"), "{out}");
    assert!(out.contains("skipped"), "{out}");
    assert!(
        out.contains("p99.9 = 90 ms, cap 110 ms, floor 30 ms"),
        "{out}"
    );
}

#[test]
fn measured_latencies_parallel_calls_retries_and_hedges() {
    let v = json(&["plan", "--json", &data("example.toml")]);
    let deps = v["dependencies"].as_array().expect("dependencies");
    let pricing = &deps[1];
    // Percentiles from pricing.txt (1000 calls) by nearest rank: the 500th, 950th, 999th.
    assert_eq!(num(&pricing["p50_ms"]), 28.0);
    assert_eq!(num(&pricing["p95_ms"]), 60.0);
    assert_eq!(num(&pricing["p999_ms"]), 260.0);
    // cap = p99.9 + the table's 20 ms margin; hedge after the p95.
    assert_eq!(num(&pricing["cap_ms"]), 280.0);
    assert_eq!(num(&pricing["hedge_delay_ms"]), 60.0);
    assert_eq!(num(&pricing["kill_fraction_at_cap"]), 0.001);
    // inventory runs alongside pricing: the same slice.
    assert_eq!(deps[2]["mode"], "parallel");
    assert_eq!(pricing["slice_ms"], deps[2]["slice_ms"]);
    // auth: one retry doubles the worst case, and the backoff before it (full jitter from
    // the table's 5 ms) may add all of its 5 ms.
    assert_eq!(
        num(&deps[0]["worst_case_ms"]),
        2.0 * num(&deps[0]["cap_ms"]) + AUTH_BACKOFF_MS
    );
    // The whole request: auth, then the longer of pricing and inventory, then
    // recommendations, then own work.
    let worst = |i: usize| num(&deps[i]["worst_case_ms"]);
    assert_eq!(
        num(&v["whole"]["worst_case_ms"]),
        worst(0) + worst(1).max(worst(2)) + worst(3) + num(&v["own_work_ms"])
    );

    let retried = steps(&v["traces"][0]);
    assert_eq!(retried[0].0, "auth");
    assert_eq!(retried[0].3, "timeout");
    assert_eq!(retried[1].0, "auth");
    assert_eq!(retried[1].3, "ok");
    // The retry starts after the first attempt's timeout ends, within the backoff's range.
    let first_ends = retried[0].1 + retried[0].2.expect("timeout");
    assert!(retried[1].1 >= first_ends, "{retried:?}");
    assert!(retried[1].1 <= first_ends + AUTH_BACKOFF_MS, "{retried:?}");
    // pricing and inventory start together.
    assert_eq!(retried[2].1, retried[3].1);
    assert_eq!(v["traces"][0]["answered"], Value::Bool(true));

    let stalled = &v["traces"][1];
    let s = steps(stalled);
    let inventory = s.iter().find(|x| x.0 == "inventory").expect("inventory");
    assert_eq!(inventory.3, "timeout");
    assert_eq!(stalled["answered"], Value::Bool(false));
    // The request fails when inventory's timeout fires.
    assert_eq!(
        num(&stalled["respond_ms"]),
        inventory.1 + inventory.2.expect("timeout")
    );
}

#[test]
fn a_hedge_is_replayed_as_the_core_sends_it() {
    let v = json(&["plan", "--json", &data("example.toml")]);
    let delay = num(&v["dependencies"][1]["hedge_delay_ms"]);
    let trace = v["traces"]
        .as_array()
        .expect("traces")
        .iter()
        .find(|t| t["name"] == "pricing hedged")
        .expect("the hedged trace");
    let pricing: Vec<&Value> = trace["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|s| s["name"] == "pricing")
        .collect();
    assert_eq!(pricing.len(), 2, "{pricing:?}");
    let (first, copy) = (pricing[0], pricing[1]);
    assert_eq!(first["hedge"], Value::Bool(false));
    assert_eq!(copy["hedge"], Value::Bool(true));
    // The copy goes out one hedge delay after the first attempt, while it is still running,
    // answers first, and the first attempt is cancelled.
    assert_eq!(num(&copy["start_ms"]), num(&first["start_ms"]) + delay);
    assert_eq!(copy["outcome"], "ok");
    assert_eq!(first["outcome"], "cancelled");
    // The next call starts when the copy answers (30 ms, the trace's second latency).
    let next = trace["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["name"] == "recommendations")
        .expect("recommendations");
    assert_eq!(num(&next["start_ms"]), num(&copy["start_ms"]) + 30.0);
    assert_eq!(trace["answered"], Value::Bool(true));

    let (code, out, _) = texts(&["plan", &data("example.toml")]);
    assert_eq!(code, 0);
    assert!(out.contains("pricing (hedge)"), "{out}");
    assert!(out.contains("cancelled (it would take 200 ms)"), "{out}");
}

#[test]
fn a_failed_parallel_call_cancels_the_call_beside_it() {
    let dir = temp_dir("plan-parallel-fail");
    let file = write(
        &dir,
        "t.toml",
        "budget_ms = 100\nown_work_ms = 10\n\
         [[dependency]]\nname = \"X\"\np50_ms = 10\np999_ms = 20\ncap_ms = 30\n\
         [[dependency]]\nname = \"Y\"\np50_ms = 5\np999_ms = 20\ncap_ms = 40\n\
         [[dependency]]\nname = \"Z\"\nmode = \"parallel\"\np50_ms = 5\np999_ms = 200\ncap_ms = 300\n\
         [[trace]]\nlatency_ms = { X = 10, Y = 100, Z = 80 }\n",
    );
    let v = json(&["plan", "--json", &file]);
    let s = steps(&v["traces"][0]);
    // Y and Z start together when X answers; Y times out at its cap, and the request fails
    // there: Z, still running, is cancelled.
    assert_eq!(s.len(), 3, "{s:?}");
    let (y, z) = (&s[1], &s[2]);
    assert_eq!((y.0.as_str(), z.0.as_str()), ("Y", "Z"));
    assert_eq!(y.1, z.1);
    assert_eq!(y.3, "timeout");
    assert_eq!(z.3, "cancelled");
    let fails_at = y.1 + y.2.expect("timeout");
    assert!(z.1 + z.2.expect("timeout") > fails_at, "{s:?}");
    assert_eq!(num(&v["traces"][0]["respond_ms"]), fails_at);
    assert_eq!(v["traces"][0]["answered"], Value::Bool(false));
}

#[test]
fn a_required_call_under_its_floor_fails_the_request_at_once() {
    let dir = temp_dir("plan-fail");
    let file = write(
        &dir,
        "t.toml",
        "budget_ms = 100\nown_work_ms = 10\n\
         [[dependency]]\nname = \"X\"\np50_ms = 20\np999_ms = 60\ncap_ms = 80\n\
         [[dependency]]\nname = \"Y\"\np50_ms = 30\np999_ms = 50\n\
         [[trace]]\nlatency_ms = { X = 70, Y = 30 }\n",
    );
    let v = json(&["plan", "--json", &file]);
    let s = steps(&v["traces"][0]);
    // X starts with 100 - 10 - Y's floor 30 = 60 ms (under its cap), answers at 70 > 60: it
    // times out; the request fails there, without calling Y.
    assert_eq!(s, vec![step("X", 0.0, Some(60.0), "timeout")]);
    assert_eq!(num(&v["traces"][0]["respond_ms"]), 60.0);

    // 50 ms cannot hold own work (10) and the floors of X (20) and Y (30): X gets
    // 50 - 10 - 30 = 10 ms, under its floor, so it is not called and the request fails at once.
    let file = write(
        &dir,
        "u.toml",
        "budget_ms = 50\nown_work_ms = 10\n\
         [[dependency]]\nname = \"X\"\np50_ms = 20\np999_ms = 60\n\
         [[dependency]]\nname = \"Y\"\np50_ms = 30\np999_ms = 50\n\
         [[trace]]\nlatency_ms = { X = 20, Y = 30 }\n",
    );
    let v = json(&["plan", "--json", &file]);
    assert_eq!(steps(&v["traces"][0]), vec![step("X", 0.0, None, "failed")]);
    assert_eq!(num(&v["traces"][0]["respond_ms"]), 0.0);
    assert_eq!(v["whole"]["floors_fit"], Value::Bool(false));
    assert_eq!(v["traces"][0]["answered"], Value::Bool(false));
}

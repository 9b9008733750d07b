//! `deadline sim`: the propagation model's headline figures (its README's) within 10%, from the binary's
//! JSON.

mod common;

use common::{json, num, texts, within};
use serde_json::Value;

const SEED: &str = "7";
/// Enough requests for the averages at a 5% stall rate to settle well inside 10%.
const REQUESTS: &str = "20000";

fn strategy<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["strategies"]
        .as_array()
        .expect("strategies")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no strategy {name}"))
}

fn sim(stall_rate: &str) -> Value {
    json(&[
        "sim",
        "--json",
        "--seed",
        SEED,
        "--requests",
        REQUESTS,
        "--stall-rate",
        stall_rate,
    ])
}

#[test]
fn the_json_names_the_four_strategies_in_order() {
    let v = json(&["sim", "--json", "--requests", "100"]);
    let names: Vec<&str> = v["strategies"]
        .as_array()
        .expect("strategies")
        .iter()
        .map(|s| s["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "one-try",
            "retry-every-layer",
            "retry-one-layer",
            "propagated"
        ]
    );
    assert_eq!(v["requests"], 100);
    assert_eq!(num(&v["stall_rate"]), 0.05);
}

#[test]
fn one_try_at_five_percent_stalls_answers_95_percent() {
    let v = sim("0.05");
    let answered = num(&strategy(&v, "one-try")["answered"]);
    // The headline figure is the 5% lost: within 10% of it.
    assert!(within(1.0 - answered, 0.05, 0.10), "{answered}");
    // The retrying strategies answer nearly everything.
    for name in ["retry-every-layer", "retry-one-layer", "propagated"] {
        let a = num(&strategy(&v, name)["answered"]);
        assert!(a > answered && a > 0.99, "{name}: {a}");
    }
}

#[test]
fn every_query_stalling_retry_every_layer_costs_9_queries_and_18_s() {
    let v = sim("1");
    let s = strategy(&v, "retry-every-layer");
    assert!(within(num(&s["queries_per_request"]), 9.0, 0.10), "{s}");
    assert!(within(num(&s["db_ms_per_request"]), 18_000.0, 0.10), "{s}");
}

#[test]
fn every_query_stalling_retry_one_layer_costs_3_queries_and_6_s() {
    let v = sim("1");
    let s = strategy(&v, "retry-one-layer");
    assert!(within(num(&s["queries_per_request"]), 3.0, 0.10), "{s}");
    assert!(within(num(&s["db_ms_per_request"]), 6_000.0, 0.10), "{s}");
}

#[test]
fn every_query_stalling_the_propagated_deadline_costs_900_ms() {
    let v = sim("1");
    let s = strategy(&v, "propagated");
    assert!(within(num(&s["db_ms_per_request"]), 900.0, 0.10), "{s}");
    assert_eq!(num(&s["db_after_client_gone"]), 0.0);
    // Nothing is answered when every query stalls.
    assert_eq!(num(&s["answered"]), 0.0);
}

#[test]
fn five_percent_stalls_155_ms_against_66_ms_of_database_time() {
    let v = sim("0.05");
    let one_layer = strategy(&v, "retry-one-layer");
    let propagated = strategy(&v, "propagated");
    assert!(
        within(num(&one_layer["db_ms_per_request"]), 155.0, 0.10),
        "{one_layer}"
    );
    assert!(
        within(num(&propagated["db_ms_per_request"]), 66.0, 0.10),
        "{propagated}"
    );
    // Propagation answers the same requests.
    assert!(within(
        num(&propagated["answered"]),
        num(&one_layer["answered"]),
        0.001
    ));
}

#[test]
fn five_percent_stalls_56_percent_of_database_time_after_the_client_left() {
    let v = sim("0.05");
    let gone = num(&strategy(&v, "retry-one-layer")["db_after_client_gone"]);
    assert!(within(gone, 0.56, 0.10), "{gone}");
    assert_eq!(
        num(&strategy(&v, "propagated")["db_after_client_gone"]),
        0.0
    );
}

#[test]
fn the_same_seed_gives_the_same_figures_and_another_seed_others() {
    let a = json(&["sim", "--json", "--seed", "1", "--requests", "3000"]);
    let b = json(&["sim", "--json", "--seed", "1", "--requests", "3000"]);
    let c = json(&["sim", "--json", "--seed", "2", "--requests", "3000"]);
    assert_eq!(a, b);
    assert_ne!(a["strategies"], c["strategies"]);
}

#[test]
fn no_stalls_one_query_per_request_and_everything_answered() {
    let v = json(&["sim", "--json", "--stall-rate", "0", "--requests", "500"]);
    for s in v["strategies"].as_array().expect("strategies") {
        assert_eq!(num(&s["answered"]), 1.0, "{s}");
        assert_eq!(num(&s["queries_per_request"]), 1.0, "{s}");
        assert_eq!(num(&s["db_after_client_gone"]), 0.0, "{s}");
    }
}

#[test]
fn the_default_run_keeps_the_headline_figures() {
    // 2,000 requests and the default seed, as the README prints them.
    let v = json(&["sim", "--json"]);
    assert_eq!(v["requests"], 2000);
    let lost = 1.0 - num(&strategy(&v, "one-try")["answered"]);
    assert!(within(lost, 0.05, 0.10), "{lost}");
    let one_layer = strategy(&v, "retry-one-layer");
    let propagated = strategy(&v, "propagated");
    assert!(
        within(num(&one_layer["db_ms_per_request"]), 155.0, 0.10),
        "{one_layer}"
    );
    assert!(
        within(num(&propagated["db_ms_per_request"]), 66.0, 0.10),
        "{propagated}"
    );
    assert!(
        within(num(&one_layer["db_after_client_gone"]), 0.56, 0.10),
        "{one_layer}"
    );
    assert_eq!(num(&propagated["db_after_client_gone"]), 0.0);
}

/// The rows of the sim tables (the header and one line per strategy) in `text`.
fn table_rows(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| {
            l.starts_with("strategy ")
                || [
                    "one-try ",
                    "retry-every-layer ",
                    "retry-one-layer ",
                    "propagated ",
                ]
                .iter()
                .any(|name| l.starts_with(name))
        })
        .collect()
}

#[test]
fn the_readme_shows_what_the_default_runs_print() {
    let readme = include_str!("../README.md");
    // The README's two sim tables, in order: the default run, then every query stalling.
    let blocks: Vec<&str> = readme
        .split("```text\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .filter(|b| b.starts_with("$ deadline sim"))
        .collect();
    assert_eq!(blocks.len(), 2, "the README shows two sim runs");
    for (block, args) in blocks
        .iter()
        .zip([&["sim"][..], &["sim", "--stall-rate", "1"]])
    {
        let (code, out, _) = texts(args);
        assert_eq!(code, 0);
        let printed = table_rows(&out);
        assert_eq!(printed.len(), 5, "{out}");
        assert_eq!(table_rows(block), printed, "deadline {args:?}");
        // The block is the command, then the first lines it prints, as it prints them.
        let (command, shown) = block.split_once('\n').unwrap();
        assert_eq!(command, format!("$ deadline {}", args.join(" ")));
        assert!(
            out.starts_with(shown),
            "deadline {args:?}:\n{shown}\nprinted:\n{out}"
        );
    }
}

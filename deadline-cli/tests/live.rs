//! `deadline plan --live` and `deadline lab --live`: snapshots taken of live dependencies (the
//! core's `Dependency::snapshot`, serialised as a service serialises it) read back into the
//! budget table and the lab, with the core's figures.

mod common;

use std::time::Duration;

use common::{json, num, temp_dir, texts, write};
use deadline_cli::lab::{self, LabOptions};
use deadline_core::policy::Quantile;
use deadline_core::rng::{Rng, SplitMix64};
use deadline_core::runtime::scope_timeout;
use deadline_core::virtual_time::ManualRuntime;
use deadline_core::{Clock, Dependency, Policy, Timer, ms};

/// How many calls each dependency of the example makes: fewer than a dependency's histogram
/// takes before it halves (4 096), so that it holds every one of them, as the offline lab
/// does.
const CALLS: usize = 4_000;

/// `n` latencies: uniform between `low` and `high` ms, but one in `every` between `high` and
/// `tail` ms; whole microseconds, from a fixed seed.
fn latencies(seed: u64, low: u64, high: u64, every: u64, tail: u64) -> Vec<Duration> {
    let mut rng = SplitMix64::new(seed);
    (0..CALLS)
        .map(|_| {
            let (from, to) = if rng.next_u64() % every == 0 {
                (high, tail)
            } else {
                (low, high)
            };
            Duration::from_micros(from * 1_000 + rng.next_u64() % ((to - from) * 1_000))
        })
        .collect()
}

/// Calls `dep` once per latency, on virtual time, each attempt taking that long: an attempt
/// slower than the cap times out at the cap.
fn feed(dep: &Dependency<'_, ManualRuntime>, latencies: &[Duration]) {
    ManualRuntime::block_on(async {
        for &latency in latencies {
            let answer = scope_timeout::<ManualRuntime, _>(ms(1_000), async {
                dep.run(|_| async move {
                    let t = ManualRuntime::timer();
                    t.sleep_until(t.now() + latency).await;
                    Ok::<_, ()>(())
                })
                .await
            })
            .await
            .expect("inside the scope");
            assert_eq!(answer.is_ok(), latency <= dep.cap());
        }
    })
    .expect("the clock moves");
}

/// The checkout example's three dependencies as a service runs them, their live latencies
/// (A a little slower than the table says, B's tail past its 110 ms cap, C, optional, with a
/// cap at its p99), and the snapshots of all three as JSON.
fn checkout_live() -> (Vec<Vec<Duration>>, String) {
    let a: Dependency<ManualRuntime> =
        Dependency::new(Policy::required("A").with_cap(ms(50)).with_floor(ms(10)));
    let b: Dependency<ManualRuntime> =
        Dependency::new(Policy::required("B").with_cap(ms(110)).with_floor(ms(30)));
    let c: Dependency<ManualRuntime> = Dependency::new(
        Policy::optional("C")
            .with_cap(ms(60))
            .with_floor(ms(25))
            .with_cap_quantile(Quantile::P99),
    );
    let samples = vec![
        latencies(1, 8, 16, 100, 45),
        latencies(2, 25, 40, 40, 160),
        latencies(3, 20, 35, 100, 70),
    ];
    for (dep, sample) in [&a, &b, &c].into_iter().zip(&samples) {
        feed(dep, sample);
    }
    let snapshots = [a.snapshot(), b.snapshot(), c.snapshot()];
    let text = serde_json::to_string(&snapshots).expect("a snapshot serialises");
    (samples, text)
}

/// The change lines of a `plan --live --json` report.
fn changes(v: &serde_json::Value) -> Vec<&str> {
    v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect()
}

/// The snapshot example the README shows is what the core writes for the example above
/// (`DEADLINE_BLESS=1` rewrites it).
#[test]
fn the_shipped_live_example_is_what_the_core_writes() {
    let (_, text) = checkout_live();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/checkout-live.json");
    if std::env::var_os("DEADLINE_BLESS").is_some() {
        std::fs::write(path, format!("{text}\n")).unwrap();
    }
    let shipped = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        shipped.trim_end(),
        text,
        "run with DEADLINE_BLESS=1 to rewrite {path}"
    );
}

#[test]
fn plan_live_reads_the_cores_figures_and_proposes_the_changes() {
    let dir = temp_dir("plan-live");
    let (_, text) = checkout_live();
    let file = write(&dir, "live.json", &text);
    let v = json(&["plan", "--live", &file, "--json"]);
    let rows = v["dependencies"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let row = |name: &str| rows.iter().find(|r| r["name"] == name).unwrap();

    // A: a little slower than the table says, nothing cut: the cap moves to the live p99.9
    // plus the 10 ms margin, rounded up.
    let a = row("A");
    let p999 = num(&a["p999"]["estimate_ms"]);
    assert!(p999 > 40.0 && p999 < 45.0 * (1.0 + 1.0 / 32.0), "{a}");
    assert_eq!(num(&a["proposed_cap_ms"]), (p999 + 10.0).ceil());
    assert_eq!(num(&a["timed_out_share"]), 0.0);

    // B: one call in forty takes 40 to 160 ms, and those over 110 ms time out: its p99.9
    // lies above the cap, beyond every answer, so the cap is raised at least to the cap plus
    // the margin, and its kill fraction is at least the timed-out share (every timeout is at
    // the cap, and the cap's bucket counts whole).
    let b = row("B");
    assert!(b["p999"]["estimate_ms"].is_null(), "{b}");
    assert!(b["suggested_cap"]["estimate_ms"].is_null(), "{b}");
    let killed = num(&b["kill_fraction"]);
    assert!(
        killed > 0.005 && killed >= num(&b["timed_out_share"]),
        "{b}"
    );
    assert_eq!(b["recorded"], 4_000);
    assert!(num(&b["proposed_cap_ms"]) >= 120.0, "{b}");

    // C states a 1% rate: its suggested cap is the p99 plus the margin.
    let c = row("C");
    assert_eq!(num(&c["stated_rate"]), 0.01);
    let p99 = num(&c["p99"]["estimate_ms"]);
    assert_eq!(num(&c["proposed_cap_ms"]), (p99 + 10.0).ceil());

    // The changes, each with its reason, and the budget table with them made.
    let changes = changes(&v);
    assert!(
        changes.iter().any(|c| c.starts_with("B: cap 110 -> ")),
        "{changes:?}"
    );
    assert!(
        changes
            .iter()
            .any(|c| c.contains("lies beyond every answer")),
        "{changes:?}"
    );
    let after = &v["plan"]["dependencies"];
    for (i, name) in ["A", "B", "C"].into_iter().enumerate() {
        assert_eq!(after[i]["name"], name);
        assert_eq!(num(&after[i]["cap_ms"]), num(&row(name)["proposed_cap_ms"]));
        assert!(after[i]["reason"].as_str().unwrap().contains("live"));
    }

    // The text: the rows beside the table's values, the changes, the table.
    let (code, out, _) = texts(&["plan", "--live", &file]);
    assert_eq!(code, 0);
    assert!(out.contains("p99.9 table/live"), "{out}");
    assert!(out.contains("changes it would make:"), "{out}");
    assert!(
        out.contains("the budget table with these changes:"),
        "{out}"
    );
}

/// The kill fraction read live agrees with the lab's offline figure on the same latencies,
/// within the histogram's error: the lab over the snapshot's histogram, and the live advice
/// the budget table shows, against the lab over the latencies themselves.
#[test]
fn the_live_kill_fraction_agrees_with_the_offline_lab() {
    let dir = temp_dir("lab-live");
    let (samples, text) = checkout_live();
    let file = write(&dir, "live.json", &text);
    let plan = json(&["plan", "--live", &file, "--json"]);
    for (name, sample, cap) in [
        ("A", &samples[0], ms(50)),
        ("B", &samples[1], ms(110)),
        ("C", &samples[2], ms(60)),
    ] {
        let options = LabOptions {
            timeouts: vec![cap],
            ..LabOptions::default()
        };
        let offline_at = |t: Duration| {
            let report = lab::run(
                "offline",
                sample,
                &LabOptions {
                    timeouts: vec![t],
                    ..options.clone()
                },
            )
            .unwrap();
            report
                .rows
                .iter()
                .find(|r| r.timeout_ms == t)
                .unwrap()
                .kill_fraction
        };
        // One bucket below the cap: the histogram's stated error (1/32 of the value).
        let low = cap - cap / 32 - Duration::from_micros(1);
        let (offline, offline_low) = (offline_at(cap), offline_at(low));
        // The live lab: the snapshot's histogram as its sample.
        let live = json(&["lab", "--live", &file, "--dependency", name, "--json"]);
        let row = live["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| num(&r["timeout_ms"]) == cap.as_secs_f64() * 1000.0 && r["retries"] == 0)
            .unwrap();
        let lab_live = num(&row["kill_fraction"]);
        // The live advice, timeouts read as censored.
        let advice = plan["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| num(&r["kill_fraction"]))
            .unwrap();
        for (what, figure) in [("lab over the snapshot", lab_live), ("advice", advice)] {
            assert!(
                offline <= figure && figure <= offline_low,
                "{name}: {what} {figure}, offline {offline} at the cap, {offline_low} one bucket below"
            );
        }
    }
}

#[test]
fn lab_live_draws_one_dependency_from_a_snapshot() {
    let dir = temp_dir("lab-live-svg");
    let (_, text) = checkout_live();
    let file = write(&dir, "live.json", &text);
    let svg = dir.join("b.svg");
    let svg = svg.to_string_lossy();
    let (code, out, err) = texts(&["lab", "--live", &file, "--dependency", "B", "--svg", &svg]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("live.json: B"), "{out}");
    assert!(
        out.contains("timed out, recorded at their timeout"),
        "{out}"
    );
    let picture = std::fs::read_to_string(&*svg).unwrap();
    assert!(picture.starts_with("<svg"), "an SVG document");
    assert!(
        picture.contains("given"),
        "the cap in use is drawn as a candidate"
    );

    // Several snapshots in the file and none named: the command says which to name.
    let (code, _, err) = texts(&["lab", "--live", &file]);
    assert_eq!(code, 2);
    assert!(err.contains("--dependency (A, B, C)"), "{err}");
}

#[test]
fn a_broken_snapshot_is_named() {
    let dir = temp_dir("live-broken");
    let (_, text) = checkout_live();
    // The count no longer matches the buckets.
    let broken = text.replacen("\"recorded\":", "\"recorded\":1", 1);
    let file = write(&dir, "broken.json", &broken);
    let (code, _, err) = texts(&["plan", "--live", &file]);
    assert_eq!(code, 2);
    assert!(err.contains("A.latency.recorded"), "{err}");
    let file = write(&dir, "not.json", "{\"dependency\": \"A\"}");
    let (code, _, err) = texts(&["plan", "--live", &file]);
    assert_eq!(code, 2);
    assert!(err.contains("not a dependency snapshot"), "{err}");
    // An array whose second snapshot lacks a field: that one named, and the field. (Before,
    // the message was the whole file's, read as one snapshot: "invalid type: map".)
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v[1].as_object_mut().unwrap().remove("cap_quantile_ppm");
    let file = write(&dir, "lacking.json", &v.to_string());
    let (code, _, err) = texts(&["plan", "--live", &file]);
    assert_eq!(code, 2);
    assert!(
        err.contains("snapshot 1 of the array (`B`)") && err.contains("cap_quantile_ppm"),
        "{err}"
    );
    // No snapshot at all.
    let file = write(&dir, "empty.json", "[]");
    let (code, _, err) = texts(&["lab", "--live", &file]);
    assert_eq!(code, 2);
    assert!(err.contains("the file holds no snapshot"), "{err}");
    // More latencies than the lab reads (each is drawn): refused, where `lab --live` tried
    // to hold four billion of them.
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let a = &mut v[0]["latency"];
    a["buckets"] = serde_json::json!([[1000, 2000, 4_000_000_000_u32]]);
    a["recorded"] = 4_000_000_000_u32.into();
    a["timeouts"] = serde_json::json!([]);
    a["timed_out"] = 0.into();
    let file = write(&dir, "huge.json", &v.to_string());
    let (code, _, err) = texts(&["lab", "--live", &file, "--dependency", "A"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("A.latency.recorded") && err.contains("more than the 10000000"),
        "{err}"
    );
    // B's timeouts without their buckets, as a snapshot written before they were kept per
    // bucket: refused with the reason, not read as timeouts nowhere.
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let b = &mut v[1]["latency"];
    assert!(b["timed_out"].as_u64().unwrap() > 0, "{b}");
    b.as_object_mut().unwrap().remove("timeouts");
    let file = write(&dir, "older.json", &v.to_string());
    let (code, _, err) = texts(&["plan", "--live", &file]);
    assert_eq!(code, 2);
    assert!(
        err.contains("B.latency.timeouts") && err.contains("take a new one"),
        "{err}"
    );
    // More timeouts in a bucket than the latencies it holds.
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let b = &mut v[1]["latency"];
    let first = b["timeouts"][0].clone();
    let held = b["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x[0] == first[0])
        .unwrap()[2]
        .as_u64()
        .unwrap();
    let extra = held + 1 - first[2].as_u64().unwrap();
    b["timeouts"][0][2] = (held + 1).into();
    b["timed_out"] = (b["timed_out"].as_u64().unwrap() + extra).into();
    let file = write(&dir, "over.json", &v.to_string());
    let (code, _, err) = texts(&["plan", "--live", &file]);
    assert_eq!(code, 2);
    assert!(
        err.contains("B.latency.timeouts") && err.contains("where the buckets hold"),
        "{err}"
    );
}

/// A snapshot of a dependency with no cap (the library's default for a policy that states
/// none) reads as uncapped, not as a cap of 1.8e22 ms; a snapshot whose name the table does
/// not list is named, not silently left out.
#[test]
fn plan_live_says_uncapped_and_names_the_snapshots_it_did_not_read() {
    let a: Dependency<ManualRuntime> = Dependency::new(Policy::required("A").with_floor(ms(10)));
    let pricing: Dependency<ManualRuntime> = Dependency::new(
        Policy::required("pricing")
            .with_cap(ms(50))
            .with_floor(ms(10)),
    );
    feed(&a, &latencies(1, 8, 16, 100, 45));
    feed(&pricing, &latencies(2, 8, 16, 100, 45));
    let text = serde_json::to_string(&[a.snapshot(), pricing.snapshot()]).unwrap();
    let dir = temp_dir("plan-live-uncapped");
    let file = write(&dir, "live.json", &text);

    let v = json(&["plan", "--live", &file, "--json"]);
    let row = &v["dependencies"][0];
    assert_eq!(row["name"], "A");
    assert_eq!(row["service_uncapped"], true, "{row}");
    assert!(row["service_cap_ms"].is_null(), "{row}");
    assert_eq!(v["unused_snapshots"], serde_json::json!(["pricing"]));

    let (code, out, _) = texts(&["plan", "--live", &file]);
    assert_eq!(code, 0);
    assert!(out.contains("A: the service's calls had no cap"), "{out}");
    assert!(!out.contains("18446744073709551616"), "{out}");
    assert!(
        out.contains("snapshots of no dependency in the table"),
        "{out}"
    );
    assert!(out.contains("pricing"), "{out}");
}

/// Snapshots none of whose names the table lists (`a`, `b`, `c` against `A`, `B`, `C`), or
/// an empty array: nothing was checked, and `plan --live` says so and fails, where it said
/// "none: every cap and floor stands" and exited 0, which a check in CI reads as passed.
#[test]
fn plan_live_that_reads_no_snapshot_fails() {
    let (_, text) = checkout_live();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for snapshot in v.as_array_mut().unwrap() {
        let name = snapshot["dependency"].as_str().unwrap().to_lowercase();
        snapshot["dependency"] = name.into();
    }
    let dir = temp_dir("plan-live-none");
    for (name, text) in [
        ("lower.json", v.to_string()),
        ("empty.json", "[]".to_owned()),
    ] {
        let file = write(&dir, name, &text);
        let (code, out, err) = texts(&["plan", "--live", &file]);
        assert_eq!(code, 2, "{name}: {out}");
        assert!(
            err.contains("nothing was checked") && err.contains("the table names A, B, C"),
            "{name}: {err}"
        );
        assert!(!out.contains("every cap and floor stands"), "{name}: {out}");
    }
}

/// Live latencies far under a floor the table states: the cap they call for is under that
/// floor, which would leave the call never made; `plan --live` says so among its changes
/// instead of planning it silently.
#[test]
fn plan_live_says_when_a_change_leaves_a_setting_that_never_acts() {
    let a: Dependency<ManualRuntime> =
        Dependency::new(Policy::required("A").with_cap(ms(100)).with_floor(ms(30)));
    // 5 to 10 ms, no tail: a live p99.9 near 10 ms, a cap of about 20 ms proposed.
    feed(&a, &latencies(4, 5, 10, u64::MAX, 10));
    let text = serde_json::to_string(&[a.snapshot()]).unwrap();
    let dir = temp_dir("plan-live-never-acts");
    let live = write(&dir, "live.json", &text);
    let table = write(
        &dir,
        "t.toml",
        "budget_ms = 500\ncap_margin_ms = 10\n[[dependency]]\nname = \"A\"\np50_ms = 40\n\
         p999_ms = 90\nfloor_ms = 30\n",
    );
    let v = json(&["plan", &table, "--live", &live, "--json"]);
    let changes = changes(&v);
    assert!(
        changes
            .iter()
            .any(|c| c.starts_with("A: with these changes") && c.contains("never be called")),
        "{changes:?}"
    );
}

/// A dependency `A` capped at `cap`, with `answers` recorded (each a latency and how many)
/// and then `timeouts` (alike).
fn a_recorded(
    cap: Duration,
    answers: &[(Duration, u32)],
    timeouts: &[(Duration, u32)],
) -> Dependency<'static, ManualRuntime> {
    let a = Dependency::new(Policy::required("A").with_cap(cap));
    for &(at, n) in answers {
        (0..n).for_each(|_| a.record_latency(at));
    }
    for &(at, n) in timeouts {
        (0..n).for_each(|_| a.record_timeout(at));
    }
    a
}

/// A table of one dependency `A` stating a cap of `cap_ms` (p50 20 ms, p99.9 40 ms), and one
/// snapshot of `dep`, written in a directory named for `what`: the table's path, then the
/// snapshot's.
fn table_and_snapshot(
    dep: &Dependency<'_, ManualRuntime>,
    cap_ms: u64,
    what: &str,
) -> (String, String) {
    let dir = temp_dir(what);
    let live = write(
        &dir,
        "live.json",
        &serde_json::to_string(&[dep.snapshot()]).unwrap(),
    );
    let table = write(
        &dir,
        "t.toml",
        &format!(
            "budget_ms = 500\ncap_margin_ms = 10\n[[dependency]]\nname = \"A\"\np50_ms = 20\n\
             p999_ms = 40\ncap_ms = {cap_ms}\n"
        ),
    );
    (table, live)
}

/// `deadline plan TABLE --live SNAPSHOT --json`, for `dep` beside a table capping it at
/// `cap_ms`.
fn plan_a(dep: &Dependency<'_, ManualRuntime>, cap_ms: u64, what: &str) -> serde_json::Value {
    let (table, live) = table_and_snapshot(dep, cap_ms, what);
    json(&["plan", &table, "--live", &live, "--json"])
}

/// A dependency whose callers cut ten attempts at 30 ms, under its 100 ms cap: its p99.9
/// lies past every answer, where no cap measures it. The cap stays, and the change says why
/// (it was proposed at the 30 ms bound plus the margin, 41 ms, cutting the calls that wait
/// for their answer at 40).
#[test]
fn plan_live_keeps_a_cap_that_only_the_callers_deadlines_cut_under() {
    let a = a_recorded(ms(100), &[(ms(20), 3_990)], &[(ms(30), 10)]);
    let v = plan_a(&a, 100, "plan-live-callers");
    let row = &v["dependencies"][0];
    assert_eq!(row["quantile_past_callers"], true, "{row}");
    assert_eq!(num(&row["proposed_cap_ms"]), 100.0, "{row}");
    assert_eq!(num(&row["kill_fraction"]), 0.0, "{row}");
    let changes = changes(&v);
    assert!(
        changes
            .iter()
            .any(|c| c.starts_with("A: cap stays 100 ms") && c.contains("callers' deadlines")),
        "{changes:?}"
    );
    assert_eq!(num(&v["plan"]["dependencies"][0]["cap_ms"]), 100.0);
}

/// A service whose cap was 40 ms, under the table's 100: the attempts it cut (ten, 0.25%)
/// say nothing past 40 ms, so what the table's cap kills is only known to be at most that,
/// and is shown so (`<=`).
#[test]
fn plan_live_bounds_what_a_cap_above_the_services_kills() {
    let a = a_recorded(ms(40), &[(ms(20), 3_990)], &[(ms(40), 10)]);
    let (table, live) = table_and_snapshot(&a, 100, "plan-live-bound");
    let v = json(&["plan", &table, "--live", &live, "--json"]);
    let row = &v["dependencies"][0];
    assert_eq!(row["kill_fraction_at_most"], true, "{row}");
    assert_eq!(num(&row["kill_fraction"]), 0.0025, "{row}");
    // Its p99.9 lies among the 40 ms cap's kills: the cap would go up to measure it, never
    // down to their bound (41 ms) plus the margin.
    assert_eq!(num(&row["proposed_cap_ms"]), 100.0, "{row}");
    let (code, out, _) = texts(&["plan", &table, "--live", &live]);
    assert_eq!(code, 0);
    assert!(out.contains("<=0.25%"), "{out}");
}

/// A service whose cap was 200 ms, where callers with 150 ms cut ten attempts that ran past
/// 100 ms: the table's 100 ms cap would have cut them, 0.25% of the calls against a stated
/// 0.1%, so the cap goes up past what the callers cut (150 ms) plus the margin, though the
/// service's own cap cut none.
#[test]
fn plan_live_raises_a_table_cap_that_kills_more_than_its_rate() {
    let a = a_recorded(ms(200), &[(ms(20), 3_990)], &[(ms(150), 10)]);
    let v = plan_a(&a, 100, "plan-live-raise");
    let row = &v["dependencies"][0];
    assert_eq!(row["kill_fraction_at_most"], false, "{row}");
    assert_eq!(num(&row["kill_fraction"]), 0.0025, "{row}");
    assert_eq!(row["quantile_past_callers"], true, "{row}");
    let cap = num(&row["proposed_cap_ms"]);
    assert!((160.0..=166.0).contains(&cap), "{row}");
    let changes = changes(&v);
    assert!(
        changes
            .iter()
            .any(|c| c.starts_with("A: cap 100 -> ") && c.contains("past this it cuts none")),
        "{changes:?}"
    );
}

/// One attempt cut at the 50 ms cap behind ten cut at 30 ms by their callers: too few to say
/// the cap cut the tail (the core would not move an adaptive cap on it), so the p99.9 is
/// read as lying past the callers' deadlines and the cap stays, not "a cap above measures it".
#[test]
fn plan_live_reads_one_kill_behind_the_callers_cuts_as_theirs() {
    let a = a_recorded(ms(50), &[(ms(10), 3_989)], &[(ms(30), 10), (ms(50), 1)]);
    let v = plan_a(&a, 50, "plan-live-one-kill");
    let row = &v["dependencies"][0];
    assert_eq!(row["quantile_past_callers"], true, "{row}");
    assert_eq!(num(&row["proposed_cap_ms"]), 50.0, "{row}");
    let changes = changes(&v);
    assert!(
        changes
            .iter()
            .any(|c| c.starts_with("A: cap stays 50 ms") && c.contains("callers' deadlines")),
        "{changes:?}"
    );
}

/// A dependency that states both its cap and its own margin (`cap_ms`, `cap_margin_ms`, as
/// the README's table does): the cap proposed from its live p99.9 adds its own margin (30 ms),
/// not the table's (10 ms), which it did whenever the cap was stated.
#[test]
fn plan_live_adds_a_dependencys_own_margin_to_a_stated_cap() {
    let a = a_recorded(ms(100), &[(ms(20), 4_000)], &[]);
    let dir = temp_dir("plan-live-own-margin");
    let live = write(
        &dir,
        "live.json",
        &serde_json::to_string(&[a.snapshot()]).unwrap(),
    );
    let table = write(
        &dir,
        "t.toml",
        "budget_ms = 500\ncap_margin_ms = 10\n[[dependency]]\nname = \"A\"\np50_ms = 20\n\
         p999_ms = 40\ncap_ms = 100\ncap_margin_ms = 30\n",
    );
    let v = json(&["plan", &table, "--live", &live, "--json"]);
    let row = &v["dependencies"][0];
    let p999 = num(&row["p999"]["estimate_ms"]);
    assert_eq!(num(&row["proposed_cap_ms"]), (p999 + 30.0).ceil(), "{row}");
}

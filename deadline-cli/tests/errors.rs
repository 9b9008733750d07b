//! Bad input: a message naming the file, the line and the field, and exit code 2. Also
//! `--help` on every subcommand.

mod common;

use common::{temp_dir, texts, write};

/// Runs `deadline` and expects exit 2 with a message containing each of `parts`.
fn rejects(args: &[&str], parts: &[&str]) -> String {
    let (code, out, err) = texts(args);
    assert_eq!(
        code, 2,
        "exit code for {args:?}; stdout: {out}; stderr: {err}"
    );
    assert!(out.is_empty(), "nothing on stdout: {out}");
    for part in parts {
        assert!(err.contains(part), "stderr lacks `{part}`: {err}");
    }
    err
}

const GOOD: &str = "budget_ms = 200\nown_work_ms = 20\n\
[[dependency]]\nname = \"A\"\np50_ms = 10\np999_ms = 40\n";

#[test]
fn a_missing_field_names_file_line_and_field() {
    let dir = temp_dir("missing");
    // No p999_ms and no samples: reported at the [[dependency]] header, line 3.
    let file = write(
        &dir,
        "t.toml",
        "budget_ms = 200\n\n[[dependency]]\nname = \"A\"\np50_ms = 10\n",
    );
    rejects(&["plan", &file], &[&format!("{file}:3"), "field `p999_ms`"]);
    // No budget_ms at all.
    let file = write(
        &dir,
        "u.toml",
        "own_work_ms = 20\n[[dependency]]\nname = \"A\"\np50_ms = 10\np999_ms = 40\n",
    );
    rejects(&["plan", &file], &[&file, "budget_ms"]);
}

#[test]
fn a_negative_latency_in_a_table_names_its_line_and_field() {
    let dir = temp_dir("negative-table");
    let file = write(&dir, "t.toml", &GOOD.replace("p50_ms = 10", "p50_ms = -10"));
    rejects(
        &["plan", &file],
        &[&format!("{file}:5"), "field `p50_ms`", "negative"],
    );
    let file = write(
        &dir,
        "v.toml",
        &format!("{GOOD}[[trace]]\nlatency_ms = {{ A = -3 }}\n"),
    );
    rejects(
        &["plan", &file],
        &[&format!("{file}:8"), "field `latency_ms.A`", "negative"],
    );
}

#[test]
fn a_negative_latency_in_a_sample_names_its_line() {
    let dir = temp_dir("negative-sample");
    let file = write(&dir, "s.txt", "10\n12\n-4\n");
    rejects(
        &["lab", &file],
        &[&format!("{file}:3"), "field `latency`", "negative"],
    );
    // The same through a table's `samples` file.
    write(&dir, "b.txt", "10\n20 x 3\nfast\n");
    let table = write(
        &dir,
        "t.toml",
        "budget_ms = 200\n[[dependency]]\nname = \"B\"\nsamples = \"b.txt\"\n",
    );
    rejects(&["plan", &table], &["b.txt:3", "field `latency`"]);
}

#[test]
fn a_sample_of_too_many_calls_exits_2_at_its_line() {
    // 100 million calls would take 1.6 GB: refused at the line that asks for them.
    let dir = temp_dir("too-many-calls");
    let file = write(&dir, "s.txt", "# a typo\n10\n8 x 100000000\n");
    rejects(
        &["lab", &file],
        &[&format!("{file}:3"), "field `count`", "10000000"],
    );
    // The same through a table's `samples` file.
    write(&dir, "b.txt", "8 x 100000000\n");
    let table = write(
        &dir,
        "t.toml",
        "budget_ms = 200\n[[dependency]]\nname = \"B\"\nsamples = \"b.txt\"\n",
    );
    rejects(&["plan", &table], &["b.txt:1", "field `count`"]);
}

/// A table's samples are all held at once, so the limit is for them all: two files of 6 million
/// calls each are refused at the line of the second that passes 10 million (32 files of 10
/// million each took over 5 GB, and the process was killed, not told).
#[test]
fn a_tables_samples_are_limited_together() {
    let dir = temp_dir("too-many-calls-together");
    write(&dir, "a.txt", "8 x 6000000\n");
    write(&dir, "b.txt", "# the second\n9 x 6000000\n");
    let table = write(
        &dir,
        "t.toml",
        "budget_ms = 200\n[[dependency]]\nname = \"A\"\nsamples = \"a.txt\"\n\
         [[dependency]]\nname = \"B\"\nsamples = \"b.txt\"\n",
    );
    rejects(
        &["plan", &table],
        &[
            "b.txt:2",
            "field `count`",
            "all the table's samples",
            "(6000000 in those read before this file)",
        ],
    );
}

#[test]
fn a_malformed_file_names_its_line() {
    let dir = temp_dir("malformed");
    let file = write(
        &dir,
        "t.toml",
        "budget_ms = 200\n[[dependency]\nname = \"A\"\n",
    );
    rejects(&["plan", &file], &[&format!("{file}:2")]);
    let file = write(
        &dir,
        "u.toml",
        &GOOD.replace("p999_ms = 40", "p999_ms = \"forty\""),
    );
    rejects(&["plan", &file], &[&format!("{file}:6"), "field `p999_ms`"]);
    let file = write(&dir, "w.toml", &format!("{GOOD}colour = \"red\"\n"));
    rejects(&["plan", &file], &[&format!("{file}:7"), "field `colour`"]);
    let file = write(
        &dir,
        "x.toml",
        &format!("{GOOD}[[trace]]\nlatency_ms = {{ Z = 3 }}\n"),
    );
    rejects(
        &["plan", &file],
        &[&format!("{file}:8"), "field `latency_ms.Z`"],
    );
}

#[test]
fn a_missing_file_is_named() {
    rejects(
        &["plan", "/nonexistent/table.toml"],
        &["/nonexistent/table.toml", "cannot read"],
    );
    rejects(
        &["lab", "/nonexistent/sample.txt"],
        &["/nonexistent/sample.txt"],
    );
}

#[test]
fn bad_arguments_exit_2() {
    rejects(&["sim", "--stall-rate", "1.5"], &["stall-rate"]);
    rejects(&["lab", "--alloc=-250"], &["alloc", "negative"]);
    rejects(&["plan", "--rate", "fast"], &["rate"]);
    // A zero timeout printed "4294967295 attempt(s) fit".
    rejects(&["lab", "--timeout", "0"], &["timeout", "more than 0 ms"]);
}

#[test]
fn help_on_every_subcommand() {
    for (sub, flag) in [
        ("plan", "--rate"),
        ("lab", "--alloc"),
        ("sim", "--stall-rate"),
    ] {
        let (code, out, _) = texts(&[sub, "--help"]);
        assert_eq!(code, 0);
        assert!(
            out.contains(flag) && out.contains("--json"),
            "{sub} --help: {out}"
        );
    }
    let (code, out, _) = texts(&["--help"]);
    assert_eq!(code, 0);
    for sub in ["plan", "lab", "sim"] {
        assert!(out.contains(sub), "{out}");
    }
}

#[test]
fn retries_or_hedges_without_idempotent_are_refused() {
    let dir = temp_dir("idempotent");
    // Policies are not idempotent unless they say so: a retry or a hedge repeats the call.
    let file = write(&dir, "r.toml", &format!("{GOOD}retries = 1\n"));
    rejects(
        &["plan", &file],
        &[&format!("{file}:3"), "field `idempotent`", "retries"],
    );
    let file = write(&dir, "h.toml", &format!("{GOOD}hedge_delay_ms = 20\n"));
    rejects(&["plan", &file], &["field `idempotent`", "hedge"]);
    // Saying so is enough.
    let file = write(
        &dir,
        "ok.toml",
        &format!("{GOOD}idempotent = true\nretries = 1\nhedge_delay_ms = 20\n"),
    );
    let (code, _, err) = texts(&["plan", &file]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_setting_that_could_never_act_is_refused() {
    let dir = temp_dir("never-acts");
    // A cap under the floor (the p50 here): the call would never be made, and `plan` said
    // "fits" for it.
    let file = write(&dir, "cap.toml", &format!("{GOOD}cap_ms = 5\n"));
    rejects(
        &["plan", &file],
        &[&format!("{file}:3"), "field `cap_ms`", "never be called"],
    );
    let file = write(
        &dir,
        "floor.toml",
        &format!("{GOOD}cap_ms = 30\nfloor_ms = 35\n"),
    );
    rejects(&["plan", &file], &["field `floor_ms`", "never be called"]);
    // A connect limit of zero ("no separate limit", as a configuration might mean it) would
    // refuse every connection.
    let file = write(&dir, "connect.toml", &format!("{GOOD}connect_ms = 0\n"));
    rejects(
        &["plan", &file],
        &["field `connect_ms`", "every connection would be refused"],
    );
    // A hedge due at or after the cap is never sent.
    let file = write(
        &dir,
        "hedge.toml",
        &format!("{GOOD}idempotent = true\ncap_ms = 30\nhedge_delay_ms = 30\n"),
    );
    rejects(
        &["plan", &file],
        &["field `hedge_delay_ms`", "never be sent"],
    );
    // A hedge after the p95, and a stated cap under it: the p95 is the setting named.
    let file = write(
        &dir,
        "p95-hedge.toml",
        &format!("{GOOD}idempotent = true\ncap_ms = 30\np95_ms = 35\nhedge = true\n"),
    );
    rejects(
        &["plan", &file],
        &[
            "field `p95_ms`",
            "never be sent",
            "state a `hedge_delay_ms` under the cap",
            "raise `cap_ms`",
        ],
    );
    // A hedge past a cap of p99.9 and margin (40 ms and 10 ms): the table states no
    // `cap_ms` to raise, so it is told to state one, or to raise the margin.
    let file = write(
        &dir,
        "margin-hedge.toml",
        &format!("{GOOD}idempotent = true\nhedge = true\nhedge_delay_ms = 60\n"),
    );
    rejects(
        &["plan", &file],
        &[
            "field `hedge_delay_ms`",
            "never be sent",
            "raise `cap_margin_ms` or state a larger `cap_ms`",
        ],
    );
    // A cap of p99.9 and margin under a microsecond: the call would never be made.
    let file = write(
        &dir,
        "zero.toml",
        "budget_ms = 200\n\n[[dependency]]\nname = \"A\"\np50_ms = 0\np999_ms = 0\n\
         cap_margin_ms = 0\n",
    );
    rejects(
        &["plan", &file],
        &["field `cap_margin_ms`", "under a microsecond"],
    );
    // A p95 outside p50..=p99.9.
    let file = write(&dir, "p95.toml", &format!("{GOOD}p95_ms = 50\n"));
    rejects(
        &["plan", &file],
        &[&format!("{file}:7"), "field `p95_ms`", "not between"],
    );
}

#[test]
fn retries_are_bounded() {
    let dir = temp_dir("retries");
    // Four billion retries of a call that always times out made one replayed step each.
    let file = write(
        &dir,
        "r.toml",
        &format!("{GOOD}idempotent = true\nretries = 4000000000\n"),
    );
    rejects(
        &["plan", &file],
        &[&format!("{file}:8"), "field `retries`", "at most 100"],
    );
    let file = write(
        &dir,
        "ok.toml",
        &format!("{GOOD}idempotent = true\nretries = 100\n"),
    );
    let (code, _, err) = texts(&["plan", &file]);
    assert_eq!(code, 0, "{err}");
}

/// A p95 the table does not state, read from its samples, is not held to the p50 and p99.9
/// the table states otherwise: the table is accepted.
#[test]
fn a_p95_from_samples_is_not_checked_against_stated_percentiles() {
    let dir = temp_dir("p95-samples");
    // The samples' p95 is 5 ms; the table says p50 is 10 ms.
    let samples: String = (0..100).map(|i| format!("{}\n", 1 + i % 5)).collect();
    write(&dir, "s.txt", &samples);
    let file = write(&dir, "t.toml", &format!("{GOOD}samples = \"s.txt\"\n"));
    let (code, _, err) = texts(&["plan", &file]);
    assert_eq!(code, 0, "{err}");
    // Stated, the same p95 is refused.
    let file = write(&dir, "u.toml", &format!("{GOOD}p95_ms = 5\n"));
    rejects(&["plan", &file], &["field `p95_ms`", "not between"]);
}

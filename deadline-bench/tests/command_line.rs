//! The loopback benchmarks' command lines: a value out of range, or an option a program does
//! not take, exits with status 2 and a usage line that lists what the program takes, before
//! anything is started.

use std::process::Command;

/// Runs `program` with `args`; its exit code and what it wrote on standard error.
fn run(program: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(program)
        .args(args)
        .output()
        .expect("the program runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_tail_out_of_range_names_the_range_and_the_tail_options() {
    for program in [env!("CARGO_BIN_EXE_tail"), env!("CARGO_BIN_EXE_downstream")] {
        let (code, err) = run(program, &["--slow-percent", "101"]);
        assert_eq!(code, Some(2), "{program}: {err}");
        assert!(
            err.contains("--slow-percent takes a number from 0 to 100"),
            "{err}"
        );
        assert!(
            err.contains("usage: [--slow-ms MS] [--slow-percent P]"),
            "{err}"
        );
        let (code, err) = run(program, &["--slow-ms", "0"]);
        assert_eq!(code, Some(2), "{program}: {err}");
        assert!(
            err.contains("--slow-ms takes a number from 0.001 to 60000"),
            "{err}"
        );
    }
}

#[test]
fn an_unknown_argument_gets_the_program_s_own_usage_line() {
    let (code, err) = run(env!("CARGO_BIN_EXE_tail"), &["--bogus"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown argument \"--bogus\""), "{err}");
    assert!(err.contains("[--slow-ms MS] [--slow-percent P]"), "{err}");
    // The server calls no dependency, so it takes no tail: it says so rather than ignore it.
    let (code, err) = run(env!("CARGO_BIN_EXE_server"), &["--slow-ms", "40"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown argument \"--slow-ms\""), "{err}");
    assert!(!err.contains("--slow-percent"), "{err}");
}

/// `tail` runs no server of its own and no fixed-rate phase, and `downstream` has no
/// fixed-rate phase: each rejects the option it would otherwise ignore, and its usage line
/// does not offer it.
#[test]
fn an_option_the_program_does_not_use_is_rejected() {
    for (program, args, option) in [
        (
            env!("CARGO_BIN_EXE_tail"),
            ["--threads", "4", "--quick"],
            "--threads",
        ),
        (
            env!("CARGO_BIN_EXE_tail"),
            ["--rate", "500", "--quick"],
            "--rate",
        ),
        (
            env!("CARGO_BIN_EXE_downstream"),
            ["--rate", "500", "--quick"],
            "--rate",
        ),
    ] {
        // `--quick` last: were the option taken again, the program would run one short
        // round and the test would fail at once, not after a whole benchmark.
        let (code, err) = run(program, &args);
        assert_eq!(code, Some(2), "{program} {args:?}: {err}");
        assert!(
            err.contains(&format!("unknown argument \"{option}\"")),
            "{err}"
        );
        assert!(!err.contains(&format!("[{option} ")), "{err}");
    }
    // The server takes both, and offers both.
    let (code, err) = run(env!("CARGO_BIN_EXE_server"), &["--threads", "0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--threads takes a positive count"), "{err}");
    assert!(err.contains("[--threads T] [--rate R]"), "{err}");
}

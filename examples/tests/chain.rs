//! The chain program's application code in virtual time: the printout is the worked example's, to the
//! millisecond.

use deadline_core::ms;
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualTimer;
use deadline_examples::chain::{Case, Expect, FAST, Response, SLOW, check, handle};

fn run(case: &Case) -> (Vec<String>, Response) {
    let timer = ManualTimer::new();
    let mut lines = Vec::new();
    let response = timer
        .run(handle(&timer, &mut SplitMix64::new(0), case, &mut |line| {
            lines.push(line.to_string())
        }))
        .expect("the handler waits only on the timer");
    (lines, response)
}

#[test]
fn fast_case_prints_the_worked_example_s_timeline() {
    let (lines, response) = run(&FAST);
    assert_eq!(
        lines[1..],
        [
            "    0 ms  A  called, timeout 50 ms",
            "   10 ms  A  answered",
            "   10 ms  B  called, timeout 110 ms",
            "  115 ms  B  answered",
            "  115 ms  C  called, timeout 60 ms",
            "  140 ms  C  answered",
            "  160 ms  response sent: 200",
        ]
    );
    assert_eq!(
        response,
        Response {
            at: ms(160),
            status: 200,
            called: [true, true, true]
        }
    );
    assert_eq!(check(&FAST, &response), Ok(()));
}

#[cfg(feature = "tokio")]
#[test]
fn on_a_runtime_s_executor_the_virtual_timeline_is_the_same() {
    // What the chain program does by default: the core's virtual-time timer, driven on the
    // runtime's own executor.
    let (lines, response) = run(&FAST);
    let timer = ManualTimer::new();
    let mut on_tokio = Vec::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime");
    let on_tokio_response = runtime.block_on(timer.advancing(handle(
        &timer,
        &mut SplitMix64::new(0),
        &FAST,
        &mut |line| on_tokio.push(line.to_string()),
    )));
    assert_eq!(on_tokio, lines);
    assert_eq!(on_tokio_response, response);
    assert_eq!(on_tokio_response.at, ms(160));
}

#[test]
fn slow_case_skips_c_at_156_ms() {
    let (lines, response) = run(&SLOW);
    assert_eq!(
        lines[1..],
        [
            "    0 ms  A  called, timeout 50 ms",
            "   48 ms  A  answered",
            "   48 ms  B  called, timeout 110 ms",
            "  156 ms  B  answered",
            "  156 ms  C  skipped: 24 ms left for it < its 25 ms floor; fallback used",
            "  176 ms  response sent: 200",
        ]
    );
    assert_eq!(
        response,
        Response {
            at: ms(176),
            status: 200,
            called: [true, true, false]
        }
    );
    assert_eq!(check(&SLOW, &response), Ok(()));
}

#[test]
fn a_required_call_that_times_out_fails_the_request_with_a_504() {
    // B hangs: it is cut off at its 110 ms timeout, and without B there is no answer.
    let hung_b = Case {
        name: "B hangs",
        latency: [ms(10), ms(500), ms(25)],
        expect: Expect {
            status: 504,
            called: [true, true, false],
        },
    };
    let (lines, response) = run(&hung_b);
    assert_eq!(lines[4], "  120 ms  B  failed: timed out after 110000 us");
    assert_eq!(
        response,
        Response {
            at: ms(120),
            status: 504,
            called: [true, true, false]
        }
    );
    assert_eq!(check(&hung_b, &response), Ok(()));
}

#[test]
fn the_check_reports_a_request_that_ended_otherwise() {
    // The slow case's run held against the fast case's expectations: C was not called.
    let (_, slow) = run(&SLOW);
    assert_eq!(
        check(&FAST, &slow),
        Err("fast case: expected status 200, called: A B C, got status 200, called: A B".into())
    );

    // B hangs where the fast case expects it to answer: a 504, and C never reached.
    let hung_b = Case {
        latency: [ms(10), ms(500), ms(25)],
        ..FAST
    };
    let (_, hung) = run(&hung_b);
    assert_eq!(
        check(&hung_b, &hung),
        Err("fast case: expected status 200, called: A B C, got status 504, called: A B".into())
    );
}

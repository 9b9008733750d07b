//! The chain program's application code in virtual time: the printout is seed 000's, to the
//! millisecond.

use deadline_core::drive::ManualTimer;
use deadline_core::ms;
use deadline_examples::chain::{Case, FAST, Response, SLOW, handle};

fn run(case: &Case) -> (Vec<String>, Response) {
    let timer = ManualTimer::new();
    let mut lines = Vec::new();
    let response = timer
        .run(handle(&timer, case, &mut |line| {
            lines.push(line.to_string())
        }))
        .expect("the handler waits only on the timer");
    (lines, response)
}

#[test]
fn fast_case_prints_the_seed_timeline() {
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
            status: 200
        }
    );
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
            status: 200
        }
    );
}

#[test]
fn a_required_call_that_times_out_fails_the_request_with_a_504() {
    // B hangs: it is cut off at its 110 ms timeout, and without B there is no answer.
    let hung_b = Case {
        name: "B hangs",
        latency: [ms(10), ms(500), ms(25)],
    };
    let (lines, response) = run(&hung_b);
    assert_eq!(lines[4], "  120 ms  B  failed: timed out after 110000 us");
    assert_eq!(
        response,
        Response {
            at: ms(120),
            status: 504
        }
    );
}

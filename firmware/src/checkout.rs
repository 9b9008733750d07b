//! The checkout example's data: the three dependencies' policies, the request's budget and
//! own work, and the cases the firmware runs, each with the trace it must print.
//!
//! A request has 200 ms and 20 ms of its own work, and calls A (cap 50 ms, floor 10 ms), B
//! (cap 110 ms, floor 30 ms) and C (cap 60 ms, floor 25 ms, optional), in that order. Each
//! call's timeout is `min(left - reserve, cap)`, the reserve being the own work plus the floors
//! of the required calls still to come. The dependencies are embassy timers that answer, fail
//! or stall as a case's script says.

use core::fmt;
use core::time::Duration;

use deadline_core::{Instant, Policy, ms};

/// A, user profile: p50 10 ms (the floor), capped at 50 ms. Required.
pub const A: Policy<'static> = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
/// B, pricing: p50 30 ms, capped at 110 ms. Required.
pub const B: Policy<'static> = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
/// C, recommendations: p50 25 ms, capped at 60 ms. Optional: it has a fallback.
pub const C: Policy<'static> = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
/// How long the client waits for the response.
pub const BUDGET: Duration = ms(200);
/// Our own work after the calls: merging, serializing, the trip back.
pub const OWN_WORK: Duration = ms(20);

/// What one attempt of a simulated dependency does, timed from its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Answers after this long.
    Answer(Duration),
    /// Fails after this long (a refusal worth retrying).
    Fail(Duration),
    /// Never answers: it runs until it is cancelled.
    Stall,
}

/// One run of the handler: what each dependency's attempts do, and the trace it must print.
pub struct Case {
    /// A name for the printout.
    pub name: &'static str,
    /// For A, B and C in turn, what their attempts do, in the order they start (the last
    /// entry for any attempt past the end).
    pub replies: [&'static [Reply]; 3],
    /// The trace, line by line.
    pub expect: &'static [&'static str],
}

impl Case {
    /// What attempt `n` (from 0) of dependency `i` does.
    pub fn reply(&self, i: usize, n: usize) -> Reply {
        let replies = self.replies.get(i).copied().unwrap_or(&[]);
        replies
            .get(n)
            .or(replies.last())
            .copied()
            .unwrap_or(Reply::Stall)
    }

    /// The first line of the trace: what the dependencies do, the budget and the own work.
    pub fn headline(&self, names: [&str; 3], log: &mut dyn FnMut(fmt::Arguments<'_>)) {
        log(format_args!(
            "{}: {}; the client waits {} ms, our own work takes {} ms",
            self.name,
            Described(self, names),
            millis(BUDGET),
            millis(OWN_WORK),
        ));
    }
}

/// A case's dependencies, described: "A answers in 10 ms, B in 105 ms, C in 25 ms" when each
/// answers its first attempt, each one's whole script otherwise.
struct Described<'a>(&'a Case, [&'a str; 3]);

impl fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Described(case, names) = self;
        let simple = case.replies.iter().all(|r| matches!(r, [Reply::Answer(_)]));
        for (i, (name, replies)) in names.iter().zip(case.replies).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
            for (n, reply) in replies.iter().enumerate() {
                let verb = match reply {
                    Reply::Answer(_) if simple && i > 0 => " in",
                    Reply::Answer(_) => " answers in",
                    Reply::Fail(_) => " fails in",
                    Reply::Stall => " stalls",
                };
                let then = if n > 0 { " then" } else { "" };
                write!(f, "{then}{verb}")?;
                if let Reply::Answer(d) | Reply::Fail(d) = reply {
                    write!(f, " {} ms", millis(*d))?;
                }
            }
        }
        Ok(())
    }
}

/// The worked example's fast case: A answers in 10 ms, B in 105 ms, C in 25 ms. C gets
/// 60 ms and the response goes out at 160 ms.
pub const FAST: Case = Case {
    name: "fast case",
    replies: [
        &[Reply::Answer(ms(10))],
        &[Reply::Answer(ms(105))],
        &[Reply::Answer(ms(25))],
    ],
    expect: &[
        "fast case: A answers in 10 ms, B in 105 ms, C in 25 ms; the client waits 200 ms, our own work takes 20 ms",
        "    0 ms  A  called, timeout 50 ms",
        "   10 ms  A  answered",
        "   10 ms  B  called, timeout 110 ms",
        "  115 ms  B  answered",
        "  115 ms  C  called, timeout 60 ms",
        "  140 ms  C  answered",
        "  160 ms  response sent: 200",
    ],
};

/// The worked example's slow case: A answers in 48 ms and B in 108 ms, so C would start at
/// 156 ms with 24 ms for it, under its 25 ms floor: C is skipped, and the response goes out
/// at 176 ms.
pub const SLOW: Case = Case {
    name: "slow case",
    replies: [
        &[Reply::Answer(ms(48))],
        &[Reply::Answer(ms(108))],
        &[Reply::Answer(ms(25))],
    ],
    expect: &[
        "slow case: A answers in 48 ms, B in 108 ms, C in 25 ms; the client waits 200 ms, our own work takes 20 ms",
        "    0 ms  A  called, timeout 50 ms",
        "   48 ms  A  answered",
        "   48 ms  B  called, timeout 110 ms",
        "  156 ms  B  answered",
        "  156 ms  C  skipped: 24 ms left for it < its 25 ms floor; fallback used",
        "  176 ms  response sent: 200",
    ],
};

/// `d` in whole milliseconds, rounded to the nearest.
pub fn millis(d: Duration) -> u64 {
    // Every duration here is far below u64::MAX microseconds.
    millis_of(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// `micros` microseconds in whole milliseconds, rounded to the nearest.
pub fn millis_of(micros: u64) -> u64 {
    micros.saturating_add(500) / 1000
}

/// The whole milliseconds from `arrival` to `t`, rounded to the nearest: the times of the
/// trace. (In the core's microseconds, so that the trace's arithmetic is the firmware's own,
/// not counted as the library's code.)
pub fn since(arrival: Instant, t: Instant) -> u64 {
    millis_of(t.as_micros().saturating_sub(arrival.as_micros()))
}

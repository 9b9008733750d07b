//! The command line the loopback benchmarks share: `--rounds N`, `--seconds S` (each phase),
//! `--connections C`, `--threads T` (the server's worker threads), `--rate R` (requests per
//! second of a fixed-rate phase) and `--quick` (one short round, the form CI runs to prove
//! the program works); and, for the programs whose loopback dependency has a tail,
//! `--slow-ms MS` and `--slow-percent P` (its slow answers).

use std::time::Duration;

/// What to run, and for how long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// Rounds; each runs every variant once, in an order that rotates from round to round.
    pub rounds: usize,
    /// How long each variant is loaded in each round.
    pub phase: Duration,
    /// Concurrent requests (connections of the load generator, or calls in flight).
    pub connections: usize,
    /// The server's tokio worker threads.
    pub threads: usize,
    /// Requests per second offered in a fixed-rate phase.
    pub rate: u32,
    /// One short round, to prove the program works (CI).
    pub quick: bool,
    /// The dependency's slow answers, for a program whose loopback dependency has a tail
    /// (`None`: the program takes no `--slow-ms` or `--slow-percent`).
    pub slow: Option<Slow>,
}

/// A dependency's slow answers: `per_10k` answers in 10 000 take `us` microseconds. Kept in
/// the dependency's own units, so that what a program prints is what the dependency does (a
/// share under 0.005% is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slow {
    /// The slow answers' latency, in microseconds.
    pub us: u64,
    /// Slow answers per 10 000.
    pub per_10k: u64,
}

impl Slow {
    /// The slow answers' latency, in milliseconds.
    #[must_use]
    pub fn ms(self) -> f64 {
        self.us as f64 / 1_000.0
    }

    /// The share of slow answers, in percent.
    #[must_use]
    pub fn percent(self) -> f64 {
        self.per_10k as f64 / 100.0
    }
}

impl Options {
    /// Reads the command line after the program's name, starting from `defaults`; `--quick`
    /// sets one round of a quarter of a second. Exits with a usage message on anything else.
    #[must_use]
    pub fn parse(defaults: Options, args: impl IntoIterator<Item = String>) -> Options {
        let mut o = defaults;
        let takes_slow = o.slow.is_some();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            // The next argument as a number from `least` to `most`.
            let mut value = |least: f64, most: f64, what: &str| -> f64 {
                args.next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v >= least && *v <= most)
                    .unwrap_or_else(|| usage(&format!("{arg} takes {what}"), takes_slow))
            };
            let positive = f64::MIN_POSITIVE;
            match (arg.as_str(), &mut o.slow) {
                ("--rounds", _) => {
                    o.rounds = value(positive, f64::MAX, "a positive count") as usize
                }
                ("--seconds", _) => {
                    o.phase = Duration::from_secs_f64(value(
                        positive,
                        1e9,
                        "a positive number of seconds, at most 1e9",
                    ));
                }
                ("--connections", _) => {
                    o.connections = value(positive, f64::MAX, "a positive count") as usize;
                }
                ("--threads", _) => {
                    o.threads = value(positive, f64::MAX, "a positive count") as usize
                }
                ("--rate", _) => o.rate = value(positive, f64::MAX, "a positive rate") as u32,
                ("--quick", _) => o.quick = true,
                // In range, so each product is a small whole number after rounding.
                ("--slow-ms", Some(slow)) => {
                    slow.us = (value(0.001, 60_000.0, "a number from 0.001 to 60000") * 1_000.0)
                        .round() as u64;
                }
                ("--slow-percent", Some(slow)) => {
                    slow.per_10k =
                        (value(0.0, 100.0, "a number from 0 to 100") * 100.0).round() as u64;
                }
                _ => usage(&format!("unknown argument {arg:?}"), takes_slow),
            }
        }
        if o.quick {
            o.rounds = 1;
            o.phase = Duration::from_millis(250);
        }
        o.rounds = o.rounds.max(1);
        o.connections = o.connections.max(1);
        o.threads = o.threads.max(1);
        o.rate = o.rate.max(1);
        o
    }
}

/// Prints `why` and the usage line (with the tail's options when the program takes them),
/// and exits with status 2.
fn usage(why: &str, takes_slow: bool) -> ! {
    let slow = if takes_slow {
        "[--slow-ms MS] [--slow-percent P] "
    } else {
        ""
    };
    eprintln!(
        "{why}\nusage: {slow}[--rounds N] [--seconds S] [--connections C] [--threads T] [--rate R] [--quick]"
    );
    std::process::exit(2);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Options, Slow};

    /// A program with a tail: 2% of answers at 40 ms unless told otherwise.
    const WITH_TAIL: Options = Options {
        rounds: 9,
        phase: Duration::from_secs(3),
        connections: 32,
        threads: 1,
        rate: 1,
        quick: false,
        slow: Some(Slow {
            us: 40_000,
            per_10k: 200,
        }),
    };

    fn parse(args: &[&str]) -> Options {
        Options::parse(WITH_TAIL, args.iter().map(|a| (*a).to_owned()))
    }

    #[test]
    fn nothing_given_keeps_the_defaults() {
        assert_eq!(parse(&[]), WITH_TAIL);
    }

    /// The tail is kept in the dependency's units, rounded to them: what is printed is what
    /// runs (a share under 0.005% is none).
    #[test]
    fn the_tail_is_read_in_the_dependency_s_units() {
        let o = parse(&["--slow-ms", "100", "--slow-percent", "5", "--rounds", "3"]);
        assert_eq!(
            o.slow,
            Some(Slow {
                us: 100_000,
                per_10k: 500
            })
        );
        assert_eq!(o.rounds, 3);
        let o = parse(&["--slow-ms", "0.0015", "--slow-percent", "0.004"]);
        let slow = o.slow.expect("a tail");
        assert_eq!((slow.us, slow.per_10k), (2, 0));
        assert_eq!((slow.ms(), slow.percent()), (0.002, 0.0));
    }

    #[test]
    fn quick_is_one_short_round_whatever_else_is_given() {
        let o = parse(&["--rounds", "7", "--seconds", "10", "--quick"]);
        assert_eq!((o.rounds, o.phase), (1, Duration::from_millis(250)));
    }
}

//! The command line the loopback benchmarks share: `--rounds N`, `--seconds S` (each phase),
//! `--connections C` and `--quick` (one short round, the form CI runs to prove the program
//! works); and, only for the programs that use them, `--threads T` (the server's worker
//! threads), `--rate R` (requests per second of a fixed-rate phase), and `--slow-ms MS` and
//! `--slow-percent P` (the slow answers of a loopback dependency with a tail). A program
//! rejects an option it does not use, rather than ignore it.

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
    /// The server's tokio worker threads (`None`: the program takes no `--threads`).
    pub threads: Option<usize>,
    /// Requests per second offered in a fixed-rate phase (`None`: the program has no such
    /// phase, and takes no `--rate`).
    pub rate: Option<u32>,
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
    /// sets one round of a quarter of a second. The options whose default is `None` are not
    /// taken. Exits with a usage message on anything else.
    #[must_use]
    pub fn parse(defaults: Options, args: impl IntoIterator<Item = String>) -> Options {
        let mut o = defaults;
        let usage = |why: &str| -> ! { usage(why, &defaults) };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            // The next argument as a number from `least` to `most`.
            let mut value = |least: f64, most: f64, what: &str| -> f64 {
                args.next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v >= least && *v <= most)
                    .unwrap_or_else(|| usage(&format!("{arg} takes {what}")))
            };
            let positive = f64::MIN_POSITIVE;
            match arg.as_str() {
                "--rounds" => o.rounds = value(positive, f64::MAX, "a positive count") as usize,
                "--seconds" => {
                    o.phase = Duration::from_secs_f64(value(
                        positive,
                        1e9,
                        "a positive number of seconds, at most 1e9",
                    ));
                }
                "--connections" => {
                    o.connections = value(positive, f64::MAX, "a positive count") as usize;
                }
                "--threads" if o.threads.is_some() => {
                    o.threads = Some(value(positive, f64::MAX, "a positive count") as usize);
                }
                "--rate" if o.rate.is_some() => {
                    o.rate = Some(value(positive, f64::MAX, "a positive rate") as u32);
                }
                "--quick" => o.quick = true,
                // In range, so each product is a small whole number after rounding.
                "--slow-ms" if o.slow.is_some() => {
                    let us = (value(0.001, 60_000.0, "a number from 0.001 to 60000") * 1_000.0)
                        .round() as u64;
                    o.slow = o.slow.map(|slow| Slow { us, ..slow });
                }
                "--slow-percent" if o.slow.is_some() => {
                    let per_10k =
                        (value(0.0, 100.0, "a number from 0 to 100") * 100.0).round() as u64;
                    o.slow = o.slow.map(|slow| Slow { per_10k, ..slow });
                }
                _ => usage(&format!("unknown argument {arg:?}")),
            }
        }
        if o.quick {
            o.rounds = 1;
            o.phase = Duration::from_millis(250);
        }
        o.rounds = o.rounds.max(1);
        o.connections = o.connections.max(1);
        o.threads = o.threads.map(|t| t.max(1));
        o.rate = o.rate.map(|r| r.max(1));
        o
    }
}

/// Prints `why` and the usage line of a program with these defaults (the options it takes,
/// and no other), and exits with status 2.
fn usage(why: &str, defaults: &Options) -> ! {
    eprintln!("{why}\nusage: {}", usage_line(defaults));
    std::process::exit(2);
}

/// The options a program with these defaults takes.
fn usage_line(defaults: &Options) -> String {
    let mut line = String::new();
    if defaults.slow.is_some() {
        line.push_str("[--slow-ms MS] [--slow-percent P] ");
    }
    line.push_str("[--rounds N] [--seconds S] [--connections C] ");
    if defaults.threads.is_some() {
        line.push_str("[--threads T] ");
    }
    if defaults.rate.is_some() {
        line.push_str("[--rate R] ");
    }
    line.push_str("[--quick]");
    line
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Options, Slow, usage_line};

    /// A program with a tail (2% of answers at 40 ms unless told otherwise) and a server of
    /// its own, but no fixed-rate phase.
    const WITH_TAIL: Options = Options {
        rounds: 9,
        phase: Duration::from_secs(3),
        connections: 32,
        threads: Some(1),
        rate: None,
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

    /// The usage line lists exactly the options the program takes: those with no default
    /// are left out, and `parse` rejects them as unknown.
    #[test]
    fn the_usage_line_lists_only_the_options_taken() {
        assert_eq!(
            usage_line(&WITH_TAIL),
            "[--slow-ms MS] [--slow-percent P] [--rounds N] [--seconds S] [--connections C] \
             [--threads T] [--quick]"
        );
        let bare = Options {
            threads: None,
            slow: None,
            rate: Some(10),
            ..WITH_TAIL
        };
        assert_eq!(
            usage_line(&bare),
            "[--rounds N] [--seconds S] [--connections C] [--rate R] [--quick]"
        );
        let o = parse(&["--threads", "4"]);
        assert_eq!((o.threads, o.rate), (Some(4), None));
    }
}

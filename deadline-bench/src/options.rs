//! The command line the loopback benchmarks share: `--rounds N`, `--seconds S` (each phase),
//! `--connections C`, `--threads T` (the server's worker threads), `--rate R` (requests per
//! second of a fixed-rate phase) and `--quick` (one short round, the form CI runs to prove
//! the program works).

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
}

impl Options {
    /// Reads the command line after the program's name, starting from `defaults`; `--quick`
    /// sets one round of a quarter of a second. Exits with a usage message on anything else.
    #[must_use]
    pub fn parse(defaults: Options, args: impl IntoIterator<Item = String>) -> Options {
        let mut o = defaults;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = |what: &str| -> f64 {
                args.next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .unwrap_or_else(|| usage(&format!("{arg} takes a positive {what}")))
            };
            match arg.as_str() {
                "--rounds" => o.rounds = value("count") as usize,
                "--seconds" => o.phase = Duration::from_secs_f64(value("number of seconds")),
                "--connections" => o.connections = value("count") as usize,
                "--threads" => o.threads = value("count") as usize,
                "--rate" => o.rate = value("rate") as u32,
                "--quick" => o.quick = true,
                _ => usage(&format!("unknown argument {arg:?}")),
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

fn usage(why: &str) -> ! {
    eprintln!(
        "{why}\nusage: [--rounds N] [--seconds S] [--connections C] [--threads T] [--rate R] [--quick]"
    );
    std::process::exit(2);
}

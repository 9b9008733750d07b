//! A server process of this program run under valgrind's callgrind, which counts exactly the
//! user-space instructions it runs: the `--instructions` mode of the `server` and
//! `downstream` programs. A count is the same on any machine and does not move with whatever
//! else the machine runs, where CPU time does.

use std::path::PathBuf;
use std::time::Duration;

use crate::child::Child;

/// Exits with a message naming `program` if valgrind is not installed.
pub fn require_valgrind(program: &str) {
    let found = std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        eprintln!("{program}: valgrind is not installed (Debian: apt-get install valgrind)");
        std::process::exit(1);
    }
}

/// One request's instructions: the difference of two whole runs' counts, `fewer` over `low`
/// requests and `more` over `high`, over the difference of the two numbers (what both runs
/// share, the start-up and the warm-up, cancels out).
///
/// # Panics
///
/// If the run with more requests counted fewer instructions, naming `name`.
#[must_use]
pub fn per_request(name: &str, (low, fewer): (u64, u64), (high, more): (u64, u64)) -> u64 {
    more.checked_sub(fewer)
        .unwrap_or_else(|| panic!("{name}: {high} requests counted {more}, {low} counted {fewer}"))
        / (high - low)
}

/// Reads the arguments after `--instructions`: none, or `--quick` (true). Exits with a usage
/// line naming `program` on anything else.
pub fn quick_arg(program: &str, rest: impl Iterator<Item = String>) -> bool {
    match rest.collect::<Vec<_>>().as_slice() {
        [] => false,
        [quick] if quick == "--quick" => true,
        _ => {
            eprintln!("usage: {program} --instructions [--quick]");
            std::process::exit(2);
        }
    }
}

/// This program started again with a role, under callgrind (see [`Child::spawn_under`]).
#[derive(Debug)]
pub struct Counted {
    child: Child,
    log: PathBuf,
}

impl Counted {
    /// Starts this program again with `args`, under callgrind, and waits for its `ready`
    /// line. `tag` names the run in valgrind's log file (a temporary file, removed by
    /// [`finish`](Self::finish)).
    ///
    /// # Panics
    ///
    /// As [`Child::spawn`].
    #[must_use]
    pub fn spawn(tag: &str, args: &[&str]) -> Counted {
        let log =
            std::env::temp_dir().join(format!("deadline-bench-{tag}-{}.log", std::process::id()));
        let log_file = format!("--log-file={}", log.display());
        let child = Child::spawn_under(
            &[
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                &log_file,
            ],
            args,
        );
        Counted { child, log }
    }

    /// The process, for its addresses and commands.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Ends the process and returns the instructions callgrind counted over its whole run.
    ///
    /// # Panics
    ///
    /// If the process does not exit with success within two minutes, or valgrind's log holds
    /// no count.
    #[must_use]
    pub fn finish(self) -> u64 {
        let Counted { child, log } = self;
        assert!(
            child.finish(Duration::from_secs(120)),
            "the process under valgrind did not exit with success"
        );
        let text = std::fs::read_to_string(&log).expect("valgrind's log");
        let _ = std::fs::remove_file(&log);
        text.lines()
            .find_map(|line| line.split("Collected :").nth(1))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no instruction count in valgrind's log:\n{text}"))
    }
}

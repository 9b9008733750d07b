//! A server in a process of its own, so that the load generator's CPU time never mixes with
//! the server's, and the server can report its own (`getrusage` of its process).
//!
//! The benchmark program starts itself again with a role (`Child::spawn`); the child binds
//! its listeners on loopback, prints `ready ADDR...` and then answers one command per line on
//! its standard input (`serve_commands`) until that input closes, when it exits.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// How long the child has to say it is ready, or to answer a command: far more than a child
/// under valgrind takes, so that only a child that hangs runs into it.
const ANSWER_LIMIT: Duration = Duration::from_secs(300);

/// A server process this program started, and the addresses it listens on.
#[derive(Debug)]
pub struct Child {
    process: std::process::Child,
    stdin: Option<ChildStdin>,
    /// The child's output, line by line, read on a thread of its own so that every wait for
    /// it has a limit.
    lines: Receiver<String>,
    addrs: Vec<SocketAddr>,
}

impl Child {
    /// Starts this program again with `args` (the child's role), and waits for its `ready`
    /// line.
    ///
    /// # Panics
    ///
    /// If the program cannot be started or does not announce its addresses within 300 s.
    #[must_use]
    pub fn spawn(args: &[&str]) -> Child {
        Child::spawn_under(&[], args)
    }

    /// [`spawn`](Self::spawn), with the program run by another: `under` is that program and
    /// its arguments (`valgrind --tool=callgrind ...`), this program's path and `args` follow.
    ///
    /// # Panics
    ///
    /// As [`spawn`](Self::spawn).
    #[must_use]
    pub fn spawn_under(under: &[&str], args: &[&str]) -> Child {
        let exe = std::env::current_exe().expect("this program's path");
        let mut command = match under.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(exe);
                command
            }
            None => Command::new(exe),
        };
        let mut process = command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the server process");
        let stdin = process.stdin.take();
        let stdout = BufReader::new(process.stdout.take().expect("the child's stdout"));
        let (send, lines) = channel();
        std::thread::spawn(move || {
            // Ends with the child's output, or once nobody reads.
            for line in stdout.lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let line = lines
            .recv_timeout(ANSWER_LIMIT)
            .expect("the child's ready line, within the limit");
        let addrs = line
            .strip_prefix("ready")
            .unwrap_or_else(|| panic!("the child said {line:?}, not ready"))
            .split_whitespace()
            .map(|a| a.parse().expect("a socket address"))
            .collect();
        Child {
            process,
            stdin,
            lines,
            addrs,
        }
    }

    /// The addresses the child listens on, in the order it bound them.
    #[must_use]
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Sends one command and returns the child's one-line answer.
    ///
    /// # Panics
    ///
    /// If the child has gone, or does not answer within 300 s.
    pub fn ask(&mut self, command: &str) -> String {
        let stdin = self.stdin.as_mut().expect("the child's stdin is open");
        writeln!(stdin, "{command}").expect("write to the child");
        stdin.flush().expect("write to the child");
        let line = self
            .lines
            .recv_timeout(ANSWER_LIMIT)
            .expect("the child's answer, within the limit");
        line.trim_end().to_owned()
    }

    /// The child's CPU time so far (user and system, all its threads).
    pub fn cpu(&mut self) -> Duration {
        let answer = self.ask("cpu");
        Duration::from_micros(answer.parse().expect("microseconds of CPU"))
    }

    /// The part of [`cpu`](Self::cpu) spent in user space (the rest is the kernel's).
    pub fn user_cpu(&mut self) -> Duration {
        let answer = self.ask("user");
        Duration::from_micros(answer.parse().expect("microseconds of CPU"))
    }

    /// Closes the child's input, which ends it, and waits for it to exit, for at most
    /// `limit`; true if it exited by itself, with success.
    pub fn finish(mut self, limit: Duration) -> bool {
        self.close_and_wait(limit)
            .is_some_and(|status| status.success())
    }

    /// Closes the child's input, which ends it, and waits for it to exit, for at most
    /// `limit`: its exit status, or `None` if it is still running.
    fn close_and_wait(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        drop(self.stdin.take());
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Ok(Some(status)) = self.process.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Requests the child has received so far (a dependency counts them).
    pub fn received(&mut self) -> u64 {
        self.ask("received").parse().expect("a count")
    }

    /// Connections the child has accepted so far (a dependency counts them).
    pub fn connections(&mut self) -> u64 {
        self.ask("connections").parse().expect("a count")
    }

    /// Of those connections, the ones closed before a byte arrived on them (a dependency
    /// counts them).
    pub fn unused(&mut self) -> u64 {
        self.ask("unused").parse().expect("a count")
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // Closing its input ends the child; give it 5 s, then kill it.
        if self.close_and_wait(Duration::from_secs(5)).is_some() {
            return;
        }
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The child's side: announces `addrs`, then answers each command line on standard input
/// with `answer` (`cpu` and `user` are answered here: this process's CPU time, and the part
/// of it in user space, in microseconds), until the input closes.
pub fn serve_commands(addrs: &[SocketAddr], mut answer: impl FnMut(&str) -> Option<String>) {
    let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {}", list.join(" ")).expect("write to the parent");
    out.flush().expect("write to the parent");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let reply = match line.trim() {
            "cpu" => crate::cpu::process_cpu().as_micros().to_string(),
            "user" => crate::cpu::process_user_cpu().as_micros().to_string(),
            command => answer(command).unwrap_or_else(|| format!("unknown command {command:?}")),
        };
        writeln!(out, "{reply}").expect("write to the parent");
        out.flush().expect("write to the parent");
    }
}

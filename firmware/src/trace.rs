//! [`Trace`]: a trace printed through semihosting and compared, line by line as it is
//! printed, with the one expected.

use core::fmt::{self, Write};

use cortex_m_semihosting::{heprintln, hprintln};

/// Compares the lines of one trace with the expected ones as they are printed.
pub struct Trace {
    expect: &'static [&'static str],
    /// Lines printed so far.
    lines: usize,
    /// Whether every line so far matched.
    ok: bool,
}

impl Trace {
    /// A trace that must print `expect`, line by line.
    pub const fn new(expect: &'static [&'static str]) -> Self {
        Trace {
            expect,
            lines: 0,
            ok: true,
        }
    }

    /// Prints one line and checks it against the next expected line.
    pub fn line(&mut self, line: fmt::Arguments<'_>) {
        hprintln!("{}", line);
        let expected = self.expect.get(self.lines).copied();
        self.lines += 1;
        let mut rest = Compare(expected);
        let matched = rest.write_fmt(line).is_ok() && rest.0 == Some("");
        if !matched {
            self.ok = false;
            heprintln!("trace: line {} differs; expected:", self.lines);
            heprintln!("{}", expected.unwrap_or("(no more lines)"));
        }
    }

    /// Whether the trace was the expected one, every line and no more.
    pub fn finish(&self) -> bool {
        let complete = self.lines == self.expect.len();
        if !complete {
            heprintln!(
                "trace: {} lines printed, {} expected",
                self.lines,
                self.expect.len()
            );
        }
        self.ok && complete
    }
}

/// A [`Write`] that consumes the expected text as the output comes, and fails on the first
/// difference (`None`: nothing more was expected). Needs no buffer.
struct Compare(Option<&'static str>);

impl Write for Compare {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0 = self.0.and_then(|rest| rest.strip_prefix(s));
        if self.0.is_some() {
            Ok(())
        } else {
            Err(fmt::Error)
        }
    }
}

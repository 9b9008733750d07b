//! The checkout example as Cortex-M firmware: its fast and slow cases through the core's
//! driver on deadline-embassy's timer, on QEMU's micro:bit (Cortex-M0) and MPS2 (M3, M4F)
//! boards.
//!
//! It prints the trace through semihosting, compares it line by line with the worked
//! example's, prints the request future's size and the peak stack, and exits with status 0
//! when every line matched, 1 otherwise. No heap: there is no global allocator.

#![no_std]
#![no_main]

mod chain;
mod executor;
mod stack;
mod systick;

use core::fmt::{self, Write};

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, heprintln, hprintln};

/// Compares the lines of one trace with the expected ones as they are printed.
struct Trace {
    expect: &'static [&'static str],
    /// Lines printed so far.
    lines: usize,
    /// Whether every line so far matched.
    ok: bool,
}

impl Trace {
    const fn new(expect: &'static [&'static str]) -> Self {
        Trace {
            expect,
            lines: 0,
            ok: true,
        }
    }

    /// Prints one line and checks it against the next expected line.
    fn line(&mut self, line: fmt::Arguments<'_>) {
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
    fn finish(&self) -> bool {
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

#[entry]
fn main() -> ! {
    executor::run(|spawner| match app() {
        Ok(task) => spawner.spawn(task),
        Err(_) => fail("the application task is already running"),
    })
}

/// The application: both cases of the worked example, checked, then the measurements.
#[embassy_executor::task]
async fn app() {
    let Some(peripherals) = cortex_m::Peripherals::take() else {
        fail("the core peripherals were taken before main")
    };
    systick::start(peripherals.SYST);

    let mut ok = true;
    let mut future_size = 0;
    for case in [&chain::FAST, &chain::SLOW] {
        let mut trace = Trace::new(case.expect);
        let mut log = |line: fmt::Arguments<'_>| trace.line(line);
        let request = chain::handle(case, &mut log);
        future_size = core::mem::size_of_val(&request);
        let status = request.await;
        ok &= trace.finish() && status == 200;
    }

    let (stack, used) = stack::peak();
    hprintln!("request future: {} bytes", future_size);
    hprintln!("peak stack: {} of {} bytes", used, stack);
    if ok {
        hprintln!("trace matches the worked example");
        debug::exit(debug::EXIT_SUCCESS);
    } else {
        fail("the trace differs from the worked example");
    }
}

/// Says why, and exits with status 1.
fn fail(why: &str) -> ! {
    heprintln!("firmware: {}", why);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    heprintln!("panic: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}

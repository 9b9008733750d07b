//! The CPU time this process has used, from `getrusage(RUSAGE_SELF)`: its own threads' user
//! and system time, whatever else the machine runs. A server that reads it before and after a
//! load phase knows what the phase cost it, even on a machine shared with other work.

use std::time::Duration;

/// The user and system CPU time of every thread of this process so far.
///
/// # Panics
///
/// If `getrusage` fails, which it does only for an invalid argument.
#[must_use]
pub fn process_cpu() -> Duration {
    let usage = rusage();
    timeval(usage.ru_utime) + timeval(usage.ru_stime)
}

/// The user CPU time of every thread of this process so far: [`process_cpu`] less the
/// kernel's part.
///
/// # Panics
///
/// As [`process_cpu`].
#[must_use]
pub fn process_user_cpu() -> Duration {
    timeval(rusage().ru_utime)
}

#[allow(unsafe_code)]
fn rusage() -> libc::rusage {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; `getrusage` writes one there and
    // returns 0, or returns -1 and writes nothing (the zeroed value stays).
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage(RUSAGE_SELF) failed");
    // SAFETY: zero-initialised, then written by `getrusage`: every field is an integer.
    unsafe { usage.assume_init() }
}

fn timeval(t: libc::timeval) -> Duration {
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let micros = u64::try_from(t.tv_usec).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(micros)
}

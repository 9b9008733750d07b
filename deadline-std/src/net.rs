//! Per-attempt limits handed to `std::net` sockets: the connect limit apart from the read limit.
//!
//! Seed 003's rules: the connect limit is short (reaching the server should take
//! milliseconds); the read limit is the time left. [`connect`] connects within the attempt's
//! connect limit and arms the socket's read and write limits with the attempt's timeout;
//! before each further read, [`arm_read`] sets the read limit to what is left of the attempt,
//! so a call that reads in several pieces still ends by its deadline.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use deadline_core::{Instant, Limits};

/// The error for "no time left to wait": [`io::ErrorKind::TimedOut`].
fn no_time_left() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "no time left before the call's deadline",
    )
}

/// Connects to `addr` within `limits.connect`, then sets the socket's read and write limits to
/// `limits.timeout`.
///
/// # Errors
///
/// The connect error ([`io::ErrorKind::TimedOut`] when the connect limit passed, and at once
/// when the connect limit is zero), or the error of setting the limits.
///
/// ```
/// use deadline_core::{Deadline, Instant, Policy, call_timeout, ms};
/// use deadline_std::net::connect;
///
/// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
/// let c = Policy::optional("C", ms(60), ms(25)).with_connect(ms(20));
/// let deadline = Deadline::after(Instant::ZERO, ms(200));
/// let limits = call_timeout(&c, deadline, Instant::from_millis(115), ms(20)).limits().unwrap();
/// let stream = connect(&listener.local_addr()?, &limits)?;
/// assert_eq!(stream.read_timeout()?, Some(ms(60)));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn connect(addr: &SocketAddr, limits: &Limits) -> io::Result<TcpStream> {
    if limits.connect.is_zero() {
        return Err(no_time_left());
    }
    let stream = TcpStream::connect_timeout(addr, limits.connect)?;
    apply(&stream, limits)?;
    Ok(stream)
}

/// Sets a connected socket's read and write limits to `limits.timeout` (for a socket that was
/// connected some other way, or taken from a pool).
///
/// # Errors
///
/// [`io::ErrorKind::TimedOut`] when the timeout is zero (a socket would read that as "no
/// limit"), or the error of setting the limits.
pub fn apply(stream: &TcpStream, limits: &Limits) -> io::Result<()> {
    set_limits(stream, limits.timeout)
}

/// Sets the socket's read and write limits to the time left until `until`, as read at `now`:
/// call it before each read of an attempt. Returns the limit it set.
///
/// # Errors
///
/// [`io::ErrorKind::TimedOut`] when no time is left (the attempt is over: do not read), or the
/// error of setting the limits.
///
/// ```
/// use deadline_core::{Instant, ms};
/// use deadline_std::net::arm_read;
///
/// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
/// let stream = std::net::TcpStream::connect(listener.local_addr()?)?;
/// let until = Instant::from_millis(175);
/// assert_eq!(arm_read(&stream, until, Instant::from_millis(115))?, ms(60));
/// assert_eq!(stream.read_timeout()?, Some(ms(60)));
/// assert!(arm_read(&stream, until, until).is_err());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn arm_read(stream: &TcpStream, until: Instant, now: Instant) -> io::Result<Duration> {
    let left = until.saturating_duration_since(now);
    set_limits(stream, left)?;
    Ok(left)
}

fn set_limits(stream: &TcpStream, limit: Duration) -> io::Result<()> {
    if limit.is_zero() {
        return Err(no_time_left());
    }
    stream.set_read_timeout(Some(limit))?;
    stream.set_write_timeout(Some(limit))
}

//! Per-attempt limits handed to `std::net` sockets: the connect limit apart from the read limit.
//!
//! The rules: the connect limit is short (reaching the server should take
//! milliseconds); the read limit is the time left. No limit armed here ever exceeds the time
//! left until the attempt's end ([`Limits::until`]) at the instant it is armed:
//!
//! - [`connect`] connects within the attempt's connect limit, or the time left if that is
//!   shorter, then reads the clock again and arms the socket's read and write limits with what
//!   is left *after* the connect (a slow connect leaves less time to read).
//! - The limits themselves are the core's: [`Limits::connect_timeout`] (the connect limit
//!   [`connect`] uses, for a socket connected some other way) and [`Limits::read_timeout`].
//! - [`apply`] arms a socket connected some other way (or taken from a pool) with the time
//!   left at `now`.
//! - [`arm_read`], called before each further read or write, sets the limits to what is left
//!   of the attempt, so a call that reads in several pieces still ends by its deadline.
//! - [`Bounded`] does that for every read and write: a socket's limit bounds one system
//!   call, not an operation made of several (`write_all`, `read_exact`, `read_to_end`, a
//!   `BufReader`'s lines), which with the limit armed once can run for as long as the peer
//!   keeps taking or giving a little at a time.
//!
//! Each returns the limit it set. The operating system may keep a socket's limit in coarser
//! units (Linux rounds it up to its timer tick), so [`TcpStream::read_timeout`] can read back
//! a little more than was set.
//!
//! All three fail with [`io::ErrorKind::TimedOut`] instead of arming a zero limit when no time
//! is left: the attempt is over, and std refuses a zero socket timeout anyway.
//!
//! A read or a write whose limit runs out fails as the platform says: with
//! [`io::ErrorKind::WouldBlock`] on Unix (`EAGAIN`), with [`io::ErrorKind::TimedOut`] on
//! Windows. A classifier of an attempt's errors reads both as
//! [`Outcome::TimedOut`](deadline_core::Outcome::TimedOut); one that knew `TimedOut` alone would
//! read a socket's timeout on Linux as some other failure. (The driver's own rule catches it
//! anyway when it comes at the attempt's end: a failure then is the attempt's timeout.)

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use deadline_core::call::Limits;
use deadline_core::{Clock, Deadline, Instant};

/// The error for "no time left to wait": [`io::ErrorKind::TimedOut`].
fn no_time_left() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "no time left before the call's deadline",
    )
}

/// Connects to `addr` within `min(limits.connect(), time left)`, then sets the socket's read
/// and write limits to the time left until `limits.until()` once connected. Returns the socket
/// and the limit it set.
///
/// `clock` must be the clock the limits were decided on ([`StdClock`](crate::StdClock) in
/// production); it is read before the connect and again after it.
///
/// # Errors
///
/// [`io::ErrorKind::TimedOut`] at once when the connect limit is zero or no time is left
/// before the connect, and after it when the connect used up the time left; otherwise the
/// connect error ([`io::ErrorKind::TimedOut`] when the connect limit passed) or the error of
/// setting the limits.
///
/// ```
/// use deadline_core::{Deadline, Instant, ms, Policy};
/// use deadline_core::call::call_timeout;
/// use deadline_core::virtual_time::ManualClock;
/// use deadline_std::net::connect;
///
/// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
/// // The checkout example's C, decided at 115 ms: 60 ms until 175 ms, of which 20 ms to connect.
/// let clock = ManualClock::starting_at(Instant::from_millis(115));
/// let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25)).with_connect(ms(20));
/// let deadline = Deadline::after(Instant::ZERO, ms(200));
/// let limits = call_timeout(&c, deadline, ms(20), Instant::from_millis(115)).limits().unwrap();
/// let (stream, armed) = connect(&listener.local_addr()?, &limits, &clock)?;
/// // The virtual clock did not move during the connect: all 60 ms are left to read.
/// assert_eq!(armed, ms(60));
/// assert!(stream.read_timeout()? >= Some(armed));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn connect<C: Clock + ?Sized>(
    addr: &SocketAddr,
    limits: &Limits,
    clock: &C,
) -> io::Result<(TcpStream, Duration)> {
    let limit = limits.connect_timeout(clock.now());
    if limit.is_zero() {
        return Err(no_time_left());
    }
    let stream = TcpStream::connect_timeout(addr, limit)?;
    let armed = apply(&stream, limits, clock.now())?;
    Ok((stream, armed))
}

/// Sets a connected socket's read and write limits to the time left until `limits.until()`, as
/// read at `now` (for a socket that was connected some other way, or taken from a pool).
/// Returns the limit it set.
///
/// # Errors
///
/// [`io::ErrorKind::TimedOut`] when no time is left (the attempt is over: do not use the
/// socket), or the error of setting the limits.
///
/// ```
/// use deadline_core::{Deadline, Instant, ms, Policy};
/// use deadline_core::call::call_timeout;
/// use deadline_std::net::apply;
///
/// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
/// let pooled = std::net::TcpStream::connect(listener.local_addr()?)?;
/// let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
/// let deadline = Deadline::after(Instant::ZERO, ms(200));
/// let limits = call_timeout(&c, deadline, ms(20), Instant::from_millis(115)).limits().unwrap();
/// // Taken from the pool 5 ms after the decision: 55 ms are left.
/// assert_eq!(apply(&pooled, &limits, Instant::from_millis(120))?, ms(55));
/// assert!(apply(&pooled, &limits, limits.until()).is_err());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn apply(stream: &TcpStream, limits: &Limits, now: Instant) -> io::Result<Duration> {
    arm(stream, limits.read_timeout(now))
}

/// Sets the socket's read and write limits to the time left until `until`, as read at `now`:
/// call it before each read or write of an attempt ([`Bounded`] calls it before every one).
/// Returns the limit it set.
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
/// let armed = arm_read(&stream, until, Instant::from_millis(115))?;
/// assert_eq!(armed, ms(60));
/// assert!(stream.read_timeout()? >= Some(armed));
/// assert!(arm_read(&stream, until, until).is_err());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn arm_read(stream: &TcpStream, until: Instant, now: Instant) -> io::Result<Duration> {
    arm(stream, Deadline::at(until).remaining(now))
}

/// Sets the read and write limits to `left`, refusing a zero limit.
fn arm(stream: &TcpStream, left: Duration) -> io::Result<Duration> {
    if left.is_zero() {
        return Err(no_time_left());
    }
    stream.set_read_timeout(Some(left))?;
    stream.set_write_timeout(Some(left))?;
    Ok(left)
}

/// A connected stream whose every read and write is armed first with what is left until the
/// attempt's end ([`arm_read`], the clock read each time): an operation made of several
/// system calls (`write_all`, `read_exact`, `read_to_end`, a `BufReader`'s lines) ends by
/// the deadline too, failing with [`io::ErrorKind::TimedOut`] once no time is left (or the
/// platform's error for a limit that ran out, as for any socket here).
///
/// ```
/// use std::io::{Read, Write};
///
/// use deadline_core::{Clock, Instant, ms};
/// use deadline_std::StdClock;
/// use deadline_std::net::Bounded;
///
/// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
/// let stream = std::net::TcpStream::connect(listener.local_addr()?)?;
/// let (mut peer, _) = listener.accept()?;
/// let mut bounded = Bounded::new(stream, StdClock.now() + ms(5_000), StdClock);
/// bounded.write_all(b"ping")?;
/// let mut got = [0; 4];
/// peer.read_exact(&mut got)?;
/// assert_eq!(&got, b"ping");
///
/// // Past its end, nothing more is read or written.
/// let mut late = Bounded::new(bounded.into_inner(), Instant::ZERO, StdClock);
/// assert_eq!(late.write(b"x").unwrap_err().kind(), std::io::ErrorKind::TimedOut);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Bounded<C> {
    stream: TcpStream,
    until: Instant,
    clock: C,
}

impl<C: Clock> Bounded<C> {
    /// `stream`, each of whose reads and writes ends by `until` on `clock` (the clock the
    /// attempt's limits were decided on: [`StdClock`](crate::StdClock) in production).
    pub const fn new(stream: TcpStream, until: Instant, clock: C) -> Self {
        Bounded {
            stream,
            until,
            clock,
        }
    }

    /// The stream.
    pub const fn get_ref(&self) -> &TcpStream {
        &self.stream
    }

    /// The stream, unbounded (with the limits last armed).
    pub fn into_inner(self) -> TcpStream {
        self.stream
    }

    /// Arms the stream with what is left now.
    fn arm(&self) -> io::Result<Duration> {
        arm_read(&self.stream, self.until, self.clock.now())
    }
}

impl<C: Clock> Read for Bounded<C> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        self.stream.read(buf)
    }
}

impl<C: Clock> Write for Bounded<C> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        self.stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

//! The socket glue: an attempt's limits set on a loopback socket and read back (no waiting).
//!
//! Each test checks the limit the function computed and returned. The socket's own read-back
//! is checked with some slack: the kernel may keep the limit in timer ticks and round it up
//! (at HZ=300, Linux reports 60 ms as 63.33 ms).

use std::cell::Cell;
use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use deadline_core::call::{Limits, call_timeout};
use deadline_core::plan::Plan;
use deadline_core::virtual_time::ManualClock;
use deadline_core::{Clock, Deadline, Instant, Policy, ms};
use deadline_std::net::{apply, arm_read, connect};

fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("bind a loopback port")
}

/// The most a kernel may round a socket limit up by.
const TICK_SLACK: Duration = ms(10);

/// The socket's read and write limits read back as `want`, give or take the kernel's rounding
/// up.
fn assert_reads_back(stream: &TcpStream, want: Duration) {
    for (which, got) in [
        ("read", stream.read_timeout().unwrap()),
        ("write", stream.write_timeout().unwrap()),
    ] {
        let got = got.unwrap_or_else(|| panic!("no {which} limit set"));
        assert!(
            want <= got && got < want + TICK_SLACK,
            "{which} limit: set {want:?}, read back {got:?}"
        );
    }
}

/// The checkout example's C, decided at 115 ms of a 200 ms request: 60 ms until 175 ms, 20 ms to connect.
fn checkout_c_limits() -> Limits {
    let c = Policy::optional("C")
        .with_cap(ms(60))
        .with_floor(ms(25))
        .with_connect(ms(20));
    let deadline = Deadline::after(Instant::ZERO, ms(200));
    call_timeout(&c, deadline, ms(20), Instant::from_millis(115))
        .limits()
        .unwrap()
}

/// A clock that reads the given instants one after another (then stays at the last): a
/// connect that takes the time between two readings.
struct Readings {
    at: Vec<Instant>,
    next: Cell<usize>,
}

impl Readings {
    fn new(at: &[Instant]) -> Self {
        Readings {
            at: at.to_vec(),
            next: Cell::new(0),
        }
    }

    fn reads(&self) -> usize {
        self.next.get()
    }
}

impl Clock for Readings {
    fn now(&self) -> Instant {
        let i = self.next.get();
        self.next.set(i + 1);
        *self.at.get(i).or(self.at.last()).unwrap()
    }
}

#[test]
fn connect_hands_the_call_timeout_to_the_socket_as_its_read_and_write_limit() {
    // The checkout example's C at 115 ms: timeout 60 ms. Its connect limit is apart, and shorter.
    let limits = checkout_c_limits();
    assert_eq!(limits.connect(), ms(20));
    let clock = ManualClock::starting_at(Instant::from_millis(115));
    let listener = listener();
    let (stream, armed) = connect(&listener.local_addr().unwrap(), &limits, &clock).unwrap();
    assert_eq!(armed, limits.timeout());
    assert_reads_back(&stream, armed);
}

#[test]
fn a_connect_that_took_time_leaves_only_the_rest_to_read() {
    // The connect starts at 115 ms and ends at 130 ms: 45 ms are left of C's attempt, not its
    // whole 60 ms timeout.
    let limits = checkout_c_limits();
    let after_connect = Instant::from_millis(130);
    let clock = Readings::new(&[Instant::from_millis(115), after_connect]);
    let listener = listener();
    let (stream, armed) = connect(&listener.local_addr().unwrap(), &limits, &clock).unwrap();
    assert_eq!(
        clock.reads(),
        2,
        "the clock is read before and after the connect"
    );
    assert_eq!(armed, ms(45));
    assert!(armed <= limits.deadline().remaining(after_connect));
    assert!(armed < limits.timeout());
    assert_reads_back(&stream, armed);
}

#[test]
fn a_connect_that_used_up_the_attempt_arms_nothing() {
    // The connect ends at the attempt's end: no time is left to read, so no socket is handed
    // out (a zero limit would mean "wait forever", and std refuses it).
    let limits = checkout_c_limits();
    let clock = Readings::new(&[Instant::from_millis(115), limits.until()]);
    let listener = listener();
    let err = connect(&listener.local_addr().unwrap(), &limits, &clock).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_eq!(clock.reads(), 2);
}

#[test]
fn the_connect_limit_never_exceeds_the_time_left() {
    // C's own connect limit (20 ms) while more is left; only what is left near the end.
    let limits = checkout_c_limits();
    assert_eq!(limits.connect_timeout(Instant::from_millis(115)), ms(20));
    assert_eq!(limits.connect_timeout(Instant::from_millis(155)), ms(20));
    assert_eq!(limits.connect_timeout(Instant::from_millis(160)), ms(15));
    assert_eq!(limits.connect_timeout(limits.until()), Duration::ZERO);
    assert_eq!(
        limits.connect_timeout(Instant::from_millis(500)),
        Duration::ZERO
    );
}

#[test]
fn a_connect_started_after_the_attempt_ended_fails_at_once() {
    let limits = checkout_c_limits();
    let clock = Readings::new(&[limits.until()]);
    let listener = listener();
    let err = connect(&listener.local_addr().unwrap(), &limits, &clock).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_eq!(clock.reads(), 1, "no connect, so no second reading");
}

#[test]
fn a_pooled_socket_used_later_gets_only_the_time_left() {
    // C's limits, decided at 115 ms; the pooled socket is taken at 125 ms.
    let limits = checkout_c_limits();
    let listener = listener();
    let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let taken = Instant::from_millis(125);
    let armed = apply(&stream, &limits, taken).unwrap();
    assert_eq!(armed, ms(50));
    assert_eq!(armed, limits.deadline().remaining(taken));
    assert_reads_back(&stream, armed);

    let err = apply(&stream, &limits, limits.until()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_reads_back(&stream, armed);
}

#[test]
fn each_read_gets_only_what_is_left_of_the_attempt() {
    // A plan's step decided at 0 ms: B gets 120 ms.
    let b = Policy::required("B").with_cap(ms(120)).with_floor(ms(30));
    let mut plan: Plan<'_, 1> = Plan::new(Deadline::after(Instant::ZERO, ms(200)), ms(20));
    let step = plan.then(&b).unwrap();
    let clock = ManualClock::new();
    let limits = plan.decide(step, clock.now()).limits().unwrap();
    let listener = listener();
    let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let armed = apply(&stream, &limits, clock.now()).unwrap();
    assert_eq!(armed, ms(120));
    assert_reads_back(&stream, armed);

    // 60 ms into the attempt, the next read may wait only the 60 ms left.
    clock.advance(ms(60));
    let armed = arm_read(&stream, limits.until(), clock.now()).unwrap();
    assert_eq!(armed, ms(60));
    assert_reads_back(&stream, armed);

    // At the attempt's end: no read at all, and the socket's limit is left as it was.
    clock.advance(ms(60));
    let err = arm_read(&stream, limits.until(), clock.now()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_reads_back(&stream, armed);
}

#[test]
fn a_zero_connect_limit_fails_at_once_instead_of_waiting_forever() {
    let a = Policy::required("A")
        .with_cap(ms(50))
        .with_floor(ms(10))
        .with_connect(ms(0));
    let deadline = Deadline::after(Instant::ZERO, ms(200));
    let limits = call_timeout(&a, deadline, ms(20), Instant::ZERO)
        .limits()
        .unwrap();
    let clock = ManualClock::new();
    let listener = listener();
    let err = connect(&listener.local_addr().unwrap(), &limits, &clock).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
}

/// A clock that moves 10 ms each time it is read: each write of a long `write_all` reads it
/// once.
struct Ticking(Cell<u64>);

impl Clock for Ticking {
    fn now(&self) -> Instant {
        let ms = self.0.get();
        self.0.set(ms + 10);
        Instant::from_millis(ms)
    }
}

/// A socket's limit bounds one system call, not an operation made of several (`write_all`,
/// `read_exact`): armed once, each call gets it whole again. Through `Bounded`, each read and
/// each write is armed with what is left when it is made (on a clock that moves 10 ms a
/// reading: 30, 20, then 10 ms), and once nothing is left, the next fails with `TimedOut`,
/// without waiting.
#[test]
fn every_read_and_write_of_a_bounded_stream_is_armed_with_what_is_left() {
    use std::io::{Read, Write};

    use deadline_std::net::Bounded;

    let listener = listener();
    let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    let until = Instant::from_millis(30);

    let mut bounded = Bounded::new(stream, until, Ticking(Cell::new(0)));
    for left in [ms(30), ms(20), ms(10)] {
        bounded.write_all(b"x").unwrap();
        assert_reads_back(bounded.get_ref(), left);
    }
    let error = bounded.write_all(b"x").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::TimedOut);
    let mut got = [0; 3];
    peer.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"xxx");

    peer.write_all(b"abc").unwrap();
    let mut bounded = Bounded::new(bounded.into_inner(), until, Ticking(Cell::new(0)));
    for (left, want) in [(ms(30), b'a'), (ms(20), b'b'), (ms(10), b'c')] {
        let mut byte = [0; 1];
        bounded.read_exact(&mut byte).unwrap();
        assert_eq!(byte[0], want);
        assert_reads_back(bounded.get_ref(), left);
    }
    let error = bounded.read(&mut [0; 1]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::TimedOut);
}

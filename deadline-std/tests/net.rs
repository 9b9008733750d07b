//! The socket glue: an attempt's limits set on a loopback socket and read back (no waiting).

use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};

use deadline_core::Clock;
use deadline_core::{Deadline, Instant, ManualClock, Plan, Policy, call_timeout, ms};
use deadline_std::net::{apply, arm_read, connect};

fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("bind a loopback port")
}

#[test]
fn connect_hands_the_call_timeout_to_the_socket_as_its_read_and_write_limit() {
    // Seed 000's C at 115 ms: timeout 60 ms. Its connect limit is apart, and shorter.
    let c = Policy::optional("C", ms(60), ms(25)).with_connect(ms(20));
    let deadline = Deadline::after(Instant::ZERO, ms(200));
    let limits = call_timeout(&c, deadline, Instant::from_millis(115), ms(20))
        .limits()
        .unwrap();
    assert_eq!(limits.connect, ms(20));
    let listener = listener();
    let stream = connect(&listener.local_addr().unwrap(), &limits).unwrap();
    assert_eq!(stream.read_timeout().unwrap(), Some(limits.timeout));
    assert_eq!(stream.write_timeout().unwrap(), Some(limits.timeout));
}

#[test]
fn each_read_gets_only_what_is_left_of_the_attempt() {
    // A plan's step decided at 0 ms: B gets 120 ms (a multiple of every kernel's timer tick,
    // so the socket reports it back exactly).
    let b = Policy::required("B", ms(120), ms(30));
    let mut plan: Plan<'_, 1> = Plan::new(Deadline::after(Instant::ZERO, ms(200)), ms(20));
    let step = plan.then(&b).unwrap();
    let clock = ManualClock::new();
    let limits = plan.decide(step, clock.now()).limits().unwrap();
    let listener = listener();
    let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    apply(&stream, &limits).unwrap();
    assert_eq!(stream.read_timeout().unwrap(), Some(ms(120)));

    // 60 ms into the attempt, the next read may wait only the 60 ms left.
    clock.advance(ms(60));
    assert_eq!(
        arm_read(&stream, limits.until, clock.now()).unwrap(),
        ms(60)
    );
    assert_eq!(stream.read_timeout().unwrap(), Some(ms(60)));

    // At the attempt's end: no read at all, and the socket's limit is left as it was.
    clock.advance(ms(60));
    let err = arm_read(&stream, limits.until, clock.now()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_eq!(stream.read_timeout().unwrap(), Some(ms(60)));
}

#[test]
fn a_zero_connect_limit_fails_at_once_instead_of_waiting_forever() {
    let a = Policy::required("A", ms(50), ms(10)).with_connect(ms(0));
    let deadline = Deadline::after(Instant::ZERO, ms(200));
    let limits = call_timeout(&a, deadline, Instant::ZERO, ms(20))
        .limits()
        .unwrap();
    let listener = listener();
    let err = connect(&listener.local_addr().unwrap(), &limits).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
}

//! Properties of the core's protocol rules, over arbitrary bytes: the `grpc-status` table,
//! the server's reading of a request's deadline headers and the answers it makes, what a
//! client sends and which failures it reads as the deadline's, how a response is
//! classified for retrying, and which bytes of a streamed body of messages may be sent.
//!
//! One copy, used by the cargo-fuzz target `protocol` and by the proptest suite that CI runs
//! on stable (`deadline-core/tests/fuzz_protocol.rs`). Each `check_*` function panics when a
//! property fails.

#![allow(dead_code, unreachable_pub)]

use core::time::Duration;

use deadline_core::wire::Admission;
use deadline_core::wire::{
    Answer, Codec, ConnectTimeout, ContentType, Cut, DeadlineHeader, DeadlineMs, Envelopes,
    Failure, GrpcCode, GrpcTimeout, Incoming, Propagation, Protocol, ResponseHead, ServerPolicy,
    WireError, parse_grpc_pushback,
};
use deadline_core::{Deadline, Error, Instant, Outcome, Pushback};

/// The codec the low two bits of `flags` pick.
fn codec(flags: u8) -> Codec {
    match flags & 3 {
        0 => Codec::Proto,
        1 => Codec::Json,
        _ => Codec::Other,
    }
}

/// Splits `data` at `\n` into `n` parts (missing ones empty).
fn parts(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts: Vec<&[u8]> = data.split(|b| *b == b'\n').take(n).collect();
    parts.resize(n, &[]);
    parts
}

/// A little-endian `u64` from up to 8 bytes of `data` at `at`.
fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    for (slot, byte) in word.iter_mut().zip(data.iter().skip(at)) {
        *slot = *byte;
    }
    u64::from_le_bytes(word)
}

/// Whether `text` is printable ASCII without `%` (a valid `grpc-message` as it is).
fn printable(text: &[u8]) -> bool {
    text.iter().all(|b| (0x20..0x7f).contains(b) && *b != b'%')
}

/// `GrpcCode::parse` on `data`: never a panic; a code exactly when the trimmed value is 1 to
/// 3 ASCII digits spelling 0 to 16; every code reads back from its number; every name is
/// ASCII, and Connect's HTTP status of every code is a 2xx, 4xx or 5xx.
pub fn check_grpc_status(data: &[u8]) {
    let trimmed = data.trim_ascii();
    let spelled = (!trimmed.is_empty()
        && trimmed.len() <= 3
        && trimmed.iter().all(u8::is_ascii_digit))
    .then(|| {
        trimmed
            .iter()
            .fold(0u32, |n, d| n * 10 + u32::from(d - b'0'))
    });
    match GrpcCode::parse(data) {
        Some(code) => assert_eq!(spelled, Some(u32::from(code.as_u8()))),
        None => assert!(spelled.is_none_or(|n| n > 16)),
    }
    for code in GrpcCode::ALL {
        assert_eq!(
            GrpcCode::parse(code.as_u8().to_string().as_bytes()),
            Some(code)
        );
        assert!(code.name().is_ascii() && code.connect_name().is_ascii());
        assert!(matches!(code.connect_http_status(), 200 | 400..=599));
    }
}

/// A server's reading of a request whose four deadline headers (each present or not, per a
/// flag bit) and protocol come from `data`.
///
/// - Never a panic.
/// - The budget is the shortest of the headers present, each decoded on its own; when one
///   cannot be decoded, the answer is 400 naming the first such header (in the order
///   `grpc-timeout`, `connect-timeout-ms`, `x-deadline-ms`, `x-envoy-expected-rq-timeout-ms`),
///   and no deadline is given.
/// - A deadline given is never further away than the server's maximum, less its margin.
/// - Every answer is in the request's protocol, with a status from the error table, and
///   fixed printable text.
pub fn check_server(data: &[u8]) {
    let flags = data.first().copied().unwrap_or(0);
    let rest = data.get(1..).unwrap_or_default();
    let values = parts(rest, 5);
    let grpc = (flags & 1 != 0).then_some(values[0]);
    let connect = (flags & 2 != 0).then_some(values[1]);
    let millis = (flags & 4 != 0).then_some(values[2]);
    let envoy = (flags & 8 != 0).then_some(values[3]);
    let incoming = Incoming::read(|name| match name {
        "grpc-timeout" => grpc,
        "connect-timeout-ms" => connect,
        "x-deadline-ms" => millis,
        "x-envoy-expected-rq-timeout-ms" => envoy,
        _ => None,
    });
    let decoded = [
        grpc.map(|v| {
            (
                "grpc-timeout",
                GrpcTimeout::parse(v.trim_ascii()).map(|t| t.duration()),
            )
        }),
        connect.map(|v| {
            (
                "connect-timeout-ms",
                ConnectTimeout::parse(v.trim_ascii()).map(|t| t.duration()),
            )
        }),
        millis.map(|v| {
            (
                "x-deadline-ms",
                DeadlineMs::parse(v.trim_ascii()).map(|t| t.duration()),
            )
        }),
        envoy.map(|v| {
            (
                "x-envoy-expected-rq-timeout-ms",
                DeadlineMs::parse(v.trim_ascii()).map(|t| t.duration()),
            )
        }),
    ];
    let first_bad = decoded
        .iter()
        .flatten()
        .find_map(|(name, d)| d.err().map(|e| (*name, e)));
    let shortest = decoded.iter().flatten().filter_map(|(_, d)| d.ok()).min();
    match incoming.budget() {
        Ok(budget) => {
            assert!(first_bad.is_none());
            assert_eq!(budget, shortest);
        }
        Err(malformed) => {
            assert_eq!(Some((malformed.header(), malformed.error())), first_bad);
            assert_ne!(malformed.error(), WireError::Spent);
        }
    }
    if let Some(valid) = incoming.shortest_valid() {
        assert_eq!(Some(valid), shortest);
    }

    let protocol = match flags >> 4 & 3 {
        0 if flags & 64 != 0 => Protocol::GrpcWeb {
            text: flags & 128 != 0,
            codec: codec(flags),
        },
        0 => Protocol::Grpc {
            codec: codec(flags),
        },
        1 => Protocol::ConnectUnary,
        2 => Protocol::ConnectStream {
            codec: codec(flags >> 6),
        },
        _ => Protocol::Http,
    };
    let max = Duration::from_millis(u64_at(values[4], 0) % 100_000 + 1);
    let margin = Duration::from_micros(u64_at(values[4], 8) % 50_000);
    let mut policy = ServerPolicy::new(Propagation::DEFAULT.with_max(max), Duration::from_secs(1))
        .with_reply_margin(margin);
    if flags & 128 != 0 {
        policy = policy.with_admission(Admission::new(Duration::from_millis(20)));
    }
    // The request arrived at `arrived` and is judged `waited` later (it waited for the
    // server to be ready to take it).
    let arrived = Instant::from_micros(u64_at(values[4], 16) % (1 << 60));
    let waited = Duration::from_micros(u64_at(values[4], 24) % 200_000);
    let now = arrived + waited;
    let admission = flags & 128 != 0;
    match policy.accept(protocol, incoming, arrived, now, None) {
        Ok(deadline) => {
            assert!(first_bad.is_none());
            assert!(deadline.remaining(now) <= max.saturating_sub(margin).max(Duration::ZERO));
            assert!(!deadline.is_expired(now));
        }
        Err(answer) => {
            assert_eq!(answer.protocol(), protocol);
            assert!(matches!(
                answer.error(),
                Error::MalformedDeadline | Error::DeadlineExceeded | Error::Shed
            ));
            assert_eq!(
                answer.error() == Error::MalformedDeadline,
                first_bad.is_some()
            );
            check_answer_shape(&answer);
        }
    }
    // Which decision, from the headers decoded one by one above: the earliest of them (or
    // the default budget) up to the maximum, from the arrival, less the margin; refused as
    // the deadline's once that has passed, shed only by an admission rule, accepted
    // otherwise with exactly that deadline.
    if first_bad.is_none() {
        let budget = shortest.unwrap_or(Duration::from_secs(1)).min(max);
        let expected = Deadline::after(arrived, budget).shortened_by(margin);
        let decided = policy.accept(protocol, incoming, arrived, now, None);
        if expected.is_expired(now) {
            assert_eq!(decided.map_err(|a| a.error()), Err(Error::DeadlineExceeded));
        } else if admission && expected.remaining(now) < Duration::from_millis(20) {
            assert_eq!(decided.map_err(|a| a.error()), Err(Error::Shed));
        } else {
            assert_eq!(decided.map_err(|a| a.error()), Ok(expected));
        }
    }
}

/// An answer's shape: its status, its body and its texts, in its protocol.
fn check_answer_shape(answer: &Answer) {
    let message = answer.message();
    assert!(printable(message.as_bytes()) && !message.is_empty());
    let content_type = match answer.content_type() {
        ContentType::Fixed(fixed) => fixed,
        ContentType::Request { fallback } => {
            // Only a codec the answer cannot name repeats the request's own type, which read
            // as this protocol; its fallback is the protocol's, with protobuf.
            assert!(answer.protocol().answer_repeats_content_type());
            let read = Protocol::read(
                || None,
                |name| (name == "content-type").then_some(fallback.as_bytes()),
            );
            let proto = match answer.protocol() {
                Protocol::Grpc { .. } => Protocol::Grpc {
                    codec: Codec::Proto,
                },
                Protocol::GrpcWeb { text, .. } => Protocol::GrpcWeb {
                    text,
                    codec: Codec::Proto,
                },
                Protocol::ConnectStream { .. } => Protocol::ConnectStream {
                    codec: Codec::Proto,
                },
                other => panic!("{other:?} repeats no content type"),
            };
            assert_eq!(read, proto);
            return check_protocol_shape(answer, Some(fallback));
        }
    };
    assert!(!answer.protocol().answer_repeats_content_type());
    if !matches!(answer.protocol(), Protocol::Http | Protocol::ConnectUnary) {
        // The answer's content type is the request's protocol and codec, as its client
        // checks before it reads the status.
        let read = Protocol::read(
            || None,
            |name| (name == "content-type").then_some(content_type.as_bytes()),
        );
        assert_eq!(read, answer.protocol());
    }
    check_protocol_shape(answer, Some(content_type));
}

/// An answer's status and body, in its protocol; and its `content_type`, when it has one of
/// its own.
fn check_protocol_shape(answer: &Answer, content_type: Option<&str>) {
    let message = answer.message();
    let body = answer.body();
    match answer.protocol() {
        Protocol::Grpc { .. } | Protocol::GrpcWeb { .. } => {
            assert_eq!(answer.status(), 200);
            assert_eq!(answer.grpc_status(), Some(answer.error().grpc_code()));
            assert!(body.is_empty());
            assert!(content_type.is_none_or(|fixed| fixed.starts_with(
                if matches!(answer.protocol(), Protocol::GrpcWeb { .. }) {
                    "application/grpc-web"
                } else {
                    "application/grpc"
                }
            )));
        }
        Protocol::Http => {
            assert_eq!(answer.status(), answer.error().http_status());
            assert_eq!(body.as_bytes(), [message.as_bytes(), b"\n"].concat());
        }
        Protocol::ConnectUnary => {
            assert_eq!(
                answer.status(),
                answer.error().grpc_code().connect_http_status()
            );
            assert_eq!(answer.status(), answer.error().http_status());
            let prefix = format!(
                r#"{{"code":"{}","message":""#,
                answer.error().grpc_code().connect_name()
            );
            assert!(body.as_str().starts_with(&prefix) && body.as_str().ends_with(r#""}"#));
        }
        Protocol::ConnectStream { .. } => {
            assert_eq!(answer.status(), 200);
            let bytes = body.as_bytes();
            assert_eq!(bytes[0], 0x02);
            let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
            assert_eq!(len, bytes.len() - 5);
            assert!(bytes[5..].starts_with(br#"{"error":{"code":""#));
        }
        _ => panic!("a protocol this property does not know"),
    }
}

/// What a client sends on a request made at an instant, with a deadline, an allowance and the
/// deadline headers already on it, all from `data`; and which failures it reads as the
/// deadline's.
///
/// - Never a panic.
/// - Nothing is sent when the time left less the allowance is zero, or a timeout already on
///   the request is zero, or a millisecond header to write cannot carry what is left.
/// - What is sent is never more than the time left less the allowance, nor more than a
///   timeout already on the request; each header value decodes back to at most that.
/// - Every deadline header the request carries is written again (a longer one, or one that
///   cannot be read), with the header chosen: none tells more than is left.
/// - What the next service was told ends where the earliest header value says, from the
///   instant it was sent: not where the unrounded time left would.
/// - The call is bounded no later than the request's deadline, and no later than what was
///   sent plus the allowance.
/// - A failure of the deadline's shape is the deadline's exactly when it arrives with the time
///   sent run out or within the allowance of it; any other failure never is.
/// - A server's failure window with the same allowance holds every failure the client takes
///   for its deadline's, and a request it does not send for want of time: when what it tells
///   comes from the time left, for a budget under 27 hours.
pub fn check_send(data: &[u8]) {
    let now = Instant::from_micros(u64_at(data, 0) >> (data.get(24).copied().unwrap_or(0) % 64));
    let budget =
        Duration::from_micros(u64_at(data, 8) >> (data.get(25).copied().unwrap_or(0) % 64));
    let allowance = Duration::from_micros(u64_at(data, 16) % 20_000);
    let carried = data.get(26).copied().unwrap_or(0);
    // A timeout already on the request, as its caller's `grpc-timeout`; a day in Envoy's
    // header; an `x-deadline-ms` that cannot be read.
    let already = (carried & 1 != 0)
        .then(|| {
            let d = u64_at(data, 27) >> (data.get(35).copied().unwrap_or(0) % 64);
            GrpcTimeout::from_duration(Duration::from_micros(d)).ok()
        })
        .flatten();
    let envoy = carried & 2 != 0;
    let unreadable = carried & 4 != 0;
    let incoming = Incoming::read(|name| match name {
        "grpc-timeout" => already.as_ref().map(GrpcTimeout::as_bytes),
        "x-envoy-expected-rq-timeout-ms" => envoy.then_some(&b"86400000"[..]),
        "x-deadline-ms" => unreadable.then_some(&b"soon"[..]),
        _ => None,
    });
    let header = match data.get(36).copied().unwrap_or(0) % 4 {
        0 => DeadlineHeader::GrpcTimeout,
        1 => DeadlineHeader::DeadlineMs,
        2 => DeadlineHeader::Both,
        _ => DeadlineHeader::ConnectTimeout,
    };
    // The headers to write: the one chosen, and every one already there.
    let mut written = match header {
        DeadlineHeader::GrpcTimeout => vec!["grpc-timeout"],
        DeadlineHeader::DeadlineMs => vec!["x-deadline-ms"],
        DeadlineHeader::Both => vec!["grpc-timeout", "x-deadline-ms"],
        _ => vec!["connect-timeout-ms"],
    };
    for (present, name) in [
        (already.is_some(), "grpc-timeout"),
        (envoy, "x-envoy-expected-rq-timeout-ms"),
        (unreadable, "x-deadline-ms"),
    ] {
        if present && !written.contains(&name) {
            written.push(name);
        }
    }
    let hop = Propagation::DEFAULT.with_allowance(allowance);
    let request = Deadline::after(now, budget);
    let left = request.remaining(now).saturating_sub(allowance);
    let shortest = [
        already.map(|t| t.duration()),
        envoy.then_some(Duration::from_millis(86_400_000)),
    ]
    .into_iter()
    .flatten()
    .min();
    let can_send = left.min(shortest.unwrap_or(Duration::MAX));
    // A server's failure window, with the same allowance, holds every failure a client layer
    // takes for its deadline's, and a request it does not send for want of time: when what it
    // tells comes from the time left (no shorter timeout already on the request), for a budget
    // under 27 hours (a header's unit is then a millisecond at most).
    let window = ServerPolicy::new(hop, Duration::from_secs(1)).failure_window();
    let from_time_left =
        shortest.is_none_or(|shortest| shortest > left) && left < Duration::from_millis(99_999_999);
    match hop.send(request, now, incoming, header) {
        Err(error) => {
            assert_eq!(error, WireError::Spent);
            let millis = written.iter().any(|name| *name != "grpc-timeout");
            assert!(can_send.is_zero() || (millis && can_send < Duration::from_millis(1)));
            if from_time_left {
                assert!(window.is_deadline_failure(request, now));
            }
        }
        Ok(out) => {
            assert!(!can_send.is_zero());
            let mut names = Vec::new();
            let mut told = Duration::MAX;
            for (name, value) in out.headers() {
                names.push(name);
                let sent = match name {
                    "grpc-timeout" => GrpcTimeout::parse(value).unwrap().duration(),
                    "x-deadline-ms" | "x-envoy-expected-rq-timeout-ms" => {
                        DeadlineMs::parse(value).unwrap().duration()
                    }
                    "connect-timeout-ms" => ConnectTimeout::parse(value).unwrap().duration(),
                    other => panic!("an unknown header {other}"),
                };
                assert!(
                    sent <= can_send && !sent.is_zero(),
                    "{name} {sent:?} {can_send:?}"
                );
                told = told.min(sent);
            }
            names.sort_unstable();
            written.sort_unstable();
            assert_eq!(names, written);
            let sent = out.sent();
            assert_eq!(sent.until(), now.saturating_add(told));
            if from_time_left {
                assert!(
                    sent.running_out_from() >= window.starts(request),
                    "{:?} {:?}",
                    sent.running_out_from(),
                    window.starts(request)
                );
            }
            assert!(sent.deadline() <= request);
            assert!(sent.deadline().instant() <= sent.until().saturating_add(allowance));
            let at = Instant::from_micros(u64_at(data, 37));
            let running_out = Deadline::at(sent.until()).remaining(at) <= allowance;
            assert_eq!(sent.is_running_out(at), running_out);
            assert_eq!(
                sent.is_deadline_failure(Failure::Transport, at),
                running_out
            );
            let ok = ResponseHead::read(200, |_| None);
            assert!(!sent.is_deadline_failure(Failure::Response(ok), at));
        }
    }
}

/// How a response whose status and headers come from `data` is classified.
///
/// - Never a panic.
/// - A gRPC response's status in its head rules: `OK` (or none in the head) is an answer,
///   `UNAVAILABLE` and `RESOURCE_EXHAUSTED` are retried (after any pushback), `CANCELLED` is
///   retried and `DEADLINE_EXCEEDED` is a timeout unless a pushback says not to retry,
///   `UNKNOWN`, `INTERNAL`,
///   `DATA_LOSS` or one that cannot be read is the server broken, any other ends the call.
///   Without gRPC, the HTTP status rules: 1xx-3xx are answers, 500/502/503/504/408/429 are
///   retried, 501, 505 and any other 4xx end the call, any other 5xx is the server broken.
/// - The deadline's shape: gRPC `CANCELLED`, `DEADLINE_EXCEEDED`, `UNAVAILABLE` without a
///   pushback; HTTP 408, 502, 503, 504 without `Retry-After`.
pub fn check_response(data: &[u8]) {
    let status = u16::from_le_bytes([
        data.first().copied().unwrap_or(0),
        data.get(1).copied().unwrap_or(0),
    ]) % 600;
    let flags = data.get(2).copied().unwrap_or(0);
    let values = parts(data.get(3..).unwrap_or_default(), 3);
    let grpc = flags & 1 != 0;
    let head = ResponseHead::read(status, |name| match name {
        "content-type" if grpc => Some(&b"application/grpc"[..]),
        "grpc-status" if flags & 2 != 0 => Some(values[0]),
        "grpc-retry-pushback-ms" if flags & 4 != 0 => Some(values[1]),
        "retry-after" if flags & 8 != 0 => Some(values[2]),
        _ => None,
    });
    assert_eq!(head.is_grpc(), grpc);
    let outcome = head.classify();
    let code = (grpc && flags & 2 != 0).then(|| GrpcCode::parse(values[0]));
    match code {
        Some(Some(GrpcCode::Ok)) => assert_eq!(outcome, None),
        // The server may have acted on the request: only its "do not retry" is heard.
        Some(Some(code @ (GrpcCode::DeadlineExceeded | GrpcCode::Cancelled))) => {
            let expected =
                if flags & 4 != 0 && parse_grpc_pushback(values[1]) == Pushback::DontRetry {
                    Outcome::Pushback(Pushback::DontRetry)
                } else if code == GrpcCode::Cancelled {
                    Outcome::Failed
                } else {
                    Outcome::TimedOut
                };
            assert_eq!(outcome, Some(expected));
        }
        Some(Some(GrpcCode::Unavailable | GrpcCode::ResourceExhausted)) => {
            let expected = if flags & 4 != 0 {
                Outcome::Pushback(parse_grpc_pushback(values[1]))
            } else {
                Outcome::Failed
            };
            assert_eq!(outcome, Some(expected));
        }
        // The server failed (a status that is not a code: tonic reads it as `UNKNOWN`).
        Some(Some(GrpcCode::Unknown | GrpcCode::Internal | GrpcCode::DataLoss) | None) => {
            assert_eq!(outcome, Some(Outcome::Broken));
        }
        Some(Some(_)) => assert_eq!(outcome, Some(Outcome::Fatal)),
        None => match status {
            504 => assert_eq!(outcome, Some(Outcome::TimedOut)),
            500 | 502 | 503 | 408 | 429 => {
                assert!(matches!(
                    outcome,
                    Some(Outcome::Failed | Outcome::Pushback(_))
                ));
            }
            400..=499 | 501 | 505 => assert_eq!(outcome, Some(Outcome::Fatal)),
            500..=599 => assert_eq!(outcome, Some(Outcome::Broken)),
            _ => assert_eq!(outcome, None),
        },
    }
    let shaped = match code {
        Some(Some(code)) => {
            matches!(
                code,
                GrpcCode::Cancelled | GrpcCode::DeadlineExceeded | GrpcCode::Unavailable
            ) && flags & 4 == 0
        }
        Some(None) => false,
        None => matches!(status, 408 | 502 | 503 | 504) && flags & 8 == 0,
    };
    assert_eq!(head.is_deadline_shaped(), shaped);
    assert_eq!(Failure::Response(head).is_deadline_shaped(), shaped);
}

/// A streamed body of messages, read frame by frame (`Envelopes`): the first byte says how
/// many frames (up to 8), the next ones how long each is; the rest is the body, any bytes,
/// read as Connect streaming (whose last message has flag `0x02`).
///
/// - Each frame sends at most its own bytes, and what has been sent is always the body's
///   first bytes.
/// - While what was sent ends between messages, it is exactly the messages that have ended
///   (found by walking the envelopes' lengths from the start), and a cut ends the way the
///   protocol says, or with nothing added after an end-stream message.
/// - Otherwise (a message longer than `Envelopes::HOLD_AT_MOST` has begun), every byte read
///   has been sent, and a cut is a reset.
pub fn check_envelopes(data: &[u8]) {
    let (frames, rest) = data
        .split_first()
        .map_or((0, &[][..]), |(n, r)| (*n % 9, r));
    let (sizes, body) = rest.split_at(usize::from(frames).min(rest.len()));
    // Where the whole envelopes end, and their flags, walking their lengths from the start.
    let mut ends = vec![(0, 0u8)];
    while let Some(prefix) = body
        .get(ends[ends.len() - 1].0..)
        .and_then(|at| at.get(..5))
    {
        let len = u32::from_be_bytes(prefix[1..].try_into().unwrap());
        let end = ends[ends.len() - 1].0 + 5 + len as usize;
        if end > body.len() {
            break;
        }
        ends.push((end, prefix[0]));
    }
    let protocol = Protocol::ConnectStream {
        codec: Codec::Proto,
    };
    let mut envelopes = Envelopes::of(protocol).unwrap();
    let (mut read, mut sent) = (0, 0);
    let mut split = sizes.iter().map(|s| usize::from(*s)).chain([usize::MAX]);
    while read < body.len() {
        let size = split.next().unwrap_or(usize::MAX).min(body.len() - read);
        let frame = &body[read..read + size];
        let send = envelopes.read(frame);
        assert!(send <= frame.len());
        if send > 0 {
            sent = read + send;
        }
        read += size;
        if envelopes.sent_whole_messages() {
            let (whole, flags) = *ends.iter().rev().find(|&&(end, _)| end <= read).unwrap();
            assert_eq!(sent, whole, "after {read} bytes");
            let ended = whole > 0 && flags & 0x02 != 0;
            let cut = if ended { Cut::Ended } else { protocol.cut() };
            assert_eq!(envelopes.cut(protocol), cut);
        } else {
            assert_eq!(sent, read);
            assert_eq!(envelopes.cut(protocol), Cut::Reset);
        }
    }
}

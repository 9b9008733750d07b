//! The headers of an `http` message as the core reads them: by name, the first value's bytes;
//! and a `Retry-After` date, which the core does not read.

use deadline_core::wire::{
    CONNECT_PROTOCOL_VERSION, CONNECT_TIMEOUT_MS, CONTENT_ENCODING, CONTENT_TYPE,
    ENVOY_EXPECTED_RQ_TIMEOUT_MS, ENVOY_UPSTREAM_RQ_TIMEOUT_MS, GRPC_MESSAGE,
    GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS, GRPC_TIMEOUT, RETRY_AFTER, X_DEADLINE_MS,
};
use deadline_core::{Outcome, Pushback};
use http::{HeaderMap, HeaderName, HeaderValue};
use std::time::SystemTime;

/// Every name the core reads or writes, as a `HeaderName` made once: looking a header up by a
/// `HeaderName` hashes it, where looking it up by a `&str` first parses and validates the name
/// (about 200 instructions, on every request, for each name).
static NAMES: [HeaderName; 12] = [
    HeaderName::from_static(CONTENT_TYPE),
    HeaderName::from_static(CONTENT_ENCODING),
    HeaderName::from_static(CONNECT_PROTOCOL_VERSION),
    HeaderName::from_static(GRPC_TIMEOUT),
    HeaderName::from_static(CONNECT_TIMEOUT_MS),
    HeaderName::from_static(X_DEADLINE_MS),
    HeaderName::from_static(ENVOY_EXPECTED_RQ_TIMEOUT_MS),
    HeaderName::from_static(ENVOY_UPSTREAM_RQ_TIMEOUT_MS),
    HeaderName::from_static(GRPC_STATUS),
    HeaderName::from_static(GRPC_MESSAGE),
    HeaderName::from_static(GRPC_RETRY_PUSHBACK_MS),
    HeaderName::from_static(RETRY_AFTER),
];

/// The `HeaderName` of one of the core's names, if it is one of [`NAMES`].
fn known(name: &str) -> Option<&'static HeaderName> {
    NAMES.iter().find(|known| known.as_str() == name)
}

/// The names the layers read from a request ([`Protocol::read`], [`Incoming::read`] and, for
/// a request about to be sent, [`Incoming::read_outgoing`]), in the order of [`Scanned`]'s
/// values.
///
/// [`Protocol::read`]: deadline_core::wire::Protocol::read
/// [`Incoming::read`]: deadline_core::wire::Incoming::read
/// [`Incoming::read_outgoing`]: deadline_core::wire::Incoming::read_outgoing
///
/// Inlined into the scan and the lookups: with a seventh name it was left out of line, and a
/// request through `Router::layer(DeadlineLayer)` took about 230 instructions more in process
/// (`bash scripts/instructions.sh axum_request_deadline_layer`).
#[inline]
fn scanned_index(name: &str) -> Option<usize> {
    match name {
        CONTENT_TYPE => Some(0),
        CONNECT_PROTOCOL_VERSION => Some(1),
        GRPC_TIMEOUT => Some(2),
        CONNECT_TIMEOUT_MS => Some(3),
        X_DEADLINE_MS => Some(4),
        ENVOY_EXPECTED_RQ_TIMEOUT_MS => Some(5),
        ENVOY_UPSTREAM_RQ_TIMEOUT_MS => Some(6),
        _ => None,
    }
}

/// The first value of each header the layers read from a request, found in one pass over a
/// request's headers: a request carries few headers, and comparing each one's name with
/// these (by length first) costs far less than one hash lookup per name.
pub(crate) struct Scanned<'a> {
    values: [Option<&'a [u8]>; 7],
}

impl<'a> Scanned<'a> {
    /// Reads `headers` once.
    pub(crate) fn new(headers: &'a HeaderMap) -> Self {
        let mut values = [None; 7];
        for (name, value) in headers {
            if let Some(slot) = scanned_index(name.as_str()).and_then(|i| values.get_mut(i)) {
                // The first value of a header sent more than once, as `HeaderMap::get` gives.
                slot.get_or_insert(value.as_bytes());
            }
        }
        Scanned { values }
    }

    /// Looks up one of the headers read, by its lowercase name, for the core's readers; any
    /// other name is absent.
    pub(crate) fn lookup(&self) -> impl FnMut(&'static str) -> Option<&'a [u8]> + '_ {
        |name| scanned_index(name).and_then(|i| self.values.get(i).copied().flatten())
    }
}

/// Looks up a header of `headers` by its lowercase name, for the core's readers
/// ([`Incoming::read`](deadline_core::wire::Incoming::read) and the like).
pub(crate) fn lookup<'a>(
    headers: &'a HeaderMap,
) -> impl FnMut(&'static str) -> Option<&'a [u8]> + 'a {
    move |name| {
        let value = match known(name) {
            Some(name) => headers.get(name),
            None => headers.get(name),
        };
        value.map(HeaderValue::as_bytes)
    }
}

/// Sets `name` to `value` in `headers`. The core's values are ASCII digits, a unit letter or
/// fixed printable text, always valid header values; one that were not would be left out.
pub(crate) fn set(headers: &mut HeaderMap, name: &'static str, value: &[u8]) {
    if let Ok(value) = HeaderValue::from_bytes(value) {
        match known(name) {
            Some(name) => headers.insert(name.clone(), value),
            None => headers.insert(name, value),
        };
    }
}

/// `outcome` of a 429 or 503 (`status`, with `headers`) whose `Retry-After` is an HTTP date,
/// which the core does not read (it reads no wall clock): the server's pushback until that
/// date on the system clock. A date already past (or a server clock behind this one) says
/// nothing: a plain failure, and the policy's backoff. Any other outcome as it is.
pub(crate) fn dated(outcome: Outcome, status: u16, headers: &HeaderMap) -> Outcome {
    if outcome != Outcome::Failed || !matches!(status, 429 | 503) {
        return outcome;
    }
    let date = headers
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| httpdate::parse_http_date(value.trim()).ok());
    match date.and_then(|date| date.duration_since(SystemTime::now()).ok()) {
        Some(wait) if !wait.is_zero() => Outcome::Pushback(Pushback::After(wait)),
        _ => outcome,
    }
}

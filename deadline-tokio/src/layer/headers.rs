//! The headers of an `http` message as the core reads them: by name, the first value's bytes.

use http::{HeaderMap, HeaderValue};

/// Looks up a header of `headers` by its lowercase name, for the core's readers
/// ([`Incoming::read`](deadline_core::wire::Incoming::read) and the like).
pub(crate) fn lookup<'a>(
    headers: &'a HeaderMap,
) -> impl FnMut(&'static str) -> Option<&'a [u8]> + 'a {
    move |name| headers.get(name).map(HeaderValue::as_bytes)
}

/// Sets `name` to `value` in `headers`. The core's values are ASCII digits, a unit letter or
/// fixed printable text, always valid header values; one that were not would be left out.
pub(crate) fn set(headers: &mut HeaderMap, name: &'static str, value: &[u8]) {
    if let Ok(value) = HeaderValue::from_bytes(value) {
        headers.insert(name, value);
    }
}

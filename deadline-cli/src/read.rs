//! Reading an input file as text, up to a size: a path that names something endless
//! (`/dev/zero`) or a log far larger than any sample is refused before it fills the memory.

use std::io::Read;
use std::path::Path;

/// The largest file the command reads: 256 MiB. Ten million latencies, the most a sample may
/// hold ([`MAX_CALLS`](crate::sample::MAX_CALLS)), fit in well under half of it at one per line, and
/// far less written as repeats (`8 x 45`).
pub(crate) const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// The text of the file at `path`, or why it cannot be had: the system's error, a file over
/// [`MAX_FILE_BYTES`] (found after reading one byte more than that, whatever the file is), or
/// text that is not UTF-8.
pub(crate) fn read_text(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    read_limited(file, MAX_FILE_BYTES)
}

/// At most `limit` bytes of `reader`, as text.
fn read_limited(reader: impl Read, limit: u64) -> Result<String, String> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "over {} MiB, more than the command reads",
            limit / (1024 * 1024)
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (a byte that is not, at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn a_file_at_the_limit_is_read_and_one_byte_more_is_refused() {
        let at_limit = vec![b'1'; MIB as usize];
        assert_eq!(
            read_limited(&at_limit[..], MIB).unwrap().len(),
            MIB as usize
        );
        let over = vec![b'1'; MIB as usize + 1];
        let e = read_limited(&over[..], MIB).unwrap_err();
        assert_eq!(e, "over 1 MiB, more than the command reads");
    }

    #[test]
    fn an_endless_source_is_refused_after_the_limit() {
        // `std::io::repeat` never ends, as `/dev/zero` does not: the read stops one byte past
        // the limit.
        let e = read_limited(std::io::repeat(b'0'), MIB).unwrap_err();
        assert!(e.starts_with("over 1 MiB"), "{e}");
    }

    #[test]
    fn text_that_is_not_utf8_is_named_so() {
        let e = read_limited(&b"12\n\xff\n"[..], MIB).unwrap_err();
        assert_eq!(e, "not UTF-8 text (a byte that is not, at offset 3)");
    }
}

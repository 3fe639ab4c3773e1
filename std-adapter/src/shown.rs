//! Paths as every message shows them (errors, the CLI's lines and logs, the SIGBUS report).
//! A path holding a control character (a newline, an ESC that starts a terminal escape
//! sequence) would break the line or drive the terminal; one that is not UTF-8 would show
//! `U+FFFD` where its bytes are. Such a path is shown as git shows it: in double quotes, with
//! `\n`, `\t`, `\r`, `\\` and `\"` escaped, and every other byte of a control character or
//! of no UTF-8 character as `\xNN` (ESC is `\x1b`, the C1 control U+009B `\xc2\x9b`, a
//! stray byte `\xff`), so that the text names the path's bytes exactly. Any other path is
//! shown as it is, and the empty path as `""`.

use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `path` for a message (see the module docs).
pub(crate) fn path(path: &Path) -> Shown<'_> {
    Shown(path.as_os_str().as_bytes())
}

/// A path's bytes, shown as the module docs say.
pub(crate) struct Shown<'a>(&'a [u8]);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_bytes(self.0, |s| f.write_str(s))
    }
}

/// Writes `bytes`, a path's, to `w` in pieces as the module docs say. It allocates nothing
/// and calls nothing but `w`, so the SIGBUS handler uses it too.
pub(crate) fn write_bytes<E>(
    bytes: &[u8],
    mut w: impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    let plain = bytes.utf8_chunks().all(|c| {
        c.invalid().is_empty()
            && !c.valid().starts_with('"')
            && !c.valid().contains(char::is_control)
    });
    if plain
        && !bytes.is_empty()
        && let Ok(s) = std::str::from_utf8(bytes)
    {
        return w(s);
    }
    w("\"")?;
    let mut buf = [0u8; 4];
    for chunk in bytes.utf8_chunks() {
        let mut rest = chunk.valid();
        while let Some(at) = rest.find(|c: char| c.is_control() || c == '"' || c == '\\') {
            w(&rest[..at])?;
            let c = rest[at..].chars().next().unwrap_or_default();
            match c {
                '\n' => w("\\n")?,
                '\t' => w("\\t")?,
                '\r' => w("\\r")?,
                '"' => w("\\\"")?,
                '\\' => w("\\\\")?,
                c => {
                    let mut utf8 = [0u8; 4];
                    for &b in c.encode_utf8(&mut utf8).as_bytes() {
                        w(hex(b, &mut buf))?;
                    }
                }
            }
            rest = &rest[at + c.len_utf8()..];
        }
        w(rest)?;
        for &b in chunk.invalid() {
            w(hex(b, &mut buf))?;
        }
    }
    w("\"")
}

/// `\xNN`: `b` in lowercase hex, in `buf` (without allocating: the SIGBUS handler calls
/// this).
fn hex(b: u8, buf: &mut [u8; 4]) -> &str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    *buf = [
        b'\\',
        b'x',
        HEX[usize::from(b >> 4)],
        HEX[usize::from(b & 0xf)],
    ];
    // Only ASCII was written.
    std::str::from_utf8(buf).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    fn shown(bytes: &[u8]) -> String {
        path(Path::new(OsStr::from_bytes(bytes))).to_string()
    }

    #[test]
    fn a_plain_path_is_shown_as_it_is() {
        assert_eq!(shown(b"/dev/shm/ticks"), "/dev/shm/ticks");
        assert_eq!(shown("/dev/shm/tïcks é".as_bytes()), "/dev/shm/tïcks é");
        assert_eq!(shown(b"/a\\b \"c\""), "/a\\b \"c\"");
        assert_eq!(shown(b""), "\"\"");
    }

    /// A newline or an ESC in a path neither ends the line nor reaches the terminal.
    #[test]
    fn control_characters_are_escaped_in_quotes() {
        assert_eq!(
            shown(b"/dev/shm/a\nb\x1b[2Jc"),
            "\"/dev/shm/a\\nb\\x1b[2Jc\""
        );
        assert_eq!(shown(b"\t\r\x00\x7f"), "\"\\t\\r\\x00\\x7f\"");
        assert_eq!(shown("a\u{9b}b".as_bytes()), "\"a\\xc2\\x9bb\"");
        // Once quoted, a backslash or quote of the path's own is escaped, so the text is
        // unambiguous; so is a path that starts with a quote.
        assert_eq!(shown(b"a\\n\"\n"), "\"a\\\\n\\\"\\n\"");
        assert_eq!(shown(b"\"x"), "\"\\\"x\"");
        for s in [
            shown(b"/dev/shm/a\nb\x1b[2Jc"),
            shown(b"\x1b\x9b\xc2\x9b\n"),
        ] {
            assert!(!s.contains(char::is_control), "{s:?}");
        }
    }

    /// Bytes that are not UTF-8 are shown as bytes, not as U+FFFD: the file can be found.
    #[test]
    fn bytes_that_are_not_utf8_are_shown_as_bytes() {
        assert_eq!(
            shown(b"/dev/shm/\xff\xfe-ring"),
            "\"/dev/shm/\\xff\\xfe-ring\""
        );
        assert_eq!(shown(b"\xe2\x82"), "\"\\xe2\\x82\"");
    }

    /// The byte writer gives the Display text, piece by piece.
    #[test]
    fn the_byte_writer_matches_the_display() {
        let path = b"/x\n\xff\"y";
        let mut v = String::new();
        write_bytes(path, |s| {
            v.push_str(s);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(v, shown(path));
    }
}

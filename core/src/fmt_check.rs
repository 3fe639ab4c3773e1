//! Test support for the error-formatting tests of both crates (std-adapter includes this
//! file by path): hostile field values, a check that every variant has a sample, and a
//! check that an error's text shows the values it carries.
// Each crate's tests use a part of it.
#![allow(dead_code)]

extern crate std;

use std::collections::BTreeSet;
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

/// Hostile `u64` field values; tests pair `U64[i]` with `U64[4 - i]` so two fields differ.
pub(crate) const U64: [u64; 5] = [0, 1, u64::MAX - 1, 1 << 63, u64::MAX];
/// Hostile `u32` field values, in the order of [`U64`].
pub(crate) const U32: [u32; 5] = [0, 1, u32::MAX - 1, 1 << 31, u32::MAX];
/// Hostile `usize` field values, in the order of [`U64`].
pub(crate) const USIZE: [usize; 5] = [0, 1, usize::MAX - 1, 1 << (usize::BITS - 1), usize::MAX];
/// Hostile `u16` field values, in the order of [`U64`].
pub(crate) const U16: [u16; 5] = [0, 1, u16::MAX - 1, 1 << 15, u16::MAX];

/// Index pairs `(i, 4 - i)` into the hostile values, so that two fields of a sample differ.
pub(crate) fn pairs() -> impl Iterator<Item = (usize, usize)> {
    (0..U64.len()).map(|i| (i, U64.len() - 1 - i))
}

/// [`check`] of each of `samples`.
pub(crate) fn check_each<E: core::error::Error + 'static>(samples: &[E], hidden: &[&str]) {
    for e in samples {
        check(e, hidden);
    }
}

/// Asserts `samples` hold every variant of their type. `index` numbers the variants
/// `0..count` with an exhaustive `match`, so a variant added later does not compile until it
/// is numbered, and then fails here until it has a sample.
pub(crate) fn assert_every_variant<E: core::fmt::Debug>(
    samples: &[E],
    count: usize,
    index: fn(&E) -> usize,
) {
    let mut seen = BTreeSet::new();
    for e in samples {
        let i = index(e);
        assert!(
            i < count,
            "{e:?} is variant {i}, not below the count {count}"
        );
        seen.insert(i);
    }
    let missing: Vec<usize> = (0..count).filter(|i| !seen.contains(i)).collect();
    assert!(missing.is_empty(), "no sample of variants {missing:?}");
}

/// Formats `e` with `{}` and `{:?}`, and every cause of its `source()` chain with `{}`, and
/// checks the texts: none is empty or holds a `{` or `}` left from a format string, and every
/// number and plain string `{:?}` shows appears in `{}` (a number in decimal or as `0x` hex),
/// except the values of the fields named in `hidden`. Returns the `{}` text.
pub(crate) fn check(e: &(dyn core::error::Error + 'static), hidden: &[&str]) -> String {
    let shown = e.to_string();
    let debug = format!("{e:?}");
    assert!(!debug.is_empty(), "empty Debug text");
    plain_text(&shown, &debug);
    let in_shown = numbers_shown(&shown);
    for (field, n) in numbers_debugged(&debug) {
        if !hidden.contains(&field) {
            assert!(
                in_shown.contains(&n),
                "{debug}: {field} {n} is not in {shown:?}"
            );
        }
    }
    for (field, s) in strings_debugged(&debug) {
        if !hidden.contains(&field) {
            assert!(
                shown.contains(s),
                "{debug}: {field} {s:?} is not in {shown:?}"
            );
        }
    }
    let mut cause = e.source();
    while let Some(c) = cause {
        plain_text(&c.to_string(), &format!("{c:?}"));
        cause = c.source();
    }
    shown
}

fn plain_text(shown: &str, debug: &str) {
    assert!(!shown.trim().is_empty(), "{debug}: empty Display text");
    // Two single-char searches (memchr), not one of a char set: that one decodes every char
    // and took seconds of a debug build's tests over the 64 KiB paths of std-adapter's.
    assert!(
        !shown.contains('{') && !shown.contains('}'),
        "{debug}: a brace left in {shown:?}"
    );
}

/// The numbers in a `{}` text: runs of decimal digits, and of hex digits after `0x`.
fn numbers_shown(text: &str) -> BTreeSet<u128> {
    let b = text.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        let word_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if !b[i].is_ascii_digit() || word_before {
            i += 1;
            continue;
        }
        let hex = b[i] == b'0' && b.get(i + 1) == Some(&b'x');
        let start = if hex { i + 2 } else { i };
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_digit() || hex && b[end].is_ascii_hexdigit()) {
            end += 1;
        }
        if let Ok(n) = u128::from_str_radix(&text[start..end], if hex { 16 } else { 10 }) {
            out.insert(n);
        }
        i = end.max(i + 1);
    }
    out
}

/// The field whose value starts at `at` in a `{:?}` text: the name before the last `: `.
fn field_at(debug: &str, at: usize) -> &str {
    let Some(colon) = debug[..at].rfind(": ") else {
        return "";
    };
    let name_start = debug[..colon]
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |p| p + 1);
    &debug[name_start..colon]
}

/// The numbers a `{:?}` text shows (not digits inside a word such as `u64`, a string or
/// `1.5s`), each with its field.
fn numbers_debugged(debug: &str) -> Vec<(&str, u128)> {
    let b = debug.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut in_string) = (0, false);
    while i < b.len() {
        match b[i] {
            b'\\' if in_string => i += 2,
            b'"' => {
                in_string = !in_string;
                i += 1;
            }
            c if c.is_ascii_digit() && !in_string => {
                let start = i;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.';
                let inside_word = start > 0 && word(b[start - 1]) || i < b.len() && word(b[i]);
                if !inside_word {
                    out.push((field_at(debug, start), debug[start..i].parse().unwrap()));
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// The strings a `{:?}` text shows without escapes, each with its field.
fn strings_debugged(debug: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = 0;
    while let Some(open) = debug[rest..].find('"').map(|p| rest + p) {
        let mut close = open + 1;
        let b = debug.as_bytes();
        while close < b.len() && b[close] != b'"' {
            close += if b[close] == b'\\' { 2 } else { 1 };
        }
        let s = &debug[open + 1..close.min(debug.len())];
        if !s.contains('\\') {
            out.push((field_at(debug, open), s));
        }
        rest = close + 1;
        if rest >= debug.len() {
            break;
        }
    }
    out
}

#[test]
fn the_checks_see_numbers_and_strings() {
    let shown = numbers_shown("a 12 of u64 0xff, 0x0000000a; 2^61");
    assert_eq!(shown.into_iter().collect::<Vec<_>>(), [2, 10, 12, 61, 255]);
    let d = r#"X { a: 5, b: Some(7), path: "/t/9\xFF", op: "open", w: 1.5s, g: [1, 2] }"#;
    assert_eq!(
        numbers_debugged(d),
        [("a", 5), ("b", 7), ("g", 1), ("g", 2)]
    );
    assert_eq!(strings_debugged(d), [("op", "open")]);
}

//! A look at a query's text before the parser sees it: one pass over the bytes, counting
//! tokens and the nesting of braces, brackets and parentheses, so that what parsing costs is
//! bounded by the limits and not by what a body of 8 MiB (which variables may fill) could hold.
//! The scan follows GraphQL's lexical grammar only as far as counting needs: strings and
//! comments are skipped whole (a brace inside them is text), everything else is a token.

use async_graphql::ServerError;

use super::limits::{DOCUMENT_TOO_LARGE, TOO_DEEP, coded_error, figure};
use crate::api::Limits;

/// The text's size, tokens and nesting within the limits: its tokens; else the error that
/// refuses it.
pub fn check(limits: &Limits, query: &str) -> Result<usize, ServerError> {
    if query.len() > limits.max_query_bytes {
        return Err(coded_error(
            DOCUMENT_TOO_LARGE,
            format!(
                "the query text of {} bytes exceeds the limit of {} (--max-query-bytes)",
                figure(query.len()),
                figure(limits.max_query_bytes)
            ),
        ));
    }
    let mut scan = Scan::default();
    let bytes = query.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        at = scan.next(bytes, at);
        if scan.tokens > limits.max_query_tokens {
            return Err(coded_error(
                DOCUMENT_TOO_LARGE,
                format!(
                    "the query has more than {} tokens (--max-query-tokens)",
                    figure(limits.max_query_tokens)
                ),
            ));
        }
        if scan.depth > limits.max_query_nesting {
            return Err(coded_error(
                TOO_DEEP,
                format!(
                    "the query nests braces, brackets or parentheses more than {} deep \
                     (--max-query-nesting)",
                    limits.max_query_nesting
                ),
            ));
        }
    }
    Ok(scan.tokens)
}

#[derive(Default)]
struct Scan {
    tokens: usize,
    /// Open braces, brackets and parentheses.
    depth: usize,
}

impl Scan {
    /// Reads the token or ignored text starting at `at`; where the next one starts.
    fn next(&mut self, bytes: &[u8], at: usize) -> usize {
        let rest = &bytes[at..];
        match rest[0] {
            // Ignored: white space, commas, line ends, a byte order mark's bytes.
            b' ' | b'\t' | b'\n' | b'\r' | b',' | 0xEF | 0xBB | 0xBF => at + 1,
            b'#' => at + line_end(rest),
            b'"' => {
                self.tokens += 1;
                if rest.starts_with(b"\"\"\"") {
                    at + block_string_end(rest)
                } else {
                    at + string_end(rest)
                }
            }
            b'{' | b'[' | b'(' => {
                self.tokens += 1;
                self.depth += 1;
                at + 1
            }
            b'}' | b']' | b')' => {
                self.tokens += 1;
                self.depth = self.depth.saturating_sub(1);
                at + 1
            }
            b'.' if rest.starts_with(b"...") => {
                self.tokens += 1;
                at + 3
            }
            b'_' | b'a'..=b'z' | b'A'..=b'Z' => {
                self.tokens += 1;
                at + run(rest, |b| b == b'_' || b.is_ascii_alphanumeric())
            }
            b'-' | b'0'..=b'9' => {
                self.tokens += 1;
                at + number_end(rest)
            }
            // Punctuators, and anything the parser will refuse.
            _ => {
                self.tokens += 1;
                at + 1
            }
        }
    }
}

/// Length of the run of bytes that pass `pass` (at least one: the first byte passed).
fn run(rest: &[u8], pass: impl Fn(u8) -> bool) -> usize {
    rest.iter()
        .position(|&b| !pass(b))
        .unwrap_or(rest.len())
        .max(1)
}

/// Length of a number: `-`, digits, a fraction, an exponent (so `1-2-3`, which GraphQL reads
/// as three values, is three tokens).
fn number_end(rest: &[u8]) -> usize {
    let digits = |from: usize| {
        from + rest[from.min(rest.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut end = digits(usize::from(rest[0] == b'-'));
    if rest.get(end) == Some(&b'.') {
        end = digits(end + 1);
    }
    if matches!(rest.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(rest.get(end + 1), Some(b'+' | b'-')));
        end = digits(end + 1 + sign);
    }
    end.max(1)
}

/// Length of a comment, up to its line's end.
fn line_end(rest: &[u8]) -> usize {
    rest.iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .unwrap_or(rest.len())
}

/// Length of a `"…"` string with its quotes (to the line's end if it is not closed: the
/// parser refuses it).
fn string_end(rest: &[u8]) -> usize {
    let mut i = 1;
    while i < rest.len() {
        match rest[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            b'\n' | b'\r' => return i,
            _ => i += 1,
        }
    }
    rest.len()
}

/// Length of a `"""…"""` block string with its quotes (`\"""` inside does not close it).
fn block_string_end(rest: &[u8]) -> usize {
    let mut i = 3;
    while i < rest.len() {
        if rest[i..].starts_with(b"\\\"\"\"") {
            i += 4;
        } else if rest[i..].starts_with(b"\"\"\"") {
            return i + 3;
        } else {
            i += 1;
        }
    }
    rest.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(query: &str) -> Scan {
        let mut scan = Scan::default();
        let mut most = 0;
        let mut at = 0;
        while at < query.len() {
            at = scan.next(query.as_bytes(), at);
            most = most.max(scan.depth);
        }
        scan.depth = most;
        scan
    }

    fn code(err: ServerError) -> String {
        err.extensions.unwrap().get("code").unwrap().to_string()
    }

    #[test]
    fn tokens_and_nesting_are_counted_as_graphql_reads_them() {
        let s = scan("query Q($a: [Int!] = [1, -2.5e3]) { f(a: $a) @skip(if: false) { ...F } }");
        // query Q ( $ a : [ Int ! ] = [ 1 -2.5e3 ] ) { f ( a : $ a ) @ skip ( if : false ) { ... F } }
        assert_eq!(s.tokens, 36);
        assert_eq!(s.depth, 2);
        let s = scan("{ a(s: \"{{{\\\"[[[\") # {{{{ \n b(t: \"\"\"{{ \\\"\"\" [[\"\"\") }");
        assert_eq!(s.tokens, 14, "strings and comments are one token or none");
        assert_eq!(s.depth, 2, "braces inside strings and comments do not nest");
        assert_eq!(scan(",,, \u{feff}\t\r\n").tokens, 0);
        assert_eq!(scan("[1-2-3]").tokens, 5, "values written without spaces");
        assert_eq!(scan("[0-0-0-0-0-0]").tokens, 8);
        assert_eq!(scan("[-1.5e-3 2E+7 -0]").tokens, 5);
        assert_eq!(scan("\"unclosed { {\n}").tokens, 2);
    }

    #[test]
    fn each_limit_refuses_with_its_code() {
        let limits = Limits {
            max_query_bytes: 100,
            max_query_tokens: 10,
            max_query_nesting: 3,
            ..Limits::default()
        };
        assert!(check(&limits, "{ a { b { c } } }").is_ok());
        let err = check(&limits, &"#".repeat(101)).unwrap_err();
        assert_eq!(code(err), "\"DOCUMENT_TOO_LARGE\"");
        let err = check(&limits, "{ a b c d e f g h i j }").unwrap_err();
        assert_eq!(code(err), "\"DOCUMENT_TOO_LARGE\"");
        let err = check(&limits, "{ a { b { c { d } } } }").unwrap_err();
        assert_eq!(code(err), "\"QUERY_TOO_DEEP\"");
        let err = check(&limits, "{ a(x: [[[1]]]) }").unwrap_err();
        assert_eq!(
            code(err),
            "\"QUERY_TOO_DEEP\"",
            "lists in arguments nest too"
        );
    }
}

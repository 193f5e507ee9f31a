//! The words of a search, read the way PostgreSQL's `websearch_to_tsquery` reads them, and
//! refused by their shape when the search could not be served by the full-text indexes or
//! would cost far more than its results: checked here, before any SQL runs (the embedded
//! database has no statement timeout to fall back on).
//!
//! The syntax (PostgreSQL 14 and later): words separated by spaces must all match; `"…"` is a
//! phrase (its words in that order; an unclosed quote runs to the end); `or` between two terms
//! matches either side (`and` binds tighter: `a b or c` is `(a b) or c`); a `-` where a term
//! starts excludes that term. The characters `! & | ( ) <` only separate terms. Each term's
//! text then goes through the text search parser, which finds words of letters and digits
//! and drops what is neither, HTML-like markup (`<b>`, `&amp;`) and a URL's protocol (`http://`).
//!
//! Which shapes the GIN indexes on the search documents serve: a search is read from the index
//! when every alternative of its `or` needs at least one word to be present (the index lists
//! the documents holding a word). An alternative made only of excluded words (`-foo`, `foo or
//! -bar`, `-"a phrase"`) matches nearly every document, so PostgreSQL reads every session and
//! timeline event (`querytree` of such a query is `T`: nothing the index can use). A search
//! with no word at all matches nothing. Past those, the cost of a search that uses the index
//! still grows with its number of words (each is checked and ranked on every document found)
//! and with its alternatives (each adds to the planner's estimate of the rows found; past about
//! 24 it reads the timeline events table whole instead of its index).

use crate::error::{Error, Result};
use crate::store::write::check_text;

/// Longest search, in characters: words to find, not a document.
pub const MAX_SEARCH_CHARS: usize = 1000;

/// Most words in a search, counting every word of a phrase, every excluded word and every
/// repetition: each is matched and ranked against every document found, so a search's cost
/// grows with it (300 copies of a common word cost 11 times one, 32 about 1.8 times, measured
/// over 100,000 sessions). Enough for a pasted error message in quotes.
pub const MAX_SEARCH_WORDS: usize = 32;

/// Most alternatives a search joins with `or`: each widens the planner's estimate of what the
/// search finds, and from about 24 (even of words no document holds) it reads the timeline
/// events table whole rather than its index; 8 keeps well clear of that.
pub const MAX_SEARCH_ALTERNATIVES: usize = 8;

/// Longest term between spaces, in characters. PostgreSQL silently ignores a word over 2,047
/// bytes, which would turn `longword -other` into a search of only excluded words; 200
/// characters are at most 800 bytes, and longer than any name, URL or identifier worth
/// searching for.
pub const MAX_SEARCH_TERM_CHARS: usize = 200;

/// The words of a search, checked: index-friendly and within the limits. Only
/// [`SearchWords::parse`] makes one, so no search reaches the database unchecked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SearchWords(String);

impl SearchWords {
    /// Reads `text` as a search (the filter's `search`), or says which rule it breaks. Every
    /// kind of whitespace separates words (PostgreSQL versions disagree on which characters
    /// are spaces, so they are all sent as plain spaces).
    pub fn parse(text: &str) -> Result<Self> {
        check_text("search", text, MAX_SEARCH_CHARS)?;
        let text: String = text
            .trim()
            .chars()
            .map(|c| if c.is_whitespace() { ' ' } else { c })
            .collect();
        if text.is_empty() {
            return Err(Error::bad_input("`search` needs at least one word"));
        }
        if let Some(term) = text
            .split(' ')
            .find(|t| t.chars().count() > MAX_SEARCH_TERM_CHARS)
        {
            return Err(Error::bad_input(format!(
                "`search` has a term of {} characters (\"{}…\"); at most {MAX_SEARCH_TERM_CHARS} \
                 are allowed between spaces",
                term.chars().count(),
                term.chars().take(20).collect::<String>()
            )));
        }
        let query = Query::read(&text);
        if query.most_exclusions > 1 {
            return Err(Error::bad_input(
                "`search` has `-` twice in a row: one `-` excludes the term after it",
            ));
        }
        let word_count: usize = query.terms().map(|t| words(t.text).count()).sum();
        if word_count > MAX_SEARCH_WORDS {
            return Err(Error::bad_input(format!(
                "`search` has {word_count} words; at most {MAX_SEARCH_WORDS} are allowed (every word \
                 of a phrase, every excluded and every repeated word counts)"
            )));
        }
        if query.alternatives.len() > MAX_SEARCH_ALTERNATIVES {
            return Err(Error::bad_input(format!(
                "`search` joins {} alternatives with `or`; at most {MAX_SEARCH_ALTERNATIVES} \
                 are allowed",
                query.alternatives.len()
            )));
        }
        if !query.terms().any(|t| finds_a_word(t.text)) {
            return Err(Error::bad_input(
                "`search` has no word to find: words are letters and digits (punctuation, \
                 markup such as `<b>` and a URL's `http://` are not searched)",
            ));
        }
        if !query.alternatives.iter().all(|terms| {
            terms
                .iter()
                .any(|t| t.excluded == 0 && finds_a_word(t.text))
        }) {
            let rule = if query.alternatives.len() == 1 {
                "`search` needs a word to find that is not excluded with `-`"
            } else {
                "each alternative of `or` in `search` needs a word to find that is not \
                 excluded with `-`"
            };
            return Err(Error::bad_input(format!(
                "{rule}: a search of only excluded words matches nearly everything and would \
                 read every session"
            )));
        }
        Ok(Self(text))
    }

    /// The text to give `websearch_to_tsquery`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A term of a search: the text the text search parser reads words from, and how many `-`
/// stand before it (excluded when any).
#[derive(Debug, PartialEq)]
struct Term<'a> {
    text: &'a str,
    excluded: usize,
}

/// A search as `websearch_to_tsquery` reads it: alternatives (joined by `or`), each of terms
/// that must all hold.
#[derive(Debug)]
struct Query<'a> {
    alternatives: Vec<Vec<Term<'a>>>,
    /// The longest run of `-` in a row (each is a `NOT` PostgreSQL stacks, and it refuses
    /// more than 31 with an internal error).
    most_exclusions: usize,
}

/// Characters `websearch_to_tsquery` skips between terms (they end a word).
fn separates(c: char) -> bool {
    matches!(c, '!' | '&' | '|' | '(' | ')' | '<' | ' ')
}

impl<'a> Query<'a> {
    /// Mirrors PostgreSQL's tokenizer (`gettoken_query_websearch` over text whose spaces are
    /// all ' '): where a term is expected, `-` excludes, `"` opens a phrase and separators are
    /// skipped, anything else starts a word that runs to a separator, a quote or a colon; where
    /// an operator is expected, `or` before a further term is `or`, separators are skipped, and
    /// anything else starts the next term (an implied `and`).
    fn read(text: &'a str) -> Self {
        let mut query = Query {
            alternatives: vec![Vec::new()],
            most_exclusions: 0,
        };
        let mut rest = text;
        let mut expecting_term = true;
        let mut excluded = 0;
        while let Some(c) = rest.chars().next() {
            if !expecting_term {
                if let Some(after) = or_operator(rest) {
                    query.alternatives.push(Vec::new());
                    rest = after;
                    expecting_term = true;
                } else if separates(c) {
                    rest = &rest[1..];
                } else {
                    expecting_term = true;
                }
                continue;
            }
            let (term, after) = match c {
                '-' => {
                    excluded += 1;
                    query.most_exclusions = query.most_exclusions.max(excluded);
                    rest = &rest[1..];
                    continue;
                }
                c if separates(c) => {
                    rest = &rest[1..];
                    continue;
                }
                '"' => {
                    let inside = &rest[1..];
                    let end = inside.find('"').unwrap_or(inside.len());
                    let after = inside[end..].strip_prefix('"').unwrap_or(&inside[end..]);
                    (&inside[..end], after)
                }
                c => {
                    let end = rest[c.len_utf8()..]
                        .find(|c: char| separates(c) || c == '"' || c == ':')
                        .map_or(rest.len(), |i| i + c.len_utf8());
                    (&rest[..end], &rest[end..])
                }
            };
            let alternative = query.alternatives.last_mut().expect("one alternative");
            alternative.push(Term {
                text: term,
                excluded,
            });
            excluded = 0;
            rest = after;
            expecting_term = false;
        }
        query
    }

    fn terms(&self) -> impl Iterator<Item = &Term<'a>> {
        self.alternatives.iter().flatten()
    }
}

/// The rest of the text after an `or` operator at its start: `or` (any case) not followed by
/// a letter, digit, `-` or `_`, with a further term after it; otherwise `or` is a word. A
/// non-ASCII character after `or` counts as ending it, which reads `or` as an operator at
/// least wherever PostgreSQL does (an alternative asks more of a search than a word).
fn or_operator(text: &str) -> Option<&str> {
    let head = text.get(..2)?;
    let after = &text[2..];
    let next = after.chars().next()?;
    let ends_the_word = !(next.is_ascii_alphanumeric() || next == '-' || next == '_');
    let term_follows = after[next.len_utf8()..].chars().any(|c| c != ' ');
    (head.eq_ignore_ascii_case("or") && ends_the_word && term_follows).then_some(after)
}

/// The words a term may hold, as the search counts them: runs of ASCII letters and digits
/// and of any other non-space characters that are not ASCII (the embedded database reads
/// every non-ASCII character as a letter), split at ASCII punctuation. Never fewer than the
/// words PostgreSQL finds there.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_ascii() && !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// Whether the text search parser surely finds a word in a term: a run of letters (of any
/// script) or digits 0-9, before any `<` or `&` (where HTML-like markup may begin and hide
/// what follows), and not a URL's protocol (the `http` of `http://`, which it drops).
fn finds_a_word(text: &str) -> bool {
    let before_markup = &text[..text.find(['<', '&']).unwrap_or(text.len())];
    let mut rest = before_markup;
    while let Some(start) = rest.find(is_letter_or_digit) {
        let run = &rest[start..];
        let end = run
            .find(|c: char| !is_letter_or_digit(c))
            .unwrap_or(run.len());
        if !run[end..].starts_with("://") {
            return true;
        }
        rest = &run[end..];
    }
    false
}

/// A character every database this runs on reads as part of a word.
fn is_letter_or_digit(c: char) -> bool {
    c.is_alphabetic() || c.is_ascii_digit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(text: &str) -> String {
        match SearchWords::parse(text) {
            Ok(words) => panic!("{text:?} was accepted as {words:?}"),
            Err(Error::BadUserInput(message)) => message,
            Err(other) => panic!("{text:?}: {other:?}"),
        }
    }

    fn shape(text: &str) -> Vec<Vec<(&str, usize)>> {
        Query::read(text)
            .alternatives
            .iter()
            .map(|terms| terms.iter().map(|t| (t.text, t.excluded)).collect())
            .collect()
    }

    #[test]
    fn terms_phrases_alternatives_and_exclusions_are_read_as_postgresql_reads_them() {
        assert_eq!(shape("disk -test"), [vec![("disk", 0), ("test", 1)]]);
        assert_eq!(
            shape("oom or crash"),
            [vec![("oom", 0)], vec![("crash", 0)]]
        );
        assert_eq!(
            shape("oom OR crash"),
            [vec![("oom", 0)], vec![("crash", 0)]]
        );
        assert_eq!(
            shape("\"exact phrase\" -\"not this\""),
            [vec![("exact phrase", 0), ("not this", 1)]]
        );
        // An unclosed quote runs to the end; a quote ends a word.
        assert_eq!(shape("a\"b -c"), [vec![("a", 0), ("b -c", 0)]]);
        // `or` at either end, or glued to a word, is a word.
        assert_eq!(shape("or foo"), [vec![("or", 0), ("foo", 0)]]);
        assert_eq!(shape("foo or"), [vec![("foo", 0), ("or", 0)]]);
        assert_eq!(shape("foo or-bar"), [vec![("foo", 0), ("or-bar", 0)]]);
        assert_eq!(shape("foo orange"), [vec![("foo", 0), ("orange", 0)]]);
        // Separators end a word, and after one a `-` excludes; within a word it does not.
        assert_eq!(shape("foo!-bar"), [vec![("foo", 0), ("bar", 1)]]);
        assert_eq!(shape("foo(or bar"), [vec![("foo", 0)], vec![("bar", 0)]]);
        assert_eq!(shape("foo-bar"), [vec![("foo-bar", 0)]]);
        assert_eq!(shape("foo:-bar"), [vec![("foo", 0), (":-bar", 0)]]);
        assert_eq!(shape("- foo --bar"), [vec![("foo", 1), ("bar", 2)]]);
    }

    #[test]
    fn everyday_searches_are_accepted() {
        for text in [
            "\"exact phrase\"",
            "oom or crash",
            "disk -test",
            "OOMKilled",
            "error: disk full",
            "10.0.0.1:8080",
            "http://example.com/health",
            "\"connection refused\" -staging or timeout",
            "пожар -тест",
            "日本語",
            "refund-api",
        ] {
            let words = SearchWords::parse(text).unwrap();
            assert_eq!(words.as_str(), text);
        }
        assert_eq!(
            SearchWords::parse(" disk\u{3000}\t-test\n")
                .unwrap()
                .as_str(),
            "disk  -test"
        );
    }

    #[test]
    fn searches_of_only_excluded_words_are_refused() {
        for text in [
            "-foo -bar",
            "-foo",
            "- foo",
            "-\"disk pressure\"",
            "\"<b>\" -foo",
        ] {
            assert!(
                refusal(text).contains("needs a word to find that is not excluded"),
                "{text}"
            );
        }
        for text in [
            "foo or -bar",
            "-foo or bar",
            "\"a b\" or -\"c d\"",
            "foo or !!!",
        ] {
            assert!(refusal(text).contains("each alternative of `or`"), "{text}");
        }
    }

    #[test]
    fn searches_without_a_word_are_refused() {
        for text in [
            "!!!",
            "\"<b></b>\"",
            "\"&amp;\"",
            "\"http://\"",
            "²",
            "😀",
            "-",
            "\"\"",
        ] {
            assert!(refusal(text).contains("no word to find"), "{text}");
        }
        assert!(refusal("   ").contains("at least one word"));
    }

    #[test]
    fn searches_past_the_limits_name_the_rule() {
        let repeated = vec!["oom"; 250].join(" ");
        assert!(refusal(&repeated).contains("250 words; at most 32"));
        let phrase = format!("\"{}\"", vec!["word"; 33].join(" "));
        assert!(refusal(&phrase).contains("33 words"));
        let hyphens = vec!["a"; 33].join("-");
        assert!(refusal(&hyphens).contains("33 words"));
        let alternatives = (0..9).map(|i| format!("w{i}")).collect::<Vec<_>>();
        assert!(refusal(&alternatives.join(" or ")).contains("joins 9 alternatives"));
        assert!(SearchWords::parse(&alternatives[..8].join(" or ")).is_ok());
        assert!(refusal(&"x".repeat(201)).contains("term of 201 characters"));
        assert!(SearchWords::parse(&"x".repeat(200)).is_ok());
        assert!(refusal(&"x ".repeat(501)).contains("at most 1000"));
        assert!(refusal("bar --foo").contains("`-` twice"));
        assert!(refusal("bar - -foo").contains("`-` twice"));
        assert!(refusal("a\0b").contains("NUL"));
    }
}

//! Paging arguments, enforced limits and page info. Cursors (see [`crate::cursor`]) mark an
//! edge's place in its list, so they page on either way, as `after` or `before`, whichever way
//! their page was read.

use async_graphql::connection::PageInfo;

use crate::api::Limits;
use crate::error::{Error, Result};
use crate::store::page::{Page, Slice};

/// Page size used when a client gives neither `first` nor `last`.
pub const DEFAULT_PAGE_SIZE: usize = 20;

/// A connection's paging arguments, as the client gave them.
pub struct PageArgs {
    pub first: Option<i32>,
    pub after: Option<String>,
    pub last: Option<i32>,
    pub before: Option<String>,
}

impl PageArgs {
    /// The slice of the list asked for, its cursors decoded by `decode`: the first `first`
    /// (by default) or the last `last` edges between `after` and `before`. Both sizes at once
    /// are refused: the Relay spec discourages it, and no page answers it usefully.
    pub fn slice<K>(self, limits: &Limits, decode: impl Fn(&str) -> Result<K>) -> Result<Slice<K>> {
        let (size, from_end) = match (self.first, self.last) {
            (Some(_), Some(_)) => {
                return Err(Error::bad_input("give `first` or `last`, not both"));
            }
            (first, None) => (page_size("first", first, limits)?, false),
            (None, last) => (page_size("last", last, limits)?, true),
        };
        Ok(Slice {
            after: self.after.as_deref().map(&decode).transpose()?,
            before: self.before.as_deref().map(&decode).transpose()?,
            size,
            from_end,
        })
    }
}

/// Validates a page size (argument `name`) against the configured maximum.
fn page_size(name: &str, size: Option<i32>, limits: &Limits) -> Result<i64> {
    let max = limits.max_page_size;
    match size {
        None => Ok(DEFAULT_PAGE_SIZE.min(max) as i64),
        Some(n) if n >= 0 && n as usize <= max => Ok(n as i64),
        Some(n) => Err(Error::bad_input(format!(
            "`{name}` must be between 0 and {max} (--max-page-size), got {n}"
        ))),
    }
}

/// A page's edges, each built from a row by `edge`, and where the page is: whether the list
/// holds items before and after it, and its first and last edges' `cursor`s.
pub fn edges_of<R, E>(
    page: Page<R>,
    edge: impl FnMut(R) -> E,
    cursor: fn(&E) -> &String,
) -> (Vec<E>, PageInfo) {
    let edges: Vec<E> = page.rows.into_iter().map(edge).collect();
    let info = PageInfo {
        has_previous_page: page.has_previous,
        has_next_page: page.has_next,
        start_cursor: edges.first().map(cursor).cloned(),
        end_cursor: edges.last().map(cursor).cloned(),
    };
    (edges, info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(first: Option<i32>, last: Option<i32>) -> Result<Slice<String>> {
        let args = PageArgs {
            first,
            after: Some("a".into()),
            last,
            before: None,
        };
        args.slice(&Limits::default(), |c| Ok(c.to_uppercase()))
    }

    #[test]
    fn page_sizes_come_from_first_or_last_within_bounds() {
        let forward = |size| Slice {
            after: Some("A".to_owned()),
            before: None,
            size,
            from_end: false,
        };
        assert_eq!(slice(None, None).unwrap(), forward(20));
        assert_eq!(slice(Some(0), None).unwrap(), forward(0));
        assert_eq!(slice(Some(100), None).unwrap(), forward(100));
        let backward = slice(None, Some(7)).unwrap();
        assert_eq!((backward.size, backward.from_end), (7, true));
        for (first, last, message) in [
            (
                Some(-1),
                None,
                "`first` must be between 0 and 100 (--max-page-size), got -1",
            ),
            (
                Some(101),
                None,
                "`first` must be between 0 and 100 (--max-page-size), got 101",
            ),
            (
                None,
                Some(-1),
                "`last` must be between 0 and 100 (--max-page-size), got -1",
            ),
            (
                None,
                Some(101),
                "`last` must be between 0 and 100 (--max-page-size), got 101",
            ),
            (Some(1), Some(1), "give `first` or `last`, not both"),
        ] {
            let err = slice(first, last).unwrap_err();
            assert!(
                matches!(&err, Error::BadUserInput(m) if m == message),
                "{err}"
            );
        }
    }
}

//! Paging arguments and opaque cursors. Cursors are base64 JSON that name the list they belong
//! to, so a cursor from another list, ordering or session is refused rather than misread. A
//! cursor marks an edge's place in its list, so it pages on either way, as `after` or `before`,
//! whichever way its page was read.

use std::collections::BTreeMap;

use async_graphql::connection::PageInfo;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::Limits;
use crate::error::{Error, Result};
use crate::store::page::Slice;
use crate::store::sessions::{SessionKey, SessionSort, SortValue};

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

/// Page info of a page: its first and last cursors, and whether edges lie before and after it.
pub fn page_info(
    start: Option<&String>,
    end: Option<&String>,
    has_previous_page: bool,
    has_next_page: bool,
) -> PageInfo {
    PageInfo {
        has_previous_page,
        has_next_page,
        start_cursor: start.cloned(),
        end_cursor: end.cloned(),
    }
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Cursor {
    Sessions {
        order: String,
        value: SortValue,
        id: Uuid,
    },
    Timeline {
        session: Uuid,
        seq: i64,
        /// The page's still-streaming events up to `seq`: sequence number → characters read.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        streaming: BTreeMap<i64, i64>,
        /// The stage or execution whose timeline the page was of.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stage: Option<Uuid>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        execution: Option<Uuid>,
    },
}

fn encode(cursor: &Cursor) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(cursor).expect("cursor serializes"))
}

fn decode(cursor: &str) -> Result<Cursor> {
    let invalid = || Error::bad_input(format!("\"{cursor}\" is not a valid cursor"));
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor.trim())
        .map_err(|_| invalid())?;
    serde_json::from_slice(&bytes).map_err(|_| invalid())
}

fn order_name(sort: SessionSort) -> &'static str {
    match sort {
        SessionSort::CreatedAt => "CREATED_AT",
        SessionSort::Status => "STATUS",
        SessionSort::AlertType => "ALERT_TYPE",
        SessionSort::Author => "AUTHOR",
        SessionSort::Duration => "DURATION",
    }
}

/// The cursor of a session in a list ordered by `sort`.
pub fn session_cursor(sort: SessionSort, key: SessionKey) -> String {
    encode(&Cursor::Sessions {
        order: order_name(sort).to_owned(),
        value: key.value,
        id: key.id,
    })
}

/// The position a sessions cursor points at; it must come from a list with the same ordering.
pub fn decode_session_cursor(cursor: &str, sort: SessionSort) -> Result<SessionKey> {
    match decode(cursor)? {
        Cursor::Sessions { order, value, id } => {
            if order != order_name(sort) {
                return Err(Error::bad_input(format!(
                    "cursor was issued for sessions ordered by {order}, not by {}",
                    order_name(sort)
                )));
            }
            if !sort.accepts(&value) {
                return Err(Error::bad_input(format!(
                    "\"{cursor}\" is not a valid cursor"
                )));
            }
            Ok(SessionKey { value, id })
        }
        Cursor::Timeline { .. } => Err(Error::bad_input(
            "cursor belongs to a timeline, not to the sessions list",
        )),
    }
}

/// Where a timeline page stopped: an event, what the page showed of the streaming events up to
/// it, and the view (a stage's or an execution's timeline, or the session's) it was read from.
/// Timelines of a session, its stages and executions share the session-wide sequence numbers,
/// so any of them pages on from `seq`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimelineCursor {
    pub seq: i64,
    pub streaming: BTreeMap<i64, i64>,
    pub stage: Option<Uuid>,
    pub execution: Option<Uuid>,
}

/// The cursor of a timeline event.
pub fn timeline_cursor(session: Uuid, at: &TimelineCursor) -> String {
    encode(&Cursor::Timeline {
        session,
        seq: at.seq,
        streaming: at.streaming.clone(),
        stage: at.stage,
        execution: at.execution,
    })
}

/// The place a timeline cursor points at; it must belong to `session`.
pub fn decode_timeline_cursor(cursor: &str, session: Uuid) -> Result<TimelineCursor> {
    match decode(cursor)? {
        Cursor::Timeline { seq, .. } if seq < 0 => Err(Error::bad_input(format!(
            "\"{cursor}\" is not a valid cursor"
        ))),
        Cursor::Timeline {
            session: s,
            seq,
            streaming,
            stage,
            execution,
        } if s == session => Ok(TimelineCursor {
            seq,
            streaming,
            stage,
            execution,
        }),
        Cursor::Timeline { .. } => Err(Error::bad_input(
            "cursor belongs to the timeline of another session",
        )),
        Cursor::Sessions { .. } => Err(Error::bad_input(
            "cursor belongs to the sessions list, not to a timeline",
        )),
    }
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

    #[test]
    fn cursors_round_trip_and_refuse_foreign_use() {
        let session = Uuid::now_v7();
        let at = TimelineCursor {
            seq: 42,
            streaming: BTreeMap::from([(40, 7)]),
            stage: Some(Uuid::now_v7()),
            execution: None,
        };
        let c = timeline_cursor(session, &at);
        assert_eq!(decode_timeline_cursor(&c, session).unwrap(), at);
        assert!(decode_timeline_cursor(&c, Uuid::now_v7()).is_err());
        assert!(decode_session_cursor(&c, SessionSort::CreatedAt).is_err());

        let key = SessionKey {
            value: SortValue::Text("2024-01-01T00:00:00Z".into()),
            id: session,
        };
        let c = session_cursor(SessionSort::Author, key.clone());
        assert_eq!(decode_session_cursor(&c, SessionSort::Author).unwrap(), key);
        assert!(decode_session_cursor(&c, SessionSort::CreatedAt).is_err());
        assert!(decode_session_cursor("garbage", SessionSort::Author).is_err());
    }

    #[test]
    fn cursors_handed_out_earlier_still_decode_and_are_made_the_same_way() {
        let uuid = |n: u128| Uuid::from_u128(0x0190a0b4_0000_7000_8000_000000000000 | n);
        let timeline = "eyJ0aW1lbGluZSI6eyJzZXNzaW9uIjoiMDE5MGEwYjQtMDAwMC03MDAwLTgwMDAtMDAwMDAwMDAwMDAxIiwic2VxIjo0Miwic3RyZWFtaW5nIjp7IjQwIjo3fSwic3RhZ2UiOiIwMTkwYTBiNC0wMDAwLTcwMDAtODAwMC0wMDAwMDAwMDAwMDIifX0";
        let at = TimelineCursor {
            seq: 42,
            streaming: BTreeMap::from([(40, 7)]),
            stage: Some(uuid(2)),
            execution: None,
        };
        assert_eq!(decode_timeline_cursor(timeline, uuid(1)).unwrap(), at);
        assert_eq!(timeline_cursor(uuid(1), &at), timeline);
        let sessions = "eyJzZXNzaW9ucyI6eyJvcmRlciI6IkRVUkFUSU9OIiwidmFsdWUiOnsiaSI6LTF9LCJpZCI6IjAxOTBhMGI0LTAwMDAtNzAwMC04MDAwLTAwMDAwMDAwMDAwMyJ9fQ";
        let key = SessionKey {
            value: SortValue::Int(-1),
            id: uuid(3),
        };
        assert_eq!(
            decode_session_cursor(sessions, SessionSort::Duration).unwrap(),
            key
        );
        assert_eq!(session_cursor(SessionSort::Duration, key), sessions);
    }
}

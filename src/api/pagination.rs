//! Page sizes and opaque cursors. Cursors are base64 JSON that name the list they belong to,
//! so a cursor from another list, ordering or session is refused rather than misread.

use std::collections::BTreeMap;

use async_graphql::connection::PageInfo;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::Limits;
use crate::error::{Error, Result};
use crate::store::sessions::{SessionKey, SessionSort, SortValue};

/// Page size used when a client gives no `first`.
pub const DEFAULT_PAGE_SIZE: usize = 20;

/// The complexity a page of `first` rows adds: its selection, once per row. The page size is
/// capped (at the default maximum: complexity is computed before the configuration is at hand)
/// because an out-of-range `first` is refused by the resolver with a clearer error.
pub fn complexity_of_page(first: Option<i32>, child_complexity: usize) -> usize {
    let cap = crate::config::DEFAULT_MAX_PAGE_SIZE as i32;
    let rows = first.unwrap_or(DEFAULT_PAGE_SIZE as i32).clamp(0, cap) as usize;
    complexity_of_rows(rows, child_complexity)
}

/// Highest complexity one field reports: far above any sensible limit, and low enough that
/// async-graphql's unchecked sums over a document's fields cannot overflow (nested pages and
/// long `nodes` lists multiply).
const COMPLEXITY_CEILING: usize = 1 << 40;

/// The complexity of `rows` copies of a selection.
pub fn complexity_of_rows(rows: usize, child_complexity: usize) -> usize {
    rows.saturating_mul(child_complexity)
        .saturating_add(1)
        .min(COMPLEXITY_CEILING)
}

/// Validates `first` against the configured maximum.
pub fn page_size(first: Option<i32>, limits: &Limits) -> Result<i64> {
    let max = limits.max_page_size;
    match first {
        None => Ok(DEFAULT_PAGE_SIZE.min(max) as i64),
        Some(n) if n >= 0 && n as usize <= max => Ok(n as i64),
        Some(n) => Err(Error::bad_input(format!(
            "`first` must be between 0 and {max}, got {n}"
        ))),
    }
}

/// Page info of a forward page. `hasPreviousPage` is false, as the Relay spec allows when
/// paginating forwards.
pub fn page_info(start: Option<&String>, end: Option<&String>, has_next_page: bool) -> PageInfo {
    PageInfo {
        has_previous_page: false,
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

    #[test]
    fn page_size_bounds() {
        let limits = Limits::default();
        assert_eq!(page_size(None, &limits).unwrap(), 20);
        assert_eq!(page_size(Some(0), &limits).unwrap(), 0);
        assert_eq!(page_size(Some(100), &limits).unwrap(), 100);
        assert!(page_size(Some(-1), &limits).is_err());
        assert!(page_size(Some(101), &limits).is_err());
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
}

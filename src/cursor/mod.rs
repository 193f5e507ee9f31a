//! Opaque cursors, one format for all of them: base64url JSON naming the list they belong to, so
//! that a cursor from another list, ordering or session is refused rather than misread. Each
//! position type is defined once and serves every place that hands it out (a timeline page's
//! edges and a timeline subscription's updates share [`TimelinePosition`]).

mod timeline;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::sessions::{SessionKey, SessionSort, SortValue};
use crate::store::{MessageKey, RecordKey};
pub use timeline::{EventTypes, LegacyLivePosition, Sent, TimelinePosition, View};

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Cursor {
    Sessions {
        order: String,
        value: SortValue,
        id: Uuid,
    },
    Timeline(TimelinePosition),
    Messages {
        execution: Uuid,
        seq: i64,
    },
    Records {
        at: chrono::DateTime<chrono::Utc>,
        id: Uuid,
    },
    /// A chat in the list of chats by latest activity (`at` is its `updated_at`).
    ChatActivity {
        at: chrono::DateTime<chrono::Utc>,
        id: Uuid,
    },
    /// A question in the list of a chat's questions (`at` is when it was asked).
    ChatQuestions {
        at: chrono::DateTime<chrono::Utc>,
        id: Uuid,
    },
    /// A chain version in the list of chains (`at` is when it was registered).
    Chains {
        at: chrono::DateTime<chrono::Utc>,
        id: Uuid,
    },
    /// An audit record in an audit log (`at` is when it was made).
    Audit {
        at: chrono::DateTime<chrono::Utc>,
        id: Uuid,
    },
    /// A notification in the list of notifications across sessions (`at`: when it was
    /// written).
    Notifications {
        at: chrono::DateTime<chrono::Utc>,
        id: Uuid,
    },
    Events(EventsPosition),
    Feed(FeedPosition),
    /// Timeline subscription cursors handed out before both kinds shared one format: decoded,
    /// never made.
    #[serde(skip_serializing)]
    Live(LegacyLivePosition),
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

/// What a cursor of another kind is, for the error that refuses it.
fn kind_of(cursor: &Cursor) -> &'static str {
    match cursor {
        Cursor::Sessions { .. } => "the sessions list",
        Cursor::Timeline(_) | Cursor::Live(_) => "a timeline",
        Cursor::Messages { .. } => "a list of messages",
        Cursor::Records { .. } => "a list of interactions or of a session's chats",
        Cursor::ChatActivity { .. } => "the list of chats by activity",
        Cursor::ChatQuestions { .. } => "a chat's questions",
        Cursor::Chains { .. } => "the list of chains",
        Cursor::Audit { .. } => "an audit log",
        Cursor::Notifications { .. } => "the list of notifications",
        Cursor::Events(_) => "a session's event stream",
        Cursor::Feed(_) => "the sessions feed",
    }
}

fn order_name(sort: SessionSort) -> &'static str {
    match sort {
        SessionSort::CreatedAt => "CREATED_AT",
        SessionSort::Status => "STATUS",
        SessionSort::AlertType => "ALERT_TYPE",
        SessionSort::Author => "AUTHOR",
        SessionSort::Duration => "DURATION",
        SessionSort::UpdatedAt => "UPDATED_AT",
        SessionSort::CompletedAt => "COMPLETED_AT",
        SessionSort::Relevance => "RELEVANCE",
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
        other => Err(Error::bad_input(format!(
            "cursor belongs to {}, not to the sessions list",
            kind_of(&other)
        ))),
    }
}

/// The cursor of a message in a list of messages (of a stage or an execution: one order).
pub fn message_cursor((execution, seq): MessageKey) -> String {
    encode(&Cursor::Messages { execution, seq })
}

/// The place a message cursor points at.
pub fn decode_message_cursor(cursor: &str) -> Result<MessageKey> {
    match decode(cursor)? {
        Cursor::Messages { execution, seq } => Ok((execution, seq)),
        other => Err(Error::bad_input(format!(
            "cursor belongs to {}, not to a list of messages",
            kind_of(&other)
        ))),
    }
}

/// The cursor of an interaction or chat in a list of them (in time order).
pub fn record_cursor((at, id): RecordKey) -> String {
    encode(&Cursor::Records { at, id })
}

/// The cursor of a chat in the list of chats by latest activity.
pub fn chat_activity_cursor((at, id): RecordKey) -> String {
    encode(&Cursor::ChatActivity { at, id })
}

/// The place a cursor of the chats-by-activity list points at.
pub fn decode_chat_activity_cursor(cursor: &str) -> Result<RecordKey> {
    match decode(cursor)? {
        Cursor::ChatActivity { at, id } => Ok((at, id)),
        other => Err(Error::bad_input(format!(
            "cursor belongs to {}, not to the list of chats by activity",
            kind_of(&other)
        ))),
    }
}

/// The cursor of a question in the list of a chat's questions.
pub fn question_cursor((at, id): RecordKey) -> String {
    encode(&Cursor::ChatQuestions { at, id })
}

/// The place a cursor of a chat's questions points at.
pub fn decode_question_cursor(cursor: &str) -> Result<RecordKey> {
    match decode(cursor)? {
        Cursor::ChatQuestions { at, id } => Ok((at, id)),
        other => Err(Error::bad_input(format!(
            "cursor belongs to {}, not to a chat's questions",
            kind_of(&other)
        ))),
    }
}

/// The cursor of a chain version in the list of chains.
pub fn chain_cursor((at, id): RecordKey) -> String {
    encode(&Cursor::Chains { at, id })
}

/// The place a cursor of the list of chains points at.
pub fn decode_chain_cursor(cursor: &str) -> Result<RecordKey> {
    match decode(cursor)? {
        Cursor::Chains { at, id } => Ok((at, id)),
        other => Err(Error::bad_input(format!(
            "cursor belongs to {}, not to the list of chains",
            kind_of(&other)
        ))),
    }
}

/// The cursor of an audit record in an audit log.
pub fn audit_cursor((at, id): RecordKey) -> String {
    encode(&Cursor::Audit { at, id })
}

/// The place a cursor of an audit log points at.
pub fn decode_audit_cursor(cursor: &str) -> Result<RecordKey> {
    match decode(cursor)? {
        Cursor::Audit { at, id } => Ok((at, id)),
        other => Err(Error::bad_input(format!(
            "cursor belongs to {}, not to an audit log",
            kind_of(&other)
        ))),
    }
}

/// The cursor of a notification in the list of notifications.
pub fn notification_cursor((at, id): RecordKey) -> String {
    encode(&Cursor::Notifications { at, id })
}

/// The place a cursor of the list of notifications points at.
pub fn decode_notification_cursor(cursor: &str) -> Result<RecordKey> {
    match decode(cursor)? {
        Cursor::Notifications { at, id } => Ok((at, id)),
        other => Err(Error::bad_input(format!(
            "cursor belongs to {}, not to the list of notifications",
            kind_of(&other)
        ))),
    }
}

/// The place an interaction or chat cursor points at.
pub fn decode_record_cursor(cursor: &str) -> Result<RecordKey> {
    match decode(cursor)? {
        Cursor::Records { at, id } => Ok((at, id)),
        other => Err(Error::bad_input(format!(
            "cursor belongs to {}, not to a list of interactions or chats",
            kind_of(&other)
        ))),
    }
}

impl TimelinePosition {
    /// The cursor of this position.
    pub fn encode(&self) -> String {
        encode(&Cursor::Timeline(self.clone()))
    }

    /// The position a timeline cursor (of a page's edge or of a subscription's update) stands
    /// for; it must belong to `session`, and is valid (see [`TimelinePosition::resumed_for`] for
    /// the view it may resume).
    pub fn decode(cursor: &str, session: Uuid) -> Result<TimelinePosition> {
        let position = match decode(cursor)? {
            Cursor::Timeline(position) => position,
            Cursor::Live(legacy) => legacy.into(),
            other => {
                return Err(Error::bad_input(format!(
                    "cursor belongs to {}, not to a timeline",
                    kind_of(&other)
                )));
            }
        };
        if position.session != session {
            return Err(Error::bad_input(
                "cursor belongs to the timeline of another session",
            ));
        }
        position.validated(cursor)
    }
}

/// A place in a session's event stream: every event up to `position` was given (or filtered
/// out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsPosition {
    pub session: Uuid,
    pub position: i64,
}

impl EventsPosition {
    /// The cursor of this position.
    pub fn encode(&self) -> String {
        encode(&Cursor::Events(*self))
    }

    /// The position an event stream cursor stands for; it must belong to `session`.
    pub fn decode(cursor: &str, session: Uuid) -> Result<EventsPosition> {
        let position = match decode(cursor)? {
            Cursor::Events(position) if position.position >= 0 => position,
            Cursor::Events(_) => {
                return Err(Error::bad_input(format!(
                    "\"{cursor}\" is not a valid cursor"
                )));
            }
            other => {
                return Err(Error::bad_input(format!(
                    "cursor belongs to {}, not to a session's event stream",
                    kind_of(&other)
                )));
            }
        };
        if position.session != session {
            return Err(Error::bad_input(
                "cursor belongs to the event stream of another session",
            ));
        }
        Ok(position)
    }
}

/// A place in the dashboard feed of every session's status changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedPosition {
    pub position: i64,
}

impl FeedPosition {
    /// The cursor of this position.
    pub fn encode(&self) -> String {
        encode(&Cursor::Feed(*self))
    }

    /// The position a feed cursor stands for.
    pub fn decode(cursor: &str) -> Result<FeedPosition> {
        match decode(cursor)? {
            Cursor::Feed(position) if position.position >= 0 => Ok(position),
            Cursor::Feed(_) => Err(Error::bad_input(format!(
                "\"{cursor}\" is not a valid cursor"
            ))),
            other => Err(Error::bad_input(format!(
                "cursor belongs to {}, not to the sessions feed",
                kind_of(&other)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn uuid(n: u128) -> Uuid {
        Uuid::from_u128(0x0190a0b4_0000_7000_8000_000000000000 | n)
    }

    #[test]
    fn cursors_round_trip_and_refuse_foreign_use() {
        let session = Uuid::now_v7();
        let mut at = TimelinePosition::new(
            session,
            View {
                stage: Some(Uuid::now_v7()),
                ..View::default()
            },
        );
        at.seen = 42;
        at.streaming = BTreeMap::from([(40, 7)]);
        let c = at.encode();
        assert_eq!(TimelinePosition::decode(&c, session).unwrap(), at);
        assert!(TimelinePosition::decode(&c, Uuid::now_v7()).is_err());
        assert!(decode_session_cursor(&c, SessionSort::CreatedAt).is_err());

        let key = SessionKey {
            value: SortValue::Text("2024-01-01T00:00:00Z".into()),
            id: session,
        };
        let c = session_cursor(SessionSort::Author, key.clone());
        assert_eq!(decode_session_cursor(&c, SessionSort::Author).unwrap(), key);
        assert!(decode_session_cursor(&c, SessionSort::CreatedAt).is_err());
        let err = TimelinePosition::decode(&c, session).unwrap_err();
        assert!(err.to_string().contains("sessions list"), "{err}");
        assert!(decode_session_cursor("garbage", SessionSort::Author).is_err());
    }

    #[test]
    fn cursors_handed_out_earlier_still_decode_and_are_made_the_same_way() {
        // A timeline connection cursor: the one format, made byte for byte as before.
        let timeline = "eyJ0aW1lbGluZSI6eyJzZXNzaW9uIjoiMDE5MGEwYjQtMDAwMC03MDAwLTgwMDAtMDAwMDAwMDAwMDAxIiwic2VxIjo0Miwic3RyZWFtaW5nIjp7IjQwIjo3fSwic3RhZ2UiOiIwMTkwYTBiNC0wMDAwLTcwMDAtODAwMC0wMDAwMDAwMDAwMDIifX0";
        let mut at = TimelinePosition::new(
            uuid(1),
            View {
                stage: Some(uuid(2)),
                ..View::default()
            },
        );
        at.seen = 42;
        at.streaming = BTreeMap::from([(40, 7)]);
        assert_eq!(TimelinePosition::decode(timeline, uuid(1)).unwrap(), at);
        assert_eq!(at.encode(), timeline);

        // A timeline subscription cursor of the earlier format: the same facts.
        let live = "eyJsaXZlIjp7InNlc3Npb24iOiIwMTkwYTBiNC0wMDAwLTcwMDAtODAwMC0wMDAwMDAwMDAwMDEiLCJ2aWV3Ijp7InN0YWdlIjoiMDE5MGEwYjQtMDAwMC03MDAwLTgwMDAtMDAwMDAwMDAwMDAyIn0sInNlZW4iOjQyLCJzdHJlYW1pbmciOnsiNDAiOjd9fX0";
        assert_eq!(TimelinePosition::decode(live, uuid(1)).unwrap(), at);

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

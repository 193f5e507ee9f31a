//! Relationships read a page at a time: the children of many parents in one statement, each
//! parent its own slice of a keyset order (read from either end), with how many children it
//! has in all.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::postgres::{PgHasArrayType, PgRow};
use sqlx::{FromRow, Postgres, Row as _};
use uuid::Uuid;

use super::audit::log::AuditRecordRow;
use super::page::{Joined, KeyArrays, Page, PerKey, Slice, either_end};
use super::{
    ChatRow, ChatUserMessageRow, LlmInteractionInPage, McpInteractionInPage, MessageRow, Record,
    Scope, SentMessageRow, Store,
};
use crate::error::Result;

/// One part of a keyset key.
pub trait KeyPart:
    for<'q> sqlx::Encode<'q, Postgres>
    + sqlx::Type<Postgres>
    + PgHasArrayType
    + Clone
    + Eq
    + Hash
    + Send
    + Sync
    + 'static
{
    /// Its SQL type, for the casts of the key arrays.
    const SQL: &'static str;
    /// Below every value of its column.
    fn least() -> Self;
    /// Above every value of its column.
    fn greatest() -> Self;
}

impl KeyPart for Uuid {
    const SQL: &'static str = "uuid";
    fn least() -> Self {
        Uuid::nil()
    }
    fn greatest() -> Self {
        Uuid::max()
    }
}

impl KeyPart for i64 {
    const SQL: &'static str = "bigint";
    fn least() -> Self {
        i64::MIN
    }
    fn greatest() -> Self {
        i64::MAX
    }
}

impl KeyPart for DateTime<Utc> {
    const SQL: &'static str = "timestamptz";
    fn least() -> Self {
        NaiveDate::from_ymd_opt(1, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .expect("a valid date")
            .and_utc()
    }
    fn greatest() -> Self {
        NaiveDate::from_ymd_opt(9999, 12, 31)
            .and_then(|d| d.and_hms_opt(23, 59, 59))
            .expect("a valid date")
            .and_utc()
    }
}

/// A relationship's order: the rows of a table (the record's own, unless another table or a
/// subquery is named) under their parent's column, by two columns that together tell every row
/// apart. `indexed`: an index on `(parent, first, second)` serves it.
struct Keyset {
    table: Option<&'static str>,
    parent: &'static str,
    first: &'static str,
    second: &'static str,
    indexed: bool,
}

/// One page request: a slice of the children of `parent` (of `session`), between two keys,
/// whether to count them all (only when the client selected `totalCount`: a count reads every
/// child of the parent, where a page reads a few), and which payloads to read with them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChildPageKey<A, B> {
    pub session: Uuid,
    pub parent: Uuid,
    pub slice: Slice<(A, B)>,
    pub counted: bool,
    pub payloads: Payloads,
}

/// The large columns a page of interactions reads with its rows when the query selects them,
/// saving the statement that would read them after it: an LLM call's request
/// ([`super::LlmRequestRow`]) and its other payloads ([`super::LlmPayloadRow`],
/// [`super::McpPayloadRow`]). Pages of other records have none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Payloads {
    pub request: bool,
    pub rest: bool,
}

/// A page, and how many children its parent has in all (0 when not counted).
#[derive(Debug, Clone)]
pub struct CountedPage<R> {
    pub page: Page<R>,
    pub total: i64,
}

impl<R> Default for CountedPage<R> {
    fn default() -> Self {
        CountedPage {
            page: Page::default(),
            total: 0,
        }
    }
}

/// A message's place in a list of messages: each agent's conversation whole, agents in the
/// order of their ids (creation order, for the UUIDv7 ids casefile makes); in what an LLM call
/// sent, its position there (its sequence number, for the conversation up to a last message).
pub type MessageKey = (Uuid, i64);

/// A page of the messages of a stage or execution.
pub type MessagePageKey = ChildPageKey<Uuid, i64>;

/// A record's place in a list in time order: when it was stored, then its id.
pub type RecordKey = (DateTime<Utc>, Uuid);

/// A page of a list of records in time order.
pub type RecordPageKey = ChildPageKey<DateTime<Utc>, Uuid>;

/// Messages under their parent's column (a stage's or an execution's), in conversation order.
fn messages_in_order(scope: Scope) -> Keyset {
    Keyset {
        table: None,
        parent: scope.column(),
        first: "execution_id",
        second: "sequence_number",
        indexed: true,
    }
}

/// Records under their parent's column, in time order.
fn in_time_order(parent: &'static str) -> Keyset {
    Keyset {
        table: None,
        parent,
        first: "created_at",
        second: "id",
        indexed: true,
    }
}

impl Store {
    /// Pages of the LLM interactions of sessions, stages or executions, with the payloads
    /// each key asks for.
    pub async fn llm_interaction_pages(
        &self,
        scope: Scope,
        keys: &[RecordPageKey],
    ) -> Result<HashMap<RecordPageKey, CountedPage<Arc<LlmInteractionInPage>>>> {
        self.child_pages(&in_time_order(scope.column()), keys).await
    }

    /// Pages of the MCP interactions of sessions, stages or executions, with their payloads
    /// when a key asks for them.
    pub async fn mcp_interaction_pages(
        &self,
        scope: Scope,
        keys: &[RecordPageKey],
    ) -> Result<HashMap<RecordPageKey, CountedPage<Arc<McpInteractionInPage>>>> {
        self.child_pages(&in_time_order(scope.column()), keys).await
    }

    /// Pages of the chats of sessions that are not deleted.
    pub async fn chat_pages(
        &self,
        keys: &[RecordPageKey],
    ) -> Result<HashMap<RecordPageKey, CountedPage<Arc<ChatRow>>>> {
        let keyset = Keyset {
            table: Some("(SELECT * FROM chats WHERE deleted_at IS NULL)"),
            ..in_time_order("session_id")
        };
        self.child_pages(&keyset, keys).await
    }

    /// Pages of the chats of sessions, the deleted ones too.
    pub async fn chat_pages_with_deleted(
        &self,
        keys: &[RecordPageKey],
    ) -> Result<HashMap<RecordPageKey, CountedPage<Arc<ChatRow>>>> {
        self.child_pages(&in_time_order("session_id"), keys).await
    }

    /// Pages of the questions asked in chats, oldest first (along `chat_user_messages_chat_idx`).
    pub async fn question_pages(
        &self,
        keys: &[RecordPageKey],
    ) -> Result<HashMap<RecordPageKey, CountedPage<Arc<ChatUserMessageRow>>>> {
        self.child_pages(&in_time_order("chat_id"), keys).await
    }

    /// Pages of the audit trails of sessions, oldest first.
    pub async fn session_audit_pages(
        &self,
        keys: &[RecordPageKey],
    ) -> Result<HashMap<RecordPageKey, CountedPage<Arc<AuditRecordRow>>>> {
        let keyset = Keyset {
            table: None,
            parent: "session_id",
            first: "at",
            second: "id",
            indexed: true,
        };
        self.child_pages(&keyset, keys).await
    }

    /// Pages of the messages of stages or executions, one statement for all of them.
    pub async fn message_pages(
        &self,
        scope: Scope,
        keys: &[MessagePageKey],
    ) -> Result<HashMap<MessagePageKey, CountedPage<Arc<MessageRow>>>> {
        self.child_pages(&messages_in_order(scope), keys).await
    }

    /// Pages of the conversations of LLM interactions: exactly the messages sent to the model,
    /// in the order sent ([`SentMessageRow`]), one statement for all of them.
    pub async fn conversation_pages(
        &self,
        keys: &[MessagePageKey],
    ) -> Result<HashMap<MessagePageKey, CountedPage<Arc<SentMessageRow>>>> {
        let keyset = Keyset {
            table: None,
            parent: "interaction_id",
            first: "execution_id",
            second: "position",
            // A view.
            indexed: false,
        };
        self.child_pages(&keyset, keys).await
    }

    /// How PostgreSQL runs the statement of these pages of LLM interactions on the plan it
    /// keeps for it ([`Store::explain_generic`]), for the tests that check which index serves it.
    pub async fn explain_llm_interaction_pages(
        &self,
        scope: Scope,
        keys: &[RecordPageKey],
    ) -> Result<String> {
        self.explain_child_pages::<LlmInteractionInPage, _, _>(&in_time_order(scope.column()), keys)
            .await
    }

    /// The same for pages of MCP interactions.
    pub async fn explain_mcp_interaction_pages(
        &self,
        scope: Scope,
        keys: &[RecordPageKey],
    ) -> Result<String> {
        self.explain_child_pages::<McpInteractionInPage, _, _>(&in_time_order(scope.column()), keys)
            .await
    }

    /// The same for pages of messages.
    pub async fn explain_message_pages(
        &self,
        scope: Scope,
        keys: &[MessagePageKey],
    ) -> Result<String> {
        self.explain_child_pages::<MessageRow, _, _>(&messages_in_order(scope), keys)
            .await
    }

    async fn explain_child_pages<R: Record, A: KeyPart, B: KeyPart>(
        &self,
        keyset: &Keyset,
        keys: &[ChildPageKey<A, B>],
    ) -> Result<String> {
        let (sql, k) = child_pages_statement::<R, A, B>(keyset, keys)?;
        self.explain_page_statement(&sql, k).await
    }

    async fn child_pages<R: Record, A: KeyPart, B: KeyPart>(
        &self,
        keyset: &Keyset,
        keys: &[ChildPageKey<A, B>],
    ) -> Result<HashMap<ChildPageKey<A, B>, CountedPage<Arc<R>>>> {
        struct Row<R> {
            ord: i64,
            total: i64,
            earlier: bool,
            later: bool,
            child: Joined<R>,
        }
        impl<'r, R: Record> FromRow<'r, PgRow> for Row<R> {
            fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
                Ok(Row {
                    ord: row.try_get("ord")?,
                    total: row.try_get::<Option<i64>, _>("total")?.unwrap_or(0),
                    earlier: row.try_get("earlier")?,
                    later: row.try_get("later")?,
                    child: Joined::from_row(row)?,
                })
            }
        }
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let (sql, k) = child_pages_statement::<R, A, B>(keyset, keys)?;
        let arguments = k.into_arguments();
        let rows: Vec<Row<R>> = sqlx::query_as_with(&sql, arguments)
            .fetch_all(self.reader().await?.traced())
            .await?;
        let mut read: Vec<(Vec<Arc<R>>, i64, bool, bool)> =
            keys.iter().map(|_| (Vec::new(), 0, false, false)).collect();
        for row in rows {
            let (children, total, earlier, later) = &mut read[(row.ord - 1) as usize];
            (*total, *earlier, *later) = (row.total, row.earlier, row.later);
            children.extend(row.child.0.map(Arc::new));
        }
        Ok(keys
            .iter()
            .zip(read)
            .map(|(key, (children, total, earlier, later))| {
                let page = Page::new(children, &key.slice, earlier, later);
                (key.clone(), CountedPage { page, total })
            })
            .collect())
    }
}

/// The statement that reads every page of `keys` in `keyset`'s order, and its keys.
fn child_pages_statement<R: Record, A: KeyPart, B: KeyPart>(
    keyset: &Keyset,
    keys: &[ChildPageKey<A, B>],
) -> Result<(String, KeyArrays)> {
    let Keyset {
        table,
        parent,
        first,
        second,
        indexed,
    } = keyset;
    let (a, b) = (A::SQL, B::SQL);
    let table = table.map_or_else(|| R::source(Some("k.session")), Cow::Borrowed);
    let any = |wanted: fn(&ChildPageKey<A, B>) -> bool| keys.iter().any(wanted);
    // Payloads are columns only when a key asks for them, and null for the keys of the
    // batch that did not.
    let mut columns = R::COLUMNS.to_owned();
    let [request, rest] = R::PAYLOADS;
    let with_request = any(|k| k.payloads.request) && !request.is_empty();
    let with_rest = any(|k| k.payloads.rest) && !rest.is_empty();
    let (forward, backward) = (any(|k| !k.slice.from_end), any(|k| k.slice.from_end));
    for (wanted, flag, payload) in [
        (with_request, "with_request", request),
        (with_rest, "with_rest", rest),
    ] {
        for column in payload.iter().filter(|_| wanted) {
            columns.push_str(&format!(
                ", CASE WHEN k.{flag} THEN {column} END AS {column}"
            ));
        }
    }
    // The parent's session is named too (the session's own children need no more).
    let of_parent = if *parent == "session_id" {
        format!("t.{parent} = k.parent")
    } else {
        format!("t.{parent} = k.parent AND t.session_id = k.session")
    };
    // Only what some key of the batch uses is bound and evaluated (PostgreSQL decodes
    // every array it is sent and sets up every part of a plan at each run, used or not):
    // a cursor's flag (whether children lie at or before `after`, and at or after
    // `before`: the nearest one, read along the parent's index) only when a key has that
    // cursor, a count only when a key asked for one, the branch of a direction only when
    // a key reads in it, a payload only when a key selects it. Each page is read from the
    // end it is taken from. The keys are materialized only when a count or a flag is
    // read, so that each is read once per key.
    let has_after = any(|k| k.slice.after.is_some());
    let has_before = any(|k| k.slice.before.is_some());
    let counted = any(|k| k.counted);
    let mut k = KeyArrays::pages(keys.iter().map(|k| (k.parent, k.session, k.slice.read())))?;
    // Absent cursors are the least and greatest keys: each page is one index range
    // (the bounds keep generic plans on the parent's index in its order).
    let cursors = [
        (
            ["after_a", "after_b"],
            (A::least(), B::least()),
            keys.iter()
                .map(|k| k.slice.after.clone())
                .collect::<Vec<_>>(),
        ),
        (
            ["before_a", "before_b"],
            (A::greatest(), B::greatest()),
            keys.iter().map(|k| k.slice.before.clone()).collect(),
        ),
    ];
    for ([name_a, name_b], end, cursors) in cursors {
        let bounds: Vec<(A, B)> = cursors
            .into_iter()
            .map(|cursor| cursor.unwrap_or_else(|| end.clone()))
            .collect();
        k.column(name_a, a, bounds.iter().map(|k| k.0.clone()).collect())?;
        k.column(name_b, b, bounds.into_iter().map(|k| k.1).collect())?;
    }
    let each = |flag: fn(&ChildPageKey<A, B>) -> bool| keys.iter().map(flag);
    k.flag("has_after", has_after, each(|k| k.slice.after.is_some()))?;
    k.flag("has_before", has_before, each(|k| k.slice.before.is_some()))?;
    k.flag("from_end", forward && backward, each(|k| k.slice.from_end))?;
    k.flag("counted", counted, each(|k| k.counted))?;
    k.flag("with_request", with_request, each(|k| k.payloads.request))?;
    k.flag("with_rest", with_rest, each(|k| k.payloads.rest))?;
    // Each bound names the parent first where the parent's index serves the order: only
    // that index can then serve the range, and generic plans read it. (Named only by the
    // equality, a generic plan may read the session's index in the same order and filter:
    // a whole session per page.)
    let (row, parent_bound) = if *indexed && parent != first {
        (format!("t.{parent}, t.{first}, t.{second}"), "k.parent, ")
    } else {
        (format!("t.{first}, t.{second}"), "")
    };
    let bound = |op: &str, [a, b]: [&str; 2]| format!("({row}) {op} ({parent_bound}k.{a}, k.{b})");
    let window = format!(
        "{of_parent} AND {} AND {}",
        bound(">", ["after_a", "after_b"]),
        bound("<", ["before_a", "before_b"])
    );
    let total = PerKey {
        name: "total",
        read: counted.then(|| {
            format!(
                "CASE WHEN k.counted THEN (SELECT count(*) FROM {table} t WHERE {of_parent}) END"
            )
        }),
        otherwise: "NULL::bigint",
    };
    let earlier = PerKey {
        name: "earlier",
        read: has_after.then(|| {
            format!(
                "CASE WHEN k.has_after THEN (SELECT TRUE FROM {table} t WHERE {of_parent} \
                   AND {} ORDER BY t.{first} DESC, t.{second} DESC LIMIT 1) IS NOT NULL \
                 ELSE FALSE END",
                bound("<=", ["after_a", "after_b"])
            )
        }),
        otherwise: "FALSE",
    };
    let later = PerKey {
        name: "later",
        read: has_before.then(|| {
            format!(
                "CASE WHEN k.has_before THEN (SELECT TRUE FROM {table} t WHERE {of_parent} \
                   AND {} ORDER BY t.{first}, t.{second} LIMIT 1) IS NOT NULL ELSE FALSE END",
                bound(">=", ["before_a", "before_b"])
            )
        }),
        otherwise: "FALSE",
    };
    let children = either_end(forward, backward, |gate, descending| {
        let order = if descending {
            format!("t.{first} DESC, t.{second} DESC")
        } else {
            format!("t.{first}, t.{second}")
        };
        format!(
            "SELECT {columns} FROM {table} t WHERE {gate}{window} \
             ORDER BY {order} LIMIT k.lim"
        )
    });
    let sql = k.statement(
        &[total, earlier, later],
        &children,
        &format!("c.{first}, c.{second}"),
    );
    Ok((sql, k))
}

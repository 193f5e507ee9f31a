//! Full-text search over sessions: which sessions match words, how well, and where.
//!
//! A session's search document (migration 0014) holds its alert type, final analysis, executive
//! summary and alert data, stemmed as English (without stop words); each finished timeline event has its own. Words
//! are read as web search syntax (`websearch_to_tsquery`: `"exact phrase"`, `or`, `-not`), and
//! only in shapes the GIN indexes serve ([`super::search_words`]).

use std::collections::HashMap;

use sqlx::{FromRow, Postgres, QueryBuilder};
use uuid::Uuid;

use super::Store;
use super::search_words::SearchWords;
use crate::error::Result;

/// The text search configuration of every search document and query (migration 0014).
const CONFIG: &str = "'casefile_english'";

/// Where a search matched a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum MatchedField {
    AlertType,
    FinalAnalysis,
    ExecutiveSummary,
    AlertData,
    TimelineEvent,
}

/// What a search matched in one session: a field, or a timeline event, with a fragment of its
/// text in which the words found are marked.
#[derive(Debug, Clone, FromRow)]
pub struct SearchMatchRow {
    pub session_id: Uuid,
    pub field: MatchedField,
    pub event_id: Option<Uuid>,
    pub rank: f32,
    /// The fragment, each word found between [`HIGHLIGHT_START`] and [`HIGHLIGHT_END`].
    pub headline: String,
}

/// Marks around a word found in [`SearchMatchRow::headline`]: control characters, which the
/// texts searched cannot contain (they are replaced by spaces before the fragment is made).
pub const HIGHLIGHT_START: char = '\u{2}';
pub const HIGHLIGHT_END: char = '\u{3}';

/// The matches asked for: the best `first` in each of these sessions, for these words.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SearchMatchKey {
    pub session: Uuid,
    pub words: SearchWords,
    pub first: i64,
}

/// `SELECT session_id, search_rank` of every session `words` match, in a field of its own or in
/// a finished timeline event (its best rank of either), each read from a GIN index.
pub(super) fn push_ranked(qb: &mut QueryBuilder<'_, Postgres>, words: &SearchWords) {
    qb.push(format_args!(
        "SELECT hit.session_id, max(hit.rank) AS search_rank \
         FROM (SELECT websearch_to_tsquery({CONFIG}, "
    ))
    .push_bind(words.as_str().to_owned())
    .push(
        ") AS query) q, LATERAL ( \
           SELECT id AS session_id, ts_rank(search_document, q.query) AS rank \
           FROM sessions WHERE search_document @@ q.query \
           UNION ALL \
           SELECT session_id, ts_rank(search_document, q.query) \
           FROM timeline_events WHERE search_document @@ q.query) hit \
         GROUP BY hit.session_id",
    );
}

/// Each field's text as its search document holds it (migration 0014: the same cuts).
const FIELDS: &str = "(VALUES \
    ('alert_type', s.alert_type || ' ' || \
        regexp_replace(s.alert_type, '([[:lower:]])([[:upper:]])', '\\1 \\2', 'g'), 'A'), \
    ('final_analysis', left(s.final_analysis, 60000), 'B'), \
    ('executive_summary', left(s.executive_summary, 20000), 'B'), \
    ('alert_data', left(s.alert_data::text, 40000), 'C')) AS f(field, body, weight)";

/// Options of `ts_headline`: up to two fragments of about 10 to 25 words around the words
/// found, marked with the control characters above.
const HEADLINE_OPTIONS: &str = "'StartSel=' || chr(2) || ', StopSel=' || chr(3) || \
    ', MaxFragments=2, MinWords=10, MaxWords=25, FragmentDelimiter=\" … \"'";

impl Store {
    /// The best matches of each key's words in its session (by rank, then field order, then
    /// timeline position): one statement for each distinct (words, first), which in a request
    /// is one.
    pub async fn search_matches(
        &self,
        keys: &[SearchMatchKey],
    ) -> Result<HashMap<SearchMatchKey, Vec<SearchMatchRow>>> {
        let mut by_search: HashMap<(&SearchWords, i64), Vec<Uuid>> = HashMap::new();
        for key in keys {
            by_search
                .entry((&key.words, key.first))
                .or_default()
                .push(key.session);
        }
        let mut found: HashMap<SearchMatchKey, Vec<SearchMatchRow>> =
            keys.iter().map(|key| (key.clone(), Vec::new())).collect();
        for ((words, first), sessions) in by_search {
            let sql = format!(
                "WITH q AS (SELECT websearch_to_tsquery({CONFIG}, $1) AS query), \
                 hit AS ( \
                   SELECT s.id AS session_id, f.field, NULL::uuid AS event_id, \
                          NULL::bigint AS sequence_number, f.body, \
                          ts_rank(setweight(to_tsvector({CONFIG}, f.body), f.weight::\"char\"), \
                                  q.query) AS rank \
                   FROM sessions s CROSS JOIN q CROSS JOIN LATERAL {FIELDS} \
                   WHERE s.id = ANY($2) AND f.body IS NOT NULL \
                     AND to_tsvector({CONFIG}, f.body) @@ q.query \
                   UNION ALL \
                   SELECT e.session_id, 'timeline_event', e.id, e.sequence_number, \
                          left(e.content, 150000), ts_rank(e.search_document, q.query) \
                   FROM timeline_events e CROSS JOIN q \
                   WHERE e.session_id = ANY($2) AND e.search_document @@ q.query), \
                 best AS ( \
                   SELECT *, row_number() OVER (PARTITION BY session_id \
                       ORDER BY rank DESC, event_id IS NOT NULL, sequence_number) AS n \
                   FROM hit) \
                 SELECT best.session_id, best.field, best.event_id, best.rank, \
                        ts_headline({CONFIG}, translate(best.body, chr(2) || chr(3), '  '), \
                                    q.query, {HEADLINE_OPTIONS}) AS headline \
                 FROM best CROSS JOIN q WHERE best.n <= $3 ORDER BY best.session_id, best.n"
            );
            let rows: Vec<SearchMatchRow> = sqlx::query_as(&sql)
                .bind(words.as_str())
                .bind(&sessions)
                .bind(first)
                .fetch_all(self.reader().await?.traced())
                .await?;
            for row in rows {
                let key = SearchMatchKey {
                    session: row.session_id,
                    words: words.clone(),
                    first,
                };
                if let Some(matches) = found.get_mut(&key) {
                    matches.push(row);
                }
            }
        }
        Ok(found)
    }
}

//! The live timeline: each timeline event as readers see it, a streaming one with the text
//! appended so far (its content, its chunks, and the pieces its session's log holds for it
//! after the position `event_texts_in_log` names: migrations 0119 and 0123) and the time that
//! text last changed.
//!
//! It is written out in each statement that reads it, not read through a view or a function:
//! - its sub-selects name the session by the statement's own expression of it (`$1`,
//!   `k.session`), so that on a layout partitioned by session each table they read is pruned to
//!   the session's partition as the statement starts (a view can name only each row's column,
//!   which sets up a scan of every partition of five tables, pruned as each row is read);
//! - no table is behind a function: a distributed database (Citus) decides how to run a
//!   statement before PostgreSQL inlines functions, and reads a table it cannot see from the
//!   coordinator's empty shell (citusdata/citus#981, docs/scale-out.md).
//!
//! The view `timeline_events_live` (0119), which reads the same rows, stays for binaries from
//! before this one; a later migration drops it.

/// The live timeline of the session `session` (an expression of the enclosing statement:
/// `$1`, `k.session`), or of every session (`None`: each row's own), as a parenthesized
/// select to read `FROM`, with the columns of a timeline event row.
pub fn live_timeline(session: Option<&str>) -> String {
    let (owner, only) = match session {
        Some(session) => (session, format!(" WHERE le.session_id = {session}")),
        None => ("le.session_id", String::new()),
    };
    let logged = logged_text(owner, "le.id");
    format!(
        "(SELECT le.id, le.session_id, le.stage_id, le.execution_id, le.sequence_number, \
         le.event_type, le.status, \
         CASE WHEN le.status = 'streaming' \
         THEN le.content || coalesce((\
         SELECT string_agg(lp.content, '' ORDER BY lp.start_offset) FROM (\
         SELECT lc.start_offset, lc.content FROM timeline_event_chunks lc \
         WHERE lc.event_id = le.id AND lc.session_id = {owner} \
         UNION ALL SELECT ll.start_offset, ll.content FROM ({logged}) ll) lp), '') \
         ELSE le.content END AS content, \
         le.metadata, le.llm_interaction_id, le.mcp_interaction_id, le.created_at, \
         CASE WHEN le.status = 'streaming' \
         THEN greatest(le.updated_at, \
         (SELECT max(lc.created_at) FROM timeline_event_chunks lc \
         WHERE lc.event_id = le.id AND lc.session_id = {owner}), \
         (SELECT ll.created_at FROM ({logged}) ll ORDER BY ll.position DESC LIMIT 1)) \
         ELSE le.updated_at END AS updated_at \
         FROM timeline_events le{only})"
    )
}

/// The pieces of the text of the streaming event `event` of the session `owner` that only the
/// session's log holds (both expressions of the enclosing statement), with where and when each
/// was logged: `start_offset`, `end_offset`, `content`, `position`, `created_at`. Those of the
/// log's rows (`logged_pieces`, 0119), then those of its runs (`run_appends`, 0123): both
/// functions of a row's values, which read no table. A run may span the position the pieces
/// are read after (a fold lands anywhere in a run), so its appends are filtered one by one;
/// the runs read start at the last one starting at or before that position, found by one probe
/// as a lateral value, so that the runs after it are a range of the key.
fn logged_text(owner: &str, event: &str) -> String {
    format!(
        "SELECT lg.start_offset, lg.end_offset, lg.content, lv.position, lv.created_at \
         FROM event_texts_in_log lf \
         JOIN session_events lv ON lv.session_id = {owner} AND lv.position > lf.after_position \
         CROSS JOIN LATERAL logged_pieces(lv) lg \
         WHERE lf.session_id = {owner} AND lf.event_id = {event} \
         AND lv.kind = 'event_appended' \
         AND ((lv.delta IS NOT NULL AND lv.entity_id = {event}) \
         OR (lv.run_deltas IS NOT NULL AND {event} = ANY (lv.run_events))) \
         AND lg.event = {event} \
         UNION ALL \
         SELECT la.start_offset, la.end_offset, la.delta, la.position, la.created_at \
         FROM event_texts_in_log lf \
         CROSS JOIN LATERAL (SELECT coalesce(max(lq.first_position), 0) AS first_position \
         FROM session_event_runs lq WHERE lq.session_id = {owner} \
         AND lq.first_position <= lf.after_position + 1) lb \
         JOIN session_event_runs lr ON lr.session_id = {owner} \
         AND lr.first_position >= lb.first_position AND {event} = ANY (lr.events) \
         CROSS JOIN LATERAL run_appends(lr.first_position, lr.appends, lr.created_at, \
         lr.events, lr.log, lr.appends) la \
         WHERE lf.session_id = {owner} AND lf.event_id = {event} \
         AND la.event = {event} AND la.position > lf.after_position"
    )
}

-- Full-text search over sessions and their timelines, filtering on alert data, and ordering by
-- last update and completion.

-- English as the search reads it: PostgreSQL's `english` configuration with its Snowball
-- stemmer, but no stop-word list, as the embedded database ships none (the stock `english`
-- fails there on every call). So words such as "the" are indexed and can be searched for.
CREATE TEXT SEARCH DICTIONARY casefile_english_stem (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION casefile_english (COPY = english);
ALTER TEXT SEARCH CONFIGURATION casefile_english
    ALTER MAPPING FOR asciiword, word, hword, hword_part, asciihword, hword_asciipart
    WITH casefile_english_stem;

-- What a search reads, as English text (stemmed: "crashing" finds "crashed"); an alert type
-- is also read as the words of its camel case ("HighLatency" is found by "latency"). Weights
-- rank a hit in the alert type (A) above one in the analysis or summary (B), above one in the
-- alert data (C); a timeline event's text is weighted D.
--
-- A tsvector holds at most 1 MB, so each text is cut before it is indexed: its first characters
-- are searchable, the rest are not. The cuts keep the worst case under the limit, so no write
-- ever fails on it: distinct short words of 4-byte characters take about 5 bytes of tsvector
-- per character (150,000 characters: 750 kB). The expressions are repeated, cut for cut, where
-- a search says which field matched (src/store/search.rs).
--
-- The documents are kept by triggers rather than as generated columns: adding a generated
-- column rewrites the table into new files, which the embedded database cannot replay after a
-- crash ("could not create file …: File exists"); and a trigger re-tokenizes a session only when
-- its text changes, not on every status change. The triggers fire ALWAYS (also for bulk loads
-- with `session_replication_role = replica`): a document is part of its row.
CREATE FUNCTION session_search_document(s sessions) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(to_tsvector('casefile_english', s.alert_type || ' ' ||
               regexp_replace(s.alert_type, '([[:lower:]])([[:upper:]])', '\1 \2', 'g')), 'A')
        || setweight(to_tsvector('casefile_english', left(coalesce(s.final_analysis, ''), 60000)), 'B')
        || setweight(to_tsvector('casefile_english', left(coalesce(s.executive_summary, ''), 20000)), 'B')
        || setweight(to_tsvector('casefile_english', left(s.alert_data::text, 40000)), 'C')
$$;

-- An event is indexed once it has finished (its streamed chunks are folded into `content` then);
-- while it streams it has no document, so appends never re-tokenize it.
CREATE FUNCTION timeline_event_search_document(status text, content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN status <> 'streaming'
                THEN to_tsvector('casefile_english', left(content, 150000)) END
$$;

ALTER TABLE sessions ADD COLUMN search_document tsvector;
ALTER TABLE timeline_events ADD COLUMN search_document tsvector;
UPDATE sessions s SET search_document = session_search_document(s);
UPDATE timeline_events SET search_document = timeline_event_search_document(status, content)
WHERE status <> 'streaming';

CREATE FUNCTION index_session_text() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.alert_type IS DISTINCT FROM OLD.alert_type
       OR NEW.alert_data IS DISTINCT FROM OLD.alert_data
       OR NEW.final_analysis IS DISTINCT FROM OLD.final_analysis
       OR NEW.executive_summary IS DISTINCT FROM OLD.executive_summary THEN
        NEW.search_document := session_search_document(NEW);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER index_session_text BEFORE INSERT OR UPDATE ON sessions
    FOR EACH ROW EXECUTE FUNCTION index_session_text();
ALTER TABLE sessions ENABLE ALWAYS TRIGGER index_session_text;

CREATE FUNCTION index_timeline_event_text() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status
       OR NEW.content IS DISTINCT FROM OLD.content THEN
        NEW.search_document := timeline_event_search_document(NEW.status, NEW.content);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER index_timeline_event_text BEFORE INSERT OR UPDATE ON timeline_events
    FOR EACH ROW EXECUTE FUNCTION index_timeline_event_text();
ALTER TABLE timeline_events ENABLE ALWAYS TRIGGER index_timeline_event_text;

CREATE INDEX sessions_search_document_idx ON sessions USING gin (search_document);
CREATE INDEX timeline_events_search_document_idx ON timeline_events USING gin (search_document);

-- The substring search it replaces.
DROP INDEX sessions_search_idx;

-- `alertDataContains`: JSON containment (`@>`), the only operator the smaller path index serves.
CREATE INDEX sessions_alert_data_idx ON sessions USING gin (alert_data jsonb_path_ops);

-- Keyset orders: (sort key, id). Unfinished sessions sort as if completed at the start of year 1
-- (before any real completion, and a time a cursor can hold, unlike '-infinity').
CREATE INDEX sessions_updated_at_idx ON sessions (updated_at, id);
CREATE INDEX sessions_completed_at_idx ON sessions
    ((coalesce(completed_at, '0001-01-01 00:00:00+00')), id);

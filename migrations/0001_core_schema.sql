-- casefile core schema: the five-layer data model of an investigation session
-- (session -> stage -> agent execution -> timeline / messages / LLM and MCP interactions),
-- plus follow-up chats. Every child row carries session_id and is tied to its parents with
-- composite foreign keys, so a row can never point at a stage or execution of another session.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- Layer root: one investigation of one alert.
CREATE TABLE sessions (
    id                uuid PRIMARY KEY,
    alert_type        text NOT NULL CHECK (length(alert_type) BETWEEN 1 AND 200),
    alert_data        jsonb NOT NULL DEFAULT '{}'::jsonb,
    status            text NOT NULL DEFAULT 'pending' CHECK (status IN
                        ('pending', 'in_progress', 'cancelling', 'completed', 'failed', 'cancelled', 'timed_out')),
    chain_id          text NOT NULL CHECK (length(chain_id) BETWEEN 1 AND 200),
    author            text,
    runbook_url       text,
    final_analysis    text,
    executive_summary text,
    error_message     text,
    started_at        timestamptz,
    completed_at      timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    deleted_at        timestamptz,
    -- Derived so that "order by duration" can use a keyset cursor and an index.
    duration_ms       bigint GENERATED ALWAYS AS (
                        (EXTRACT(EPOCH FROM (completed_at - started_at)) * 1000)::bigint) STORED,
    CHECK (completed_at IS NULL OR started_at IS NULL OR completed_at >= started_at)
);

-- Keyset pagination: every ordering is (sort key, id).
CREATE INDEX sessions_created_at_idx ON sessions (created_at, id);
CREATE INDEX sessions_status_idx ON sessions (status, id);
CREATE INDEX sessions_alert_type_idx ON sessions (alert_type, id);
CREATE INDEX sessions_author_idx ON sessions ((coalesce(author, '')), id);
CREATE INDEX sessions_duration_idx ON sessions ((coalesce(duration_ms, -1)), id);
CREATE INDEX sessions_chain_id_idx ON sessions (chain_id);
-- Substring search (at least 3 characters, so trigram indexes apply).
CREATE INDEX sessions_search_idx ON sessions USING gin (
    (alert_type || ' ' || coalesce(author, '') || ' ' || coalesce(final_analysis, '')) gin_trgm_ops);

-- A follow-up conversation on a finished session.
CREATE TABLE chats (
    id         uuid PRIMARY KEY,
    session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    created_by text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, session_id)
);
CREATE INDEX chats_session_idx ON chats (session_id, created_at);

-- One question a person asked in a chat; it is answered by a stage of its own.
CREATE TABLE chat_user_messages (
    id         uuid PRIMARY KEY,
    chat_id    uuid NOT NULL,
    session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    content    text NOT NULL CHECK (content ~ '[^[:space:]]' AND char_length(content) <= 5000),
    author     text,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, session_id),
    FOREIGN KEY (chat_id, session_id) REFERENCES chats (id, session_id) ON DELETE CASCADE
);
CREATE INDEX chat_user_messages_chat_idx ON chat_user_messages (chat_id, created_at);

-- Layer 0a: a stage of the chain; coordinates one or more agent executions.
CREATE TABLE stages (
    id                   uuid PRIMARY KEY,
    session_id           uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    stage_name           text NOT NULL CHECK (length(stage_name) BETWEEN 1 AND 200),
    stage_index          integer NOT NULL CHECK (stage_index >= 0),
    expected_agent_count integer NOT NULL CHECK (expected_agent_count >= 1),
    parallel_type        text CHECK (parallel_type IN ('multi_agent', 'replica')),
    success_policy       text CHECK (success_policy IN ('all', 'any')),
    status               text NOT NULL DEFAULT 'pending' CHECK (status IN
                           ('pending', 'active', 'completed', 'failed', 'timed_out', 'cancelled')),
    started_at           timestamptz,
    completed_at         timestamptz,
    duration_ms          bigint CHECK (duration_ms >= 0),
    error_message        text,
    chat_id              uuid,
    chat_user_message_id uuid,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (session_id, stage_index),
    UNIQUE (id, session_id),
    -- The seed: parallel_type and success_policy are null for a single agent, set for several.
    CHECK ((expected_agent_count = 1 AND parallel_type IS NULL AND success_policy IS NULL)
        OR (expected_agent_count > 1 AND parallel_type IS NOT NULL AND success_policy IS NOT NULL)),
    CHECK (chat_user_message_id IS NULL OR chat_id IS NOT NULL),
    FOREIGN KEY (chat_id, session_id) REFERENCES chats (id, session_id) ON DELETE CASCADE,
    FOREIGN KEY (chat_user_message_id, session_id)
        REFERENCES chat_user_messages (id, session_id) ON DELETE CASCADE
);
CREATE INDEX stages_chat_idx ON stages (chat_id) WHERE chat_id IS NOT NULL;
CREATE UNIQUE INDEX stages_chat_user_message_idx ON stages (chat_user_message_id)
    WHERE chat_user_message_id IS NOT NULL;

-- Layer 0b: the work of one agent in a stage (or of a sub-agent an orchestrator spawned).
CREATE TABLE agent_executions (
    id                  uuid PRIMARY KEY,
    stage_id            uuid NOT NULL,
    session_id          uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    parent_execution_id uuid,
    agent_name          text NOT NULL CHECK (length(agent_name) BETWEEN 1 AND 200),
    agent_index         integer NOT NULL CHECK (agent_index >= 1),
    status              text NOT NULL DEFAULT 'pending' CHECK (status IN
                          ('pending', 'active', 'completed', 'failed', 'timed_out', 'cancelled')),
    started_at          timestamptz,
    completed_at        timestamptz,
    duration_ms         bigint CHECK (duration_ms >= 0),
    error_message       text,
    iteration_strategy  text NOT NULL CHECK (length(iteration_strategy) BETWEEN 1 AND 100),
    llm_provider        text,
    llm_model           text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (stage_id, agent_index),
    UNIQUE (id, session_id),
    UNIQUE (id, stage_id, session_id),
    CHECK (parent_execution_id IS NULL OR parent_execution_id <> id),
    FOREIGN KEY (stage_id, session_id) REFERENCES stages (id, session_id) ON DELETE CASCADE,
    FOREIGN KEY (parent_execution_id, session_id)
        REFERENCES agent_executions (id, session_id) ON DELETE CASCADE
);
CREATE INDEX agent_executions_session_idx ON agent_executions (session_id);
CREATE INDEX agent_executions_parent_idx ON agent_executions (parent_execution_id, agent_index)
    WHERE parent_execution_id IS NOT NULL;

-- Layer 2: the LLM conversation of one execution; immutable, stored once (no O(n^2) copies).
CREATE TABLE messages (
    id              uuid PRIMARY KEY,
    session_id      uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    stage_id        uuid NOT NULL,
    execution_id    uuid NOT NULL,
    sequence_number integer NOT NULL CHECK (sequence_number >= 1),
    role            text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content         text NOT NULL,
    tool_call_id    text,
    tool_name       text,
    tool_calls      jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (execution_id, sequence_number),
    UNIQUE (id, execution_id),
    -- A tool result answers one call; only an assistant message asks for calls.
    CHECK (role = 'tool' OR tool_call_id IS NULL),
    CHECK (role = 'assistant' OR tool_calls IS NULL),
    FOREIGN KEY (execution_id, stage_id, session_id)
        REFERENCES agent_executions (id, stage_id, session_id) ON DELETE CASCADE
);
CREATE INDEX messages_stage_execution_idx ON messages (stage_id, execution_id);
CREATE INDEX messages_session_idx ON messages (session_id);
CREATE INDEX messages_created_at_idx ON messages (created_at);

-- Layer 3: the full technical record of one LLM call (debug tab).
CREATE TABLE llm_interactions (
    id                 uuid PRIMARY KEY,
    session_id         uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    stage_id           uuid NOT NULL,
    execution_id       uuid NOT NULL,
    interaction_type   text NOT NULL CHECK (interaction_type IN
                         ('iteration', 'final_analysis', 'executive_summary', 'chat_response')),
    model_name         text NOT NULL CHECK (length(model_name) BETWEEN 1 AND 200),
    last_message_id    uuid,
    llm_request        jsonb NOT NULL DEFAULT '{}'::jsonb,
    llm_response       jsonb NOT NULL DEFAULT '{}'::jsonb,
    thinking_content   text,
    response_metadata  jsonb NOT NULL DEFAULT '{}'::jsonb,
    input_tokens       integer CHECK (input_tokens >= 0),
    output_tokens      integer CHECK (output_tokens >= 0),
    total_tokens       integer CHECK (total_tokens >= 0),
    thinking_tokens    integer CHECK (thinking_tokens >= 0),
    estimated_cost_usd double precision CHECK (estimated_cost_usd >= 0),
    duration_ms        bigint CHECK (duration_ms >= 0),
    error_message      text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, session_id),
    FOREIGN KEY (execution_id, stage_id, session_id)
        REFERENCES agent_executions (id, stage_id, session_id) ON DELETE CASCADE,
    -- The conversation sent to the model is a prefix of this execution's own messages.
    FOREIGN KEY (last_message_id, execution_id) REFERENCES messages (id, execution_id)
);
CREATE INDEX llm_interactions_execution_idx ON llm_interactions (execution_id, created_at, id);
CREATE INDEX llm_interactions_stage_idx ON llm_interactions (stage_id, created_at, id);
CREATE INDEX llm_interactions_session_idx ON llm_interactions (session_id, created_at, id);
CREATE INDEX llm_interactions_created_at_idx ON llm_interactions (created_at);
CREATE INDEX llm_interactions_last_message_idx ON llm_interactions (last_message_id)
    WHERE last_message_id IS NOT NULL;

-- Layer 4: the full technical record of one MCP tool call or tool listing (debug tab).
CREATE TABLE mcp_interactions (
    id               uuid PRIMARY KEY,
    session_id       uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    stage_id         uuid NOT NULL,
    execution_id     uuid NOT NULL,
    interaction_type text NOT NULL CHECK (interaction_type IN ('tool_call', 'tool_list')),
    server_name      text NOT NULL CHECK (length(server_name) BETWEEN 1 AND 200),
    tool_name        text,
    tool_arguments   jsonb NOT NULL DEFAULT '{}'::jsonb,
    tool_result      jsonb NOT NULL DEFAULT '{}'::jsonb,
    available_tools  jsonb NOT NULL DEFAULT '[]'::jsonb,
    duration_ms      bigint CHECK (duration_ms >= 0),
    error_message    text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, session_id),
    CHECK (interaction_type = 'tool_list' OR tool_name IS NOT NULL),
    FOREIGN KEY (execution_id, stage_id, session_id)
        REFERENCES agent_executions (id, stage_id, session_id) ON DELETE CASCADE
);
CREATE INDEX mcp_interactions_execution_idx ON mcp_interactions (execution_id, created_at, id);
CREATE INDEX mcp_interactions_stage_idx ON mcp_interactions (stage_id, created_at, id);
CREATE INDEX mcp_interactions_session_idx ON mcp_interactions (session_id, created_at, id);
CREATE INDEX mcp_interactions_created_at_idx ON mcp_interactions (created_at);

-- Layer 1: the user-facing reasoning timeline, created when streaming starts.
CREATE TABLE timeline_events (
    id                 uuid PRIMARY KEY,
    session_id         uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    stage_id           uuid NOT NULL,
    execution_id       uuid NOT NULL,
    sequence_number    bigint NOT NULL CHECK (sequence_number >= 1),
    event_type         text NOT NULL CHECK (event_type IN
                         ('llm_thinking', 'llm_response', 'llm_tool_call', 'mcp_tool_call',
                          'mcp_tool_summary', 'user_question', 'executive_summary', 'final_analysis')),
    status             text NOT NULL DEFAULT 'streaming' CHECK (status IN
                         ('streaming', 'completed', 'failed', 'cancelled', 'timed_out')),
    content            text NOT NULL DEFAULT '',
    metadata           jsonb NOT NULL DEFAULT '{}'::jsonb,
    llm_interaction_id uuid,
    mcp_interaction_id uuid,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (session_id, sequence_number),
    FOREIGN KEY (execution_id, stage_id, session_id)
        REFERENCES agent_executions (id, stage_id, session_id) ON DELETE CASCADE,
    FOREIGN KEY (llm_interaction_id, session_id) REFERENCES llm_interactions (id, session_id),
    FOREIGN KEY (mcp_interaction_id, session_id) REFERENCES mcp_interactions (id, session_id)
);
CREATE INDEX timeline_events_stage_idx ON timeline_events (stage_id, sequence_number);
CREATE INDEX timeline_events_execution_idx ON timeline_events (execution_id, sequence_number);
CREATE INDEX timeline_events_created_at_idx ON timeline_events (created_at);
CREATE INDEX timeline_events_llm_interaction_idx ON timeline_events (llm_interaction_id)
    WHERE llm_interaction_id IS NOT NULL;
CREATE INDEX timeline_events_mcp_interaction_idx ON timeline_events (mcp_interaction_id)
    WHERE mcp_interaction_id IS NOT NULL;

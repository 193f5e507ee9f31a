// The page a share link opens (/share/{session}#<secret>): reads the session over GraphQL with
// the link's secret as its bearer, renders its stages, agents, timeline and conclusion, and,
// while the session runs, follows its event stream (GET /sessions/{id}/events, read with fetch
// so the secret goes in a header, never in a URL). Everything the session holds is written with
// textContent: agent output is text, never markup.
"use strict";
(() => {
  const PAGE_SIZE = 50; // timeline events per request
  const MAX_PAGES = 100; // beyond 5,000 events the page says how many it left out
  const FINISHED = new Set(["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"]);
  const EVENT_LABELS = {
    LLM_THINKING: "Thinking",
    LLM_RESPONSE: "Response",
    LLM_TOOL_CALL: "Tool call",
    MCP_TOOL_CALL: "Tool result",
    MCP_TOOL_SUMMARY: "Tool result summary",
    USER_QUESTION: "Question",
    EXECUTIVE_SUMMARY: "Executive summary",
    FINAL_ANALYSIS: "Final analysis",
    SYSTEM_WARNING: "Warning",
    SYSTEM_ERROR: "Error",
  };

  const SESSION = `query SharedSession($id: ID!) {
  session(id: $id) {
    uuid alertType status author chainId chain { name version }
    createdAt startedAt completedAt durationMs
    executiveSummary finalAnalysis errorMessage
    stages { uuid stageIndex name status successPolicy durationMs errorMessage }
    agents {
      uuid depth agentName agentType teamName status llmModel durationMs errorMessage
      stage { uuid }
    }
  }
}`;
  const POSITION = `query SharedSessionPosition($id: ID!) {
  session(id: $id) { status eventsConnection(last: 1) { edges { node { sequence } } } }
}`;
  const TIMELINE = `query SharedTimeline($id: ID!, $first: Int!, $after: String) {
  session(id: $id) {
    timeline(first: $first, after: $after) {
      pageInfo { hasNextPage endCursor }
      edges { node { uuid sequenceNumber eventType status content metadata execution { uuid } } }
    }
  }
}`;
  const EVENT = `query SharedTimelineEvent($id: ID!) {
  node(id: $id) { ... on TimelineEvent { uuid status content } }
}`;

  const main = document.getElementById("share");
  const live = document.getElementById("live");
  const sessionId = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] ?? "");
  const secret = decodeURIComponent(location.hash.slice(1));

  // What the page knows: the session's tree (replaced on each reload) and its timeline events,
  // each with the element showing it, kept across reloads of the tree.
  let session = null;
  const events = new Map(); // uuid -> { status, content, length, item, body, state, agent }
  const agentLists = new Map(); // execution uuid -> <ol> of its timeline events
  let timelineCursor = null;
  let timelineComplete = false;
  // Whether the page still follows the stream, and the last position it has applied.
  let following = true;
  let position = 0;

  class Refused extends Error {}

  async function graphql(query, variables) {
    const headers = {
      "Content-Type": "application/json",
      Accept: "application/graphql-response+json, application/json",
    };
    if (secret) headers.Authorization = `Bearer ${secret}`;
    const response = await fetch("/graphql", {
      method: "POST",
      headers,
      body: JSON.stringify({ query, variables }),
      credentials: "omit",
    });
    if (response.status === 401) throw new Refused("This link is not valid: it was revoked, it has expired, or it was copied incompletely.");
    const body = await response.json().catch(() => null);
    const error = body?.errors?.[0];
    if (error) {
      if (error.extensions?.code === "FORBIDDEN") throw new Refused("This link does not open this session.");
      throw new Error(error.message);
    }
    if (!response.ok || !body) throw new Error(`the server answered ${response.status}`);
    return body.data;
  }

  // ---- rendering --------------------------------------------------------------------------

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined) continue;
      if (name === "class") node.className = value;
      else node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  const words = (value) => (value ?? "").toLowerCase().replaceAll("_", " ");
  const badge = (status) => el("span", { class: `status status-${words(status).replaceAll(" ", "-")}` }, words(status));
  const when = (at) => (at ? new Date(at).toLocaleString() : null);
  function duration(ms) {
    if (ms === null || ms === undefined) return null;
    if (ms < 1000) return `${ms} ms`;
    const seconds = Math.round(ms / 1000);
    if (seconds < 60) return `${seconds} s`;
    const minutes = Math.floor(seconds / 60);
    return seconds % 60 ? `${minutes} min ${seconds % 60} s` : `${minutes} min`;
  }
  const facts = (...parts) => el("p", { class: "facts" }, parts.filter(Boolean).join(" · "));

  function showNotice(text) {
    main.replaceChildren(el("p", { class: "notice", id: "notice" }, text));
  }

  function setLive(state, text) {
    live.dataset.state = state;
    live.textContent = text;
  }

  // The whole tree; timeline lists move into their agents' cards and keep their items.
  function render() {
    const s = session;
    document.title = `${s.alertType} · casefile`;
    const chain = s.chain ? `${s.chain.name} v${s.chain.version}` : s.chainId;
    const header = el("section", { class: "summary" },
      el("h1", {}, s.alertType, " ", badge(s.status)),
      facts(`chain ${chain}`, s.author && `by ${s.author}`, `created ${when(s.createdAt)}`,
        s.startedAt && `started ${when(s.startedAt)}`, duration(s.durationMs) && `took ${duration(s.durationMs)}`));
    const conclusion = el("section", { class: "conclusion", id: "conclusion" });
    if (s.executiveSummary) conclusion.append(el("h2", {}, "Executive summary"), el("p", { class: "text", id: "executive-summary" }, s.executiveSummary));
    if (s.finalAnalysis) conclusion.append(el("h2", {}, "Final analysis"), el("div", { class: "text", id: "final-analysis" }, s.finalAnalysis));
    if (s.errorMessage) conclusion.append(el("h2", {}, "Error"), el("p", { class: "text error", id: "session-error" }, s.errorMessage));
    if (!conclusion.childElementCount) conclusion.append(el("p", { class: "pending" }, FINISHED.has(s.status) ? "No conclusion was recorded." : "No conclusion yet: the investigation is still running."));

    const stages = el("section", { class: "stages" });
    for (const stage of s.stages) {
      const card = el("article", { class: "stage", "data-stage": stage.uuid },
        el("h2", {}, `Stage ${stage.stageIndex + 1} · ${stage.name} `, badge(stage.status)),
        facts(stage.successPolicy && `succeeds when ${words(stage.successPolicy)} agents do`, duration(stage.durationMs) && `took ${duration(stage.durationMs)}`),
        stage.errorMessage && el("p", { class: "text error" }, stage.errorMessage));
      for (const agent of s.agents.filter((a) => a.stage.uuid === stage.uuid)) card.append(agentCard(agent));
      stages.append(card);
    }
    const more = timelineComplete ? null : el("p", { class: "pending" }, `Only the first ${MAX_PAGES * PAGE_SIZE} timeline events are shown.`);
    main.replaceChildren(header, conclusion, stages, ...(more ? [more] : []));
  }

  function agentCard(agent) {
    const kind = agent.agentType === "WORKER" && agent.depth === 0 ? null : words(agent.agentType);
    return el("div", { class: `agent depth-${Math.min(agent.depth, 3)}`, "data-agent": agent.uuid },
      el("h3", {}, agent.agentName, " ", badge(agent.status)),
      facts(kind, agent.teamName && `team ${agent.teamName}`, agent.llmModel, duration(agent.durationMs) && `took ${duration(agent.durationMs)}`),
      agent.errorMessage && el("p", { class: "text error" }, agent.errorMessage),
      listOf(agent.uuid));
  }

  function listOf(agent) {
    let list = agentLists.get(agent);
    if (!list) {
      list = el("ol", { class: "timeline" });
      agentLists.set(agent, list);
    }
    return list;
  }

  const codePoints = (text) => Array.from(text).length;

  function addEvent(node) {
    const known = events.get(node.uuid);
    if (known) return updateEvent(known, node.status, node.content);
    let label = EVENT_LABELS[node.eventType] ?? words(node.eventType);
    const tool = node.metadata?.tool_name;
    if (tool) label += ` · ${tool}${node.metadata.server_name ? ` (${node.metadata.server_name})` : ""}`;
    const state = el("span", { class: "event-status" });
    const body = el("div", { class: "text" });
    const item = el("li", { class: `event event-${words(node.eventType).replaceAll(" ", "-")}`, "data-event": node.uuid },
      el("div", { class: "event-head" }, el("span", { class: "event-type" }, label), state), body);
    const event = { item, body, state, status: null, content: "", length: 0 };
    events.set(node.uuid, event);
    listOf(node.execution.uuid).append(item);
    updateEvent(event, node.status, node.content);
  }

  function updateEvent(event, status, content) {
    if (content !== undefined && content !== null && content !== event.content) {
      event.content = content;
      event.length = codePoints(content);
      event.body.textContent = content;
    }
    if (status && status !== event.status) {
      event.status = status;
      event.item.dataset.status = status;
      event.state.textContent = status === "COMPLETED" ? "" : words(status);
    }
  }

  // Appended text at `offset` (in code points): what the page has already is skipped, so a
  // replayed envelope changes nothing; a gap means the page missed text, so it reads it whole.
  async function append(uuid, offset, text) {
    const event = events.get(uuid);
    if (!event) return loadTimeline();
    if (offset > event.length) return reloadEvent(uuid);
    const fresh = Array.from(text).slice(event.length - offset).join("");
    if (!fresh) return;
    event.content += fresh;
    event.length += codePoints(fresh);
    event.body.append(document.createTextNode(fresh));
  }

  async function reloadEvent(uuid) {
    const data = await graphql(EVENT, { id: btoa(`TimelineEvent:${uuid}`) });
    const event = events.get(uuid);
    if (event && data.node) updateEvent(event, data.node.status, data.node.content);
  }

  // ---- loading ----------------------------------------------------------------------------

  async function loadSession() {
    const data = await graphql(SESSION, { id: sessionId });
    if (!data.session) throw new Refused("There is no such session (it may have been deleted).");
    session = data.session;
    render();
  }

  // Timeline events after the last one read, a page at a time.
  async function loadTimeline() {
    for (let pages = 0; pages < MAX_PAGES; pages++) {
      const data = await graphql(TIMELINE, { id: sessionId, first: PAGE_SIZE, after: timelineCursor });
      const page = data.session.timeline;
      for (const edge of page.edges) addEvent(edge.node);
      if (page.pageInfo.endCursor) timelineCursor = page.pageInfo.endCursor;
      if (!page.pageInfo.hasNextPage) {
        timelineComplete = true;
        return;
      }
    }
    timelineComplete = false;
  }

  let treeTimer = null;
  // Stage and agent changes come in bursts: the tree is read again once they settle.
  function reloadTreeSoon() {
    clearTimeout(treeTimer);
    treeTimer = setTimeout(() => loadSession().catch(fail), 150);
  }

  // ---- following ----------------------------------------------------------------------------

  // One envelope of seed 004's JSON. Appends are applied here; anything about an event the
  // page has not read yet reads the timeline on from where it stopped; anything about the
  // session's, a stage's or an agent's state reads the tree again.
  async function apply(envelope) {
    const data = envelope.data ?? {};
    const category = envelope.event?.category;
    if (data.event_id && typeof data.offset === "number") {
      return append(data.event_id, data.offset, data.content ?? data.thought ?? "");
    }
    if (data.event_id) {
      const event = events.get(data.event_id);
      if (!event) return loadTimeline();
      return updateEvent(event, data.status?.toUpperCase(), data.content ?? data.result);
    }
    if (["lifecycle", "stage", "dispatch", "system", "chat"].includes(category)) reloadTreeSoon();
    // The orchestrator (the session's own events) has the session's id: it is no agent.
    const agent = envelope.source?.agent_id;
    if (agent && agent !== envelope.run_id && !agentLists.has(agent)) reloadTreeSoon();
    if (category === "lifecycle" && data.subject === "session" && FINISHED.has(data.status?.toUpperCase())) {
      following = false;
    }
  }

  // The session's event stream from `position`, resumed after each interruption, until the
  // session finishes or the link stops working.
  async function follow() {
    let delay = 1000;
    while (following) {
      setLive("live", "● Live");
      try {
        await readStream();
        delay = 1000;
      } catch (error) {
        if (error instanceof Refused) throw error;
        console.warn("the event stream stopped:", error);
      }
      if (!following) break;
      setLive("reconnecting", "Reconnecting…");
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 30_000);
    }
    await loadSession();
    setLive("finished", "Finished");
  }

  async function readStream() {
    const headers = { Accept: "text/event-stream" };
    if (secret) headers.Authorization = `Bearer ${secret}`;
    const response = await fetch(`/sessions/${encodeURIComponent(sessionId)}/events?after=${position}`, { headers, credentials: "omit" });
    if (response.status === 401 || response.status === 403) throw new Refused("This link stopped working: it was revoked or has expired.");
    if (!response.ok) throw new Error(`the event stream answered ${response.status}`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    while (following) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replaceAll("\r\n", "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        await handleFrame(frame);
      }
    }
    await reader.cancel();
  }

  async function handleFrame(frame) {
    let kind = "message";
    let id = null;
    const data = [];
    for (const line of frame.split("\n")) {
      const colon = line.indexOf(":");
      if (colon === 0) continue; // a comment: keep-alive
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") kind = value;
      else if (field === "id") id = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return;
    const payload = JSON.parse(data.join("\n"));
    if (kind === "error") {
      if (payload.code === "UNAUTHENTICATED" || payload.code === "FORBIDDEN") throw new Refused("This link stopped working: it was revoked or has expired.");
      throw new Error(payload.message);
    }
    await apply(payload);
    if (id !== null) position = Number(id);
  }

  function fail(error) {
    if (error instanceof Refused) {
      following = false;
      setLive("refused", "Not available");
      showNotice(error.message);
      return;
    }
    console.error(error);
    setLive("error", "Error");
    showNotice(`The session could not be shown: ${error.message}`);
  }

  async function start() {
    if (!secret) setLive("loading", "No secret in the link");
    // Where the stream will start: read before the records, so whatever happens meanwhile is
    // in the stream (applied twice, it changes nothing).
    const now = await graphql(POSITION, { id: sessionId });
    if (!now.session) throw new Refused("There is no such session (it may have been deleted).");
    position = now.session.eventsConnection.edges[0]?.node.sequence ?? 0;
    await loadTimeline();
    await loadSession();
    if (FINISHED.has(session.status)) {
      setLive("finished", "Finished");
      return;
    }
    await follow();
  }

  start().catch(fail);
})();

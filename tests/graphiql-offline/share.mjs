// Opens the pages share links open, in headless Chromium that may reach nothing but the server:
// - the link the demo printed at start-up: the orchestrated session renders, its stages, every
//   agent of its tree, every timeline event and its final analysis;
// - a link created with `createShareLink` for the demo's running session: the page follows it
//   live, so text appended to its streaming event appears without a reload; once the link is
//   revoked, the page says it stopped working.
// Fails on any request to another origin, any console error, page error or
// Content-Security-Policy violation.
//
// Environment: CASEFILE_URL (the server), CASEFILE_SHARE_URL (the demo's link),
// CASEFILE_ADMIN_TOKEN (an admin token, to create, write and revoke), CHROMIUM, SCREENSHOT_DIR
// (default: the system's temporary directory). run.sh sets them all.
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findings, launch, poll, violations, watchedPage } from "./browser.mjs";

const server = new URL(process.env.CASEFILE_URL ?? "http://127.0.0.1:8080");
const demoLink = process.env.CASEFILE_SHARE_URL ?? "";
const admin = process.env.CASEFILE_ADMIN_TOKEN ?? "";
const screenshots = process.env.SCREENSHOT_DIR ?? tmpdir();
const orchestratedShot = join(screenshots, "share-orchestrated.png");
const liveShot = join(screenshots, "share-live.png");

const { problems, check, finish } = findings();
const watches = [];

async function graphql(query, variables) {
  const response = await fetch(new URL("/graphql", server), {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${admin}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = await response.json();
  if (body.errors) throw new Error(`${query.split("{")[0].trim()}: ${JSON.stringify(body.errors)}`);
  return body.data;
}

// What the page shows: its live state, and the stages, agents and events it rendered.
function shown() {
  return {
    live: document.getElementById("live")?.dataset.state,
    notice: document.getElementById("notice")?.textContent ?? null,
    stages: [...document.querySelectorAll("[data-stage]")].map((e) => e.dataset.stage),
    agents: [...document.querySelectorAll("[data-agent]")].map((e) => e.dataset.agent),
    events: [...document.querySelectorAll("[data-event]")].map((e) => e.dataset.event),
    finalAnalysis: document.getElementById("final-analysis")?.textContent ?? "",
  };
}

const browser = await launch(server);
let page;
try {
  check(/\/share\/[0-9a-f-]{36}#cfs_[0-9a-f]{64}$/.test(demoLink), `the demo printed the link ${JSON.stringify(demoLink)}`);
  check(new URL(demoLink).origin === server.origin, "the demo's link points at the server");

  // 1. The demo's orchestrated session, finished: everything it holds renders.
  const sessionId = new URL(demoLink).pathname.split("/")[2];
  const expected = (await graphql(`query Expected($id: ID!) { session(id: $id) {
      finalAnalysis stages { uuid } agents { uuid agentType } counts { timelineEvents } } }`, { id: sessionId })).session;
  let watch;
  ({ page, watch } = await watchedPage(browser, server));
  watches.push(watch);
  const response = await page.goto(demoLink, { waitUntil: "load" });
  check(response.ok(), `GET ${new URL(demoLink).pathname} answered ${response.status()}`);
  const headers = response.headers();
  check((headers["content-security-policy"] ?? "").includes("default-src 'none'"), `the page's Content-Security-Policy is ${headers["content-security-policy"]}`);
  check(headers["referrer-policy"] === "no-referrer", `the page's Referrer-Policy is ${headers["referrer-policy"]}`);
  const orchestrated = await poll(page, shown, (s) => s.live === "finished" || s.live === "refused" || s.live === "error", "the session to render");
  check(orchestrated.live === "finished", `the page says ${orchestrated.live}: ${orchestrated.notice}`);
  check(sameSet(orchestrated.stages, expected.stages.map((s) => s.uuid)), `stages shown: ${orchestrated.stages.length} of ${expected.stages.length}`);
  check(sameSet(orchestrated.agents, expected.agents.map((a) => a.uuid)), `agents shown: ${orchestrated.agents.length} of ${expected.agents.length}`);
  check(new Set(expected.agents.map((a) => a.agentType)).size === 3, "the orchestrated session has a supervisor, team supervisors and workers");
  check(orchestrated.events.length === expected.counts.timelineEvents, `timeline events shown: ${orchestrated.events.length} of ${expected.counts.timelineEvents}`);
  check(expected.finalAnalysis && orchestrated.finalAnalysis === expected.finalAnalysis, "the final analysis is shown as recorded");
  await page.screenshot({ path: orchestratedShot, fullPage: true });
  console.log(`orchestrated session: ${orchestrated.stages.length} stage(s), ${orchestrated.agents.length} agents, ${orchestrated.events.length} timeline events, the final analysis`);
  check((await violations(page)).length === 0, `Content-Security-Policy violations: ${(await violations(page)).join("; ")}`);
  await page.close();

  // 2. The demo's running session, through a link created now: an append arrives live.
  const sessions = (await graphql(`{ sessions(first: 50, filter: { status: [IN_PROGRESS] }) { edges { node {
      id uuid timeline(last: 50) { edges { node { id uuid status content } } } } } } }`)).sessions.edges.map((e) => e.node);
  const running = sessions.find((s) => s.timeline.edges.some((e) => e.node.status === "STREAMING"));
  if (!running) throw new Error("the demo has no running session with a streaming event");
  const streaming = running.timeline.edges.map((e) => e.node).find((e) => e.status === "STREAMING");
  const created = (await graphql(`mutation Share($id: ID!) { createShareLink(sessionId: $id, expiresIn: "1h", note: "share check") {
      url link { id } } }`, { id: running.id })).createShareLink;
  check(created.url?.startsWith(`${server.origin}/share/${running.uuid}#cfs_`), `createShareLink's url is ${created.url}`);
  let revoked = false;
  ({ page, watch } = await watchedPage(browser, server, {
    // Once the link is revoked, its stream's end is refused: expected, and only then.
    expected: (text) => revoked && /status of 401/.test(text),
  }));
  watches.push(watch);
  await page.goto(created.url, { waitUntil: "load" });
  await poll(page, (id) => ({ live: document.getElementById("live")?.dataset.state, has: !!document.querySelector(`[data-event="${id}"]`) }),
    (s) => s.live === "live" && s.has, "the running session, followed live", streaming.uuid);
  const marker = ` [appended by the share check at ${new Date().toISOString()}]`;
  const appendedAt = Date.now();
  await graphql(`mutation Append($input: AppendTimelineContentInput!) { appendTimelineContent(input: $input) { __typename } }`,
    { input: { eventId: streaming.id, offset: Array.from(streaming.content).length, delta: marker } });
  const text = await poll(page, (id) => document.querySelector(`[data-event="${id}"] .text`)?.textContent ?? "",
    (t) => t.endsWith(marker), "the appended text to appear", streaming.uuid);
  check(text === streaming.content + marker, "the event shows its content and the append, once");
  console.log(`running session: the append appeared ${Date.now() - appendedAt} ms after it was sent`);
  await page.screenshot({ path: liveShot, fullPage: true });

  // 3. Revoked: the stream closes and the page says so.
  revoked = true;
  await graphql(`mutation Revoke($id: UUID!) { revokeShareLink(id: $id) { revokedAt } }`, { id: created.link.id });
  const after = await poll(page, shown, (s) => s.live === "refused", "the page to notice the revocation");
  console.log(`revoked: the page says "${after.notice}"`);
  check((await violations(page)).length === 0, `Content-Security-Policy violations: ${(await violations(page)).join("; ")}`);
} catch (error) {
  problems.push(error.message);
  await page?.screenshot({ path: liveShot }).catch(() => {});
} finally {
  await browser.close();
}

for (const watch of watches) {
  check(watch.offOrigin.length === 0, `requests to other origins were attempted: ${watch.offOrigin.join(", ")}`);
  check(watch.consoleErrors.length === 0, `console errors: ${watch.consoleErrors.join(" | ")}`);
}
console.log(`screenshots: ${orchestratedShot} ${liveShot}`);
finish("Share page check", "the shared sessions rendered and followed live, and no request left the server's origin");

function sameSet(a, b) {
  return a.length === b.length && a.every((x) => b.includes(x));
}

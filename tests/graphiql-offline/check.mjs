// Opens casefile's GraphiQL in headless Chromium that may reach nothing but the server, and uses
// it as a person would: the pre-filled example query runs, the docs explorer lists the schema,
// a subscription delivers its first event over the WebSocket. Fails on any request to another
// origin, any console error, page error or Content-Security-Policy violation.
//
// Environment: CASEFILE_URL (the server, e.g. http://127.0.0.1:8080), CASEFILE_TOKEN (an API
// token when the server runs with `--auth tokens`: typed into the headers editor),
// CHROMIUM (default /usr/bin/chromium), SCREENSHOT (default graphiql-offline.png in the
// system's temporary directory). run.sh sets them all.
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findings, launch, poll, sleep, violations, watchedPage } from "./browser.mjs";

const server = new URL(process.env.CASEFILE_URL ?? "http://127.0.0.1:8080");
const token = process.env.CASEFILE_TOKEN ?? "";
const screenshot = process.env.SCREENSHOT ?? join(tmpdir(), "graphiql-offline.png");

const { problems, check, finish } = findings();
let tokenTyped = false;
let refusedBeforeToken = 0;

const browser = await launch(server);
let page;
let watch;
try {
  ({ page, watch } = await watchedPage(browser, server, {
    // Until the token is typed in, the headers editor's placeholder is refused (the schema
    // request at start-up): expected, and only that.
    expected: (text) => {
      const before = token && !tokenTyped && text.includes("status of 401");
      if (before) refusedBeforeToken += 1;
      return before;
    },
  }));
  const { framesSent, framesReceived } = watch;

  const response = await page.goto(server.href, { waitUntil: "load" });
  check(response.ok(), `GET / answered ${response.status()}`);
  const csp = response.headers()["content-security-policy"] ?? "";
  check(csp.includes("default-src 'none'"), `the page's Content-Security-Policy is ${JSON.stringify(csp)}`);

  // GraphiQL renders, with the example query (and, with tokens, the Authorization header).
  await page.waitForSelector(".graphiql-query-editor .CodeMirror");
  const query = await editorText(page, ".graphiql-query-editor");
  check(query.includes("query RecentSessions"), "the query editor holds the example query");
  if (token) {
    await page.click('button[data-name="headers"]');
    const headers = await editorText(page, ".graphiql-editor-tool .graphiql-editor:not(.hidden)");
    check(headers.includes('"Authorization": "Bearer <your casefile API token>"'),
      `the headers editor starts with the Authorization header to fill in, not ${JSON.stringify(headers)}`);
    await setEditor(page, ".graphiql-editor-tool .graphiql-editor:not(.hidden)",
      JSON.stringify({ Authorization: `Bearer ${token}` }, null, 2));
    tokenTyped = true;
    // The schema was asked for with the placeholder: again, with the token.
    await page.click('button[aria-label="Re-fetch GraphQL schema"]');
  }

  // The example query runs and shows the demo's sessions.
  await page.click(".graphiql-execute-button");
  const result = JSON.parse(await waitForResult(page, ['"sessions"', '"errors"']));
  check(!result.errors, `the example query failed: ${JSON.stringify(result.errors)}`);
  const sessions = result.data?.sessions?.edges ?? [];
  check(sessions.length > 0 && sessions[0].node.alertType, "the example query returns demo sessions");
  await page.screenshot({ path: screenshot });
  console.log(`example query: ${result.data?.sessions?.totalCount} sessions; first: ${sessions[0]?.node.alertType}`);

  // A dialog (its scroll lock adds an inline <style>, which the policy allows by hash).
  await page.click('button[aria-label="Open settings dialog"]');
  await page.waitForSelector('[role="dialog"]');
  await page.keyboard.press("Escape");

  // The docs explorer lists the schema's root types.
  await page.click('button[aria-label="Show Documentation Explorer"]');
  const docs = await poll(page, () => document.querySelector(".graphiql-doc-explorer")?.innerText ?? "",
    (text) => /query:\s*Query/.test(text), "the docs explorer lists Query");
  check(/subscription:\s*Subscription/.test(docs), "the docs explorer lists Subscription");

  // A subscription on the first session starts with that session as it is now.
  const id = sessions[0]?.node.id;
  await setEditor(page, ".graphiql-query-editor",
    `subscription Watch {\n  session(id: "${id}") {\n    kind\n    session { id alertType status }\n  }\n}\n`);
  await page.click(".graphiql-execute-button");
  const event = JSON.parse(await waitForResult(page, ['"kind"', '"errors"']));
  check(event.data?.session?.session?.id === id, `the subscription's first event: ${JSON.stringify(event)}`);
  const init = framesSent.map(parse).find((m) => m?.type === "connection_init");
  check(init, "GraphiQL sent connection_init over the WebSocket");
  if (token) {
    check(init?.payload?.Authorization === `Bearer ${token}`,
      "connection_init carries the headers editor's Authorization");
  }
  check(framesReceived.map(parse).some((m) => m?.type === "next"), "the server sent the event over the WebSocket");
  console.log(`subscription: first event ${event.data?.session?.kind} for ${event.data?.session?.session?.alertType}`);
  await page.click(".graphiql-execute-button"); // stops it

  const blocked = await violations(page);
  check(blocked.length === 0, `Content-Security-Policy violations: ${blocked.join("; ")}`);
} catch (error) {
  problems.push(error.message);
  // What the page showed when it failed, instead of the result pane.
  await page?.screenshot({ path: screenshot }).catch(() => {});
} finally {
  await browser.close();
}

if (token) console.log(`refused before the token was typed in (expected): ${refusedBeforeToken} request(s)`);
check(watch && watch.offOrigin.length === 0, `requests to other origins were attempted: ${watch?.offOrigin.join(", ")}`);
check(watch && watch.consoleErrors.length === 0, `console errors: ${watch?.consoleErrors.join(" | ")}`);
console.log(`screenshot: ${screenshot}`);
finish("GraphiQL offline check", "no request left the server's origin");

function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// GraphiQL's editors are CodeMirror 5 instances, reachable from their wrapper elements.
function editorText(page, selector) {
  return page.$eval(`${selector} .CodeMirror`, (e) => e.CodeMirror.getValue());
}

// Sets an editor's text the way typing would, then gives GraphiQL time to parse it (it picks
// the operation to run 100 ms after the last change).
async function setEditor(page, selector, text) {
  await page.$eval(`${selector} .CodeMirror`, (e, text) => e.CodeMirror.setValue(text), text);
  await sleep(500);
}

// The response pane's text once it contains one of `markers`.
function waitForResult(page, markers) {
  return poll(page, () => document.querySelector(".result-window .CodeMirror")?.CodeMirror.getValue() ?? "",
    (text) => markers.some((m) => text.includes(m)), `a response with ${markers.join(" or ")}`);
}

// Headless Chromium that may reach nothing but casefile, shared by check.mjs (GraphiQL) and
// share.mjs (the share page): every request to another origin is refused and counted, and so
// are console errors, page errors and Content-Security-Policy violations, which each check
// reports at its end.
import puppeteer from "puppeteer-core";

export const TIMEOUT = 20_000;

export async function launch(server, chromium = process.env.CHROMIUM ?? "/usr/bin/chromium") {
  return puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: [
      // Every host name but the server's address fails to resolve; no proxy, no background
      // traffic (updates, safe browsing, sign-in).
      `--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE ${server.hostname}`,
      "--no-proxy-server",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-domain-reliability",
      "--disable-sync",
      // Chromium's sandbox needs user namespaces, which root in a container seldom has.
      ...(process.getuid?.() === 0 ? ["--no-sandbox"] : []),
    ],
  });
}

// A new page that watches itself: `watch.offOrigin` (requests to other origins),
// `watch.consoleErrors` (console errors `expected` does not accept, and page errors),
// `watch.framesSent`/`framesReceived` (WebSocket frames), and `violations(page)` (CSP).
export async function watchedPage(browser, server, { expected = () => false } = {}) {
  const page = await browser.newPage();
  const watch = { offOrigin: [], consoleErrors: [], framesSent: [], framesReceived: [] };
  await page.setViewport({ width: 1440, height: 900 });
  page.setDefaultTimeout(TIMEOUT);

  // The network: this server's origin and inline data only; anything else is refused and
  // counted, so an attempt fails the check even though it could not have succeeded.
  await page.setRequestInterception(true);
  page.on("request", (request) => {
    const url = request.url();
    if (url.startsWith("data:") || url.startsWith("blob:") || new URL(url).origin === server.origin) {
      request.continue();
    } else {
      watch.offOrigin.push(url);
      request.abort("blockedbyclient");
    }
  });
  // WebSockets bypass request interception: watch them through the DevTools protocol.
  const cdp = await page.createCDPSession();
  await cdp.send("Network.enable");
  cdp.on("Network.webSocketCreated", ({ url }) => {
    if (new URL(url).host !== server.host) watch.offOrigin.push(url);
  });
  cdp.on("Network.webSocketFrameSent", ({ response }) => watch.framesSent.push(response.payloadData));
  cdp.on("Network.webSocketFrameReceived", ({ response }) => watch.framesReceived.push(response.payloadData));

  page.on("console", (message) => {
    if (message.type() === "error" && !expected(message.text())) watch.consoleErrors.push(message.text());
  });
  page.on("pageerror", (error) => watch.consoleErrors.push(`page error: ${error.message}`));
  // Violations also reach the console, but only this event names the directive for sure.
  await page.evaluateOnNewDocument(() => {
    window.__cspViolations = [];
    document.addEventListener("securitypolicyviolation", (e) =>
      window.__cspViolations.push(`${e.effectiveDirective} blocked ${e.blockedURI || "inline"}`));
  });
  return { page, watch };
}

export function violations(page) {
  return page.evaluate(() => window.__cspViolations);
}

// `read` in the page until `done` holds for what it returns (unlike page.waitForFunction, a
// timeout says what the page showed last).
export async function poll(page, read, done, what, arg) {
  const deadline = Date.now() + TIMEOUT;
  for (;;) {
    const value = await page.evaluate(read, arg);
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last saw ${JSON.stringify(value).slice(0, 300)}`);
    await sleep(100);
  }
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// A check's findings: `check(ok, message)` records the failures, `finish(name)` prints them and
// sets the exit code.
export function findings() {
  const problems = [];
  return {
    problems,
    check(ok, message) {
      if (!ok) problems.push(message);
    },
    finish(name, passed) {
      if (problems.length > 0) {
        console.error(`${name} FAILED:\n- ${problems.join("\n- ")}`);
        process.exitCode = 1;
      } else {
        console.log(`${name} passed: ${passed}`);
      }
    },
  };
}

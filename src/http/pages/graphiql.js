// Starts GraphiQL with the settings the server wrote into the page as JSON (data, not an inline
// script: the page's Content-Security-Policy runs scripts from this server's files only).
"use strict";
(() => {
  const root = document.getElementById("graphiql");
  if (typeof React === "undefined" || typeof ReactDOM === "undefined" || typeof GraphiQL === "undefined") {
    root.textContent = "GraphiQL's scripts did not load; the browser console says why.";
    return;
  }
  const config = JSON.parse(document.getElementById("graphiql-config").textContent);
  const endpoint = new URL(config.endpoint, window.location.href).toString();
  const subscriptions = new URL(config.subscriptionEndpoint, window.location.href);
  subscriptions.protocol = subscriptions.protocol === "https:" ? "wss:" : "ws:";
  // GraphiQL sends the headers editor's headers with every HTTP request and, for a
  // subscription, as its WebSocket's connection_init payload (where casefile reads
  // Authorization).
  const fetcher = GraphiQL.createFetcher({ url: endpoint, subscriptionUrl: subscriptions.toString() });
  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, {
      fetcher,
      defaultQuery: config.defaultQuery,
      defaultHeaders: config.defaultHeaders,
      defaultEditorToolsVisibility: true,
    })
  );
})();

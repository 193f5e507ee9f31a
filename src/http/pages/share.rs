//! The read-only page a share link opens, `/share/{session}#<secret>`: the session's stages,
//! agents, timeline and conclusion, followed live while it runs. The secret stays in the
//! fragment, which browsers never send (nor put in `Referer`): `share.js` reads it and sends it
//! as the bearer of its GraphQL requests and of the session's event stream, so the server sees
//! it exactly as it sees any other client's credential, with the same one-session scope.

use super::Page;

const TEMPLATE: &str = include_str!("share.html");

/// Scripts and styles from this server's files only: nothing inline, no fonts, no images.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn page() -> Page {
    Page::new(TEMPLATE, POLICY)
}

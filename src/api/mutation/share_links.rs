//! Sharing a session: read-only links (operator or above).

use std::sync::Arc;

use async_graphql::{Context, ID, Result, SimpleObject};
use chrono::Utc;
use uuid::Uuid;

use super::{Audit, origin, transaction};
use crate::api::PublicOrigin;
use crate::api::ids::{NodeType, decode_as};
use crate::api::types::ShareLink;
use crate::auth::tokens::{generate_share_secret, hash};
use crate::error::Error;
use crate::observe::request::RequestInfo;
use crate::options::parse_period;
use crate::store::share_links::{self as link_store, NewShareLink};

/// The longest a link may live: long enough for a post-mortem's review, short enough that a
/// forgotten link does not open a session for good.
const LONGEST: chrono::Duration = chrono::Duration::days(90);

/// A link just created, with its secret.
#[derive(SimpleObject)]
pub struct CreatedShareLink {
    /// The link.
    pub link: ShareLink,
    /// The secret (`cfs_` and 64 hex digits): send it as `Authorization: Bearer <secret>` to
    /// read the session over GraphQL or its event stream. Shown only here: casefile keeps only
    /// its hash.
    pub secret: String,
    /// The page that shows the session in a browser, read-only and live while it runs:
    /// `{origin}/share/{session uuid}#{secret}`, the secret in the fragment, which browsers
    /// never send to a server. The origin is `--public-origin`, or `http://` and the host
    /// this request was sent to (null when it named none).
    pub url: Option<String>,
}

/// Where the page of `session`'s link with `secret` is.
fn page_url(ctx: &Context<'_>, session: Uuid, secret: &str) -> Option<String> {
    let origin = match &ctx.data_unchecked::<PublicOrigin>().0 {
        Some(origin) => origin.to_string(),
        None => format!("http://{}", ctx.data_opt::<RequestInfo>()?.host.as_deref()?),
    };
    Some(format!("{origin}/share/{session}#{secret}"))
}

pub(super) async fn create(
    ctx: &Context<'_>,
    session_id: ID,
    expires_in: String,
    note: Option<String>,
) -> Result<CreatedShareLink> {
    let session = decode_as(NodeType::Session, &session_id)?;
    let lifetime = parse_period(&expires_in)
        .ok()
        .filter(|period| *period <= LONGEST)
        .ok_or_else(|| {
            Error::bad_input(format!(
                "`expiresIn` must be a period such as `7d`, `12h` or `90m`, at most 90 days; got \
                 {expires_in:?}"
            ))
        })?;
    let secret = generate_share_secret();
    let link = (
        session,
        Utc::now() + lifetime,
        note,
        hash(&secret),
        origin(ctx)?,
    );
    let row = transaction(
        ctx,
        Audit::Caller,
        link,
        |c, (session, expires_at, note, digest, origin)| {
            Box::pin(async move {
                let new = NewShareLink {
                    session_id: *session,
                    secret_hash: digest,
                    expires_at: *expires_at,
                    note: note.as_deref(),
                    created_by: origin.actor.as_deref(),
                };
                link_store::create(c, &new, origin).await
            })
        },
    )
    .await?;
    ctx.data_unchecked::<Arc<crate::auth::Authenticator>>()
        .tokens()
        .forget_refusals();
    Ok(CreatedShareLink {
        url: page_url(ctx, row.session_id, &secret),
        link: ShareLink(Arc::new(row)),
        secret,
    })
}

pub(super) async fn revoke(ctx: &Context<'_>, id: Uuid) -> Result<ShareLink> {
    let row = transaction(ctx, Audit::Caller, (id, origin(ctx)?), |c, (id, origin)| {
        Box::pin(link_store::revoke(c, *id, origin))
    })
    .await?;
    // This process forgets at once (streams the link opened close); others when the NOTIFY
    // reaches them.
    ctx.data_unchecked::<Arc<crate::auth::Authenticator>>()
        .tokens()
        .invalidate();
    Ok(ShareLink(Arc::new(row)))
}

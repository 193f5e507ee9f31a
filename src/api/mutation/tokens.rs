//! Managing API tokens (admin only).

use async_graphql::{Context, InputObject, Result, SimpleObject};
use chrono::{DateTime, Utc};

use super::{Audit, origin, transaction};
use crate::api::types::ApiToken;
use crate::auth::Authenticator;
use crate::auth::tokens::{generate_secret, hash};
use crate::error::Error;
use crate::model::Role;
use crate::store::tokens::{self as token_store, NewToken};

/// A new API token.
#[derive(InputObject)]
pub struct CreateApiTokenInput {
    /// Unique name, for good (letters, digits, `.`, `_`, `-`; at most 100): what it creates is
    /// recorded as `token:NAME`.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// When it stops working (in the future; default: never).
    pub expires_at: Option<DateTime<Utc>>,
}

/// A token just created, with its secret.
#[derive(SimpleObject)]
pub struct CreatedApiToken {
    /// The token.
    pub token: ApiToken,
    /// The secret to send as `Authorization: Bearer <secret>`. Shown only here: casefile keeps
    /// only its hash.
    pub secret: String,
}

pub(super) async fn create(
    ctx: &Context<'_>,
    input: CreateApiTokenInput,
) -> Result<CreatedApiToken> {
    if input.expires_at.is_some_and(|at| at <= Utc::now()) {
        return Err(Error::bad_input("`expiresAt` must be in the future").into());
    }
    let origin = origin(ctx)?;
    let secret = generate_secret();
    let secret_hash = hash(&secret);
    let token = (input, secret_hash, origin);
    let row = transaction(ctx, Audit::Caller, token, |c, (input, digest, origin)| {
        Box::pin(async move {
            let new = NewToken {
                name: &input.name,
                role: input.role,
                secret_hash: digest,
                expires_at: input.expires_at,
                created_by: origin.actor.as_deref(),
            };
            token_store::create(c, &new, origin).await
        })
    })
    .await?;
    ctx.data_unchecked::<std::sync::Arc<Authenticator>>()
        .tokens()
        .forget_refusals();
    Ok(CreatedApiToken {
        token: ApiToken(row),
        secret,
    })
}

pub(super) async fn revoke(ctx: &Context<'_>, name: String) -> Result<ApiToken> {
    let origin = origin(ctx)?;
    let row = transaction(ctx, Audit::Caller, (name, origin), |c, (name, origin)| {
        Box::pin(token_store::revoke(c, name, origin))
    })
    .await?;
    // This process forgets at once; others when the NOTIFY reaches them.
    ctx.data_unchecked::<std::sync::Arc<Authenticator>>()
        .tokens()
        .invalidate();
    Ok(ApiToken(row))
}

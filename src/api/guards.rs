//! Field guards: every root field names the least role that may use it, so the rule holds on
//! every transport (HTTP, batches, WebSocket, SSE, multipart) alike. The edge puts the caller's
//! [`Identity`] into each request; a request without one is refused here too.
//!
//! A share link's identity reads one session and nothing else: [`RoleGuard`] refuses it, so
//! every root field does unless it names a session and says so with [`SessionReaderGuard`] (its
//! resolver then checks the session with [`may_read`]). A new root field is closed to links
//! until it is made so.

use async_graphql::{Context, Guard};

use crate::auth::Identity;
use crate::error::Error;
use crate::model::{Role, db_name};

/// Allows callers whose role is `role` or above.
pub struct RoleGuard(pub Role);

impl Guard for RoleGuard {
    async fn check(&self, ctx: &Context<'_>) -> async_graphql::Result<()> {
        let identity = caller(ctx)?;
        if identity.scope.is_some() {
            return Err(beyond_the_link().into());
        }
        if identity.role >= self.0 {
            Ok(())
        } else {
            Err(Error::Forbidden(format!(
                "this needs the {} role; the caller has {}",
                db_name(self.0),
                db_name(identity.role)
            ))
            .into())
        }
    }
}

/// Allows readers, share links included: for root fields that read one session, whose
/// resolver checks that session with [`may_read`].
pub struct SessionReaderGuard;

impl Guard for SessionReaderGuard {
    async fn check(&self, ctx: &Context<'_>) -> async_graphql::Result<()> {
        let identity = caller(ctx)?;
        if identity.scope.is_some() || identity.role >= Role::Reader {
            Ok(())
        } else {
            Err(Error::Forbidden("this needs the reader role".to_owned()).into())
        }
    }
}

/// Refuses what a share link does not open: anything but its session.
pub(crate) fn beyond_the_link() -> Error {
    Error::Forbidden(
        "a share link opens its one session only: ask for it with `session(id: …)`".to_owned(),
    )
}

/// Whether the caller may read `session`; FORBIDDEN for a share link of another session.
pub(crate) fn may_read(ctx: &Context<'_>, session: uuid::Uuid) -> crate::error::Result<()> {
    if caller(ctx)?.may_read(session) {
        Ok(())
    } else {
        Err(beyond_the_link())
    }
}

/// FORBIDDEN for a share link: for fields under a session that reach other sessions.
pub(crate) fn across_sessions(ctx: &Context<'_>) -> crate::error::Result<()> {
    if caller(ctx)?.scope.is_some() {
        Err(beyond_the_link())
    } else {
        Ok(())
    }
}

/// The request's caller.
pub(crate) fn caller<'a>(ctx: &Context<'a>) -> crate::error::Result<&'a Identity> {
    ctx.data_opt::<Identity>().ok_or_else(|| {
        Error::Unauthenticated(crate::auth::Rejection::UNAUTHENTICATED_MESSAGE.to_owned())
    })
}

//! Field guards: every root field names the least role that may use it, so the rule holds on
//! every transport (HTTP, batches, WebSocket, SSE, multipart) alike. The edge puts the caller's
//! [`Identity`] into each request; a request without one is refused here too.

use async_graphql::{Context, Guard};

use crate::auth::Identity;
use crate::error::Error;
use crate::model::{Role, db_name};

/// Allows callers whose role is `role` or above.
pub struct RoleGuard(pub Role);

impl Guard for RoleGuard {
    async fn check(&self, ctx: &Context<'_>) -> async_graphql::Result<()> {
        let identity = caller(ctx)?;
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

/// The request's caller.
pub(crate) fn caller<'a>(ctx: &Context<'a>) -> crate::error::Result<&'a Identity> {
    ctx.data_opt::<Identity>().ok_or_else(|| {
        Error::Unauthenticated(crate::auth::Rejection::UNAUTHENTICATED_MESSAGE.to_owned())
    })
}

//! Operations answered as streams (SSE, multipart, WebSocket) within the request limits: a
//! query or mutation holds a place among the requests in flight while it runs, and ends at the
//! request timeout with a last result coded `TIMEOUT`, as it would over a plain POST; a
//! subscription is long-lived and does neither.

use std::any::TypeId;
use std::sync::Arc;

use async_graphql::{Data, Executor, Request, Response, ServerError};
use futures::StreamExt as _;
use futures::stream::{self, BoxStream};

use super::throttle::{InFlight, TIMEOUT, Throttle};
use crate::api::Runner;
use crate::api::runner::coded_error;
use crate::auth::Caller;

/// Runs `request` of `caller` as a stream. A query or mutation runs in `place` (the one its HTTP
/// request was admitted with) or, without one, in a new place; refused, it gets one result
/// with the refusal.
pub fn operation_stream(
    runner: &Runner,
    throttle: &Arc<Throttle>,
    mut request: Request,
    session_data: Option<Arc<Data>>,
    caller: &Caller,
    place: Option<InFlight>,
) -> BoxStream<'static, Response> {
    if runner.runs_subscription(&mut request) {
        return runner.execute_stream(request, session_data);
    }
    let place = match place.map_or_else(|| throttle.occupy(caller), Ok) {
        Ok(place) => place,
        Err(refusal) => return only(refusal.error()),
    };
    let timed_out = coded_error(TIMEOUT, throttle.timed_out());
    let mut responses = runner.execute_stream(request, session_data);
    Box::pin(async_stream::stream! {
        let deadline = tokio::time::sleep_until(place.deadline);
        // Held while the operation runs; dropped with it when it is cut off.
        let _place = place;
        futures::pin_mut!(deadline);
        loop {
            tokio::select! {
                // A result ready at the deadline is delivered: a committed mutation's answer
                // must not be replaced by a TIMEOUT saying nothing was kept.
                biased;
                next = responses.next() => match next {
                    Some(response) => yield response,
                    None => break,
                },
                () = &mut deadline => {
                    yield Response::from_errors(vec![timed_out.clone()]);
                    break;
                }
            }
        }
    })
}

/// A stream of one result: this error.
fn only(error: ServerError) -> BoxStream<'static, Response> {
    stream::once(async move { Response::from_errors(vec![error]) }).boxed()
}

/// The runner as a WebSocket connection's operations reach it: each one bounded as above,
/// counted against the connection's [`Caller`] (in its data since `connection_init`).
#[derive(Clone)]
pub struct BoundedRunner {
    pub runner: Runner,
    pub throttle: Arc<Throttle>,
}

impl Executor for BoundedRunner {
    async fn execute(&self, request: Request) -> Response {
        self.runner.execute(request).await
    }

    fn execute_stream(
        &self,
        request: Request,
        session_data: Option<Arc<Data>>,
    ) -> BoxStream<'static, Response> {
        let caller = session_data
            .as_deref()
            .and_then(|data| data.get(&TypeId::of::<Caller>()))
            .and_then(|caller| caller.downcast_ref::<Caller>())
            .cloned();
        match caller {
            Some(caller) => operation_stream(
                &self.runner,
                &self.throttle,
                request,
                session_data,
                &caller,
                None,
            ),
            // async-graphql runs operations only once `connection_init` was accepted, which
            // names the caller: nothing runs uncounted.
            None => only(coded_error(
                "UNAUTHENTICATED",
                "the connection is not initialised",
            )),
        }
    }
}

//! Gives every operation its own loaders and drives it so that their batches go to the
//! database only when the operation is blocked on them (see `api::loaders::batch`). Operations
//! on a stream (WebSocket, SSE) get loaders that keep nothing between loads, so each update of
//! a subscription is resolved against the database as it is then.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextExecute, NextPrepareRequest, NextSubscribe,
};
use async_graphql::{Request, Response, ServerResult};
use futures::stream::BoxStream;

use crate::api::loaders::{Dispatcher, Loaders, UntilIdle};
use crate::store::Store;

pub struct Batching(pub Store);

impl ExtensionFactory for Batching {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(BatchingOfOne {
            store: self.0.clone(),
            dispatcher: Arc::default(),
            streamed: AtomicBool::new(false),
        })
    }
}

struct BatchingOfOne {
    store: Store,
    dispatcher: Arc<Dispatcher>,
    /// The operation runs on a stream (`subscribe` is called before the request is prepared).
    streamed: AtomicBool,
}

#[async_graphql::async_trait::async_trait]
impl Extension for BatchingOfOne {
    fn subscribe<'s>(
        &self,
        ctx: &ExtensionContext<'_>,
        stream: BoxStream<'s, Response>,
        next: NextSubscribe<'_>,
    ) -> BoxStream<'s, Response> {
        self.streamed.store(true, Ordering::Relaxed);
        Box::pin(UntilIdle::new(
            next.run(ctx, stream),
            self.dispatcher.clone(),
        ))
    }

    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        let cached = !self.streamed.load(Ordering::Relaxed);
        let loaders = Loaders::new(&self.store, &self.dispatcher, cached);
        next.run(ctx, request.data(loaders)).await
    }

    async fn execute(
        &self,
        ctx: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> Response {
        UntilIdle::new(
            Box::pin(next.run(ctx, operation_name)),
            self.dispatcher.clone(),
        )
        .await
    }
}

//! A stream polled inside a span (tracing's `Instrument` covers futures only), so what the
//! stream does each time it is polled (a statement's rows, a subscription's batches) is
//! recorded under that span.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use tracing::Span;

pub struct InSpan<'a, T> {
    inner: BoxStream<'a, T>,
    span: Span,
}

impl<'a, T> InSpan<'a, T> {
    pub fn new(inner: BoxStream<'a, T>, span: Span) -> Self {
        InSpan { inner, span }
    }
}

impl<T> Stream for InSpan<'_, T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        this.inner.as_mut().poll_next(cx)
    }
}

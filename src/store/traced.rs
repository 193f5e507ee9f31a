//! A connection whose statements are traced: each one is a span (`sql`, with its text) under
//! the operation or batch that ran it, and counts against that operation's statements. sqlx
//! itself only logs an event once a statement is done.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt as _, Stream, StreamExt as _};
use sqlx::postgres::{PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{Describe, Either, Execute, Executor, PgConnection, Postgres};
use tracing::{Instrument as _, Span};

use crate::observe::request::count_statement;

/// `&mut PgConnection`, traced.
pub struct Traced<'c>(pub &'c mut PgConnection);

impl fmt::Debug for Traced<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Traced").finish()
    }
}

/// Traces `connection`'s statements.
pub fn traced(connection: &mut PgConnection) -> Traced<'_> {
    Traced(connection)
}

fn statement_span(sql: &str) -> Span {
    count_statement();
    let operation = sql
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase();
    tracing::debug_span!(
        "sql",
        otel.name = %operation,
        otel.kind = "client",
        db.system = "postgresql",
        db.operation.name = %operation,
        db.query.text = sql,
    )
}

impl<'c> Executor<'c> for Traced<'c> {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let span = statement_span(query.sql());
        let inner = {
            let _entered = span.enter();
            self.0.fetch_many(query)
        };
        InSpan { inner, span }.boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let span = statement_span(query.sql());
        self.0.fetch_optional(query).instrument(span).boxed()
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement<'q>, sqlx::Error>>
    where
        'c: 'e,
    {
        self.0.prepare_with(sql, parameters)
    }

    fn describe<'e, 'q: 'e>(
        self,
        sql: &'q str,
    ) -> BoxFuture<'e, Result<Describe<Postgres>, sqlx::Error>>
    where
        'c: 'e,
    {
        self.0.describe(sql)
    }
}

/// A stream polled inside its span.
struct InSpan<'e, T> {
    inner: BoxStream<'e, T>,
    span: Span,
}

impl<T> Stream for InSpan<'_, T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        this.inner.poll_next_unpin(cx)
    }
}

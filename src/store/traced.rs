//! A connection whose statements are traced: each one is a span (`sql`, with its text) under
//! the operation or batch that ran it, and counts against that operation's statements. sqlx
//! itself only logs an event once a statement is done.

use std::fmt;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt as _, StreamExt as _};
use sqlx::postgres::{PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{Describe, Either, Execute, Executor, PgConnection, Postgres};
use tracing::{Instrument as _, Span};

use crate::observe::in_span::InSpan;
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
    // The statement's first keyword (casefile writes SQL in capitals), taken only when the
    // span is recorded at all.
    let operation = || sql.split_whitespace().next().unwrap_or_default();
    tracing::debug_span!(
        "sql",
        otel.name = operation(),
        otel.kind = "client",
        db.system = "postgresql",
        db.operation.name = operation(),
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
        InSpan::new(inner, span).boxed()
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

//! Runs GraphQL operations: parses them (keeping the parsed documents), checks the request
//! limits, gives each operation its own loaders and drives it so that their batches go to the
//! database only when the operation is blocked on them (see `api::loaders::batch`), and gives
//! every error its code.
//!
//! This is the work async-graphql's extensions are for, done around the schema instead: once
//! any extension is installed, async-graphql sends every field and every list item through a
//! slower path (a `ResolveInfo` with registry lookups and formatted type names, a boxed future
//! per extension). Measured on the dashboard's list, that was a third of the server's time.

mod apart;
mod check;
pub mod codes;
mod documents;
mod expansion;
mod introspection;
mod kind;
pub mod limits;
pub mod persisted;
mod report;
pub mod response_size;
mod text;
mod verdicts;

use std::any::TypeId;
use std::sync::Arc;

use async_graphql::parser::types::{ExecutableDocument, OperationType};
use async_graphql::{
    Data, Executor, Request, Response, ServerError, ValidationMode, ValidationResult,
};
use futures::StreamExt as _;
use futures::future::Either;
use futures::stream::{self, BoxStream};
use tracing::{Instrument as _, Span};
use uuid::Uuid;

use super::CasefileSchema;
use super::compiled::Compiled;
use super::loaders::{Dispatcher, OperationLoaders, UntilIdle};
use crate::api::Limits;
use crate::auth::Identity;
use crate::observe::in_span::InSpan;
use crate::observe::metrics::GRAPHQL_VALIDATIONS;
use crate::observe::request::{OPERATION_WORK, OperationWork};
use crate::store::Store;
use apart::Apart;
use check::{Check, Figures};
use codes::assign_code;
pub use documents::selected_operation;
use documents::{Documents, Parsed};
use introspection::Introspection;
pub use limits::{CostBudget, coded_error};
use persisted::PersistedQueries;
use report::Report;
use response_size::ResponseSize;
use verdicts::Verdicts;

/// Documents expanding to more selections than this are validated off the runtime's worker
/// threads (see [`apart`]): a few milliseconds of work and more.
const VALIDATED_APART: u64 = 2_000;
/// Operations answering more introspection values than this run off the worker threads: its
/// resolvers answer at once, so a large introspection is answered in one long poll.
const INTROSPECTION_APART: u64 = 2_000;

/// What the edge runs operations with (HTTP, SSE and WebSocket alike).
#[derive(Clone)]
pub struct Runner(Arc<Inner>);

struct Inner {
    /// Runs validated operations: no extensions, and only the checks validation must repeat.
    schema: CasefileSchema,
    /// Validates in full and keeps the figures; executes nothing.
    checker: CasefileSchema,
    /// Computes the figures alone (the fast pass), for an operation whose verdict is kept but
    /// whose cost reads its variables; executes nothing.
    figures: CasefileSchema,
    /// The checker's extension, which holds the schema's types once it has run.
    check: Check,
    store: Store,
    limits: Limits,
    documents: Documents,
    persisted: PersistedQueries,
    /// What introspection answers, to price it before it runs.
    introspection: Introspection,
}

/// An operation that passed every check, ready to run.
struct Admitted {
    request: Request,
    /// Its plan, when the compiled path answers it (then `store` reads its tree).
    compiled: Option<Compiled>,
    store: Store,
    dispatcher: Arc<Dispatcher>,
    size: Arc<ResponseSize>,
    /// Run off the worker threads (a large introspection).
    apart: bool,
}

impl Runner {
    /// `build` makes the schema (with its data): once to run operations, once to check them.
    pub fn new(
        build: impl Fn() -> async_graphql::SchemaBuilder<
            super::Query,
            super::Mutation,
            super::Subscription,
        >,
        store: Store,
        limits: Limits,
    ) -> Runner {
        // Introspection resolves from the schema alone: nothing here waits on I/O. (Read on a
        // schema of its own: the reading query nests deeper than clients may be allowed to.)
        let introspection = Introspection::read(|query| {
            futures::executor::block_on(build().finish().execute(query))
        });
        // async-graphql refuses selection sets nested (through fragments too) past its
        // recursion depth, 32 unless told: the same bound as the text's nesting.
        let build = || build().limit_recursive_depth(limits.max_query_nesting);
        let schema = build().validation_mode(ValidationMode::Fast).finish();
        let check = Check::default();
        Runner(Arc::new(Inner {
            schema,
            checker: build().extension(check.clone()).finish(),
            figures: build()
                .validation_mode(ValidationMode::Fast)
                .extension(Check::default())
                .finish(),
            check,
            introspection,
            store,
            limits,
            documents: Documents::new(limits),
            persisted: PersistedQueries::new(),
        }))
    }

    /// The request's document (its persisted query's, if it sent only the hash), parsed.
    fn parse(&self, request: &mut Request) -> Result<Parsed, ServerError> {
        let inner = &self.0;
        let persisted = inner.persisted.resolve(request)?;
        let document = inner.documents.parse(&request.query)?;
        if let Some(persisted) = persisted {
            inner.persisted.register(persisted, &request.query);
        }
        Ok(document)
    }

    /// Checks a parsed `request`, and gives it its loaders (`cached` unless it runs on a
    /// stream, where each update must see the database as it is then; `bound` to a share
    /// link's session); else the errors that refuse it.
    async fn admit(
        &self,
        mut request: Request,
        parsed: Parsed,
        cached: bool,
        bound: Option<Uuid>,
    ) -> Result<Admitted, Vec<ServerError>> {
        let inner = &self.0;
        let Parsed {
            document,
            selections,
            verdicts,
            ..
        } = parsed;
        if let Err(err) = limits::check_shape(&inner.limits, &document) {
            return Err(vec![err]);
        }

        let mut figures = self
            .validate(&request, &document, selections, &verdicts)
            .await?;
        // Introspection, priced by what it answers (async-graphql counted each of its fields
        // once; that stays, as the walk's own cost).
        let weigh = || {
            inner.introspection.weigh(
                &document,
                request.operation_name.as_deref(),
                &request.variables,
                inner.limits.max_query_complexity as u64,
            )
        };
        // The walk's work grows with the document (and stops at the cost limit).
        let introspection = if selections > VALIDATED_APART {
            apart::heavy(weigh)
        } else {
            weigh()
        };
        figures.complexity = figures
            .complexity
            .saturating_add(usize::try_from(introspection.values).unwrap_or(usize::MAX));
        let budget = request
            .data
            .get(&TypeId::of::<CostBudget>())
            .and_then(|data| data.downcast_ref::<CostBudget>());
        if let Err(err) = limits::check_cost(&inner.limits, &figures, budget) {
            return Err(vec![err]);
        }
        if introspection.bytes > inner.limits.max_response_bytes as u64 {
            return Err(vec![limits::response_too_large(&inner.limits)]);
        }

        let dispatcher = Arc::new(Dispatcher::default());
        let size = ResponseSize::new(inner.limits.max_response_bytes);
        // A query gets a store of its own (for the root fields too), whose reads keep one
        // connection between statements. Not a mutation: its transactions take connections
        // from the pool, which its parked one could be the last of. Nor a stream: it would
        // hold a connection for as long as it runs.
        let store = if cached && is_query(&document, request.operation_name.as_deref()) {
            inner.store.for_operation()
        } else {
            inner.store.clone()
        };
        // Not on a stream: each of its updates is read by its resolvers.
        let compiled = cached
            .then(|| {
                Compiled::plan(
                    &document,
                    request.operation_name.as_deref(),
                    &request.variables,
                    from_edge::<Identity>(&request, None),
                    &inner.limits,
                )
            })
            .flatten();
        request.set_parsed_query(document);
        let request = request
            .data(OperationLoaders::new(&store, &dispatcher, cached, bound))
            .data(store.clone())
            .data(size.clone());
        Ok(Admitted {
            request,
            compiled,
            store,
            dispatcher,
            size,
            apart: introspection.values > INTROSPECTION_APART,
        })
    }

    /// Validates the operation, and its figures: depth, cost. In full (on the checker) the first
    /// time; after that by its kept verdict (see [`verdicts`]).
    async fn validate(
        &self,
        request: &Request,
        document: &ExecutableDocument,
        selections: u64,
        verdicts: &Verdicts,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        let inner = &self.0;
        let operation_name = request.operation_name.as_deref();
        let schema = inner.check.schema();
        if let (Some(verdict), Some(schema)) = (verdicts.get(operation_name), schema) {
            metrics::counter!(GRAPHQL_VALIDATIONS, "pass" => "kept").increment(1);
            let (mut errors, figures) = verdict.check(&schema.registry, &request.variables);
            let figures = match figures {
                Some(figures) => Ok(figures),
                None => {
                    self.figures(&inner.figures, request, document, selections)
                        .await
                }
            };
            return match figures {
                Ok(figures) if errors.is_empty() => Ok(figures),
                Ok(_) => Err(errors),
                Err(more) => {
                    errors.extend(more);
                    Err(errors)
                }
            };
        }
        metrics::counter!(GRAPHQL_VALIDATIONS, "pass" => "full").increment(1);
        let figures = self
            .figures(&inner.checker, request, document, selections)
            .await?;
        // A verdict is kept for the documents sent over and over, which are small; a larger one
        // (validated off the worker threads) is not walked again to list its arguments here.
        if let Some(schema) = inner.check.schema()
            && selections <= VALIDATED_APART
        {
            verdicts.keep(&schema.registry, document, operation_name, figures);
        }
        Ok(figures)
    }

    /// The figures `checker` computes for the request's operation, or its validation errors.
    async fn figures(
        &self,
        checker: &CasefileSchema,
        request: &Request,
        document: &ExecutableDocument,
        selections: u64,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        let figures = Figures::default();
        let mut probe = Request::new(String::new())
            .variables(request.variables.clone())
            .data(figures.clone());
        probe.operation_name = request.operation_name.clone();
        probe.set_parsed_query(document.clone());
        let checked = Apart::new(
            Box::pin(checker.execute(probe)),
            selections > VALIDATED_APART,
        )
        .await;
        if !checked.errors.is_empty() {
            return Err(checked.errors);
        }
        figures.get().ok_or_else(|| {
            vec![coded_error(
                "INTERNAL_SERVER_ERROR",
                "the operation was not validated",
            )]
        })
    }

    /// Fills in the query of a request that sent only the hash of a persisted query this
    /// server knows (see [`persisted`]), for the edge to see what it would run; anything amiss
    /// is left for execution to refuse.
    pub fn fill_persisted_query(&self, request: &mut Request) {
        if request.query.is_empty() {
            let _ = self.0.persisted.resolve(request);
        }
    }

    /// The response to an operation refused before it ran.
    fn refused(&self, mut errors: Vec<ServerError>) -> Response {
        limits::cap_errors(&mut errors);
        errors.iter_mut().for_each(assign_code);
        Response::from_errors(errors)
    }

    /// The response as it goes out: replaced if it grew too large, every error coded.
    fn finish(&self, mut response: Response, size: &ResponseSize) -> Response {
        if size.take_exceeded() {
            return Response::from_errors(vec![limits::response_too_large(&self.0.limits)]);
        }
        limits::cap_errors(&mut response.errors);
        response.errors.iter_mut().for_each(assign_code);
        response
    }
}

/// Whether the operation to run (the one named, else the only one) is a query.
fn is_query(document: &ExecutableDocument, operation_name: Option<&str>) -> bool {
    selected_operation(document, operation_name)
        .is_some_and(|(_, operation)| operation.ty == OperationType::Query)
}

/// What the edge said of an operation's request (in the request's data, or for a WebSocket,
/// the connection's): its [`RequestInfo`], its caller's [`Identity`].
fn from_edge<'a, T: Send + Sync + 'static>(
    request: &'a Request,
    session_data: Option<&'a Data>,
) -> Option<&'a T> {
    [Some(&request.data), session_data]
        .into_iter()
        .flatten()
        .find_map(|data| data.get(&TypeId::of::<T>()))
        .and_then(|value| value.downcast_ref::<T>())
}

/// The one session the caller may read, for a share link: where its loaders are bound.
fn bound(request: &Request, session_data: Option<&Data>) -> Option<Uuid> {
    from_edge::<Identity>(request, session_data).and_then(|identity| identity.scope)
}

impl Runner {
    /// Parses the request and opens its report, with its span named for the operation (a trace
    /// exporter names a span once, when it starts).
    fn start(
        &self,
        request: &mut Request,
        session_data: Option<&Data>,
    ) -> (Report, Span, Result<Parsed, ServerError>) {
        let mut report = Report::new(from_edge(request, session_data).cloned());
        let parsed = self.parse(request);
        if let Ok(parsed) = &parsed {
            report.identify(&parsed.document, request.operation_name.as_deref());
        }
        let span = report.open_span();
        (report, span, parsed)
    }

    /// The parsed request, admitted; else the response that refuses it (reported).
    async fn prepare(
        &self,
        request: Request,
        parsed: Result<Parsed, ServerError>,
        cached: bool,
        bound: Option<Uuid>,
        report: &mut Report,
    ) -> Result<Admitted, Response> {
        let admitted = match parsed {
            Ok(parsed) => self.admit(request, parsed, cached, bound).await,
            Err(err) => Err(vec![err]),
        };
        admitted.inspect(|_| report.admitted()).map_err(|errors| {
            let response = self.refused(errors);
            report.sent(&response);
            response
        })
    }
}

impl Executor for Runner {
    async fn execute(&self, mut request: Request) -> Response {
        let (mut report, span, document) = self.start(&mut request, None);
        let bound = bound(&request, None);
        async {
            let Admitted {
                request,
                compiled,
                store,
                dispatcher,
                size,
                apart,
            } = match self
                .prepare(request, document, true, bound, &mut report)
                .await
            {
                Ok(admitted) => admitted,
                Err(refused) => return refused,
            };
            let work = Arc::new(OperationWork::default());
            report.count_work(work.clone());
            let schema = &self.0.schema;
            let resolved =
                move |request| UntilIdle::new(Box::pin(schema.execute(request)), dispatcher);
            let execution = match compiled {
                Some(compiled) => {
                    let size = size.clone();
                    // What changed under the compiled path is answered by the resolvers.
                    Either::Left(Box::pin(async move {
                        match compiled.run(&store, &size).await {
                            Some(response) => response,
                            None => resolved(request).await,
                        }
                    }))
                }
                None => Either::Right(resolved(request)),
            };
            let execution = Apart::new(Box::pin(OPERATION_WORK.scope(work, execution)), apart);
            let response = self.finish(execution.await, &size);
            report.sent(&response);
            response
        }
        .instrument(span)
        .await
    }

    fn execute_stream(
        &self,
        mut request: Request,
        session_data: Option<Arc<Data>>,
    ) -> BoxStream<'static, Response> {
        let runner = self.clone();
        let (mut report, span, document) = self.start(&mut request, session_data.as_deref());
        let bound = bound(&request, session_data.as_deref());
        let responses = stream::once(async move {
            let Admitted {
                request,
                dispatcher,
                size,
                apart,
                ..
            } = match runner
                .prepare(request, document, false, bound, &mut report)
                .await
            {
                Ok(admitted) => admitted,
                Err(refused) => return stream::iter([refused]).boxed(),
            };
            let responses = match session_data {
                Some(data) => runner
                    .0
                    .schema
                    .execute_stream_with_session_data(request, data),
                None => runner.0.schema.execute_stream(request),
            };
            // The report lives as long as the stream: its line is written when it ends.
            Apart::new(UntilIdle::new(responses, dispatcher), apart)
                .map(move |response| {
                    let response = runner.finish(response, &size);
                    report.sent(&response);
                    response
                })
                .boxed()
        })
        .flatten()
        .boxed();
        // Every poll of the stream (its loaders' batches, their statements) is the operation's.
        InSpan::new(responses, span).boxed()
    }
}

//! Reading ahead below sessions. A query's loads go out a level at a time: a session's stages
//! once the session is loaded, their executions once the stages are, each execution's pages
//! once the executions are, a round trip each. Every row below a session carries the
//! session's id, so once a query's sessions are known (from the start, for `session(id:)`),
//! what its fields below them will load can be loaded across each session at once, in one
//! round trip: this reads the query's selection below the sessions and makes those loads,
//! which prime the loaders the fields ask ([`Loader::prefetch`], [`Loader::prime`]). The fields
//! resolve as ever and find their values loaded; one that is not read ahead loads as before.
//!
//! A key read ahead is built by the very function its field builds its key with, so the two
//! meet in the loader's cache; a field whose arguments do not parse is left to its resolver
//! (which reports the error). Fields skipped by `@skip`/`@include` are not read ahead.
//!
//! [`Loader::prefetch`]: crate::api::loaders::Loader::prefetch
//! [`Loader::prime`]: crate::api::loaders::Loader::prime

use async_graphql::parser::types::ConstDirective;
use async_graphql::{Context, InputType, Lookahead, Name, SelectionField, Value};
use uuid::Uuid;

use crate::api::Limits;
use crate::api::loaders::{Across, Load, Loader, Loaders, ReadAcross};
use crate::api::pagination::PageArgs;
use crate::api::types::connection::{child_page_key, counts_all};
use crate::api::types::timeline::{TimelineFilterInput, timeline_page_key};
use crate::cursor::{decode_message_cursor, decode_record_cursor};
use crate::store::child_pages::ChildPageKey;
use crate::store::{Key, Scope};

/// Reads ahead what `fields` (the selection of each of `sessions`) will load.
pub(crate) fn below_sessions<'a>(
    ctx: &Context<'_>,
    sessions: &[Uuid],
    fields: impl IntoIterator<Item = SelectionField<'a>>,
) {
    if sessions.is_empty() {
        return;
    }
    let ahead = Ahead {
        loaders: ctx.data_unchecked::<Loaders>(),
        limits: ctx.data_unchecked::<Limits>(),
        sessions,
    };
    for field in included(fields) {
        ahead.session_field(&field);
    }
}

struct Ahead<'a> {
    loaders: &'a Loaders,
    limits: &'a Limits,
    sessions: &'a [Uuid],
}

/// The fields of a selection that will be resolved.
fn included<'a>(
    fields: impl IntoIterator<Item = SelectionField<'a>>,
) -> impl Iterator<Item = SelectionField<'a>> {
    fields.into_iter().filter(|field| {
        field.directives().is_ok_and(|directives| {
            directives.iter().all(|d| match d.name.node.as_str() {
                "skip" => !condition(d),
                "include" => condition(d),
                _ => true,
            })
        })
    })
}

/// A `@skip` or `@include` directive's `if`.
fn condition(directive: &ConstDirective) -> bool {
    directive
        .get_argument("if")
        .is_some_and(|value| matches!(value.node, Value::Boolean(true)))
}

impl Ahead<'_> {
    fn session_field(&self, field: &SelectionField<'_>) {
        match field.name() {
            "stages" => {
                self.each_session(&self.loaders.stages_by_session, |s| s);
                for field in included(field.selection_set()) {
                    self.stage_field(&field);
                }
            }
            "agents" => {
                self.each_session(&self.loaders.agents_by_session, |s| s);
                self.executions_below(field);
            }
            "timeline" => self.timeline(Scope::Session, field),
            "llmInteractionsConnection" => self.pages(
                field,
                self.loaders.llm_interaction_pages.get(Scope::Session),
                decode_record_cursor,
            ),
            "mcpInteractionsConnection" => self.pages(
                field,
                self.loaders.mcp_interaction_pages.get(Scope::Session),
                decode_record_cursor,
            ),
            "chatsConnection" => {
                let include_deleted = field
                    .arguments()
                    .ok()
                    .and_then(|args| argument::<Option<bool>>(&args, "includeDeleted"));
                match include_deleted {
                    Some(Some(true)) => self.pages(
                        field,
                        &self.loaders.chat_pages_with_deleted,
                        decode_record_cursor,
                    ),
                    Some(None | Some(false)) => {
                        self.pages(field, &self.loaders.chat_pages, decode_record_cursor)
                    }
                    None => {}
                }
            }
            _ => {}
        }
    }

    fn stage_field(&self, field: &SelectionField<'_>) {
        match field.name() {
            "executions" => self.executions_below(field),
            name => self.scoped_field(Scope::Stage, name, field),
        }
    }

    /// The executions of each session (a list of them was selected), and what `list` selects
    /// of them.
    fn executions_below(&self, list: &SelectionField<'_>) {
        self.each_session(&self.loaders.read_ahead.executions, |s| s);
        for field in included(list.selection_set()) {
            match field.name() {
                "subAgents" => self.executions_below(&field),
                name => self.scoped_field(Scope::Execution, name, &field),
            }
        }
    }

    /// The relationships every level shares (`types::scoped`), under a stage or execution.
    fn scoped_field(&self, scope: Scope, name: &str, field: &SelectionField<'_>) {
        let read_ahead = &self.loaders.read_ahead;
        match name {
            "timeline" => self.timeline(scope, field),
            "messagesConnection" => self.pages_across(
                scope,
                field,
                &read_ahead.message_pages,
                decode_message_cursor,
            ),
            "llmInteractionsConnection" => self.pages_across(
                scope,
                field,
                &read_ahead.llm_interaction_pages,
                decode_record_cursor,
            ),
            "mcpInteractionsConnection" => self.pages_across(
                scope,
                field,
                &read_ahead.mcp_interaction_pages,
                decode_record_cursor,
            ),
            _ => {}
        }
    }

    /// Loads `key_of` each session through `loader`.
    fn each_session<L: Load>(&self, loader: &Loader<L>, key_of: impl Fn(Uuid) -> L::Key) {
        for &session in self.sessions {
            loader.prefetch(key_of(session));
        }
    }

    /// The page `field` asks of each session, through `loader`: the session's own, or across
    /// it, that of each of its stages or executions (a key across a session names the session
    /// as its parent).
    fn pages<L, A, B>(
        &self,
        field: &SelectionField<'_>,
        loader: &Loader<L>,
        decode: fn(&str) -> crate::error::Result<(A, B)>,
    ) where
        L: Load<Key = ChildPageKey<A, B>>,
    {
        let Some(args) = page_args(field) else { return };
        let counted = counts_all(&Lookahead::from(*field));
        for &session in self.sessions {
            let parent = Key::new(session, session);
            match child_page_key(self.limits, parent, args.clone(), decode, counted) {
                Ok(key) => loader.prefetch(key),
                Err(_) => return,
            }
        }
    }

    /// The page `field` asks of each stage or execution (`scope`) of each session.
    fn pages_across<L, A, B>(
        &self,
        scope: Scope,
        field: &SelectionField<'_>,
        across: &Across<L>,
        decode: fn(&str) -> crate::error::Result<(A, B)>,
    ) where
        L: ReadAcross<Key = ChildPageKey<A, B>>,
    {
        if let Some(loader) = across.get(scope) {
            self.pages(field, loader, decode);
        }
    }

    /// The timeline page `field` asks of each session, or of each of its stages or executions.
    fn timeline(&self, scope: Scope, field: &SelectionField<'_>) {
        let Some(args) = page_args(field) else { return };
        let Some(filter) = field
            .arguments()
            .ok()
            .and_then(|args| argument::<Option<TimelineFilterInput>>(&args, "filter"))
        else {
            return;
        };
        let filter = filter.unwrap_or_default();
        for &session in self.sessions {
            let Ok(key) = timeline_page_key(self.limits, session, session, args.clone(), &filter)
            else {
                return;
            };
            match self.loaders.read_ahead.timeline.get(scope) {
                Some(across) => across.prefetch(key),
                None => self.loaders.timeline.get(scope).prefetch(key),
            }
        }
    }
}

/// A connection field's page arguments, if they parse.
fn page_args(field: &SelectionField<'_>) -> Option<PageArgs> {
    let args = field.arguments().ok()?;
    Some(PageArgs {
        first: argument(&args, "first")?,
        after: argument(&args, "after")?,
        last: argument(&args, "last")?,
        before: argument(&args, "before")?,
    })
}

/// An argument's value as its field's resolver receives it (`None` when it does not parse).
fn argument<T: InputType>(args: &[(Name, Value)], name: &str) -> Option<T> {
    let value = args
        .iter()
        .find(|(n, _)| n.as_str() == name)
        .map(|(_, v)| v.clone());
    T::parse(value).ok()
}

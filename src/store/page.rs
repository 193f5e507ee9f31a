//! Pages of ordered lists, read from either end: which rows a page asks for, and what one
//! statement brings back for it (the rows, and whether rows lie on either side of them), and
//! that statement for lists kept newest first.

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Arguments as _, Encode, FromRow, Postgres, QueryBuilder, Row as _, Type};
use uuid::Uuid;

use super::{RecordKey, Store};
use crate::error::Result;

/// The rows of an ordered list strictly after `after` and strictly before `before` (either
/// may be absent), and of those the first `size`, or the last `size` when `from_end`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Slice<K> {
    pub after: Option<K>,
    pub before: Option<K>,
    pub size: i64,
    pub from_end: bool,
}

impl<K> Slice<K> {
    /// Rows to read: one more than the page, which, when there, says that more lie beyond the
    /// page on the side it is taken from.
    pub(super) fn read(&self) -> i64 {
        self.size + 1
    }
}

/// The keys of a statement that reads the pages of many parents at once: one array per column,
/// unnested together as `k` (numbered by `k.ord`). A statement binds only the columns some key
/// of its batch uses: PostgreSQL decodes every array it is sent and sets up every expression of
/// its plan at each run, used or not.
#[derive(Default)]
pub(super) struct KeyArrays {
    columns: Vec<&'static str>,
    arrays: Vec<String>,
    arguments: PgArguments,
    /// Every parameter, cast to its type (`$n::type`).
    parameters: Vec<String>,
}

impl KeyArrays {
    /// The keys of pages: `parent`, its `session`, and `lim`, the rows each page reads.
    pub fn pages(pages: impl Iterator<Item = (Uuid, Uuid, i64)>) -> sqlx::Result<Self> {
        let (mut parents, mut sessions, mut limits) = (Vec::new(), Vec::new(), Vec::new());
        for (parent, session, limit) in pages {
            parents.push(parent);
            sessions.push(session);
            limits.push(limit);
        }
        let mut keys = KeyArrays::default();
        keys.column("parent", "uuid", parents)?;
        keys.column("session", "uuid", sessions)?;
        keys.column("lim", "bigint", limits)?;
        Ok(keys)
    }

    /// Adds the boolean column `name` when some key uses it (`wanted`).
    pub fn flag(
        &mut self,
        name: &'static str,
        wanted: bool,
        values: impl Iterator<Item = bool>,
    ) -> sqlx::Result<()> {
        if wanted {
            self.column(name, "boolean", values.collect())?;
        }
        Ok(())
    }

    /// Adds the column `name` (of SQL type `sql`), one value per key.
    pub fn column<T>(&mut self, name: &'static str, sql: &str, values: Vec<T>) -> sqlx::Result<()>
    where
        Vec<T>: for<'q> Encode<'q, Postgres> + Type<Postgres> + Send,
    {
        let parameter = self.bind(values, &format!("{sql}[]"))?;
        self.arrays.push(parameter);
        self.columns.push(name);
        Ok(())
    }

    /// Binds a parameter of the statement that is not a key column, of SQL type `sql`: the
    /// parameter, cast to its type (`$n::type`).
    pub fn bind<T>(&mut self, value: T, sql: &str) -> sqlx::Result<String>
    where
        T: for<'q> Encode<'q, Postgres> + Type<Postgres> + Send,
    {
        self.arguments.add(value).map_err(sqlx::Error::Encode)?;
        let parameter = format!("${}::{sql}", self.arguments.len());
        self.parameters.push(parameter.clone());
        Ok(parameter)
    }

    /// The statement that joins each key (`k`) to its page: `rows`, a subquery on `k` (see
    /// [`either_end`]), aliased `c`, in key order then `order`. Each [`PerKey`] value is read
    /// once per key: the keys are then materialized (not re-read per row); when no key wants
    /// any of them, the keys are a plain `unnest` and the values their constants.
    pub fn statement(&self, per_key: &[PerKey], rows: &str, order: &str) -> String {
        let relation = format!(
            "unnest({}) WITH ORDINALITY AS k({}, ord)",
            self.arrays.join(", "),
            self.columns.join(", ")
        );
        let named = |value: &dyn Fn(&PerKey) -> String| {
            per_key
                .iter()
                .map(|v| format!("{} AS {}", value(v), v.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if per_key.iter().any(|v| v.read.is_some()) {
            let read = named(&|v| v.read.clone().unwrap_or_else(|| v.otherwise.to_owned()));
            let columns = named(&|v| format!("k.{}", v.name));
            format!(
                "WITH k AS MATERIALIZED (SELECT k.*, {read} FROM {relation}) \
                 SELECT k.ord, {columns}, c.* FROM k LEFT JOIN LATERAL ({rows}) c ON TRUE \
                 ORDER BY k.ord, {order}"
            )
        } else {
            let constants = named(&|v| v.otherwise.to_owned());
            format!(
                "SELECT k.ord, {constants}, c.* FROM {relation} \
                 LEFT JOIN LATERAL ({rows}) c ON TRUE ORDER BY k.ord, {order}"
            )
        }
    }

    /// A statement that reads back, with these arguments, each parameter as text (for
    /// explaining the statement with its arguments written out: see [`Store::explain_generic`]).
    pub fn as_text(&self) -> String {
        let texts: Vec<String> = self
            .parameters
            .iter()
            .map(|p| format!("{p}::text"))
            .collect();
        format!("SELECT ARRAY[{}]::text[]", texts.join(", "))
    }

    pub fn into_arguments(self) -> PgArguments {
        self.arguments
    }
}

impl Store {
    /// How PostgreSQL runs a page statement over `k` on the plan a connection keeps for it
    /// ([`Store::explain_generic`]).
    pub(super) async fn explain_page_statement(&self, sql: &str, k: KeyArrays) -> Result<String> {
        let arguments: Vec<String> = sqlx::query_scalar_with(&k.as_text(), k.into_arguments())
            .fetch_one(self.reader().await?.traced())
            .await?;
        let [plan] = self.explain_generic([(sql, arguments)]).await?;
        Ok(plan)
    }
}

/// A value a page statement reads once per key (a count, whether rows lie beyond a cursor):
/// `read`, its expression on `k`, when some key of the batch wants it; else `otherwise`.
pub(super) struct PerKey {
    pub name: &'static str,
    pub read: Option<String>,
    pub otherwise: &'static str,
}

/// The rows of each key's page, read from the end it is taken from (so LIMIT takes the rows
/// next to its cursor): `branch(gate, descending)` is one direction's subquery; a batch that
/// reads both ways has both, which `k.from_end` switches.
pub(super) fn either_end(
    forward: bool,
    backward: bool,
    branch: impl Fn(&str, bool) -> String,
) -> String {
    match (forward, backward) {
        (true, true) => format!(
            "({}) UNION ALL ({})",
            branch("NOT k.from_end AND ", false),
            branch("k.from_end AND ", true)
        ),
        (false, true) => branch("", true),
        _ => branch("", false),
    }
}

/// A page of rows, in list order, and whether the list holds rows before and after it.
#[derive(Debug, Clone)]
pub struct Page<R> {
    pub rows: Vec<R>,
    pub has_previous: bool,
    pub has_next: bool,
}

/// An empty page with nothing on either side.
impl<R> Default for Page<R> {
    fn default() -> Self {
        Page {
            rows: Vec::new(),
            has_previous: false,
            has_next: false,
        }
    }
}

impl<R> Page<R> {
    /// The same page, each row mapped by `f`.
    pub fn map<T>(self, f: impl FnMut(R) -> T) -> Page<T> {
        Page {
            rows: self.rows.into_iter().map(f).collect(),
            has_previous: self.has_previous,
            has_next: self.has_next,
        }
    }

    /// The page from what was read for `slice`: up to [`Slice::read`] rows in list order, and
    /// whether rows exist at or before `after` (`earlier`) and at or after `before` (`later`),
    /// which lie beyond the page whichever way it was taken.
    pub(super) fn new<K>(mut rows: Vec<R>, slice: &Slice<K>, earlier: bool, later: bool) -> Self {
        let size = slice.size.max(0) as usize;
        let more = rows.len() > size;
        if slice.from_end {
            rows.drain(..rows.len().saturating_sub(size));
        } else {
            rows.truncate(size);
        }
        Page {
            rows,
            has_previous: earlier || (more && slice.from_end),
            has_next: later || (more && !slice.from_end),
        }
    }
}

/// A list of a table's rows, newest first by `(at, id)` (`at` a timestamp column), read along
/// an index on those columns (after the filter's equality columns) from either end.
pub(super) struct NewestFirst {
    pub table: &'static str,
    pub columns: &'static str,
    pub at: &'static str,
}

/// A list's conditions: pushes ` WHERE …` onto a statement about its table.
pub(super) type Filter<'f, 'q> = &'f (dyn Fn(&mut QueryBuilder<'q, Postgres>) + Sync);

impl NewestFirst {
    /// The page `slice` of the rows `filter` selects, and whether rows lie on either side.
    pub async fn fetch<'q, R>(
        &self,
        store: &Store,
        filter: Filter<'_, 'q>,
        slice: &Slice<RecordKey>,
    ) -> Result<Page<R>>
    where
        R: for<'r> FromRow<'r, PgRow> + Send + Unpin,
    {
        let mut qb = QueryBuilder::new("");
        self.push_page(&mut qb, filter, slice);
        let rows: Vec<Flagged<R>> = qb
            .build_query_as()
            .fetch_all(store.reader().await?.traced())
            .await?;
        let (earlier, later) = rows
            .first()
            .map_or((false, false), |r| (r.earlier, r.later));
        let rows = rows.into_iter().filter_map(|r| r.row.0).collect();
        Ok(Page::new(rows, slice, earlier, later))
    }

    /// How many rows `filter` selects, across all pages.
    pub async fn count<'q>(&self, store: &Store, filter: Filter<'_, 'q>) -> Result<i64> {
        let mut qb = QueryBuilder::new(format!("SELECT count(*) FROM {}", self.table));
        filter(&mut qb);
        Ok(qb
            .build_query_scalar()
            .fetch_one(store.reader().await?.traced())
            .await?)
    }

    /// How PostgreSQL reads that page: `EXPLAIN` of the very statement, for the tests that check
    /// an index serves it.
    pub async fn explain<'q>(
        &self,
        store: &Store,
        filter: Filter<'_, 'q>,
        slice: &Slice<RecordKey>,
    ) -> Result<String> {
        let mut qb = QueryBuilder::new("EXPLAIN ");
        self.push_page(&mut qb, filter, slice);
        store.explain(qb).await
    }

    /// The statement of a page: the rows of the slice outer-joined to whether rows lie at or
    /// beyond `after` and `before` (so an empty page still says), each an index probe. `filter`
    /// pushes ` WHERE …` with the list's conditions.
    fn push_page<'q>(
        &self,
        qb: &mut QueryBuilder<'q, Postgres>,
        filter: Filter<'_, 'q>,
        slice: &Slice<RecordKey>,
    ) {
        let NewestFirst { table, columns, at } = self;
        // List order is descending: a row "precedes" another when it is newer.
        let (precedes, follows) = (">", "<");
        let read = if slice.from_end { "ASC" } else { "DESC" };
        qb.push("SELECT ");
        for (key, op, towards, name) in [
            (&slice.after, precedes, "ASC", "earlier"),
            (&slice.before, follows, "DESC", "later"),
        ] {
            match key {
                Some(key) => {
                    qb.push(format_args!("(SELECT TRUE FROM {table}"));
                    filter(qb);
                    self.push_bound(qb, &format!("{op}="), key);
                    qb.push(format_args!(
                        " ORDER BY {at} {towards}, id {towards} LIMIT 1) IS NOT NULL"
                    ));
                }
                None => {
                    qb.push("FALSE");
                }
            }
            qb.push(format_args!(" AS {name}, "));
        }
        qb.push(format_args!(
            "p.* FROM (VALUES (1)) AS one LEFT JOIN (SELECT {columns} FROM {table}"
        ));
        filter(qb);
        if let Some(key) = &slice.after {
            self.push_bound(qb, follows, key);
        }
        if let Some(key) = &slice.before {
            self.push_bound(qb, precedes, key);
        }
        qb.push(format_args!(" ORDER BY {at} {read}, id {read} LIMIT "))
            .push_bind(slice.read())
            .push(format_args!(") p ON TRUE ORDER BY {at} DESC, id DESC"));
    }

    fn push_bound(&self, qb: &mut QueryBuilder<'_, Postgres>, op: &str, (at, id): &RecordKey) {
        qb.push(format_args!(" AND ({}, id) {op} (", self.at))
            .push_bind(*at)
            .push(", ")
            .push_bind(*id)
            .push(")");
    }
}

/// A row of a page statement: whether rows lie beyond either cursor, and the row itself
/// (absent on an empty page).
struct Flagged<R> {
    earlier: bool,
    later: bool,
    row: Joined<R>,
}

impl<'r, R: FromRow<'r, PgRow>> FromRow<'r, PgRow> for Flagged<R> {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        Ok(Flagged {
            earlier: row.try_get("earlier")?,
            later: row.try_get("later")?,
            row: Joined::from_row(row)?,
        })
    }
}

/// The row of the nullable side of an outer join: `None` when its `id` is null. A page
/// statement outer-joins its rows to its flags, so an empty page still returns the flags.
pub(super) struct Joined<R>(pub Option<R>);

impl<'r, R: FromRow<'r, PgRow>> FromRow<'r, PgRow> for Joined<R> {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        let id: Option<Uuid> = row.try_get("id")?;
        Ok(Joined(id.map(|_| R::from_row(row)).transpose()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(size: i64, from_end: bool) -> Slice<i64> {
        Slice {
            after: None,
            before: None,
            size,
            from_end,
        }
    }

    #[test]
    fn the_extra_row_is_dropped_at_the_far_end_and_says_more_lie_there() {
        let forward = Page::new(vec![1, 2, 3], &slice(2, false), false, false);
        assert_eq!(
            (forward.rows, forward.has_previous, forward.has_next),
            (vec![1, 2], false, true)
        );
        let backward = Page::new(vec![1, 2, 3], &slice(2, true), false, false);
        assert_eq!(
            (backward.rows, backward.has_previous, backward.has_next),
            (vec![2, 3], true, false)
        );
        let whole = Page::new(vec![1, 2], &slice(2, true), false, false);
        assert_eq!(
            (whole.rows, whole.has_previous, whole.has_next),
            (vec![1, 2], false, false)
        );
    }

    #[test]
    fn rows_beyond_the_cursors_count_on_either_side() {
        let page = Page::new(vec![4, 5], &slice(2, false), true, true);
        assert_eq!((page.has_previous, page.has_next), (true, true));
        let empty = Page::new(Vec::<i64>::new(), &slice(0, true), true, false);
        assert_eq!((empty.has_previous, empty.has_next), (true, false));
        let zero = Page::new(vec![7], &slice(0, false), false, false);
        assert_eq!((zero.rows, zero.has_next), (vec![], true));
    }
}

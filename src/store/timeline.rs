//! Pages of the timeline (by sequence_number) under many parents in one statement.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::FromRow;
use uuid::Uuid;

use super::{Scope, Store, TimelineEventRow};
use crate::error::Result;

/// One page request: events of `parent` with sequence_number > `after`, at most `limit` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimelinePageKey {
    pub parent: Uuid,
    pub after: i64,
    pub limit: i64,
}

impl Store {
    /// Every requested page in one statement: each key is joined laterally to its own ordered,
    /// limited slice, so different parents may ask for different `after`/`limit`.
    pub async fn timeline_pages(
        &self,
        scope: Scope,
        keys: &[TimelinePageKey],
    ) -> Result<HashMap<TimelinePageKey, Vec<Arc<TimelineEventRow>>>> {
        #[derive(FromRow)]
        struct Row {
            ord: i64,
            #[sqlx(flatten)]
            event: TimelineEventRow,
        }
        let parents: Vec<Uuid> = keys.iter().map(|k| k.parent).collect();
        let afters: Vec<i64> = keys.iter().map(|k| k.after).collect();
        let limits: Vec<i64> = keys.iter().map(|k| k.limit).collect();
        let column = scope.column();
        let sql = format!(
            "SELECT k.ord, e.* \
             FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS k(parent, after_seq, lim, ord) \
             CROSS JOIN LATERAL ( \
                 SELECT * FROM timeline_events_live t \
                 WHERE t.{column} = k.parent AND t.sequence_number > k.after_seq \
                 ORDER BY t.sequence_number LIMIT k.lim) e \
             ORDER BY k.ord, e.sequence_number"
        );
        let rows: Vec<Row> = sqlx::query_as(&sql)
            .bind(&parents)
            .bind(&afters)
            .bind(&limits)
            .fetch_all(&mut *self.reader().await?)
            .await?;
        let mut pages: HashMap<TimelinePageKey, Vec<Arc<TimelineEventRow>>> =
            keys.iter().map(|k| (*k, Vec::new())).collect();
        for row in rows {
            let key = keys[(row.ord - 1) as usize];
            pages.entry(key).or_default().push(Arc::new(row.event));
        }
        Ok(pages)
    }
}

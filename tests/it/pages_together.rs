//! The pages a level of a query asks of its parents are read by one statement of one branch per
//! relationship (`store/pages_together.rs`): whatever mix of pages a batch holds (every
//! relationship, slices from either end, after and before cursors, counts, payloads, timeline
//! filters), each page is the same as the page read by its statement alone.

use casefile::model::{TimelineEventStatus, TimelineEventType};
use casefile::store::page::Slice;
use casefile::store::pages_together::{ChildPage, PageRead};
use casefile::store::{
    MessagePageKey, Payloads, RecordPageKey, Scope, TimelineFilter, TimelinePageKey,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::common::TestApp;

/// SplitMix64, seeded per run (printed) so that a failing batch can be made again.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Clone>(&mut self, of: &[T]) -> Option<T> {
        (!of.is_empty()).then(|| of[self.below(of.len())].clone())
    }
}

/// A slice of a few rows or all, from either end, between cursors taken from `keys` (the
/// parent's rows' keys, in order), or none.
fn slice<K: Clone>(rng: &mut Rng, keys: &[K]) -> Slice<K> {
    let after = if rng.chance(30) { rng.pick(keys) } else { None };
    let before = if rng.chance(30) { rng.pick(keys) } else { None };
    Slice {
        after,
        before,
        size: [0, 1, 2, 5, 100][rng.below(5)] as i64,
        from_end: rng.chance(40),
    }
}

fn payloads(rng: &mut Rng) -> Payloads {
    Payloads {
        request: rng.chance(40),
        rest: rng.chance(40),
    }
}

fn filter(rng: &mut Rng) -> TimelineFilter {
    match rng.below(4) {
        0 => TimelineFilter {
            event_types: Some(vec![TimelineEventType::LlmResponse]),
            statuses: None,
        },
        1 => TimelineFilter {
            event_types: Some(vec![
                TimelineEventType::LlmThinking,
                TimelineEventType::ExecutiveSummary,
            ]),
            statuses: Some(vec![TimelineEventStatus::Completed]),
        },
        _ => TimelineFilter::default(),
    }
}

/// What a page read, as text (its rows and flags), to compare.
fn shown(page: Option<&PageRead>) -> String {
    format!("{page:#?}")
}

#[tokio::test]
async fn a_levels_pages_read_together_are_the_pages_read_apart() {
    let app = TestApp::start().await;
    casefile::demo::load(&app.store).await.unwrap();
    let pool = app.store.pool();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("batches of pages, seed {seed}");
    let mut rng = Rng(seed);
    let mut compared = 0;
    for scope in [Scope::Session, Scope::Stage, Scope::Execution] {
        let (table, column) = match scope {
            Scope::Session => ("sessions", "id"),
            Scope::Stage => ("stages", "session_id"),
            Scope::Execution => ("agent_executions", "session_id"),
        };
        let parents: Vec<(Uuid, Uuid)> =
            sqlx::query_as(&format!("SELECT id, {column} FROM {table} ORDER BY id"))
                .fetch_all(pool)
                .await
                .unwrap();
        let parent_column = match scope {
            Scope::Session => "session_id",
            Scope::Stage => "stage_id",
            Scope::Execution => "execution_id",
        };
        for round in 0..12 {
            // A batch: a few parents, each asking some of its relationships, some twice.
            let mut keys = Vec::new();
            for _ in 0..1 + rng.below(4) {
                let (parent, session) = rng.pick(&parents).unwrap();
                let of = |table: &str, order: &str| {
                    format!(
                        "SELECT {order} FROM {table} WHERE {parent_column} = $1 ORDER BY {order}"
                    )
                };
                let sequence: Vec<i64> =
                    sqlx::query_scalar(&of("timeline_events", "sequence_number"))
                        .bind(parent)
                        .fetch_all(pool)
                        .await
                        .unwrap();
                let messages: Vec<(Uuid, i32)> =
                    sqlx::query_as(&of("messages", "execution_id, sequence_number"))
                        .bind(parent)
                        .fetch_all(pool)
                        .await
                        .unwrap();
                let messages: Vec<(Uuid, i64)> =
                    messages.into_iter().map(|(e, n)| (e, n.into())).collect();
                let llm: Vec<(DateTime<Utc>, Uuid)> =
                    sqlx::query_as(&of("llm_interactions", "created_at, id"))
                        .bind(parent)
                        .fetch_all(pool)
                        .await
                        .unwrap();
                let mcp: Vec<(DateTime<Utc>, Uuid)> =
                    sqlx::query_as(&of("mcp_interactions", "created_at, id"))
                        .bind(parent)
                        .fetch_all(pool)
                        .await
                        .unwrap();
                for _ in 0..1 + rng.below(2) {
                    if rng.chance(70) {
                        keys.push(ChildPage::Timeline(TimelinePageKey {
                            session,
                            parent,
                            slice: slice(&mut rng, &sequence),
                            filter: filter(&mut rng),
                        }));
                    }
                    if scope != Scope::Session && rng.chance(70) {
                        keys.push(ChildPage::Messages(MessagePageKey {
                            session,
                            parent,
                            slice: slice(&mut rng, &messages),
                            counted: rng.chance(50),
                            payloads: Payloads::default(),
                        }));
                    }
                    for (rows, kind) in [
                        (&llm, ChildPage::LlmInteractions as fn(_) -> ChildPage),
                        (&mcp, ChildPage::McpInteractions),
                    ] {
                        if rng.chance(70) {
                            keys.push(kind(RecordPageKey {
                                session,
                                parent,
                                slice: slice(&mut rng, rows),
                                counted: rng.chance(50),
                                payloads: payloads(&mut rng),
                            }));
                        }
                    }
                }
            }
            let mut seen = std::collections::HashSet::new();
            keys.retain(|key| seen.insert(key.clone()));
            let together = app.store.child_pages_of(scope, &keys).await.unwrap();
            assert_eq!(together.len(), keys.len());
            for key in &keys {
                let apart = app
                    .store
                    .child_pages_of(scope, std::slice::from_ref(key))
                    .await
                    .unwrap();
                assert_eq!(
                    shown(together.get(key)),
                    shown(apart.get(key)),
                    "{scope:?}, round {round} (seed {seed}): {key:?} of a batch of {}",
                    keys.len()
                );
                compared += 1;
            }
        }
    }
    println!("{compared} pages compared");
    app.stop().await;
}

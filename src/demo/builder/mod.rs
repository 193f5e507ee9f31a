//! The [`Demo`] builder, which creates the rows in memory while it plays a clock forward:
//! [`lifecycle`] opens and ends sessions, chats, stages and agent executions, [`records`] adds
//! what an execution leaves behind (messages, timeline events, LLM and MCP interactions),
//! [`steps`] composes those into what an agent does, and [`notifications`] adds what the
//! outbox holds about a session's end or a chat answer.

mod lifecycle;
mod notifications;
mod records;
mod steps;

use std::collections::HashMap;

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use super::catalog::Profile;
use super::ids::demo_id;
use crate::store::write::restore::Records;

// What the scenarios build with, whichever file it lives in.
pub(super) use lifecycle::{Agents, Alert, Joins, Outcome};
pub(super) use notifications::{Delivery, Notify};
pub(super) use records::Msg;
pub(super) use steps::Step;

// Handles to rows under construction: where the row is, and the ids its children copy.
#[derive(Clone, Copy)]
pub(super) struct Session {
    idx: usize,
    id: Uuid,
}

#[derive(Clone, Copy)]
pub(super) struct Stage {
    idx: usize,
    id: Uuid,
    session: Uuid,
}

#[derive(Clone, Copy)]
pub(super) struct Agent {
    idx: usize,
    id: Uuid,
    stage: Uuid,
    session: Uuid,
    profile: &'static Profile,
}

/// The rows of all scenarios, in the order they were created (which is also a valid insert
/// order within each table), plus the clock and per-parent counters that derive them.
#[derive(Default)]
pub(super) struct Demo {
    now: DateTime<Utc>,
    /// Next ordinal of a kind of child under a parent: stage index, sequence numbers, ...
    ordinals: HashMap<(Uuid, &'static str), i32>,
    /// The rows themselves.
    pub(super) rows: Records,
}

impl Demo {
    pub(super) fn wait(&mut self, ms: i64) {
        self.now += TimeDelta::milliseconds(ms);
    }

    /// The next 1-based ordinal of `kind` under `parent`.
    fn next(&mut self, parent: Uuid, kind: &'static str) -> i32 {
        let n = self.ordinals.entry((parent, kind)).or_default();
        *n += 1;
        *n
    }

    /// The id of the `n`-th `kind` under `parent`, created `at`.
    fn child_id(parent: Uuid, kind: &str, n: i32, at: DateTime<Utc>) -> Uuid {
        demo_id(&format!("{parent}/{kind}/{n}"), at)
    }
}

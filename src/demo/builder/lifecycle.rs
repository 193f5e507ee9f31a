//! Sessions, chats, stages and agent executions: opening them, and ending them with the status
//! that follows from what happened (for a stage, from its agents under its success policy).

use chrono::TimeDelta;
use serde_json::{Value as Json, json};
use uuid::Uuid;

use super::records::Event;
use super::{Agent, Demo, Session, Stage};
use crate::demo::catalog::{CHAT_AGENT, Profile};
use crate::demo::chains::Chain;
use crate::demo::ids::{BASE, demo_id, millis_between};
use crate::model::{
    AgentType, ExecutionStatus, ParallelType, SessionStatus, StageStatus, SuccessPolicy,
    TimelineEventType,
};
use crate::store::{ChatRow, ChatUserMessageRow, ExecutionRow, SessionRow, StageRow};

use TimelineEventType as Kind;

/// What a scenario says about the alert that opens a session.
pub(in crate::demo) struct Alert {
    pub(in crate::demo) key: &'static str,
    pub(in crate::demo) alert_type: &'static str,
    pub(in crate::demo) chain: Chain,
    pub(in crate::demo) runbook_url: &'static str,
    pub(in crate::demo) data: Json,
}

/// How many agents a stage runs.
pub(in crate::demo) enum Agents {
    One,
    Parallel(ParallelType, SuccessPolicy, i32),
}

/// Where a dispatched sub-agent joins its parent's tree (seed 004's agent types).
pub(in crate::demo) enum Joins {
    /// As the team supervisor of a new team with this name.
    Team(&'static str),
    /// As a worker in its parent's team.
    Worker,
}

/// What a session ended with.
#[derive(Default)]
pub(in crate::demo) struct Outcome {
    pub(in crate::demo) final_analysis: Option<&'static str>,
    pub(in crate::demo) executive_summary: Option<&'static str>,
    pub(in crate::demo) error: Option<String>,
}

impl Demo {
    /// A session created `minutes` after [`BASE`] for an alert; it starts out pending.
    pub(in crate::demo) fn session(&mut self, minutes: i64, alert: Alert) -> Session {
        self.now = BASE + TimeDelta::minutes(minutes);
        let id = demo_id(&format!("demo/{}", alert.key), self.now);
        let (chain_id, chain_version) = match alert.chain {
            Chain::Version(v) => (v.name, Some(v.version.into())),
            Chain::Named(name) => (name, None),
        };
        self.rows.sessions.push(SessionRow {
            id,
            alert_type: alert.alert_type.into(),
            alert_data: crate::store::raw_json(&alert.data),
            status: SessionStatus::Pending,
            chain_id: chain_id.into(),
            author: Some("alertmanager".into()),
            runbook_url: Some(alert.runbook_url.into()),
            final_analysis: None,
            executive_summary: None,
            error_message: None,
            started_at: None,
            completed_at: None,
            created_at: self.now,
            updated_at: self.now,
            deleted_at: None,
            duration_ms: None,
            created_by: None,
            chain_version,
            chain_overrides: None,
        });
        Session {
            idx: self.rows.sessions.len() - 1,
            id,
        }
    }

    /// The worker picks the session up a moment after the alert arrived.
    pub(in crate::demo) fn start(&mut self, s: Session) {
        self.wait(1_800);
        let row = &mut self.rows.sessions[s.idx];
        row.status = SessionStatus::InProgress;
        row.started_at = Some(self.now);
        row.updated_at = self.now;
    }

    /// Records where a session stands; terminal statuses also get `completed_at`.
    pub(in crate::demo) fn settle(&mut self, s: Session, status: SessionStatus, outcome: Outcome) {
        self.wait(400);
        let row = &mut self.rows.sessions[s.idx];
        row.status = status;
        row.final_analysis = outcome.final_analysis.map(Into::into);
        row.executive_summary = outcome.executive_summary.map(Into::into);
        row.error_message = outcome.error;
        row.updated_at = self.now;
        if status != SessionStatus::InProgress && status != SessionStatus::Cancelling {
            row.completed_at = Some(self.now);
        }
    }

    pub(in crate::demo) fn stage(&mut self, s: Session, name: &str, agents: Agents) -> Stage {
        let n = self.next(s.id, "stage");
        let id = Self::child_id(s.id, "stage", n, self.now);
        let (expected, parallel_type, success_policy) = match agents {
            Agents::One => (1, None, None),
            Agents::Parallel(kind, policy, count) => (count, Some(kind), Some(policy)),
        };
        self.rows.stages.push(StageRow {
            id,
            session_id: s.id,
            stage_name: name.into(),
            stage_index: n - 1,
            expected_agent_count: expected,
            parallel_type,
            success_policy,
            status: StageStatus::Active,
            started_at: Some(self.now),
            completed_at: None,
            duration_ms: None,
            error_message: None,
            chat_id: None,
            chat_user_message_id: None,
            created_at: self.now,
            updated_at: self.now,
        });
        Stage {
            idx: self.rows.stages.len() - 1,
            id,
            session: s.id,
        }
    }

    /// Ends a stage with the status its agents add up to under its success policy (see the
    /// design: all completed, or any completed under `any`; all timed out or all cancelled
    /// keep that status; anything else failed). The error names the agents that fell short;
    /// it is returned so a failing session can quote it.
    pub(in crate::demo) fn end_stage(&mut self, st: Stage) -> Option<String> {
        self.wait(150);
        let row = &self.rows.stages[st.idx];
        let (policy, policy_name) = match row.success_policy {
            Some(SuccessPolicy::Any) => (SuccessPolicy::Any, "any"),
            _ => (SuccessPolicy::All, "all"),
        };
        let agents: Vec<&ExecutionRow> = self
            .rows
            .executions
            .iter()
            .filter(|e| e.stage_id == st.id && e.parent_execution_id.is_none())
            .collect();
        let all = |status| agents.iter().all(|e| e.status == status);
        let any_completed = agents
            .iter()
            .any(|e| e.status == ExecutionStatus::Completed);
        let status =
            if all(ExecutionStatus::Completed) || (policy == SuccessPolicy::Any && any_completed) {
                StageStatus::Completed
            } else if all(ExecutionStatus::TimedOut) {
                StageStatus::TimedOut
            } else if all(ExecutionStatus::Cancelled) {
                StageStatus::Cancelled
            } else {
                StageStatus::Failed
            };
        let error = (status != StageStatus::Completed).then(|| {
            let failures: Vec<String> = agents
                .iter()
                .filter(|e| e.status != ExecutionStatus::Completed)
                .map(|e| {
                    let verb = match e.status {
                        ExecutionStatus::TimedOut => "timed out",
                        ExecutionStatus::Cancelled => "was cancelled",
                        _ => "failed",
                    };
                    let reason = e.error_message.as_deref().unwrap_or("no error recorded");
                    format!("{} {verb}: {reason}", e.agent_name)
                })
                .collect();
            if agents.len() == 1 {
                failures.join("; ")
            } else {
                format!(
                    "{} of {} agents did not succeed (success policy: {policy_name}): {}",
                    failures.len(),
                    agents.len(),
                    failures.join("; ")
                )
            }
        });
        let now = self.now;
        let row = &mut self.rows.stages[st.idx];
        row.status = status;
        row.completed_at = Some(now);
        row.duration_ms = row.started_at.map(|started| millis_between(started, now));
        row.error_message = error.clone();
        row.updated_at = now;
        if let Some(chat) = row.chat_id {
            self.touch_chat(chat);
        }
        error
    }

    /// A chat `created_by` opens (and so owns), with its title.
    pub(in crate::demo) fn chat(&mut self, s: Session, created_by: &str, title: &str) -> Uuid {
        let n = self.next(s.id, "chat");
        let id = Self::child_id(s.id, "chat", n, self.now);
        self.rows.chats.push(ChatRow {
            id,
            session_id: s.id,
            created_by: Some(created_by.into()),
            title: Some(title.into()),
            created_at: self.now,
            updated_at: self.now,
            deleted_at: None,
            deleted_by: None,
        });
        id
    }

    /// A question asked, or an answer ended: the chat's latest activity.
    fn touch_chat(&mut self, chat: Uuid) {
        let now = self.now;
        if let Some(row) = self.rows.chats.iter_mut().find(|c| c.id == chat) {
            row.updated_at = now;
        }
    }

    /// A question asked in a chat: its stage starts a chat agent, whose timeline opens with
    /// the question.
    pub(in crate::demo) fn chat_question(
        &mut self,
        s: Session,
        chat: Uuid,
        author: &str,
        content: &str,
    ) -> (Stage, Agent) {
        let n = self.next(chat, "question");
        let question = Self::child_id(chat, "question", n, self.now);
        self.rows.chat_messages.push(ChatUserMessageRow {
            id: question,
            chat_id: chat,
            session_id: s.id,
            content: content.into(),
            author: Some(author.into()),
            created_at: self.now,
            created_by: None,
        });
        self.touch_chat(chat);
        let asked = self.now;
        self.wait(600);
        let st = self.stage(s, "Chat Response", Agents::One);
        let row = &mut self.rows.stages[st.idx];
        row.chat_id = Some(chat);
        row.chat_user_message_id = Some(question);
        let agent = self.agent(st, &CHAT_AGENT);
        let meta = json!({ "author": author, "chat_id": chat, "chat_user_message_id": question });
        self.event(
            agent,
            Event::new(Kind::UserQuestion, content, asked).meta(meta),
        );
        (st, agent)
    }

    /// A top-level agent execution in a stage: the root of its agent tree.
    pub(in crate::demo) fn agent(&mut self, st: Stage, profile: &'static Profile) -> Agent {
        self.execution(st, profile, None, AgentType::GlobalSupervisor, None, None)
    }

    /// A sub-agent `parent` dispatched with `task`: a team supervisor leading a new team, or a
    /// worker in its parent's team.
    pub(in crate::demo) fn dispatch(
        &mut self,
        st: Stage,
        profile: &'static Profile,
        parent: Agent,
        joins: Joins,
        task: &str,
    ) -> Agent {
        let (agent_type, team) = match joins {
            Joins::Team(team) => (AgentType::TeamSupervisor, team.to_owned()),
            Joins::Worker => {
                let parent = &self.rows.executions[parent.idx];
                let team = parent.team_name.clone();
                (
                    AgentType::Worker,
                    team.expect("a worker's parent leads a team"),
                )
            }
        };
        self.execution(
            st,
            profile,
            Some(parent),
            agent_type,
            Some(team),
            Some(task),
        )
    }

    fn execution(
        &mut self,
        st: Stage,
        profile: &'static Profile,
        parent: Option<Agent>,
        agent_type: AgentType,
        team_name: Option<String>,
        task: Option<&str>,
    ) -> Agent {
        let index = self.next(st.id, "agent");
        let id = Self::child_id(st.id, "agent", index, self.now);
        let depth = parent.map_or(0, |p| self.rows.executions[p.idx].depth + 1);
        self.rows.executions.push(ExecutionRow {
            id,
            stage_id: st.id,
            session_id: st.session,
            parent_execution_id: parent.map(|p| p.id),
            agent_name: profile.name.into(),
            agent_index: index,
            status: ExecutionStatus::Active,
            started_at: Some(self.now),
            completed_at: None,
            duration_ms: None,
            error_message: None,
            iteration_strategy: profile.model.strategy.into(),
            llm_provider: Some(profile.model.provider.into()),
            llm_model: Some(profile.model.name.into()),
            created_at: self.now,
            updated_at: self.now,
            agent_type,
            team_name,
            task: task.map(Into::into),
            result_summary: None,
            depth,
        });
        Agent {
            idx: self.rows.executions.len() - 1,
            id,
            stage: st.id,
            session: st.session,
            profile,
        }
    }

    /// What a finished sub-agent reports back to its parent (seed 003's `result_summary`).
    pub(in crate::demo) fn report(&mut self, a: Agent, summary: &str) {
        self.rows.executions[a.idx].result_summary = Some(summary.into());
    }

    pub(in crate::demo) fn end_agent(
        &mut self,
        a: Agent,
        status: ExecutionStatus,
        error: Option<&str>,
    ) {
        self.wait(120);
        let now = self.now;
        let row = &mut self.rows.executions[a.idx];
        row.status = status;
        row.completed_at = Some(now);
        row.duration_ms = row.started_at.map(|started| millis_between(started, now));
        row.error_message = error.map(Into::into);
        row.updated_at = now;
    }
}

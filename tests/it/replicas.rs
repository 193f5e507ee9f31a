//! Three server processes on one PostgreSQL: writers on one, followers of the session's event
//! stream on all three (over WebSocket, graphql-sse and multipart HTTP), one process SIGKILLed
//! and restarted mid-run, followers cutting their connections at random. Every follower resumes
//! from its last cursor and ends with exactly the order and text the writers produced.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::common::TestDb;
use crate::common::multipart::MultipartSubscription;
use crate::common::rng::Rng;
use crate::common::served::Served;
use crate::common::sse::SseSubscription;
use crate::common::ws::Subscription;

const EVENTS: &str = "subscription ($s: ID!, $after: String) {
  events(sessionId: $s, after: $after) {
    sequence firstSequence type cursor
    source { agentId }
    data {
      __typename
      ... on TextAppended { eventId offset text }
      ... on TimelineEventChange { event { id } }
      ... on SystemNotice { code }
    }
  }
}";

/// The last writer's notice: followers stop when they have it.
const LAST: &str = "RUN_FINISHED";

/// POSTs a mutation to the writers' process; any error fails the test.
async fn write(client: &reqwest::Client, addr: SocketAddr, query: &str, vars: Value) -> Value {
    let body: Value = client
        .post(format!("http://{addr}/graphql"))
        .json(&json!({ "query": query, "variables": vars }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(body.get("errors").is_none(), "{body:#}\n{query}");
    body["data"].clone()
}

/// What one writer did, in its order, as a follower sees it: events created and finished, their
/// text, notices.
#[derive(Debug, Default, PartialEq)]
struct Story(Vec<String>);

impl Story {
    fn push(&mut self, item: String) {
        self.0.push(item);
    }

    /// Text joins the text right before it: appends may arrive merged.
    fn text(&mut self, text: &str) {
        match self.0.last_mut() {
            Some(last) if last.starts_with("text:") => last.push_str(text),
            _ => self.0.push(format!("text:{text}")),
        }
    }
}

const PIECES: [&str; 8] = [
    "OOMKilled ",
    "pod ",
    "api-7f9c ",
    "restarted ",
    "✓ ",
    "🙂 ",
    "memory 512Mi→1Gi ",
    "\"quoted\"\n",
];

/// One agent's work: streamed events (single appends and batches), notices.
async fn writer(
    client: reqwest::Client,
    addr: SocketAddr,
    execution: String,
    seed: u64,
    events: usize,
    written: Arc<AtomicUsize>,
) -> Story {
    let mut rng = Rng(seed);
    let mut story = Story::default();
    for e in 0..events {
        let d = write(
            &client,
            addr,
            "mutation ($x: ID!) { createTimelineEvent(input: { executionId: $x,
               eventType: LLM_RESPONSE, status: STREAMING }) { id } }",
            json!({ "x": execution }),
        )
        .await;
        let event = d["createTimelineEvent"]["id"].as_str().unwrap().to_owned();
        story.push(format!("timeline.created:{event}"));
        let mut offset = 0usize;
        let pieces = 8 + rng.below(20);
        let mut done = 0;
        while done < pieces {
            // One append in three goes in a batch of up to four.
            let batch = if rng.below(3) == 0 {
                (1 + rng.below(4)).min(pieces - done)
            } else {
                1
            };
            let mut operations = Vec::new();
            for _ in 0..batch {
                let piece = PIECES[rng.below(PIECES.len() as u64) as usize];
                operations.push(json!({ "appendTimelineContent":
                    { "eventId": event, "offset": offset, "delta": piece } }));
                offset += piece.chars().count();
                story.text(piece);
            }
            write(
                &client,
                addr,
                "mutation ($ops: [IngestOperation!]!) { ingest(operations: $ops) { __typename } }",
                json!({ "ops": operations }),
            )
            .await;
            done += batch;
            written.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(rng.below(40))).await;
        }
        write(
            &client,
            addr,
            "mutation ($e: ID!) { finishTimelineEvent(input: { eventId: $e, status: COMPLETED }) { status } }",
            json!({ "e": event }),
        )
        .await;
        story.push(format!("timeline.finished:{event}"));
        if rng.below(3) == 0 {
            let code = format!("FALLBACK_MODEL_{e}");
            notice(&client, addr, &execution, &code).await;
            story.push(format!("system.warning:{code}"));
        }
    }
    story
}

async fn notice(client: &reqwest::Client, addr: SocketAddr, execution: &str, code: &str) {
    write(
        client,
        addr,
        "mutation ($x: ID!, $c: String!) { recordSystemNotice(input: { executionId: $x,
           level: WARNING, code: $c, message: \"the primary model timed out\" }) { eventType } }",
        json!({ "x": execution, "c": code }),
    )
    .await;
}

/// A subscription over one of the three transports.
enum Follow {
    Ws(Box<Subscription>),
    Sse(SseSubscription),
    Multipart(MultipartSubscription),
}

impl Follow {
    async fn open(transport: usize, addr: SocketAddr, vars: Value) -> Result<Follow, String> {
        Ok(match transport {
            0 => Follow::Ws(Box::new(Subscription::open(addr, EVENTS, vars).await?)),
            1 => Follow::Sse(SseSubscription::open(addr, EVENTS, vars).await?),
            _ => Follow::Multipart(MultipartSubscription::open(addr, EVENTS, vars).await?),
        })
    }

    async fn next(&mut self) -> Result<Result<Value, Value>, String> {
        match self {
            Follow::Ws(s) => s.try_next().await,
            Follow::Sse(s) => s.try_next().await,
            Follow::Multipart(s) => s.try_next().await,
        }
    }
}

/// What a follower received, and how it got there.
struct Followed {
    events: Vec<Value>,
    connections: usize,
    /// Subscriptions the server ended with an error (asking the client to resume).
    ended: Vec<String>,
}

/// Follows the session on whichever process is at `slot`'s address, from its last cursor,
/// cutting the connection after a random number of events.
async fn follower(
    slot: watch::Receiver<SocketAddr>,
    transport: usize,
    session: String,
    seed: u64,
) -> Followed {
    let mut rng = Rng(seed);
    let mut followed = Followed {
        events: Vec::new(),
        connections: 0,
        ended: Vec::new(),
    };
    let mut cursor = Value::Null;
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "transport {transport}: not finished within 120 s after {} events, {} connections; \
             ended by the server: {:?}",
            followed.events.len(),
            followed.connections,
            followed.ended
        );
        let addr = *slot.borrow();
        let vars = json!({ "s": session, "after": cursor });
        let mut follow = match Follow::open(transport, addr, vars).await {
            Ok(follow) => follow,
            Err(_) => {
                // Its process is down: try again (at the restarted one's address).
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        followed.connections += 1;
        for _ in 0..5 + rng.below(60) {
            match follow.next().await {
                Ok(Ok(data)) => {
                    let event = data["events"].clone();
                    cursor = event["cursor"].clone();
                    let last = event["data"]["code"] == LAST;
                    followed.events.push(event);
                    if last {
                        return followed;
                    }
                }
                Ok(Err(end)) => {
                    let code = end["errors"][0]["extensions"]["code"]
                        .as_str()
                        .or(end["payload"][0]["extensions"]["code"].as_str())
                        .unwrap_or_default()
                        .to_owned();
                    assert!(
                        ["SUBSCRIBER_TOO_SLOW", "STREAM_EXPIRED"].contains(&code.as_str()),
                        "transport {transport}: the subscription ended with {end}"
                    );
                    followed.ended.push(code);
                    break;
                }
                Err(_lost) => break,
            }
        }
    }
}

/// Checks that `events` cover positions 1..=`last` exactly once, in order, with each event's
/// appended text at the offsets it claims; returns each writer's story as seen in them.
fn stories(events: &[Value], last: i64) -> HashMap<String, Story> {
    let mut next = 1;
    let mut stories: HashMap<String, Story> = HashMap::new();
    let mut lengths: HashMap<String, u64> = HashMap::new();
    for e in events {
        assert_eq!(
            e["firstSequence"].as_i64(),
            Some(next),
            "a gap or a repeat at {e}"
        );
        next = e["sequence"].as_i64().unwrap() + 1;
        let Some(agent) = e["source"]["agentId"].as_str() else {
            continue;
        };
        let story = stories.entry(agent.to_owned()).or_default();
        let data = &e["data"];
        match data["__typename"].as_str().unwrap() {
            "TextAppended" => {
                let event = data["eventId"].as_str().unwrap();
                let text = data["text"].as_str().unwrap();
                let length = lengths.entry(event.to_owned()).or_default();
                assert_eq!(data["offset"].as_u64(), Some(*length), "{e}");
                *length += text.chars().count() as u64;
                story.text(text);
            }
            "TimelineEventChange" => story.push(format!(
                "{}:{}",
                e["type"].as_str().unwrap(),
                data["event"]["id"].as_str().unwrap()
            )),
            "SystemNotice" => story.push(format!(
                "{}:{}",
                e["type"].as_str().unwrap(),
                data["code"].as_str().unwrap()
            )),
            _ => {}
        }
    }
    assert_eq!(next, last + 1, "every position up to the last one");
    stories
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_on_three_processes_get_exactly_the_writers_order_through_a_sigkill() {
    if std::env::var("DATABASE_URL").map_or(true, |url| url.is_empty()) {
        eprintln!(
            "skipped: three server processes on one database need an external PostgreSQL \
             (DATABASE_URL)"
        );
        return;
    }
    let db = TestDb::start().await;
    let url = db.url().unwrap();
    let args = vec!["--database-url".to_owned(), url];
    let mut processes = Vec::new();
    for _ in 0..3 {
        processes.push(Served::start(args.clone()).await);
    }
    let slots: Vec<_> = processes.iter().map(|p| watch::channel(p.addr)).collect();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("seed {seed}");

    // The session and its agents, written through the first process.
    let client = reqwest::Client::new();
    let writers_at = processes[0].addr;
    let d = write(
        &client,
        writers_at,
        "mutation { createSession(input: { alertType: \"OOMKilled\", chainId: \"k8s\" }) { id } }",
        json!({}),
    )
    .await;
    let session = d["createSession"]["id"].as_str().unwrap().to_owned();
    let d = write(
        &client,
        writers_at,
        "mutation ($s: ID!) { createStage(input: { sessionId: $s, stageIndex: 0,
           name: \"Investigation\" }) { id } }",
        json!({ "s": session }),
    )
    .await;
    let stage = d["createStage"]["id"].as_str().unwrap().to_owned();
    let agent = |index: i32, parent: Option<&str>, kind: &str, team: Option<&str>| json!({ "s": stage, "i": index, "p": parent, "t": kind, "team": team });
    const CREATE: &str = "mutation ($s: ID!, $i: Int!, $p: ID, $t: AgentType, $team: String) {
      createAgentExecution(input: { stageId: $s, agentIndex: $i, agentName: \"Agent\",
        iterationStrategy: \"react\", parentExecutionId: $p, agentType: $t, teamName: $team }) { id } }";
    let lead = write(
        &client,
        writers_at,
        CREATE,
        agent(1, None, "GLOBAL_SUPERVISOR", None),
    )
    .await["createAgentExecution"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut executions = vec![lead.clone()];
    for (i, team) in ["pods", "nodes"].into_iter().enumerate() {
        let index = 2 + 2 * i as i32;
        let supervisor = write(
            &client,
            writers_at,
            CREATE,
            agent(index, Some(&lead), "TEAM_SUPERVISOR", Some(team)),
        )
        .await["createAgentExecution"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let worker = write(
            &client,
            writers_at,
            CREATE,
            agent(index + 1, Some(&supervisor), "WORKER", None),
        )
        .await["createAgentExecution"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        executions.push(worker);
    }

    // Followers: each transport on each process.
    let mut followers = Vec::new();
    for (slot, (_, rx)) in slots.iter().enumerate() {
        for transport in 0..3 {
            followers.push(tokio::spawn(follower(
                rx.clone(),
                transport,
                session.clone(),
                seed ^ (slot * 3 + transport + 1) as u64,
            )));
        }
    }

    // The writers, concurrently, while the third process is killed and restarted.
    const EVENTS_PER_WRITER: usize = 10;
    let written = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = executions
        .iter()
        .enumerate()
        .map(|(i, execution)| {
            tokio::spawn(writer(
                client.clone(),
                writers_at,
                execution.clone(),
                seed.wrapping_add(i as u64 * 7919),
                EVENTS_PER_WRITER,
                written.clone(),
            ))
        })
        .collect();
    let killed = {
        let written = written.clone();
        let mut process = processes.pop().unwrap();
        let slot = slots[2].0.clone();
        let args = args.clone();
        tokio::spawn(async move {
            while written.load(Ordering::Relaxed) < 60 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            process.kill();
            let at = written.load(Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(700)).await;
            let restarted = Served::start(args).await;
            slot.send(restarted.addr).unwrap();
            (restarted, at, written.load(Ordering::Relaxed))
        })
    };
    let mut expected = HashMap::new();
    for (execution, writer) in executions.iter().zip(writers) {
        expected.insert(execution.clone(), writer.await.unwrap());
    }
    let (restarted, killed_at, restarted_at) = killed.await.unwrap();
    assert!(
        restarted_at < written.load(Ordering::Relaxed),
        "the process came back before the writers finished"
    );
    notice(&client, writers_at, &lead, LAST).await;
    expected
        .get_mut(&lead)
        .unwrap()
        .push(format!("system.warning:{LAST}"));

    let last: i64 =
        sqlx::query_scalar("SELECT max(position) FROM session_events WHERE session_id = $1")
            .bind(casefile::api::ids::decode(&session).unwrap().1)
            .fetch_one(db.store().pool())
            .await
            .unwrap();
    let mut orders = Vec::new();
    for (i, follower) in followers.into_iter().enumerate() {
        let followed = follower.await.unwrap();
        let seen = stories(&followed.events, last);
        for (execution, story) in &expected {
            assert_eq!(
                seen.get(execution),
                Some(story),
                "follower {i} (process {}, transport {}) differs from writer {execution}",
                i / 3,
                i % 3
            );
        }
        eprintln!(
            "follower {i}: {} envelopes for {last} positions over {} connections; ended by the \
             server: {:?}",
            followed.events.len(),
            followed.connections,
            followed.ended
        );
        assert!(followed.connections > 1, "follower {i} reconnected");
        // Everyone saw the same order: the same event at each position that is not merged text.
        let order: Vec<(i64, String)> = followed
            .events
            .iter()
            .filter(|e| e["data"]["__typename"] != "TextAppended")
            .map(|e| (e["sequence"].as_i64().unwrap(), e["type"].to_string()))
            .collect();
        orders.push(order);
    }
    assert!(orders.windows(2).all(|w| w[0] == w[1]), "one order for all");
    eprintln!(
        "the third process was killed after {killed_at} of {} writes, back after {restarted_at}",
        written.load(Ordering::Relaxed)
    );
    drop(restarted);
    drop(processes);
    db.stop().await;
}

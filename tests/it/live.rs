//! Live timeline subscriptions over real WebSocket connections.

use serde_json::{Value, json};

use crate::common::TestApp;
use crate::common::ws::Subscription;
use crate::write_api::Agent;

const TIMELINE: &str =
    "subscription ($s: ID!, $after: String) { timeline(sessionId: $s, after: $after) {
    kind sequenceNumber offset delta cursor event { uuid status content } } }";

/// The text the writer streams: token-sized pieces.
fn pieces(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("tok{i} ")).collect()
}

async fn running_execution(a: &Agent<'_>) -> (String, String) {
    let session = a.session().await;
    let stage = a.stage(&session, 0, 1, None).await;
    let exec = a.execution(&stage, 1, "Agent").await;
    (session, exec)
}

/// Streams `pieces` into a new event and finishes it.
async fn write_stream(
    a: &Agent<'_>,
    exec: &str,
    pieces: &[String],
    pause: std::time::Duration,
) -> String {
    let (event, _) = a.event(exec, "STREAMING").await;
    let mut offset = 0;
    for piece in pieces {
        let r = a.append(&event, offset, piece).await;
        assert!(r.get("errors").is_none(), "{r}");
        offset += piece.chars().count() as i64;
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    a.ok("mutation ($id: ID!) { finishTimelineEvent(input: { eventId: $id, status: COMPLETED }) { status } }", json!({ "id": event })).await;
    event
}

/// Reads updates until the event finishes; returns (kinds, concatenated deltas).
async fn read_until_finished(sub: &mut Subscription) -> (Vec<String>, String, Value) {
    let mut kinds = Vec::new();
    let mut text = String::new();
    loop {
        let update = sub.next().await.expect("an update")["timeline"].clone();
        kinds.push(update["kind"].as_str().unwrap().to_owned());
        if let Some(delta) = update["delta"].as_str() {
            assert_eq!(
                update["offset"].as_i64().unwrap(),
                text.chars().count() as i64,
                "deltas are contiguous"
            );
            text.push_str(delta);
        }
        if update["kind"] == "FINISHED" {
            return (kinds, text, update);
        }
    }
}

#[tokio::test]
async fn subscribers_on_both_protocols_receive_exactly_the_writers_content() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    let mut modern = Subscription::start(
        app.addr,
        false,
        json!({ "token": "t" }),
        TIMELINE,
        json!({ "s": session }),
    )
    .await;
    let mut legacy =
        Subscription::start(app.addr, true, json!({}), TIMELINE, json!({ "s": session })).await;
    let pieces = pieces(150);
    let expected: String = pieces.concat();
    write_stream(&a, &exec, &pieces, std::time::Duration::ZERO).await;
    for sub in [&mut modern, &mut legacy] {
        let (kinds, text, finished) = read_until_finished(sub).await;
        assert_eq!(kinds.first().map(String::as_str), Some("CREATED"));
        assert_eq!(text, expected);
        assert_eq!(finished["event"]["content"], expected.as_str());
        assert_eq!(finished["event"]["status"], "COMPLETED");
    }
    modern.disconnect().await;
    legacy.disconnect().await;
    app.stop().await;
}

#[tokio::test]
async fn reconnecting_with_the_last_cursor_loses_and_repeats_nothing() {
    let app = TestApp::start().await;
    let a = Agent { app: &app };
    let (session, exec) = running_execution(&a).await;
    let pieces = pieces(300);
    let expected: String = pieces.concat();
    let writer = write_stream(&a, &exec, &pieces, std::time::Duration::from_millis(2));
    let reader = async {
        let mut cursor = Value::Null;
        let mut text = String::new();
        let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut reconnects = 0;
        loop {
            let mut sub = Subscription::start(
                app.addr,
                reconnects % 2 == 1,
                json!({}),
                TIMELINE,
                json!({ "s": session, "after": cursor }),
            )
            .await;
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let take = 1 + (rng % 25) as usize;
            for _ in 0..take {
                let update = sub.next().await.expect("an update")["timeline"].clone();
                if let Some(delta) = update["delta"].as_str() {
                    assert_eq!(
                        update["offset"].as_i64().unwrap(),
                        text.chars().count() as i64
                    );
                    text.push_str(delta);
                }
                cursor = update["cursor"].clone();
                if update["kind"] == "FINISHED" {
                    sub.disconnect().await;
                    return (text, reconnects);
                }
            }
            sub.disconnect().await;
            reconnects += 1;
        }
    };
    let (_, (text, reconnects)) = tokio::join!(writer, reader);
    assert!(
        reconnects >= 3,
        "the stream was interrupted {reconnects} times"
    );
    assert_eq!(text, expected);
    app.stop().await;
}

//! `casefile check-distribution`: a migrated database's schema distributes by session as
//! `docs/scale-out.md` places its tables, and a schema that does not is refused, finding by
//! finding.

use casefile::distribution::{Placement, Placements, check};

use crate::common::TestDb;
use crate::common::cli::{DataDir, casefile, stdout};

fn documented() -> Placements {
    Placements::documented().expect("docs/scale-out.md places its tables")
}

#[tokio::test]
async fn a_migrated_database_distributes() {
    let placed = documented().iter().count();
    let passed = format!("{placed} tables checked, all keys distribute\n");
    let dir = DataDir::new("check-distribution");
    if let Ok(url) = std::env::var("DATABASE_URL")
        && !url.is_empty()
    {
        // Plain: what it adds is refused, and a partitioned table refuses most of it itself.
        let db = TestDb::start_plain().await;
        let url = db.url().expect("an external database has a URL");
        let checked = casefile(&["check-distribution", "--database-url", &url], &dir.0);
        assert_eq!(stdout(&checked), passed);
        db.stop().await;
        return;
    }
    // It applies nothing: on a new database, every placed table is missing.
    let unmigrated = casefile(&["check-distribution"], &dir.0);
    assert!(!unmigrated.status.success());
    let printed = String::from_utf8(unmigrated.stdout).unwrap();
    assert!(
        printed.contains("sessions: in docs/scale-out.md but not in the database\n"),
        "{printed}"
    );
    assert_eq!(printed.lines().count(), placed, "{printed}");
    let refused = String::from_utf8_lossy(&unmigrated.stderr);
    assert!(refused.contains(&format!("{placed} findings")), "{refused}");

    stdout(&casefile(&["migrate"], &dir.0));
    assert_eq!(stdout(&casefile(&["check-distribution"], &dir.0)), passed);
}

#[tokio::test]
async fn a_schema_that_does_not_distribute_is_refused_finding_by_finding() {
    // Plain: what it adds is refused, and a partitioned table refuses most of it itself.
    let db = TestDb::start_plain().await;
    let store = db.store();
    let mut placements = documented();
    let clean = check(&store.catalog().await.unwrap(), &placements);
    assert_eq!(clean, [], "the migrations distribute");

    for statement in [
        "CREATE TABLE unclassified_things (id int)",
        "CREATE TABLE sessionless_notes (id uuid PRIMARY KEY)",
        "CREATE TABLE loose_notes (id uuid, session_id uuid)",
        "CREATE UNIQUE INDEX messages_sequence_number_idx ON messages (sequence_number)",
        "ALTER TABLE messages ADD CONSTRAINT messages_id_key UNIQUE (id)",
        // An expression over the session is not the session.
        "CREATE UNIQUE INDEX chats_session_text_idx ON chats ((session_id::text), id)",
        "CREATE TABLE annotations (id uuid, session_id uuid NOT NULL, \
             about_session uuid REFERENCES sessions (id), PRIMARY KEY (id, session_id))",
        "CREATE TABLE labels (id uuid PRIMARY KEY, session_id uuid REFERENCES sessions (id))",
        "CREATE TABLE bookmarks (message_id uuid, session_id uuid, \
             FOREIGN KEY (message_id, session_id) REFERENCES messages (id, session_id))",
        // A partition is its partitioned table's: neither it nor its copies of the keys count.
        "CREATE TABLE parted_notes (id uuid, session_id uuid NOT NULL, \
             PRIMARY KEY (id, session_id)) PARTITION BY HASH (session_id)",
        "CREATE TABLE parted_notes_0 PARTITION OF parted_notes \
             FOR VALUES WITH (MODULUS 1, REMAINDER 0)",
        "CREATE TABLE parted_replies (id uuid, note_id uuid, session_id uuid NOT NULL, \
             PRIMARY KEY (id, session_id), \
             FOREIGN KEY (note_id, session_id) REFERENCES parted_notes (id, session_id))",
    ] {
        sqlx::query(statement)
            .execute(db.db.pool())
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    for (table, placement) in [
        ("sessionless_notes", Placement::Distributed),
        ("loose_notes", Placement::Distributed),
        ("annotations", Placement::Distributed),
        ("labels", Placement::Reference),
        ("bookmarks", Placement::Local),
        ("parted_notes", Placement::Distributed),
        ("parted_replies", Placement::Distributed),
        ("vanished_things", Placement::Local),
    ] {
        placements.place(table, placement);
    }

    let findings: Vec<String> = check(&store.catalog().await.unwrap(), &placements)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        findings,
        [
            "annotations: foreign key annotations_about_session_fkey to sessions does not refer \
             from `session_id` to sessions.`id`",
            "bookmarks: foreign key bookmarks_message_id_session_id_fkey refers from a local \
             table to messages, a distributed one: a distributed PostgreSQL cannot keep it",
            "chats: unique index chats_session_text_idx ((session_id::text), id) does not \
             contain `session_id`",
            "labels: foreign key labels_session_id_fkey refers from a reference table to \
             sessions, a distributed one: a distributed PostgreSQL cannot keep it",
            "loose_notes: distributed, but `session_id` may be null",
            "loose_notes: distributed, but has no primary key",
            "messages: unique constraint messages_id_key (id) does not contain `session_id`",
            "messages: unique index messages_sequence_number_idx (sequence_number) does not \
             contain `session_id`",
            "sessionless_notes: distributed, but has no `session_id` column",
            "sessionless_notes: primary key sessionless_notes_pkey (id) does not contain \
             `session_id`",
            "unclassified_things: not in docs/scale-out.md (place it: distributed, reference or \
             local)",
            "vanished_things: in docs/scale-out.md but not in the database",
        ]
    );

    // The command reads the document itself: the tables only this test placed are unplaced.
    match db.url() {
        Some(url) => {
            let dir = DataDir::new("check-distribution");
            let refused = casefile(&["check-distribution", "--database-url", &url], &dir.0);
            assert!(!refused.status.success());
            let printed = String::from_utf8(refused.stdout).unwrap();
            for line in [
                "unclassified_things: not in docs/scale-out.md",
                "labels: not in docs/scale-out.md",
                "messages: unique index messages_sequence_number_idx (sequence_number) does not \
                 contain `session_id`",
            ] {
                assert!(printed.contains(line), "{line} in:\n{printed}");
            }
        }
        None => eprintln!(
            "the command's half of this test is skipped: the embedded database serves one \
             process (its refusals are run by a_migrated_database_distributes)"
        ),
    }
    db.stop().await;
}

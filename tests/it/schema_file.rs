//! `schema.graphql` is exactly the SDL the server serves.

#[test]
fn schema_file_matches_the_served_schema() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.graphql");
    let served = casefile::api::sdl();
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    if on_disk != served {
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(path, &served).unwrap();
            return;
        }
        panic!(
            "schema.graphql is out of date: run `cargo run -- schema > schema.graphql` \
             (or this test with UPDATE_SCHEMA=1) and commit it"
        );
    }
}

#[test]
fn the_cli_prints_the_same_schema() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_casefile"))
        .arg("schema")
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        casefile::api::sdl()
    );
}

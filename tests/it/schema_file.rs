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

/// Every type, field, argument, input field and enum value of casefile's own schema says what
/// it is (GraphiQL's docs panel shows these).
#[tokio::test]
async fn everything_in_the_schema_is_described() {
    let app = crate::common::TestApp::start().await;
    let data = app
        .data(
            "{ __schema { types { name description
                 fields { name description args { name description } }
                 inputFields { name description }
                 enumValues { name description } } } }",
            serde_json::json!({}),
        )
        .await;
    let described = |v: &serde_json::Value| {
        v["description"]
            .as_str()
            .is_some_and(|d| !d.trim().is_empty())
    };
    let mut missing = Vec::new();
    for t in data["__schema"]["types"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        // Introspection types and the standard scalars are described by the spec, not by us.
        if name.starts_with("__") || ["String", "Int", "Float", "Boolean", "ID"].contains(&name) {
            continue;
        }
        if !described(t) {
            missing.push(name.to_owned());
        }
        for f in t["fields"].as_array().into_iter().flatten() {
            if !described(f) {
                missing.push(format!("{name}.{}", f["name"].as_str().unwrap()));
            }
            for a in f["args"].as_array().unwrap() {
                if !described(a) {
                    missing.push(format!(
                        "{name}.{}({})",
                        f["name"].as_str().unwrap(),
                        a["name"].as_str().unwrap()
                    ));
                }
            }
        }
        for f in t["inputFields"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(t["enumValues"].as_array().into_iter().flatten())
        {
            if !described(f) {
                missing.push(format!("{name}.{}", f["name"].as_str().unwrap()));
            }
        }
    }
    assert!(missing.is_empty(), "undescribed: {missing:#?}");
    app.stop().await;
}

/// Scalars are described for API users, and the file says what introspection says of their
/// specifications.
#[tokio::test]
async fn scalars_are_described_and_specified() {
    let app = crate::common::TestApp::start().await;
    let data = app
        .data(
            r#"{ dt: __type(name: "DateTime") { description specifiedByURL }
                 uuid: __type(name: "UUID") { description specifiedByURL } }"#,
            serde_json::json!({}),
        )
        .await;
    let file =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema.graphql")).unwrap();
    for (alias, scalar) in [("dt", "DateTime"), ("uuid", "UUID")] {
        let description = data[alias]["description"].as_str().unwrap();
        assert!(!description.contains("Implement the"), "{description}");
        let url = data[alias]["specifiedByURL"].as_str().unwrap();
        assert!(
            file.contains(&format!("scalar {scalar} @specifiedBy(url: \"{url}\")")),
            "{scalar} in schema.graphql"
        );
    }
    app.stop().await;
}

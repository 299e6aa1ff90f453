//! The checked-in schemas must match the types.

use std::path::Path;

#[test]
fn checked_in_schemas_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas");
    let drift = handoff_schema::check(&dir);
    assert!(
        drift.is_empty(),
        "schemas/ is out of date ({}); run `{}` and commit the result",
        drift.join(", "),
        handoff_schema::REGENERATE
    );
}

#[test]
fn every_schema_names_its_version() {
    for (name, value) in handoff_schema::schemas() {
        let id = value["$id"].as_str().unwrap_or_default();
        assert!(
            id.starts_with("handoff.") && id.ends_with(".v1"),
            "{name}: {id}"
        );
    }
}

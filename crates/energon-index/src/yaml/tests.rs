//! Tests of the YAML loader and emitter.

use std::path::Path;

use serde_json::{Value, json};

use super::*;

fn load(text: &str) -> Value {
    parse_yaml(text, Path::new("t.yaml")).unwrap()
}

#[test]
fn smoke() {
    assert_eq!(load("a: 1"), json!({"a": 1}));
    assert_eq!(dump_yaml(&json!({"a": [1]}), DumpOptions::default()), "a:\n- 1\n");
}

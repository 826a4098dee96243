#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Map, Value, json};

use super::*;

fn parse(body: Value) -> Result<Vec<PatchOp>, PatchError> {
    parse_patch(Some(&body), &PatchRules::cluster())
}

fn parse_err(body: Value) -> String {
    parse(body)
        .expect_err("patch should be rejected")
        .to_string()
}

fn cluster_doc() -> Map<String, Value> {
    json!({
        "uuid": "5d12f6fd-a196-4bf0-ae4c-1f639a523a52",
        "name": "k8s",
        "cluster_template_id": "0562d357-8641-4759-8fed-8173f02c9633",
        "keypair": null,
        "node_count": 3,
        "master_count": 1,
        "labels": {"kube_tag": "v1.30.1", "a": "1"},
        "health_status_reason": {},
        "status": "CREATE_COMPLETE",
        "create_timeout": 60,
    })
    .as_object()
    .cloned()
    .unwrap()
}

fn nodegroup_doc() -> Map<String, Value> {
    json!({
        "uuid": "7d5b1e3a-0b0e-4a4e-9a51-0b8c8f0e7a11",
        "name": "workers",
        "labels": {"a": "1"},
        "min_node_count": 2,
        "max_node_count": 5,
        "node_labels": {"x": "y"},
        "node_taints": [{"key": "k", "value": "", "effect": "NoSchedule"}],
    })
    .as_object()
    .cloned()
    .unwrap()
}

/// Parse then apply with the given rules; the error text on failure.
fn run(
    doc: &mut Map<String, Value>,
    body: Value,
    rules: &PatchRules,
) -> Result<Vec<PatchOp>, String> {
    let mut ops = parse_patch(Some(&body), rules).map_err(|e| e.to_string())?;
    apply_patch(doc, &mut ops, rules).map_err(|e| e.to_string())?;
    Ok(ops)
}

fn apply_err(doc: &mut Map<String, Value>, body: Value) -> String {
    let before = doc.clone();
    let err = run(doc, body, &PatchRules::cluster()).expect_err("patch should fail");
    assert_eq!(
        *doc, before,
        "a failed patch must leave the document untouched"
    );
    err
}

// ----- body shape (WSME) --------------------------------------------------------------------

#[test]
fn missing_and_non_list_bodies() {
    assert_eq!(
        parse_patch(None, &PatchRules::cluster())
            .unwrap_err()
            .to_string(),
        "Missing argument: \"patch\""
    );
    let null = parse_patch(Some(&Value::Null), &PatchRules::cluster()).unwrap_err();
    assert_eq!(null.to_string(), "'NoneType' object is not iterable");
    // Upstream crashes (500); the request is at fault: 400, same text.
    assert_eq!(null.status(), 400);
    assert_eq!(
        parse_err(json!({"a": 1})),
        "Invalid input for field/attribute patch. Value: '{'a': 1}'. Value not a valid list: {'a': 1}"
    );
    assert_eq!(
        parse_err(json!("x")),
        "Invalid input for field/attribute patch. Value: 'x'. Value not a valid list: x"
    );
    assert_eq!(
        parse_err(json!(5)),
        "Invalid input for field/attribute patch. Value: '5'. Value not a valid list: 5"
    );
    assert_eq!(parse(json!([])).unwrap(), vec![]);
}

#[test]
fn non_object_elements() {
    for (body, text, status) in [
        (json!(["abc"]), "'str' object has no attribute 'keys'", 400),
        (json!([5]), "'int' object has no attribute 'keys'", 400),
        (json!([[1]]), "'list' object has no attribute 'keys'", 400),
        (json!([null]), "'NoneType' object is not subscriptable", 400),
    ] {
        let err = parse(body).unwrap_err();
        assert_eq!((err.to_string().as_str(), err.status()), (text, status));
    }
    // A null element only hurts later: a WSME error in a following element wins.
    assert_eq!(
        parse_err(json!([null, {"path": "/a", "op": "frob"}])),
        "Invalid input for field/attribute op. Value: 'frob'. Value should be one of: remove, add, replace"
    );
}

#[test]
fn unknown_attributes() {
    assert_eq!(
        parse_err(json!([{"op": "add", "path": "/a", "foo": 1}])),
        "Unknown attribute for argument patch: foo"
    );
    assert_eq!(
        parse_err(json!([{"op": "add", "path": "/a", "foo": 1, "bar": 2}])),
        "Unknown attributes for argument patch: foo, bar"
    );
    // Checked before the element's own fields.
    assert_eq!(
        parse_err(json!([{"path": "/b", "op": "frob", "zz": 1}])),
        "Unknown attribute for argument patch: zz"
    );
}

#[test]
fn mandatory_fields_and_types() {
    let missing = |f: &str| {
        format!("Invalid input for field/attribute {f}. Value: 'None'. Mandatory field missing.")
    };
    assert_eq!(parse_err(json!([{}])), missing("path"));
    assert_eq!(parse_err(json!([{"op": "add"}])), missing("path"));
    assert_eq!(parse_err(json!([{"path": "/a"}])), missing("op"));
    assert_eq!(
        parse_err(json!([{"path": 5, "op": 5}])),
        "Invalid input for field/attribute path. Value: '5'. Value should be string"
    );
    assert_eq!(
        parse_err(json!([{"path": ["/a"], "op": "add"}])),
        "Invalid input for field/attribute path. Value: '['/a']'. Value should be string"
    );
    assert_eq!(
        parse_err(json!([{"path": "/a", "op": ["add"]}])),
        "Invalid input for field/attribute op. Value: '['add']'. unhashable type: 'list'"
    );
    assert_eq!(
        parse_err(json!([{"path": "/a", "op": {}}])),
        "Invalid input for field/attribute op. Value: '{}'. unhashable type: 'dict'"
    );
}

#[test]
fn op_enum() {
    assert_eq!(
        parse_err(json!([{"op": "frob", "path": "/a"}])),
        "Invalid input for field/attribute op. Value: 'frob'. Value should be one of: remove, add, replace"
    );
    for op in ["move", "copy", "test", "ADD"] {
        assert!(
            parse_err(json!([{"op": op, "path": "/a", "value": "x"}]))
                .contains("Value should be one of")
        );
    }
    // Earlier fields are checked first.
    assert_eq!(
        parse_err(json!([{"path": "/a.b", "op": "frob", "value": 1.5}])),
        "Invalid input for field/attribute path. Value: '/a.b'. Value should match the pattern ^(/[\\w-]+)+$"
    );
}

#[test]
fn path_pattern() {
    for bad in [
        "a",
        "/",
        "/a/",
        "//a",
        "/labels/foo.bar",
        "/a\n\n",
        "/a\r",
        "/a b",
        "",
    ] {
        assert_eq!(
            parse_err(json!([{"op": "add", "path": bad, "value": "x"}])),
            format!(
                "Invalid input for field/attribute path. Value: '{bad}'. Value should match the pattern ^(/[\\w-]+)+$"
            ),
            "{bad:?}"
        );
    }
    for good in ["/a", "/a-b/_1/-", "/ünï", "/node_taints/0", "/a\n"] {
        assert!(
            parse(json!([{"op": "add", "path": good, "value": "x"}])).is_ok(),
            "{good:?}"
        );
    }
}

#[test]
fn value_types() {
    let wrong = |shown: &str, class: &str| {
        format!(
            "Invalid input for field/attribute value. Value: '{shown}'. Wrong type. Expected '(<class 'str'>, <class 'int'>)', got '<class '{class}'>'"
        )
    };
    assert_eq!(
        parse_err(json!([{"op": "add", "path": "/a", "value": 1.5}])),
        wrong("1.5", "float")
    );
    assert_eq!(
        parse_err(json!([{"op": "add", "path": "/a", "value": 2.0}])),
        wrong("2.0", "float")
    );
    assert_eq!(
        parse_err(json!([{"op": "add", "path": "/a", "value": 1e5}])),
        wrong("100000.0", "float")
    );
    assert_eq!(
        parse_err(json!([{"op": "add", "path": "/a", "value": {"x": 1}}])),
        wrong("{'x': 1}", "dict")
    );
    assert_eq!(
        parse_err(json!([{"op": "add", "path": "/a", "value": [1]}])),
        wrong("[1]", "list")
    );
    // Type errors come before the internal-path check of the same element.
    assert_eq!(
        parse_err(json!([{"op": "remove", "path": "/uuid", "value": 1.5}])),
        wrong("1.5", "float")
    );
    for v in [
        json!("x"),
        json!(""),
        json!(0),
        json!(-5),
        json!(true),
        json!(false),
    ] {
        let ops = parse(json!([{"op": "add", "path": "/a", "value": v}])).unwrap();
        assert_eq!(ops[0].value, Some(v));
    }
}

#[test]
fn internal_non_removable_and_needs_value() {
    assert_eq!(
        parse_err(json!([{"op": "replace", "path": "/uuid", "value": "x"}])),
        "'/uuid' is an internal attribute and can not be updated"
    );
    assert_eq!(
        parse_err(json!([{"op": "remove", "path": "/stack_id"}])),
        "'/stack_id' is an internal attribute and can not be updated"
    );
    assert_eq!(
        parse_err(json!([{"op": "remove", "path": "/cluster_template_id"}])),
        "'/cluster_template_id' is a mandatory attribute and can not be removed"
    );
    assert!(
        parse(json!([{"op": "replace", "path": "/cluster_template_id", "value": "x"}])).is_ok()
    );
    // Exact match only: sub-paths slip through.
    assert!(parse(json!([{"op": "add", "path": "/uuid/x", "value": "x"}])).is_ok());
    assert_eq!(
        parse_err(json!([{"op": "add", "path": "/a"}])),
        "'add' and 'replace' operations needs value"
    );
    assert_eq!(
        parse_err(json!([{"op": "replace", "path": "/a", "value": null}])),
        "'add' and 'replace' operations needs value"
    );
    // Elements are validated in order.
    assert_eq!(
        parse_err(
            json!([{"path": "/uuid", "op": "add", "value": "x"}, {"path": "/b", "op": "frob"}])
        ),
        "'/uuid' is an internal attribute and can not be updated"
    );
    // remove keeps a value it was given, null is dropped.
    let ops = parse(json!([{"op": "remove", "path": "/a", "value": "x"}, {"op": "remove", "path": "/b", "value": null}])).unwrap();
    assert_eq!(ops[0].value, Some(json!("x")));
    assert_eq!(ops[1].value, None);
}

#[test]
fn resource_rules() {
    let t = PatchRules::cluster_template();
    let err =
        |rules: &PatchRules, body: Value| parse_patch(Some(&body), rules).unwrap_err().to_string();
    assert_eq!(
        err(&t, json!([{"op": "remove", "path": "/image_id"}])),
        "'/image_id' is a mandatory attribute and can not be removed"
    );
    assert_eq!(
        err(&t, json!([{"op": "remove", "path": "/hidden"}])),
        "'/hidden' is a mandatory attribute and can not be removed"
    );
    assert_eq!(
        err(
            &t,
            json!([{"op": "replace", "path": "/project_id", "value": "p"}])
        ),
        "'/project_id' is an internal attribute and can not be updated"
    );
    let ng = PatchRules::nodegroup();
    assert_eq!(
        err(
            &ng,
            json!([{"op": "replace", "path": "/labels", "value": "{}"}])
        ),
        "'/labels' is an internal attribute and can not be updated"
    );
    assert_eq!(
        err(
            &ng,
            json!([{"op": "replace", "path": "/node_count", "value": 3}])
        ),
        "'/node_count' is an internal attribute and can not be updated"
    );
    assert!(
        parse_patch(
            Some(&json!([{"op": "add", "path": "/labels/k", "value": "v"}])),
            &ng
        )
        .is_ok()
    );
    assert!(
        parse_patch(
            Some(&json!([{"op": "remove", "path": "/anything"}])),
            &PatchRules::federation()
        )
        .is_ok()
    );
}

#[test]
fn null_op_or_path_fail_like_jsonpatch() {
    let err = parse(json!([{"path": "/a", "op": null, "value": "x"}])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Couldn't apply patch '[{'path': '/a', 'op': None, 'value': 'x'}]'. Reason: Operation's op must be a string"
    );
    assert_eq!(err.status(), 400);
    assert_eq!(
        parse_err(json!([{"path": null, "op": "remove"}])),
        "Couldn't apply patch '[{'path': None, 'op': 'remove'}]'. Reason: Invalid 'path'"
    );
    let err = parse(json!([{"path": null, "op": "add", "value": "x"}])).unwrap_err();
    assert_eq!(
        (err.to_string().as_str(), err.status()),
        ("'NoneType' object has no attribute 'count'", 400)
    );
    assert_eq!(
        parse_err(json!([{"path": "/a", "op": null}])),
        "'add' and 'replace' operations needs value"
    );
}

// ----- application --------------------------------------------------------------------------

#[test]
fn add_checks_on_root_attributes() {
    let mut doc = cluster_doc();
    assert_eq!(
        apply_err(
            &mut doc,
            json!([{"op": "add", "path": "/foo", "value": "x"}])
        ),
        "Adding a new attribute /foo to the root of the resource is not allowed."
    );
    assert_eq!(
        apply_err(
            &mut doc,
            json!([{"op": "add", "path": "/name", "value": "x"}])
        ),
        "The attribute /name has existed, please use 'replace' operation instead."
    );
    // The checks look at the unpatched document and run before anything is applied.
    assert_eq!(
        apply_err(
            &mut doc,
            json!([{"op": "remove", "path": "/name"}, {"op": "add", "path": "/name", "value": "x"}])
        ),
        "The attribute /name has existed, please use 'replace' operation instead."
    );
    assert_eq!(
        apply_err(
            &mut doc,
            json!([{"op": "remove", "path": "/foo"}, {"op": "add", "path": "/zzz", "value": "x"}])
        ),
        "Adding a new attribute /zzz to the root of the resource is not allowed."
    );
    run(
        &mut doc,
        json!([{"op": "add", "path": "/keypair", "value": "kp"}]),
        &PatchRules::cluster(),
    )
    .unwrap();
    assert_eq!(doc["keypair"], json!("kp"));
}

#[test]
fn missing_members() {
    let mut doc = cluster_doc();
    assert_eq!(
        apply_err(
            &mut doc,
            json!([{"op": "replace", "path": "/foo", "value": "x"}])
        ),
        "Couldn't apply patch '[{'path': '/foo', 'op': 'replace', 'value': 'x'}]'. Reason: can't replace a non-existent object 'foo'"
    );
    assert_eq!(
        apply_err(&mut doc, json!([{"op": "remove", "path": "/foo"}])),
        "Couldn't apply patch '[{'path': '/foo', 'op': 'remove'}]'. Reason: can't remove a non-existent object 'foo'"
    );
    assert_eq!(
        apply_err(&mut doc, json!([{"op": "remove", "path": "/labels/zz"}])),
        "Couldn't apply patch '[{'path': '/labels/zz', 'op': 'remove'}]'. Reason: can't remove a non-existent object 'zz'"
    );
    assert_eq!(
        apply_err(
            &mut doc,
            json!([{"op": "replace", "path": "/name", "value": "x"}, {"op": "remove", "path": "/foo"}])
        ),
        "Couldn't apply patch '[{'path': '/name', 'op': 'replace', 'value': 'x'}, {'path': '/foo', 'op': 'remove'}]'. Reason: can't remove a non-existent object 'foo'"
    );
    // A removed member is really gone for the following operations.
    assert_eq!(
        apply_err(
            &mut doc,
            json!([{"op": "remove", "path": "/name"}, {"op": "replace", "path": "/name", "value": "x"}])
        ),
        "Couldn't apply patch '[{'path': '/name', 'op': 'remove'}, {'path': '/name', 'op': 'replace', 'value': 'x'}]'. Reason: can't replace a non-existent object 'name'"
    );
}

#[test]
fn pointer_errors() {
    let mut doc = nodegroup_doc();
    let rules = PatchRules::federation(); // no internal paths in the way
    let mut reason = |path: &str, op: &str| {
        let mut body = json!({"op": op, "path": path});
        if op != "remove" {
            body["value"] = json!("x");
        }
        let before = doc.clone();
        let err = run(&mut doc, json!([body]), &rules).unwrap_err();
        assert_eq!(doc, before);
        err.split_once("Reason: ")
            .map(|(_, r)| r.to_string())
            .unwrap_or(err)
    };
    assert_eq!(
        reason("/foo/bar", "add"),
        "member 'foo' not found in {'uuid': '7d5b1e3a-0b0e-4a4e-9a51-0b8c8f0e7a11', 'name': 'workers', 'labels': {'a': '1'}, 'min_node_count': 2, 'max_node_count': 5, 'node_labels': {'x': 'y'}, 'node_taints': [{'key': 'k', 'value': '', 'effect': 'NoSchedule'}]}"
    );
    assert_eq!(
        reason("/min_node_count/x", "replace"),
        "Document '<class 'int'>' does not support indexing, must be mapping/sequence or support __getitem__"
    );
    assert_eq!(
        reason("/node_taints/5", "remove"),
        "can't remove a non-existent object '5'"
    );
    assert_eq!(
        reason("/node_taints/5", "replace"),
        "can't replace outside of list"
    );
    assert_eq!(
        reason("/node_taints/-", "replace"),
        "'path' with '-' can't be applied to 'replace' operation"
    );
    assert_eq!(
        reason("/labels/-", "replace"),
        "'path' with '-' can't be applied to 'replace' operation"
    );
    assert_eq!(
        reason("/node_taints/2", "add"),
        "can't insert outside of list"
    );
    assert_eq!(
        reason("/node_taints/01", "remove"),
        "'01' is not a valid sequence index"
    );
    assert_eq!(
        reason("/node_taints/x", "remove"),
        "'x' is not a valid sequence index"
    );
    assert_eq!(
        reason("/node_taints/-", "remove"),
        "invalid array index '-'"
    );
    assert_eq!(
        reason("/node_taints/5/x", "remove"),
        "index '5' is out of bounds"
    );
    assert_eq!(
        reason("/node_taints/-/x", "add"),
        "Document '<class 'jsonpointer.EndOfList'>' does not support indexing, must be mapping/sequence or support __getitem__"
    );
    // Strings are Python sequences.
    assert_eq!(
        reason("/labels/a/b", "add"),
        "'b' is not a valid sequence index"
    );
    assert_eq!(
        reason("/labels/a/0", "add"),
        "unable to fully resolve json pointer /labels/a/0, part 0"
    );
    assert_eq!(
        reason("/labels/a/0/1", "replace"),
        "unable to fully resolve json pointer /labels/a/0/1, part 1"
    );
    assert_eq!(
        reason("/labels/a/5/x", "replace"),
        "index '5' is out of bounds"
    );
    assert_eq!(
        reason("/labels/a/-", "add"),
        "unable to fully resolve json pointer /labels/a/-, part -"
    );
    let err = run(
        &mut doc,
        json!([{"op": "remove", "path": "/labels/a/0"}]),
        &rules,
    )
    .unwrap_err();
    assert_eq!(err, "'str' object doesn't support item deletion");
}

#[test]
fn nested_edits_and_lists() {
    let mut doc = nodegroup_doc();
    let rules = PatchRules::federation();
    run(
        &mut doc,
        json!([
            {"op": "add", "path": "/node_taints/-", "value": "t2"},
            {"op": "add", "path": "/node_taints/0", "value": "t0"},
            {"op": "replace", "path": "/node_taints/1/key", "value": "k2"},
            {"op": "remove", "path": "/node_taints/2"},
        ]),
        &rules,
    )
    .unwrap();
    assert_eq!(
        doc["node_taints"],
        json!(["t0", {"key": "k2", "value": "", "effect": "NoSchedule"}])
    );
}

#[test]
fn client_label_ops() {
    // `openstock coe cluster template update ... --label k=v --no-label a`
    let mut doc = cluster_doc();
    let ops = run(
        &mut doc,
        json!([
            {"op": "add", "path": "/labels/k", "value": "v"},
            {"op": "add", "path": "/labels/kube_tag", "value": "v1.31.0"},
            {"op": "remove", "path": "/labels/a"},
        ]),
        &PatchRules::cluster(),
    )
    .unwrap();
    assert_eq!(ops.len(), 3);
    assert_eq!(doc["labels"], json!({"kube_tag": "v1.31.0", "k": "v"}));
    let keys: Vec<&String> = doc["labels"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["kube_tag", "k"],
        "existing keys keep their place, new ones go last"
    );
}

#[test]
fn client_count_and_literal_ops() {
    let mut doc = cluster_doc();
    run(
        &mut doc,
        json!([{"op": "replace", "path": "/node_count", "value": 5}]),
        &PatchRules::cluster(),
    )
    .unwrap();
    assert_eq!(doc["node_count"], json!(5));

    let mut ng = nodegroup_doc();
    let rules = PatchRules::nodegroup();
    let ops = run(
        &mut ng,
        json!([
            {"op": "replace", "path": "/min_node_count", "value": 1},
            {"op": "replace", "path": "/max_node_count", "value": 4},
            {"op": "replace", "path": "/node_labels", "value": "{'a': 'b'}"},
            {"op": "replace", "path": "/node_taints", "value": "[{'key': 'k', 'value': '', 'effect': 'NoSchedule'}]"},
        ]),
        &rules,
    )
    .unwrap();
    assert_eq!(ng["node_labels"], json!({"a": "b"}));
    assert_eq!(
        ng["node_taints"],
        json!([{"key": "k", "value": "", "effect": "NoSchedule"}])
    );
    // The parsed value replaces the string in the op, as upstream mutates its patch list.
    assert_eq!(ops[2].value, Some(json!({"a": "b"})));
    // The client clears with str({}) / str([]).
    run(
        &mut ng,
        json!([{"op": "replace", "path": "/node_labels", "value": "{}"}, {"op": "replace", "path": "/node_taints", "value": "[]"}]),
        &rules,
    )
    .unwrap();
    assert_eq!(
        (ng["node_labels"].clone(), ng["node_taints"].clone()),
        (json!({}), json!([]))
    );
}

#[test]
fn literal_failures() {
    let mut ng = nodegroup_doc();
    let rules = PatchRules::nodegroup();
    let mut fail = |body: Value| run(&mut ng, body, &rules).unwrap_err();
    // A raw empty string is not valid Python.
    assert_eq!(
        fail(json!([{"op": "replace", "path": "/node_labels", "value": ""}])),
        "Couldn't apply patch '[{'path': '/node_labels', 'op': 'replace', 'value': ''}]'. Reason: invalid syntax (<unknown>, line 0)"
    );
    assert_eq!(
        fail(json!([{"op": "replace", "path": "/node_labels", "value": 5}])),
        "Couldn't apply patch '[{'path': '/node_labels', 'op': 'replace', 'value': 5}]'. Reason: malformed node or string: 5"
    );
    assert_eq!(
        fail(json!([{"op": "replace", "path": "/node_labels", "value": true}])),
        "Couldn't apply patch '[{'path': '/node_labels', 'op': 'replace', 'value': True}]'. Reason: malformed node or string: True"
    );
    // Earlier literal values already show parsed in the rendered patch.
    let err = fail(json!([
        {"op": "replace", "path": "/node_labels", "value": "{'a': 'b'}"},
        {"op": "replace", "path": "/node_taints", "value": "true"},
    ]));
    assert!(
        err.starts_with(
            "Couldn't apply patch '[{'path': '/node_labels', 'op': 'replace', 'value': {'a': 'b'}}, {'path': '/node_taints', 'op': 'replace', 'value': 'true'}]'. Reason: malformed node or string on line 1: <ast.Name object at 0x"
        ),
        "{err}"
    );
    assert_eq!(
        fail(
            json!([{"op": "remove", "path": "/foo"}, {"op": "replace", "path": "/node_labels", "value": "{"}])
        ),
        "Couldn't apply patch '[{'path': '/foo', 'op': 'remove'}, {'path': '/node_labels', 'op': 'replace', 'value': '{'}]'. Reason: '{' was never closed (<unknown>, line 1)"
    );
    // `add` does not parse: the string is stored as is (re-validation rejects it later).
    let mut doc = cluster_doc();
    doc.insert("health_status_reason".into(), Value::Null);
    run(
        &mut doc,
        json!([{"op": "add", "path": "/health_status_reason", "value": "{}"}]),
        &PatchRules::cluster(),
    )
    .unwrap();
    assert_eq!(doc["health_status_reason"], json!("{}"));
}

#[test]
fn literal_reapplication_sees_parsed_values() {
    // Template PATCH applies the same op list up to three times (two validators, then the
    // handler); values parsed to non-containers are parsed again, like upstream.
    let rules = PatchRules::cluster_template();
    let mut ops = parse_patch(
        Some(&json!([{"op": "replace", "path": "/labels", "value": "'x'"}])),
        &rules,
    )
    .unwrap();
    let mut doc = json!({"labels": {}}).as_object().cloned().unwrap();
    apply_patch(&mut doc.clone(), &mut ops, &rules).unwrap();
    assert_eq!(ops[0].value, Some(json!("x")));
    let err = apply_patch(&mut doc, &mut ops, &rules)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("Reason: malformed node or string on line 1: <ast.Name object"),
        "{err}"
    );

    let mut ops = parse_patch(
        Some(&json!([{"op": "replace", "path": "/labels", "value": "{'a': 'b'}"}])),
        &rules,
    )
    .unwrap();
    apply_patch(&mut doc.clone(), &mut ops, &rules).unwrap();
    apply_patch(&mut doc, &mut ops, &rules).unwrap();
    assert_eq!(doc["labels"], json!({"a": "b"}));
}

#[test]
fn remove_resets_defaults_and_keeps_order() {
    let mut doc = cluster_doc();
    let before: Vec<String> = doc.keys().cloned().collect();
    run(
        &mut doc,
        json!([
            {"op": "remove", "path": "/node_count"},
            {"op": "remove", "path": "/name"},
            {"op": "remove", "path": "/keypair"},
            {"op": "add", "path": "/keypair", "value": "kp"},
        ]),
        &PatchRules::cluster(),
    )
    .unwrap();
    assert_eq!(doc["node_count"], json!(1));
    assert_eq!(doc["name"], Value::Null);
    assert_eq!(
        doc["keypair"],
        json!("kp"),
        "re-added after removal, back in its original place"
    );
    assert_eq!(doc.keys().cloned().collect::<Vec<_>>(), before);

    let mut ng = nodegroup_doc();
    run(
        &mut ng,
        json!([{"op": "remove", "path": "/min_node_count"}, {"op": "remove", "path": "/max_node_count"}]),
        &PatchRules::nodegroup(),
    )
    .unwrap();
    assert_eq!(
        (ng["min_node_count"].clone(), ng["max_node_count"].clone()),
        (json!(0), Value::Null)
    );
}

#[test]
fn key_order_survives_arbitrary_patches() {
    // Property-style: for many op sequences, re-rendering keeps every untouched key in place,
    // root keys keep their original order, and nested new keys are appended.
    let paths = [
        "/name",
        "/labels",
        "/labels/a",
        "/labels/new",
        "/keypair",
        "/node_count",
        "/labels/kube_tag",
        "/status",
    ];
    let ops = ["add", "replace", "remove"];
    let values = [json!("v"), json!(7), json!("{'z': '1', 'y': '2'}")];
    let rules = PatchRules::cluster();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for _ in 0..500 {
        let mut doc = cluster_doc();
        let root_order: Vec<String> = doc.keys().cloned().collect();
        let body: Vec<Value> = (0..1 + next(4))
            .map(|_| {
                let op = ops[next(3)];
                let mut o = json!({"op": op, "path": paths[next(paths.len())]});
                if op != "remove" {
                    o["value"] = values[next(values.len())].clone();
                }
                o
            })
            .collect();
        let before = doc.clone();
        match run(&mut doc, Value::Array(body.clone()), &rules) {
            Err(_) => assert_eq!(doc, before),
            Ok(_) => {
                assert_eq!(
                    doc.keys().cloned().collect::<Vec<_>>(),
                    root_order,
                    "{body:?}"
                );
                if let (Some(old), Some(new)) =
                    (before["labels"].as_object(), doc["labels"].as_object())
                {
                    let kept: Vec<&String> = new.keys().filter(|k| old.contains_key(*k)).collect();
                    let expected: Vec<&String> =
                        old.keys().filter(|k| new.contains_key(*k)).collect();
                    // Keys that were removed and re-added move to the end, like a Python dict.
                    let readded = body.iter().any(|o| {
                        o["op"] == "remove"
                            && o["path"]
                                .as_str()
                                .is_some_and(|p| p.starts_with("/labels/"))
                    });
                    if !readded {
                        assert_eq!(kept, expected, "{body:?}");
                    }
                }
                let rendered = serde_json::to_string(&doc).unwrap();
                let reparsed: Map<String, Value> = serde_json::from_str(&rendered).unwrap();
                assert_eq!(
                    reparsed.keys().collect::<Vec<_>>(),
                    doc.keys().collect::<Vec<_>>()
                );
            }
        }
    }
}

#[test]
fn deep_nesting_is_bounded() {
    // CPython's 200-bracket limit; deeper input is a 400 with the tokenizer's message, found
    // without recursing past the limit (test threads have a 2 MiB stack).
    let deep_list = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert!(python_literal(&deep_list).is_ok());
    let too_deep = format!("{}{}", "(".repeat(201), ")".repeat(201));
    assert_eq!(
        python_literal(&too_deep).unwrap_err(),
        "too many nested parentheses (<unknown>, line 1)"
    );
    for deep in [
        format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)),
        format!("{}1{}", "{'a':".repeat(10_000), "}".repeat(10_000)),
    ] {
        let started = std::time::Instant::now();
        assert_eq!(
            python_literal(&deep).unwrap_err(),
            "too many nested parentheses (<unknown>, line 1)"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
    // Long operator chains are no nesting for this parser: upstream's RecursionError (a 500)
    // becomes a 400.
    assert_eq!(
        python_literal(&format!("{}1", "-".repeat(10_000))).unwrap_err(),
        malformed_at(1, "UnaryOp")
    );
    assert_eq!(
        python_literal(&format!("1{}", "+1".repeat(20_000))).unwrap_err(),
        INVALID
    );
    let mut ng = nodegroup_doc();
    let deep_dict = format!("{}{}", "{'a': ".repeat(10_000), "}".repeat(10_000));
    for value in [deep_dict, format!("{}1", "not ".repeat(5000))] {
        let body = json!([{"op": "replace", "path": "/node_labels", "value": value}]);
        let mut ops = parse_patch(Some(&body), &PatchRules::nodegroup()).unwrap();
        let err = apply_patch(&mut ng, &mut ops, &PatchRules::nodegroup()).unwrap_err();
        assert_eq!(err.status(), 400);
    }
}

#[test]
fn no_thread_in_the_parser() {
    // Deep input used to run on a big-stack thread; the bounded parser needs none.
    let source = include_str!("literal.rs");
    assert!(!source.contains(concat!("std::", "thread")));
}

// ----- the literal parser -------------------------------------------------------------------

fn ok(s: &str) -> Value {
    python_literal(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn err(s: &str) -> String {
    match python_literal(s) {
        Ok(v) => panic!("{s:?} parsed as {v}"),
        Err(e) => e,
    }
}

fn malformed_at(line: u32, class: &str) -> String {
    format!(
        "malformed node or string on line {line}: <ast.{class} object at {}>",
        literal::NODE_ADDRESS
    )
}

const INVALID: &str = "invalid syntax (<unknown>, line 1)";

#[test]
fn literal_client_values() {
    assert_eq!(ok("{'a': 'b'}"), json!({"a": "b"}));
    assert_eq!(ok("{\"a\": 1}"), json!({"a": 1}));
    assert_eq!(
        ok("[{'key': 'k', 'value': '', 'effect': 'NoSchedule'}]"),
        json!([{"key": "k", "value": "", "effect": "NoSchedule"}])
    );
    assert_eq!(ok("{}"), json!({}));
    assert_eq!(ok("[]"), json!([]));
}

#[test]
fn literal_scalars() {
    assert_eq!(ok("'x'"), json!("x"));
    assert_eq!(ok("\"x\""), json!("x"));
    assert_eq!(ok("True"), json!(true));
    assert_eq!(ok("False"), json!(false));
    assert_eq!(ok("None"), Value::Null);
    assert_eq!(ok("-1"), json!(-1));
    assert_eq!(ok("+1"), json!(1));
    assert_eq!(ok("- 1"), json!(-1));
    assert_eq!(ok("-(1)"), json!(-1));
    assert_eq!(ok("0x1F"), json!(31));
    assert_eq!(ok("0o17"), json!(15));
    assert_eq!(ok("0b101"), json!(5));
    assert_eq!(ok("0x_1f"), json!(31));
    assert_eq!(ok("1_000"), json!(1000));
    assert_eq!(ok("00"), json!(0));
    assert_eq!(ok("1e5"), json!(100000.0));
    assert_eq!(ok("1."), json!(1.0));
    assert_eq!(ok(".5"), json!(0.5));
    assert_eq!(ok("1.5e-7"), json!(1.5e-7));
    assert_eq!(ok("-2.5E+3"), json!(-2500.0));
    assert_eq!(ok("18446744073709551615"), json!(u64::MAX));
    assert_eq!(ok("-9223372036854775808"), json!(i64::MIN));
}

#[test]
fn literal_containers_and_nesting() {
    assert_eq!(
        ok("{'a': {'b': [1, (2, 3)]}}"),
        json!({"a": {"b": [1, [2, 3]]}})
    );
    assert_eq!(ok("(1,)"), json!([1]));
    assert_eq!(ok("()"), json!([]));
    assert_eq!(ok("(1)"), json!(1));
    assert_eq!(ok("1, 2"), json!([1, 2]));
    assert_eq!(ok("1,"), json!([1]));
    assert_eq!(ok("[1,]"), json!([1]));
    assert_eq!(ok("{'a':1,}"), json!({"a": 1}));
    assert_eq!(ok("{'a': 1, 'b': 2, 'a': 3}"), json!({"a": 3, "b": 2}));
    let v = ok("{'z': 1, 'a': 2, 'm': 3}");
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["z", "a", "m"]);
    assert_eq!(ok("[1,\n 2]"), json!([1, 2]));
    assert_eq!(
        ok("{'a': [None, True, -1.5]}"),
        json!({"a": [null, true, -1.5]})
    );
}

#[test]
fn literal_strings_and_escapes() {
    assert_eq!(ok(r"'\x41\u00e9\n\t\\\''"), json!("Aé\n\t\\'"));
    assert_eq!(ok(r"'\101\0'"), json!("A\u{0}"));
    assert_eq!(ok(r"'\777'"), json!("ǿ"));
    assert_eq!(ok(r"'\q'"), json!("\\q"));
    assert_eq!(ok(r"'\8'"), json!("\\8"));
    assert_eq!(ok(r"r'\n'"), json!("\\n"));
    assert_eq!(ok(r"R'\''"), json!("\\'"));
    assert_eq!(ok("u'x'"), json!("x"));
    assert_eq!(ok("'''a'''"), json!("a"));
    assert_eq!(ok("'''a\nb'''"), json!("a\nb"));
    assert_eq!(ok(r#""""it's "q" """"#), json!("it's \"q\" "));
    assert_eq!(ok("'a' 'b'"), json!("ab"));
    assert_eq!(ok("\"it's\""), json!("it's"));
    assert_eq!(ok("'a\\\nb'"), json!("ab"));
    assert_eq!(ok(r"'\U0001F600'"), json!("😀"));
    assert_eq!(ok("'''é\r\nx'''"), json!("é\nx"));
}

#[test]
fn literal_whitespace_and_comments() {
    assert_eq!(ok(" {'a': 1}"), json!({"a": 1}));
    assert_eq!(ok("\t1"), json!(1));
    assert_eq!(ok("1 "), json!(1));
    assert_eq!(ok("1\n"), json!(1));
    assert_eq!(ok("\n1"), json!(1));
    assert_eq!(ok("1\r\n"), json!(1));
    assert_eq!(ok("1 # c"), json!(1));
    assert_eq!(ok("1\n  \n"), json!(1));
    assert_eq!(ok("1 \\\n "), json!(1));
    assert_eq!(ok("[1 \\\n]"), json!([1]));
    assert_eq!(err("1 \\\n"), INVALID);
}

#[test]
fn literal_json_spellings_are_names() {
    assert_eq!(err("true"), malformed_at(1, "Name"));
    assert_eq!(err("null"), malformed_at(1, "Name"));
    assert_eq!(err("false"), malformed_at(1, "Name"));
    assert_eq!(err("{a: 1}"), malformed_at(1, "Name"));
    assert_eq!(err("{'a': true}"), malformed_at(1, "Name"));
    assert_eq!(err("[1,\nx]"), malformed_at(2, "Name"));
    assert_eq!(err("(\nx)"), malformed_at(2, "Name"));
}

#[test]
fn literal_malformed_nodes() {
    assert_eq!(err("--1"), malformed_at(1, "UnaryOp"));
    assert_eq!(err("+-1"), malformed_at(1, "UnaryOp"));
    // CPython names the operand's class for these; this parser says UnaryOp, or names the
    // first bad node inside.
    assert_eq!(err("-True"), malformed_at(1, "UnaryOp"));
    assert_eq!(err("-'a'"), malformed_at(1, "UnaryOp"));
    assert_eq!(err("-[1]"), malformed_at(1, "UnaryOp"));
    assert_eq!(err("-x"), malformed_at(1, "Name"));
    assert_eq!(err("-[x]"), malformed_at(1, "Name"));
    assert_eq!(err("f'a'"), malformed_at(1, "JoinedStr"));
    assert_eq!(err("'a' f'b'"), malformed_at(1, "JoinedStr"));
    assert_eq!(err("é"), malformed_at(1, "Name"));
    // Valid Python but no literal: CPython names the node; this parser knows only literal
    // syntax and answers the generic message.
    for input in [
        "1+2",
        "-1+x",
        "not x",
        "x.y.z",
        "1 .real",
        "x()",
        "f(a=1)",
        "x[0]",
        "[1] [2]",
        "x < y",
        "[1 not in 2]",
        "x or y",
        "a @ b",
        "[x for x in y]",
        "{1:2 for x in y}",
        "(x for x in y)",
        "1 if x else 2",
        "lambda: 1",
        "(a := 1)",
        "await x",
        "(yield)",
        "[*[]]",
        "{**{}}",
        "{'a': 1, **x}",
        "{'a': y, **x}",
        "set(x)",
        "set()",
        "...",
        "-...",
    ] {
        assert_eq!(err(input), INVALID, "input {input:?}");
    }
}

#[test]
fn literal_syntax_errors() {
    let cases = [
        ("", "invalid syntax (<unknown>, line 0)"),
        (" ", "invalid syntax (<unknown>, line 0)"),
        ("\n", "invalid syntax (<unknown>, line 1)"),
        ("\n\n", "invalid syntax (<unknown>, line 2)"),
        ("# c", INVALID),
        ("{'a': 'b'} x", INVALID),
        ("1\n2", "invalid syntax (<unknown>, line 2)"),
        ("1 +", INVALID),
        ("1 # c\n+", "invalid syntax (<unknown>, line 2)"),
        ("{'a'", "'{' was never closed (<unknown>, line 1)"),
        ("[1,2", "'[' was never closed (<unknown>, line 1)"),
        ("[1,\n  x", "'[' was never closed (<unknown>, line 1)"),
        ("[1 2", INVALID),
        ("[{'a': 1}", "'[' was never closed (<unknown>, line 1)"),
        (
            "'abc",
            "unterminated string literal (detected at line 1) (<unknown>, line 1)",
        ),
        (
            "'a\nb'",
            "unterminated string literal (detected at line 1) (<unknown>, line 1)",
        ),
        (
            "'a\\\nb",
            "unterminated string literal (detected at line 2) (<unknown>, line 1)",
        ),
        (
            "{'a': 'b}",
            "unterminated string literal (detected at line 1) (<unknown>, line 1)",
        ),
        (
            "\"\"\"abc",
            "unterminated triple-quoted string literal (detected at line 1) (<unknown>, line 1)",
        ),
        (
            "\"\"\"a\nb",
            "unterminated triple-quoted string literal (detected at line 2) (<unknown>, line 1)",
        ),
        (
            "\"\"\"a\n",
            "unterminated triple-quoted string literal (detected at line 1) (<unknown>, line 1)",
        ),
        (
            "[1,,2] 'abc",
            "unterminated string literal (detected at line 1) (<unknown>, line 1)",
        ),
        ("[1,,2", INVALID),
        ("[1 2]", INVALID),
        ("[a b]", INVALID),
        ("[a \"x\"]", INVALID),
        ("[1,\n2\n3]", "invalid syntax (<unknown>, line 3)"),
        ("{1 1}", INVALID),
        ("{'a': 1 'b': 2", INVALID),
        ("[1 {2: 3}]", INVALID),
        ("{'a': 1 'b'", INVALID),
        ("[_ 1]", INVALID),
        ("[print 1]", INVALID),
        ("1 2", INVALID),
        ("{'a': 'b' 'c': 'd'}", INVALID),
        ("{'a': 1, 'b'}", INVALID),
        ("{1: 2, 3 4}", INVALID),
        (
            "{'a': 'b',\n 'c' 'd'}",
            "invalid syntax (<unknown>, line 2)",
        ),
        ("{'a':}", INVALID),
        ("{'a': 1, 'b':}", INVALID),
        ("1 if 2", INVALID),
        ("[1, 2 if 3]", INVALID),
        ("[a=1]", INVALID),
        ("{a=1}", INVALID),
        ("{'a'='b'}", INVALID),
        ("[a.b=1]", INVALID),
        ("[None=1]", INVALID),
        ("f(1=2)", INVALID),
        ("a=1", INVALID),
        ("(]", INVALID),
        ("[1,\n 2)", "invalid syntax (<unknown>, line 2)"),
        (")", INVALID),
        ("1a", "invalid decimal literal (<unknown>, line 1)"),
        ("1_", "invalid decimal literal (<unknown>, line 1)"),
        ("1e", "invalid decimal literal (<unknown>, line 1)"),
        ("1.real", "invalid decimal literal (<unknown>, line 1)"),
        ("0x", "invalid hexadecimal literal (<unknown>, line 1)"),
        ("0o8", "invalid octal literal (<unknown>, line 1)"),
        ("1j", "invalid decimal literal (<unknown>, line 1)"),
        ("1+-2j", "invalid decimal literal (<unknown>, line 1)"),
        (
            "007",
            "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers (<unknown>, line 1)",
        ),
        ("€", INVALID),
        ("²", INVALID),
        ("$", INVALID),
        ("1 \\ 2", INVALID),
        ("\n  1", "unexpected indent (<unknown>, line 2)"),
        ("1\n\t", "unexpected indent (<unknown>, line 2)"),
        ("b'a' 'b'", "unsupported literal value of type 'bytes'"),
        ("b'é'", "unsupported literal value of type 'bytes'"),
        (
            r"'\x4'",
            r"(unicode error) 'unicodeescape' codec can't decode bytes in position 0-2: truncated \xXX escape (<unknown>, line 1)",
        ),
        (
            r"'\u00'",
            r"(unicode error) 'unicodeescape' codec can't decode bytes in position 0-3: truncated \uXXXX escape (<unknown>, line 1)",
        ),
        ("*a", INVALID),
        ("not", INVALID),
        ("import", INVALID),
        ("[1 for]", INVALID),
    ];
    for (input, want) in cases {
        assert_eq!(err(input), want, "input {input:?}");
    }
    assert_eq!(err("1\0"), "source code string cannot contain null bytes");
    // f-strings are never literals; their syntax is not checked.
    assert_eq!(err("f'{'"), malformed_at(1, "JoinedStr"));
}

#[test]
fn literal_values_json_cannot_hold() {
    assert_eq!(err("{1, 2}"), "unsupported literal value of type 'set'");
    assert_eq!(err("b'x'"), "unsupported literal value of type 'bytes'");
    assert_eq!(err("{1: 'a'}"), "unsupported dictionary key of type 'int'");
    assert_eq!(
        err("{None: 'a'}"),
        "unsupported dictionary key of type 'NoneType'"
    );
    assert_eq!(
        err("1e999"),
        "unsupported literal value of type 'float' (not finite)"
    );
    assert_eq!(
        err("123456789012345678901234567890"),
        "unsupported literal value of type 'int' (out of range)"
    );
    assert_eq!(
        err(r"'\ud800'"),
        "unsupported literal value of type 'str' (not valid Unicode)"
    );
    // A malformed element is still reported before the unsupported container.
    assert_eq!(err("{1, x}"), malformed_at(1, "Name"));
}

#[test]
fn error_statuses() {
    assert_eq!(PatchError::NeedsValue.status(), 400);
    assert_eq!(
        PatchError::Apply {
            patch: "[]".into(),
            reason: "r".into()
        }
        .status(),
        400
    );
    // What upstream crashes on is the request's fault here (no 5xx for any input).
    assert_eq!(PatchError::Internal("x".into()).status(), 400);
}

//! The lists' kept items (magnum-db src/items.rs): on MariaDB a list item is rendered once per
//! distinct row and copied after; what a client reads must be what a fresh render gives,
//! change as soon as the row (or a cluster's node counts) changes, and follow the
//! microversion. On SQLite nothing is kept, and the same answers are checked.

use magnum_core::RequestContext;
use serde_json::{Value, json};

use crate::clusters::{create, template, template_body};
use crate::common::{MEMBER, Persona, Server, start};

/// The body's text, byte for byte, and parsed.
async fn text(s: &Server, who: Persona, version: &str, path: &str) -> (String, Value) {
    let r = s
        .http
        .get(format!("{}{path}", s.base))
        .header("X-Project-Id", who.project)
        .header("X-User-Id", who.user)
        .header("X-Roles", who.roles)
        .header(
            "OpenStack-API-Version",
            format!("container-infra {version}"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let t = r.text().await.unwrap();
    let v = serde_json::from_str(&t).unwrap();
    (t, v)
}

fn names(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn kept_list_items_are_what_a_fresh_render_gives() {
    let s = start().await;
    let mysql = std::env::var("MAGNUM_TEST_MYSQL_URL").is_ok_and(|v| !v.is_empty());
    // Text that JSON escapes, unicode, and labels, so the kept bytes are not trivial.
    let mut odd = template_body("quote \"q\" \\ tab\t ünï");
    odd["labels"] = json!({"k": "v \"x\"", "kube_tag": "v1.30.4"});
    let a = template(&s, MEMBER, &odd).await;
    let b = template(&s, MEMBER, &template_body("plain")).await;
    let templates = "/v1/clustertemplates";

    let (first, v) = text(&s, MEMBER, "latest", templates).await;
    if mysql {
        assert_eq!(s.state.db.rendered_items(), 2, "one item per template kept");
    } else {
        assert!(
            (s.state.db.rendered_items() == 0),
            "SQLite has no row bytes"
        );
    }
    for _ in 0..2 {
        assert_eq!(text(&s, MEMBER, "latest", templates).await.0, first);
    }
    // Each item is the template as `show` renders it.
    for item in v["clustertemplates"].as_array().unwrap() {
        let uuid = item["uuid"].as_str().unwrap();
        let (_, one) = text(&s, MEMBER, "latest", &format!("{templates}/{uuid}")).await;
        assert_eq!(item, &one);
    }
    // A change is seen at once; the other item is still the kept one.
    let r = s
        .send(
            MEMBER,
            "PATCH",
            &format!("{templates}/{b}"),
            &json!([{"op": "replace", "path": "/name", "value": "renamed"}]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (after, v) = text(&s, MEMBER, "latest", templates).await;
    assert_eq!(
        names(&v, "clustertemplates"),
        ["quote \"q\" \\ tab\t ünï", "renamed"]
    );
    assert_ne!(after, first);
    assert_eq!(text(&s, MEMBER, "latest", templates).await.0, after);

    // Clusters: the key names follow the microversion, the node counts their nodegroups.
    let mut uuids = Vec::new();
    for name in ["c1", "c2"] {
        uuids.push(create(&s, MEMBER, &json!({"cluster_template_id": a, "name": name})).await);
    }
    let clusters = "/v1/clusters";
    let (new, v14) = text(&s, MEMBER, "1.14", clusters).await;
    let (old, v12) = text(&s, MEMBER, "1.12", clusters).await;
    for _ in 0..2 {
        assert_eq!(text(&s, MEMBER, "1.14", clusters).await.0, new);
        assert_eq!(text(&s, MEMBER, "1.12", clusters).await.0, old);
    }
    for (list, has, lacks) in [
        (&v14, "cluster_id", "stack_id"),
        (&v12, "stack_id", "cluster_id"),
    ] {
        for item in list["clusters"].as_array().unwrap() {
            assert!(
                item.get(has).is_some() && item.get(lacks).is_none(),
                "{item}"
            );
            assert_eq!(item["node_count"], json!(1), "{item}");
        }
    }
    // A worker nodegroup resized behind the API's back: the row of the cluster itself is
    // unchanged, its count is not.
    let ctx = RequestContext::admin_all_tenants();
    let groups = s.db.nodegroups().for_clusters(&uuids[..1]).await.unwrap();
    let worker = groups
        .iter()
        .find(|g| g.role.as_ref().map(|r| r.as_str()) != Some("master"))
        .unwrap();
    let mut bigger = worker.clone();
    bigger.node_count = Some(5);
    s.db.nodegroups().save(worker, &bigger).await.unwrap();
    let (_, v) = text(&s, MEMBER, "1.14", clusters).await;
    let counts: Vec<(&str, &Value)> = v["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), &c["node_count"]))
        .collect();
    assert_eq!(counts, [("c1", &json!(5)), ("c2", &json!(1))]);
    // And a change to the cluster's own row.
    let c = s.db.clusters().get_by_uuid(&ctx, &uuids[1]).await.unwrap();
    let mut done = c.clone();
    done.status = "CREATE_COMPLETE".parse().ok();
    s.db.clusters().save(&c, &done).await.unwrap();
    let (_, v) = text(&s, MEMBER, "1.14", clusters).await;
    assert_eq!(v["clusters"][1]["status"], json!("CREATE_COMPLETE"));
    assert_eq!(v["clusters"][0]["status"], json!("CREATE_IN_PROGRESS"));
    // The page's marker is the last item's uuid, kept items or not.
    let (_, v) = text(&s, MEMBER, "1.14", &format!("{clusters}?limit=1")).await;
    let next = v["next"].as_str().unwrap();
    assert!(next.ends_with(&format!("marker={}", uuids[0])), "{next}");
    if mysql {
        // Two templates (one renamed: three), two clusters at two microversions, one
        // resized and one changed: each distinct rendering kept once.
        assert_eq!(s.state.db.rendered_items(), 3 + 4 + 2, "kept items");
    }
}

//! Repository behaviour on every engine: upstream's scoping, lookups, filters, pagination,
//! defaults, JSON text and error kinds.

use magnum_core::ids::Identity;
use magnum_core::model::NodegroupRole;
use magnum_core::status::ClusterStatus;
use magnum_core::{Error, RequestContext};
use magnum_db::items::List;
use magnum_db::repo::cluster::{Cluster, ClusterBrief, ClusterFilters, ClusterStats};
use magnum_db::repo::cluster_template::ClusterTemplate;
use magnum_db::repo::federation::{Federation, FederationFilters};
use magnum_db::repo::magnum_service;
use magnum_db::repo::nodegroup::{NodeGroup, NodeGroupFilters};
use magnum_db::repo::quota::QuotaFilters;
use magnum_db::repo::x509keypair::{X509KeyPair, X509KeyPairFilters};
use magnum_db::{Database, Page, SortDir};
use sea_orm::{ConnectionTrait, Statement};

use crate::on_every_engine;

fn member(project: &str) -> RequestContext {
    RequestContext::for_project(project, &format!("user-{project}"))
}

fn admin() -> RequestContext {
    RequestContext {
        is_admin: true,
        project_id: Some("admin-project".into()),
        ..RequestContext::default()
    }
}

async fn template(
    db: &Database,
    project: &str,
    name: &str,
    public: bool,
    hidden: bool,
) -> ClusterTemplate {
    db.cluster_templates()
        .create(ClusterTemplate {
            name: Some(name.into()),
            project_id: Some(project.into()),
            user_id: Some(format!("user-{project}")),
            coe: Some("kubernetes".into()),
            image_id: Some("fedora-coreos".into()),
            public: Some(public),
            hidden: Some(hidden),
            ..Default::default()
        })
        .await
        .unwrap()
}

async fn cluster(db: &Database, project: &str, name: &str, template: &str) -> Cluster {
    db.clusters()
        .create(Cluster {
            name: Some(name.into()),
            project_id: Some(project.into()),
            user_id: Some(format!("user-{project}")),
            cluster_template_id: Some(template.into()),
            status: "CREATE_IN_PROGRESS".parse().ok(),
            ..Default::default()
        })
        .await
        .unwrap()
}

async fn nodegroup(db: &Database, c: &Cluster, name: &str, role: &str, count: i32) -> NodeGroup {
    db.nodegroups()
        .create(NodeGroup {
            name: name.into(),
            cluster_id: c.uuid.clone().unwrap(),
            project_id: c.project_id.clone().unwrap(),
            role: Some(role.into()),
            node_count: Some(count),
            ..Default::default()
        })
        .await
        .unwrap()
}

async fn raw_text(db: &Database, sql: &str) -> Option<String> {
    let row = db
        .sea_connection()
        .query_one_raw(Statement::from_string(db.backend(), sql))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<Option<String>>(0).unwrap()
}

#[tokio::test]
async fn cluster_create_fills_upstream_defaults_and_json_text() {
    on_every_engine!(at_head, |t| {
        let db = &t.db;
        let ct = template(db, "p1", "k8s", false, false).await;
        let c = cluster(db, "p1", "c1", ct.uuid.as_deref().unwrap()).await;
        assert_eq!(c.uuid.as_ref().map(String::len), Some(36));
        assert!(c.created_at.is_some() && c.updated_at.is_none());
        assert_eq!(c.floating_ip_enabled, Some(true));
        assert_eq!(c.master_lb_enabled, Some(false));
        assert_eq!(
            raw_text(db, "SELECT labels FROM cluster").await.as_deref(),
            Some("{}")
        );
        assert_eq!(
            ct.server_type, None,
            "upstream writes NULL, not the column default"
        );

        let mut labelled = c.clone();
        labelled.labels = Some(magnum_db::json::dumps(
            &serde_json::json!({"kube_tag": "v1.30.4", "note": "café"}),
        ));
        db.clusters().save(&c, &labelled).await.unwrap();
        assert_eq!(
            raw_text(db, "SELECT labels FROM cluster").await.as_deref(),
            Some(r#"{"kube_tag": "v1.30.4", "note": "caf\u00e9"}"#)
        );

        let dup = Cluster {
            uuid: c.uuid.clone(),
            ..Default::default()
        };
        assert!(matches!(
            db.clusters().create(dup).await,
            Err(Error::ClusterAlreadyExists { .. })
        ));
    });
}

#[tokio::test]
async fn statuses_come_up_typed_and_unknown_text_survives_other_saves() {
    on_every_engine!(at_head, |t| {
        let db = &t.db;
        let ct = template(db, "p1", "k8s", false, false).await;
        let c = cluster(db, "p1", "c1", ct.uuid.as_deref().unwrap()).await;
        assert_eq!(c.status, Some(ClusterStatus::CreateInProgress));
        let mut healthy = c.clone();
        healthy.health_status = Some(magnum_core::status::ClusterHealthStatus::Healthy);
        let c = db.clusters().save(&c, &healthy).await.unwrap();
        assert_eq!(
            raw_text(db, "SELECT health_status FROM cluster")
                .await
                .as_deref(),
            Some("HEALTHY")
        );
        let ng = nodegroup(db, &c, "ng", "custom-role", 2).await;
        assert_eq!(ng.role, Some(NodegroupRole::Other("custom-role".into())));

        // A text no release writes (a hand edit) reads as no status, and a save of another
        // column leaves it as it was.
        db.sea_connection()
            .execute_unprepared("UPDATE cluster SET status = 'SOMETHING_OLD'")
            .await
            .unwrap();
        let ctx = RequestContext::admin_all_tenants();
        let odd = db
            .clusters()
            .get_by_uuid(&ctx, c.uuid.as_deref().unwrap())
            .await
            .unwrap();
        assert_eq!(odd.status, None);
        let mut renamed = odd.clone();
        renamed.name = Some("c1-renamed".into());
        let saved = db.clusters().save(&odd, &renamed).await.unwrap();
        assert_eq!(saved.name.as_deref(), Some("c1-renamed"));
        assert_eq!(
            raw_text(db, "SELECT status FROM cluster").await.as_deref(),
            Some("SOMETHING_OLD")
        );
    });
}

#[tokio::test]
async fn cluster_lookups_respect_tenants_and_names() {
    on_every_engine!(at_head, |t| {
        let db = &t.db;
        let c1 = cluster(db, "p1", "same", "t").await;
        cluster(db, "p1", "same", "t").await;
        let c3 = cluster(db, "p2", "other", "t").await;
        let repo = db.clusters();
        let uuid = c1.uuid.as_deref().unwrap();

        assert_eq!(
            repo.get_by_uuid(&member("p1"), uuid).await.unwrap().id,
            c1.id
        );
        assert!(matches!(
            repo.get_by_uuid(&member("p2"), uuid).await,
            Err(Error::ClusterNotFound { .. })
        ));
        assert_eq!(
            repo.get_by_id(&member("p1"), c1.id).await.unwrap().id,
            c1.id
        );
        let e = repo.get_by_name(&member("p1"), "same").await.unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Multiple clusters exist with same name"),
            "{e}"
        );
        assert_eq!(e.kind(), magnum_core::ErrorKind::Conflict);
        assert_eq!(
            repo.get_by_name(&member("p2"), "other").await.unwrap().id,
            c3.id
        );

        // Admins see other projects only when asking for all tenants.
        assert!(repo.get_by_uuid(&admin(), uuid).await.is_err());
        assert!(
            repo.get_by_uuid(&RequestContext::admin_all_tenants(), uuid)
                .await
                .is_ok()
        );
        // A context without a project is scoped to its user.
        let user_only = RequestContext {
            user_id: Some("user-p2".into()),
            ..Default::default()
        };
        assert_eq!(
            repo.list(&user_only, &ClusterFilters::default(), &Page::default())
                .await
                .unwrap()
                .len(),
            1
        );

        repo.destroy(&Identity::Uuid(uuid.into())).await.unwrap();
        let e = repo
            .destroy(&Identity::Uuid(uuid.into()))
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), format!("Cluster {uuid} could not be found."));
    });
}

#[tokio::test]
async fn cluster_lists_filter_sort_and_page_by_keyset() {
    on_every_engine!(at_head, |t| {
        let db = &t.db;
        let all = RequestContext::admin_all_tenants();
        let mut made = Vec::new();
        for (i, name) in ["delta", "alpha", "charlie", "bravo", "echo"]
            .iter()
            .enumerate()
        {
            let c = cluster(db, if i % 2 == 0 { "p1" } else { "p2" }, name, "t").await;
            nodegroup(db, &c, "default-master", "master", 1).await;
            nodegroup(db, &c, "default-worker", "worker", i as i32 + 1).await;
            nodegroup(db, &c, "extra", "gpu", 2).await;
            made.push(c);
        }
        let repo = db.clusters();
        let none = ClusterFilters::default();

        // Default order is creation order (id).
        let ids: Vec<i32> = repo
            .list(&all, &none, &Page::default())
            .await
            .unwrap()
            .iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(ids, made.iter().map(|c| c.id).collect::<Vec<_>>());

        // Walk by name descending, two per page, with the last row as marker.
        let mut page = Page {
            limit: Some(2),
            sort_key: Some("name".into()),
            sort_dir: SortDir::Desc,
            marker: None,
        };
        let mut names = Vec::new();
        loop {
            let rows = repo.list(&all, &none, &page).await.unwrap();
            if rows.is_empty() {
                break;
            }
            names.extend(rows.iter().map(|c| c.name.clone().unwrap()));
            page.marker = rows.last().cloned();
        }
        assert_eq!(names, ["echo", "delta", "charlie", "bravo", "alpha"]);

        let bad = Page {
            sort_key: Some("nope".into()),
            ..Page::default()
        };
        let e = repo.list(&all, &none, &bad).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "The sort_key value \"nope\" is an invalid field for sorting"
        );

        // node_count sums every non-master nodegroup; master_count the master ones: in the
        // streamed brief list (the counts keyed by uuid bytes)...
        let mut sums = Vec::new();
        repo.list_brief_each(&all, &none, &Page::default(), &mut |b: &ClusterBrief<
            '_,
        >| {
            let name = b.name.unwrap_or_default().to_owned();
            sums.push((name, b.node_count, b.master_count));
        })
        .await
        .unwrap();
        let want = [
            ("delta", 3),
            ("alpha", 4),
            ("charlie", 5),
            ("bravo", 6),
            ("echo", 7),
        ]
        .map(|(n, workers)| (n.to_owned(), workers, 1));
        assert_eq!(sums, want);
        // ...and in the filters.
        let f = ClusterFilters {
            node_count: Some(5),
            ..Default::default()
        }; // charlie: 3 + 2
        let hits = repo.list(&all, &f, &Page::default()).await.unwrap();
        assert_eq!(
            hits.iter()
                .map(|c| c.name.clone().unwrap())
                .collect::<Vec<_>>(),
            ["charlie"]
        );
        let f = ClusterFilters {
            master_count: Some(1),
            project_id: Some("p2".into()),
            ..Default::default()
        };
        assert_eq!(repo.count(&all, &f).await.unwrap(), 2);
        let f = ClusterFilters {
            status: Some(vec!["CREATE_COMPLETE".into(), "CREATE_IN_PROGRESS".into()]),
            ..Default::default()
        };
        assert_eq!(repo.count(&all, &f).await.unwrap(), 5);
        assert_eq!(repo.count(&member("p1"), &none).await.unwrap(), 3);

        assert_eq!(
            repo.stats(None).await.unwrap(),
            ClusterStats {
                clusters: 5,
                nodes: 5 + 15 + 10
            }
        );
        assert_eq!(
            repo.stats(Some("p2")).await.unwrap(),
            ClusterStats {
                clusters: 2,
                nodes: 2 + (2 + 4) + 4
            }
        );
        assert_eq!(
            repo.stats(Some("nobody")).await.unwrap(),
            ClusterStats {
                clusters: 0,
                nodes: 0
            }
        );

        let uuids: Vec<String> = made
            .iter()
            .take(2)
            .map(|c| c.uuid.clone().unwrap())
            .collect();
        assert_eq!(db.nodegroups().for_clusters(&uuids).await.unwrap().len(), 6);
    });
}

#[tokio::test]
async fn template_visibility_in_use_rules_and_referenced_delete() {
    on_every_engine!(at_head, |t| {
        let db = &t.db;
        let own = template(db, "p1", "own", false, false).await;
        let public = template(db, "p2", "public", true, false).await;
        let hidden = template(db, "p2", "hidden", true, true).await;
        let private = template(db, "p2", "private", false, true).await;
        let repo = db.cluster_templates();

        let names =
            |v: Vec<ClusterTemplate>| v.into_iter().map(|t| t.name.unwrap()).collect::<Vec<_>>();
        assert_eq!(
            names(repo.list(&member("p1"), &Page::default()).await.unwrap()),
            ["own", "public"]
        );
        assert_eq!(
            names(repo.list(&admin(), &Page::default()).await.unwrap()),
            ["public", "hidden"]
        );
        assert_eq!(
            repo.list(&RequestContext::admin_all_tenants(), &Page::default())
                .await
                .unwrap()
                .len(),
            4
        );
        assert!(
            repo.get_by_uuid(&member("p1"), private.uuid.as_deref().unwrap())
                .await
                .is_err()
        );
        assert!(repo.get_by_name(&member("p1"), "public").await.is_ok());
        assert!(repo.get_by_name(&member("p1"), "hidden").await.is_err());

        // In use: only rename, publish, hide/unhide or re-tag, one at a time.
        let uuid = own.uuid.clone().unwrap();
        cluster(db, "p1", "user", &uuid).await;
        let mut renamed = own.clone();
        renamed.name = Some("renamed".into());
        let own = repo.save(&own, &renamed).await.unwrap();
        let mut flavor = own.clone();
        flavor.flavor_id = Some("m1.large".into());
        assert!(matches!(
            repo.save(&own, &flavor).await,
            Err(Error::ClusterTemplateReferenced { .. })
        ));
        let mut publish = own.clone();
        publish.public = Some(true);
        let own = repo.save(&own, &publish).await.unwrap();
        let mut unpublish = own.clone();
        unpublish.public = Some(false);
        assert!(repo.save(&own, &unpublish).await.is_err());
        let mut two = own.clone();
        two.name = Some("x".into());
        two.hidden = Some(true);
        assert!(repo.save(&own, &two).await.is_err());
        let mut uuid_change = own.clone();
        uuid_change.uuid = Some("other".into());
        assert!(matches!(
            repo.save(&own, &uuid_change).await,
            Err(Error::InvalidParameterValue { .. })
        ));

        let e = repo
            .destroy(&Identity::Uuid(uuid.clone()))
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("ClusterTemplate {uuid} is referenced by one or multiple clusters.")
        );
        repo.destroy(&Identity::Id(public.id)).await.unwrap();
        let _ = hidden;
    });
}

#[tokio::test]
async fn nodegroups_are_unique_per_cluster_and_scoped_to_projects() {
    on_every_engine!(at_head, |t| {
        let db = &t.db;
        let c = cluster(db, "p1", "c", "t").await;
        let cid = c.uuid.clone().unwrap();
        let w = nodegroup(db, &c, "default-worker", "worker", 3).await;
        assert_eq!(
            raw_text(db, "SELECT node_taints FROM nodegroup")
                .await
                .as_deref(),
            Some("[]")
        );
        let dup = NodeGroup {
            name: "default-worker".into(),
            cluster_id: cid.clone(),
            project_id: "p1".into(),
            ..Default::default()
        };
        let e = db.nodegroups().create(dup).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("A node group with name default-worker already exists in the cluster {cid}.")
        );

        let repo = db.nodegroups();
        assert_eq!(
            repo.get_by_name(&member("p1"), &cid, "default-worker")
                .await
                .unwrap()
                .id,
            w.id
        );
        assert!(
            repo.get_by_uuid(&member("p2"), &cid, &w.uuid)
                .await
                .is_err()
        );
        // Admins see every project's nodegroups, all_tenants or not.
        assert!(repo.get_by_uuid(&admin(), &cid, &w.uuid).await.is_ok());

        let mut m = w.clone();
        m.node_addresses = Some(magnum_db::json::dumps(&["10.0.0.5", "10.0.0.6"]));
        repo.save(&w, &m).await.unwrap();
        let f = NodeGroupFilters {
            node_addresses: Some(vec!["10.0.0.5".into(), "10.0.0.6".into()]),
            ..Default::default()
        };
        assert_eq!(
            repo.list(&member("p1"), &cid, &f, &Page::default())
                .await
                .unwrap()
                .len(),
            1
        );
        let f = NodeGroupFilters {
            role: Some("master".into()),
            ..Default::default()
        };
        assert!(
            repo.list(&member("p1"), &cid, &f, &Page::default())
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(repo.count(&member("p1"), &cid).await.unwrap(), 1);
        repo.destroy(&cid, &Identity::Uuid(w.uuid.clone()))
            .await
            .unwrap();
        assert!(matches!(
            repo.destroy(&cid, &Identity::Id(w.id)).await,
            Err(Error::NodeGroupNotFound { .. })
        ));
    });
}

#[tokio::test]
async fn quotas_services_keypairs_and_federations() {
    on_every_engine!(at_head, |t| {
        let db = &t.db;
        let q = db.quotas();
        q.create("p1", "Cluster", 10).await.unwrap();
        let e = q.create("p1", "Cluster", 5).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "Quota for project p1 already exists for resource Cluster."
        );
        assert_eq!(q.update("p1", "Cluster", 3).await.unwrap().hard_limit, 3);
        assert_eq!(q.get("p1", "Cluster").await.unwrap().hard_limit, 3);
        assert_eq!(
            q.list(
                &QuotaFilters {
                    project_id: Some("p1".into()),
                    ..Default::default()
                },
                &Page::default()
            )
            .await
            .unwrap()
            .len(),
            1
        );
        q.delete("p1", "Cluster").await.unwrap();
        let e = q.delete("p1", "Cluster").await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "Quota could not be found: project_id p1 resource Cluster."
        );

        let s = db.magnum_services();
        let first = s
            .report_state_up(Some("host-a"), "magnum-conductor")
            .await
            .unwrap();
        assert_eq!(first.report_count, 1);
        let again = s.create(Some("host-a"), "magnum-conductor").await.unwrap();
        assert_eq!(
            again.id, first.id,
            "a duplicate create returns the existing row"
        );
        let second = s
            .report_state_up(Some("host-a"), "magnum-conductor")
            .await
            .unwrap();
        assert_eq!(second.report_count, 2);
        let now = magnum_db::repo::now();
        assert!(magnum_service::is_up(&second, now, 180));
        assert!(!magnum_service::is_up(
            &second,
            now + chrono::Duration::seconds(181),
            180
        ));
        let forced = s.update(second.id, None, None, Some(true)).await.unwrap();
        assert!(!magnum_service::is_up(&forced, now, 180));
        assert_eq!(s.list(None, &Page::default()).await.unwrap().len(), 1);
        s.destroy(second.id).await.unwrap();

        let k = db.x509keypairs();
        let kp = k
            .create(X509KeyPair {
                project_id: Some("p1".into()),
                certificate: Some("PEM".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(
            k.get_by_uuid(&member("p1"), kp.uuid.as_deref().unwrap())
                .await
                .is_ok()
        );
        assert!(
            k.get_by_uuid(&member("p2"), kp.uuid.as_deref().unwrap())
                .await
                .is_err()
        );
        assert_eq!(
            k.list(
                &member("p1"),
                &X509KeyPairFilters::default(),
                &Page::default()
            )
            .await
            .unwrap()
            .len(),
            1
        );
        k.destroy(&Identity::Id(kp.id)).await.unwrap();

        let f = db.federations();
        let fed = f
            .create(Federation {
                name: Some("fed".into()),
                project_id: Some("p1".into()),
                member_ids: Some(magnum_db::json::dumps(&["a", "b"])),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(fed.properties.as_deref(), Some("{}"));
        let by_members = FederationFilters {
            member_ids: Some(vec!["a".into(), "b".into()]),
            ..Default::default()
        };
        assert_eq!(
            f.list(&member("p1"), &by_members, &Page::default())
                .await
                .unwrap()
                .len(),
            1
        );
        assert!(f.get_by_name(&member("p2"), "fed").await.is_err());
        // Federations have no user_id column: a project-less caller sees none.
        let nobody = RequestContext {
            user_id: Some("u".into()),
            ..Default::default()
        };
        assert!(
            f.list(&nobody, &FederationFilters::default(), &Page::default())
                .await
                .unwrap()
                .is_empty()
        );
        f.destroy(&Identity::Uuid(fed.uuid.clone().unwrap()))
            .await
            .unwrap();
    });
}

/// The hot lists render each row through the caller's rendering, except a row equal to one
/// rendered before (MariaDB's binary rows, kept under their bytes in items.rs): its item is
/// copied and the rendering is not asked. A changed row, or a cluster whose node counts
/// changed, is rendered again. The other engines render every row every time.
#[tokio::test]
async fn hot_lists_render_each_distinct_row_once_on_mariadb() {
    on_every_engine!(at_head, |t| {
        let db = &t.db;
        let mysql = t.engine == magnum_db::Engine::MySql;
        let ctx = RequestContext {
            project_id: Some("p1".into()),
            ..Default::default()
        };
        let one = template(db, "p1", "one", false, false).await;
        template(db, "p1", "two", false, false).await;
        let ctx = &ctx;
        // (body, the rows the rendering was asked for)
        let templates = || async move {
            let asked = std::sync::Mutex::new(Vec::new());
            let list = db
                .cluster_templates()
                .list_rendered(ctx, &Page::default(), b"[".to_vec(), "http://x", |t, o| {
                    let name = t.name.unwrap_or_default();
                    asked.lock().unwrap().push(name.to_owned());
                    o.extend_from_slice(name.as_bytes());
                })
                .await
                .unwrap();
            assert_eq!(list.count, 2);
            assert!(list.last.is_some());
            (
                String::from_utf8(list.body).unwrap(),
                asked.into_inner().unwrap(),
            )
        };
        let (body, asked) = templates().await;
        assert_eq!((body.as_str(), asked.len()), ("[one,two", 2));
        let (body, asked) = templates().await;
        assert_eq!(body, "[one,two");
        assert_eq!(asked.len(), if mysql { 0 } else { 2 }, "{:?}", t.engine);
        let mut renamed = one.clone();
        renamed.name = Some("uno".into());
        db.cluster_templates().save(&one, &renamed).await.unwrap();
        let (body, asked) = templates().await;
        assert_eq!(body, "[uno,two");
        assert_eq!(
            asked,
            if mysql {
                vec!["uno"]
            } else {
                vec!["uno", "two"]
            }
        );

        // The brief clusters list: the node counts are part of what an item is kept under.
        let c = cluster(db, "p1", "c", "t").await;
        nodegroup(db, &c, "default-master", "master", 1).await;
        let worker = nodegroup(db, &c, "default-worker", "worker", 3).await;
        let clusters = || async move {
            let asked = std::sync::Mutex::new(0);
            let list = db
                .clusters()
                .list_brief_rendered(
                    ctx,
                    &ClusterFilters::default(),
                    &Page::default(),
                    (Vec::new(), List::ClustersBrief, "http://x"),
                    |c, o| {
                        *asked.lock().unwrap() += 1;
                        o.extend_from_slice(
                            format!(
                                "{}:{}/{}",
                                c.name.unwrap_or_default(),
                                c.node_count,
                                c.master_count
                            )
                            .as_bytes(),
                        );
                    },
                )
                .await
                .unwrap();
            (
                String::from_utf8(list.body).unwrap(),
                asked.into_inner().unwrap(),
            )
        };
        assert_eq!(clusters().await, ("c:3/1".to_owned(), 1));
        assert_eq!(clusters().await, ("c:3/1".to_owned(), usize::from(!mysql)));
        let mut more = worker.clone();
        more.node_count = Some(5);
        db.nodegroups().save(&worker, &more).await.unwrap();
        assert_eq!(
            clusters().await,
            ("c:5/1".to_owned(), 1),
            "new counts: rendered again"
        );
    });
}

/// The sweep's read: the listed clusters still in the statuses, each with its nodegroups
/// in id order (none for a cluster without any), in cluster id order, in one statement of
/// one JSON value however many uuids; more clusters than the reader keeps ahead, a receiver
/// that dawdles, and one that leaves early (the rest is read and the connection stays usable).
#[tokio::test]
async fn sweep_stream_sends_listed_clusters_with_nodegroups_in_order() {
    on_every_engine!(at_head, |t| {
        let db = &t.db;
        let used = template(db, "p1", "used", false, false).await;
        template(db, "p1", "idle", false, false).await;
        let used_id = used.uuid.clone().unwrap();
        let mut made = Vec::new();
        for i in 0..150 {
            let tpl = if i % 10 == 9 {
                "other"
            } else {
                used_id.as_str()
            };
            let c = cluster(db, "p1", &format!("c{i:03}"), tpl).await;
            for n in 0..i % 3 {
                let role = if n == 0 { "master" } else { "worker" };
                nodegroup(db, &c, &format!("ng{n}"), role, n + 1).await;
            }
            made.push(c);
        }
        // Every tenth cluster is complete, so out of the statuses asked for.
        for c in made.iter().step_by(10) {
            let mut done = c.clone();
            done.status = "CREATE_COMPLETE".parse().ok();
            db.clusters().save(c, &done).await.unwrap();
        }
        let statuses = [
            ClusterStatus::CreateInProgress,
            ClusterStatus::UpdateInProgress,
        ];
        // Two of every three listed, and one that is no cluster's.
        let mut listed: Vec<String> = made
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 1)
            .map(|(_, c)| c.uuid.clone().unwrap())
            .collect();
        listed.push("00000000-0000-0000-0000-000000000000".into());
        let want: Vec<(String, Vec<String>)> = made
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 1 && i % 10 != 0)
            .map(|(i, c)| {
                let ngs = (0..i % 3).map(|n| format!("ng{n}")).collect();
                (c.name.clone().unwrap(), ngs)
            })
            .collect();
        assert!(want.len() > 64, "more than the reader keeps ahead");

        let repo = db.clusters();
        let (read, mut rx) = repo.stream_among(&statuses, &listed, true);
        let receive = async {
            let mut got = Vec::new();
            while let Some((c, ngs)) = rx.recv().await {
                if got.len() % 16 == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                assert!(ngs.iter().all(|n| Some(&n.cluster_id) == c.uuid.as_ref()));
                got.push((c.name.unwrap(), ngs.into_iter().map(|n| n.name).collect()));
            }
            got
        };
        let (n, got) = tokio::join!(read, receive);
        assert_eq!(n.unwrap(), want.len());
        assert_eq!(got, want);

        // Without nodegroups: one item per cluster, none attached.
        let (read, mut rx) = repo.stream_among(&statuses, &listed, false);
        let receive = async {
            let mut names = Vec::new();
            while let Some((c, ngs)) = rx.recv().await {
                assert!(ngs.is_empty());
                names.push(c.name.unwrap());
            }
            names
        };
        let (n, names) = tokio::join!(read, receive);
        assert_eq!(n.unwrap(), want.len());
        let want_names: Vec<String> = want.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(names, want_names);

        // A receiver that leaves after three: the reader still reads to the end.
        let (read, mut rx) = repo.stream_among(&statuses, &listed, true);
        let leave = async move {
            for _ in 0..3 {
                rx.recv().await.unwrap();
            }
        };
        let (n, ()) = tokio::join!(read, leave);
        assert_eq!(n.unwrap(), want.len());
        assert_eq!(repo.uuids_with_status(&statuses).await.unwrap().len(), 135);

        // Nothing listed: no statement, nothing sent.
        let (read, mut rx) = repo.stream_among(&statuses, &[], true);
        assert_eq!(read.await.unwrap(), 0);
        assert!(rx.recv().await.is_none());

        // The templates in use by clusters in the statuses: "used" only ("other" is none).
        let in_use = db
            .cluster_templates()
            .of_clusters_in(&statuses)
            .await
            .unwrap();
        let names: Vec<_> = in_use.into_iter().map(|t| t.name.unwrap()).collect();
        assert_eq!(names, ["used"]);
    });
}

/// A nodegroup whose `node_count` is NULL (a row another writer left) counts as upstream
/// counts it in each place: 1 where upstream sums NodeGroup objects (the brief list, the
/// typed model), 0 where it sums in SQL (the `node_count` filter, the stats).
#[tokio::test]
async fn a_null_node_count_counts_as_upstream_counts_it_in_each_place() {
    on_every_engine!(at_head, |t| {
        let db = &t.db;
        let ct = template(db, "p1", "k8s", false, false).await;
        let c = cluster(db, "p1", "nulls", ct.uuid.as_deref().unwrap()).await;
        nodegroup(db, &c, "default-master", "master", 1).await;
        nodegroup(db, &c, "default-worker", "worker", 2).await;
        let extra = nodegroup(db, &c, "extra", "worker", 9).await;
        db.sea_connection()
            .execute_unprepared(&format!(
                "UPDATE nodegroup SET node_count = NULL WHERE uuid = '{}'",
                extra.uuid
            ))
            .await
            .unwrap();
        let all = RequestContext::admin_all_tenants();
        let none = ClusterFilters::default();

        // The object rule: 2 + 1.
        let mut sums = Vec::new();
        db.clusters()
            .list_brief_each(&all, &none, &Page::default(), &mut |b: &ClusterBrief<
                '_,
            >| {
                sums.push((b.node_count, b.master_count));
            })
            .await
            .unwrap();
        assert_eq!(sums, [(3, 1)]);
        let ngs = db
            .nodegroups()
            .for_clusters(std::slice::from_ref(c.uuid.as_ref().unwrap()))
            .await
            .unwrap();
        let typed = magnum_db::model::nodegroups(&ngs);
        let extra_typed = typed.iter().find(|n| n.name == "extra").unwrap();
        assert_eq!(extra_typed.node_count, 1);

        // The SQL rule: SUM skips the NULL, so the workers sum to 2, not 3.
        let by_count = |n| ClusterFilters {
            node_count: Some(n),
            ..Default::default()
        };
        assert_eq!(db.clusters().count(&all, &by_count(2)).await.unwrap(), 1);
        assert_eq!(db.clusters().count(&all, &by_count(3)).await.unwrap(), 0);
        assert_eq!(
            db.clusters().stats(None).await.unwrap(),
            ClusterStats {
                clusters: 1,
                nodes: 1 + 2
            }
        );
    });
}

//! An operator switches from upstream Magnum + magnum-cluster-api ("mcapi") to magnumd: a
//! cluster mcapi built keeps working. The database holds mcapi's rows (a template of driver
//! `k8s_cluster_api_ubuntu`, a cluster whose stack_id names its CAPI Cluster), the management
//! cluster holds mcapi's objects (a `cluster.x-k8s.io/v1beta1` Cluster of ClusterClass
//! `magnum-v0.38.1` in magnum-system, its cloud-config and CA Secrets); through the real
//! `openstack coe` client its status is read, it is resized, a nodegroup comes and goes, it is
//! upgraded one minor version (a skip of two refused) and it is deleted, with mcapi's class,
//! variables and API version left as they were.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::capi::{Kube, leftovers, stack, status_is, wait_for};
use crate::client::Cli;
use crate::lifecycle::{openssl, show};

const CLOUD: &str = "demo-member";
/// mcapi names its ClusterClass after its release.
const MCAPI_CLASS: &str = "magnum-v0.38.1";
const V1BETA1: &str = "cluster.x-k8s.io/v1beta1";

/// Runs statements on magnumd's SQLite database in one transaction, through Python's
/// sqlite3 (a busy timeout, so it waits for magnumd's writes); each must change a row.
fn sql(db: &Path, statements: &[(&str, Vec<Value>)]) {
    const SCRIPT: &str = r#"
import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1], timeout=30)
with con:
    for stmt, params in json.loads(sys.argv[2]):
        if con.execute(stmt, params).rowcount < 1:
            sys.exit(f"no row changed by {stmt} {params}")
"#;
    let todo: Vec<Value> = statements.iter().map(|(s, p)| json!([s, p])).collect();
    let out = Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(db)
        .arg(Value::Array(todo).to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "sqlite: {}", crate::text(&out.stderr));
}

fn v1beta1_path(plural: &str, name: &str) -> String {
    format!("/apis/{V1BETA1}/namespaces/magnum-system/{plural}/{name}")
}

/// Creates an object in a magnum-system collection; fails on the server's refusal.
fn create(kube: &Kube, collection: &str, body: &Value) {
    let got = kube.post(collection, body);
    assert_ne!(got["kind"], "Status", "the stand-in refused {body}: {got}");
}

const SECRETS: &str = "/api/v1/namespaces/magnum-system/secrets";

/// The Cluster as mcapi writes it (drivers.md §4.3: its names, labels and topology; a few of
/// its ~40 variables, the ones the simulated controller reads among them).
fn mcapi_cluster(stack_id: &str, uuid: &str) -> Value {
    let image = "3a5b1c9e-0c1f-4d6e-9a59-6f1f6b7e2d10";
    json!({
        "apiVersion": V1BETA1,
        "kind": "Cluster",
        "metadata": {"name": stack_id, "namespace": "magnum-system",
                     "labels": {"cluster-uuid": uuid}},
        "spec": {
            "clusterNetwork": {
                "serviceDomain": "cluster.local",
                "pods": {"cidrBlocks": ["10.100.0.0/16"]},
                "services": {"cidrBlocks": ["10.254.0.0/16"]},
            },
            "topology": {
                "class": MCAPI_CLASS,
                "version": "v1.33.1",
                "controlPlane": {"replicas": 1, "machineHealthCheck": {"enable": false}},
                "workers": {"machineDeployments": [{
                    "class": "default-worker",
                    "name": "default-worker",
                    "replicas": 1,
                    "nodeVolumeDetachTimeout": "300s",
                    "metadata": {"labels": {
                        "node-role.kubernetes.io/worker": "",
                        "node.cluster.x-k8s.io/nodegroup": "default-worker",
                    }},
                    "variables": {"overrides": [
                        {"name": "flavor", "value": "m1.medium"},
                        {"name": "imageUUID", "value": image},
                    ]},
                }]},
                "variables": [
                    {"name": "apiServerLoadBalancer", "value": {"enabled": true}},
                    {"name": "controlPlaneFlavor", "value": "m1.large"},
                    {"name": "flavor", "value": "m1.medium"},
                    {"name": "imageUUID", "value": image},
                    {"name": "identityRef",
                     "value": {"name": format!("{stack_id}-cloud-config"), "cloudName": "default"}},
                    {"name": "nodeCidr", "value": "10.0.0.0/24"},
                    {"name": "dnsNameservers", "value": ["8.8.8.8"]},
                    {"name": "operatingSystem", "value": "ubuntu"},
                    {"name": "admissionControlList",
                     "value": ["NodeRestriction", "NamespaceLifecycle"]},
                ],
            },
        },
    })
}

/// mcapi's Secrets of a cluster: its cloud-config and the four CA Secrets kubeadm adopts
/// (a throwaway CA here: nothing reads their keys).
fn mcapi_secrets(kube: &Kube, work: &Path, stack_id: &str, uuid: &str) {
    let (key, crt) = (work.join("mcapi-ca.key"), work.join("mcapi-ca.pem"));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-subj",
        "/CN=kubernetes",
        "-days",
        "1",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        crt.to_str().unwrap(),
    ]);
    let b64 =
        |p: &Path| base64::engine::general_purpose::STANDARD.encode(std::fs::read(p).unwrap());
    let clouds = format!(
        "clouds:\n  default:\n    auth:\n      auth_url: http://127.0.0.1/identity\n      \
         application_credential_id: mcapi-{uuid}\n      application_credential_secret: x\n    \
         auth_type: v3applicationcredential\n    region_name: RegionOne\n    interface: public\n"
    );
    create(
        kube,
        SECRETS,
        &json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{stack_id}-cloud-config"), "namespace": "magnum-system"},
            "stringData": {"clouds.yaml": clouds, "cacert": ""},
        }),
    );
    for suffix in ["ca", "etcd", "proxy", "sa"] {
        create(
            kube,
            SECRETS,
            &json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("{stack_id}-{suffix}"), "namespace": "magnum-system",
                             "labels": {"cluster.x-k8s.io/cluster-name": stack_id}},
                "type": "cluster.x-k8s.io/secret",
                "data": {"tls.crt": b64(&crt), "tls.key": b64(&key)},
            }),
        );
    }
}

fn capi_cluster(kube: &Kube, stack_id: &str) -> Value {
    kube.get(&v1beta1_path("clusters", stack_id))
}

fn machine_deployments(c: &Value) -> Vec<Value> {
    c["spec"]["topology"]["workers"]["machineDeployments"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The live Machines of one nodegroup (its MachineDeployment's topology name).
fn machines(kube: &Kube, stack_id: &str, ng: &str) -> Vec<Value> {
    kube.list(
        V1BETA1,
        "machines",
        &format!(
            "cluster.x-k8s.io/cluster-name={stack_id},topology.cluster.x-k8s.io/deployment-name={ng}"
        ),
    )
    .into_iter()
    .filter(|m| m["metadata"]["deletionTimestamp"].is_null())
    .collect()
}

/// Still mcapi's Cluster: its class, its variables, its network, and every write to it made
/// at v1beta1 (the version mcapi speaks; a write at v1beta2 would have re-versioned it).
fn assert_still_mcapis(kube: &Kube, stack_id: &str, original: &Value) {
    let c = capi_cluster(kube, stack_id);
    let t = &c["spec"]["topology"];
    assert_eq!(t["class"], MCAPI_CLASS, "{c}");
    assert!(t["classRef"].is_null(), "the topology was rewritten: {c}");
    assert_eq!(
        t["variables"], original["spec"]["topology"]["variables"],
        "{c}"
    );
    assert_eq!(
        c["spec"]["clusterNetwork"], original["spec"]["clusterNetwork"],
        "{c}"
    );
    let versions: Vec<&str> = c["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["apiVersion"].as_str())
        .collect();
    assert!(
        !versions.is_empty() && versions.iter().all(|v| *v == V1BETA1),
        "written at another version than mcapi's: {versions:?}"
    );
}

fn wait_nodegroup(cli: &Cli, cluster: &str, ng: &str, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let n = cli.json(CLOUD, &["coe", "nodegroup", "show", cluster, ng]);
        if n["status"] == want {
            return n;
        }
        assert!(
            !n["status"].as_str().unwrap_or_default().ends_with("FAILED"),
            "{n}"
        );
        assert!(
            Instant::now() < deadline,
            "nodegroup {ng} never {want}: {n}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn a_cluster_built_by_magnum_cluster_api_is_adopted_read_resized_scaled_and_deleted() {
    let Some(st) = stack("0.2", "") else { return };
    let (cli, kube) = (&st.cli, &st.kube);
    let started = Instant::now();

    // The database as upstream Magnum + mcapi left it. The template is an ordinary API one
    // with mcapi's driver name (the client's --driver) and the distro Glance gave upstream.
    // The cluster rows come from a real create (on a template of the simulated driver, which
    // builds nothing): the API and conductor write every column (project and user of the
    // demo member, nodegroups with their roles, the certificate refs upstream rows carry),
    // so SQL only changes the few columns that say who built it and how far it got, and
    // does not depend on the rest of the schema.
    let labels = ["--label", "kube_tag=v1.33.1"];
    let common = [
        "--network-driver",
        "calico",
        "--flavor",
        "m1.medium",
        "--master-flavor",
        "m1.large",
    ];
    let mut args = vec!["--driver", "k8s_cluster_api_ubuntu"];
    args.extend(common);
    args.extend(labels);
    let mcapi_t = cli.create_template(CLOUD, "mcapi-133", "ubuntu-2204-kube", &args);
    assert_eq!(mcapi_t["driver"], "k8s_cluster_api_ubuntu", "{mcapi_t}");
    let mut args = vec!["--driver", "simulated"];
    args.extend(common);
    args.extend(labels);
    cli.create_template(CLOUD, "seed", "ubuntu-2204-kube", &args);
    cli.ok(
        CLOUD,
        &[
            "coe",
            "cluster",
            "create",
            "adopted",
            "--cluster-template",
            "seed",
            "--master-count",
            "1",
            "--node-count",
            "1",
        ],
    );
    let seeded = wait_for(cli, CLOUD, "adopted", 60, status_is("CREATE_COMPLETE"));
    let uuid = seeded["uuid"].as_str().unwrap().to_owned();
    // mcapi's name: `kube-` and 5 characters of [a-z0-9] (hex is a subset).
    let stack_id = format!("kube-{}", &uuid.replace('-', "")[..5]);

    // The management cluster as mcapi left it, before the conductor looks at it.
    mcapi_secrets(kube, st.work.path(), &stack_id, &uuid);
    let original = mcapi_cluster(&stack_id, &uuid);
    create(
        kube,
        &format!("/apis/{V1BETA1}/namespaces/magnum-system/clusters"),
        &original,
    );

    sql(
        &st.db,
        &[
            (
                "UPDATE cluster_template SET cluster_distro = 'ubuntu' WHERE uuid = ?",
                vec![mcapi_t["uuid"].clone()],
            ),
            (
                "UPDATE cluster SET cluster_template_id = ?, stack_id = ?, \
                 status = 'CREATE_IN_PROGRESS', status_reason = NULL, api_address = NULL, \
                 coe_version = NULL, health_status = NULL, health_status_reason = NULL \
                 WHERE uuid = ?",
                vec![mcapi_t["uuid"].clone(), json!(stack_id), json!(uuid)],
            ),
            (
                "UPDATE nodegroup SET status = 'CREATE_IN_PROGRESS', status_reason = NULL, \
                 node_addresses = '[]', stack_id = NULL WHERE cluster_id = ?",
                vec![json!(uuid)],
            ),
        ],
    );
    let flipped = Instant::now();
    // Nothing refers to the seed template any more.
    cli.ok(CLOUD, &["coe", "cluster", "template", "delete", "seed"]);
    let c = show(cli, CLOUD, "adopted");
    // The conductor may have read the status already (the simulated controller is quick).
    assert!(
        c["status"] == "CREATE_IN_PROGRESS" || c["status"] == "CREATE_COMPLETE",
        "{c}"
    );
    assert_eq!(c["cluster_id"], stack_id.as_str(), "{c}");
    assert_eq!(c["labels"]["kube_tag"], "v1.33.1", "{c}");
    let mut ngs: Vec<(String, String, i64)> = cli
        .json(CLOUD, &["coe", "nodegroup", "list", "adopted"])
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_owned(),
                n["role"].as_str().unwrap().to_owned(),
                n["node_count"].as_i64().unwrap(),
            )
        })
        .collect();
    ngs.sort();
    assert_eq!(
        ngs,
        [
            ("default-master".to_owned(), "master".to_owned(), 1),
            ("default-worker".to_owned(), "worker".to_owned(), 1)
        ]
    );
    let setup = flipped.duration_since(started);

    // Status read: our status engine drives mcapi's v1beta1 Cluster to CREATE_COMPLETE, with
    // the API address and version it found (the rows had neither).
    let c = wait_for(cli, CLOUD, "adopted", 120, status_is("CREATE_COMPLETE"));
    let read = flipped.elapsed();
    assert!(
        c["api_address"]
            .as_str()
            .is_some_and(|a| a.starts_with("https://")),
        "{c}"
    );
    assert_eq!(c["coe_version"], "v1.33.1", "{c}");
    assert!(c["status_reason"].is_null(), "{c}");
    wait_nodegroup(cli, "adopted", "default-worker", "CREATE_COMPLETE");
    wait_nodegroup(cli, "adopted", "default-master", "CREATE_COMPLETE");
    assert_still_mcapis(kube, &stack_id, &original);
    // The certificate refs upstream left serve `cluster config` as before.
    let kc = crate::lifecycle::check_kubeconfig(cli, CLOUD, "adopted", st.work.path());
    assert!(kc.contains(c["api_address"].as_str().unwrap()), "{kc}");

    // Resize 1 -> 2: mcapi's topology is patched in place (its class, variables and entry
    // fields kept), at v1beta1.
    let phase = Instant::now();
    cli.ok(CLOUD, &["coe", "cluster", "resize", "adopted", "2"]);
    let c = wait_for(cli, CLOUD, "adopted", 120, |c| {
        status_is("UPDATE_COMPLETE")(c) && c["node_count"] == 2
    });
    let resized = phase.elapsed();
    assert!(c["status_reason"].is_null(), "{c}");
    assert_still_mcapis(kube, &stack_id, &original);
    let live = capi_cluster(kube, &stack_id);
    let mds = machine_deployments(&live);
    assert_eq!(mds.len(), 1, "{live}");
    let mut want = original["spec"]["topology"]["workers"]["machineDeployments"][0].clone();
    want["replicas"] = json!(2);
    assert_eq!(mds[0], want, "only the replicas change");
    assert_eq!(live["spec"]["topology"]["controlPlane"]["replicas"], 1);
    assert_eq!(machines(kube, &stack_id, "default-worker").len(), 2);

    // A nodegroup: a second machineDeployments entry of mcapi's worker class, then gone.
    let phase = Instant::now();
    cli.ok(
        CLOUD,
        &[
            "coe",
            "nodegroup",
            "create",
            "adopted",
            "extra",
            "--node-count",
            "1",
        ],
    );
    wait_nodegroup(cli, "adopted", "extra", "CREATE_COMPLETE");
    let ng_created = phase.elapsed();
    let live = capi_cluster(kube, &stack_id);
    let mds = machine_deployments(&live);
    assert_eq!(mds.len(), 2, "{live}");
    assert_eq!(
        mds[0], want,
        "the default worker entry is untouched: {live}"
    );
    assert_eq!(mds[1]["class"], "default-worker", "{live}");
    assert_eq!(mds[1]["name"], "extra", "{live}");
    assert_eq!(mds[1]["replicas"], 1, "{live}");
    // Shaped like mcapi's: the sibling's image, its own flavor and node labels.
    assert_eq!(
        mds[1]["metadata"]["labels"]["node.cluster.x-k8s.io/nodegroup"], "extra",
        "{live}"
    );
    assert_eq!(
        mds[1]["metadata"]["labels"]["node-role.kubernetes.io/worker"], "",
        "{live}"
    );
    let overrides = &mds[1]["variables"]["overrides"];
    assert!(
        overrides
            .as_array()
            .unwrap()
            .contains(&json!({"name": "flavor", "value": "m1.medium"})),
        "{live}"
    );
    assert!(
        overrides
            .as_array()
            .unwrap()
            .contains(&mds[0]["variables"]["overrides"][1]),
        "{live}"
    );
    assert_eq!(machines(kube, &stack_id, "extra").len(), 1);
    assert_still_mcapis(kube, &stack_id, &original);
    wait_for(cli, CLOUD, "adopted", 120, status_is("UPDATE_COMPLETE"));

    let phase = Instant::now();
    cli.ok(CLOUD, &["coe", "nodegroup", "delete", "adopted", "extra"]);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let listed = cli.json(CLOUD, &["coe", "nodegroup", "list", "adopted"]);
        let Some(extra) = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == "extra")
            .cloned()
        else {
            break;
        };
        if Instant::now() > deadline {
            let c = show(cli, CLOUD, "adopted");
            panic!(
                "nodegroup extra never went: {extra}; cluster {} {}",
                c["status"], c["status_reason"]
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let ng_deleted = phase.elapsed();
    let live = capi_cluster(kube, &stack_id);
    assert_eq!(machine_deployments(&live), [want.clone()], "{live}");
    let extra_sel = format!(
        "cluster.x-k8s.io/cluster-name={stack_id},topology.cluster.x-k8s.io/deployment-name=extra"
    );
    assert!(
        kube.list(V1BETA1, "machinedeployments", &extra_sel)
            .is_empty()
    );
    assert!(kube.list(V1BETA1, "machines", &extra_sel).is_empty());
    assert_still_mcapis(kube, &stack_id, &original);
    let c = wait_for(cli, CLOUD, "adopted", 120, status_is("UPDATE_COMPLETE"));
    assert_eq!(c["node_count"], 2, "{c}");

    // Upgrade through mcapi's own class: a skip of two minors is refused with nothing
    // changed; one minor reaches UPDATE_COMPLETE with every Machine at the new version, the
    // class and variables as mcapi left them.
    for (name, tag) in [
        ("mcapi-134", "kube_tag=v1.34.2"),
        ("mcapi-135", "kube_tag=v1.35.0"),
    ] {
        let mut args = vec!["--driver", "k8s_cluster_api_ubuntu", "--label", tag];
        args.extend(common);
        let t = cli.create_template(CLOUD, name, "ubuntu-2204-kube", &args);
        sql(
            &st.db,
            &[(
                "UPDATE cluster_template SET cluster_distro = 'ubuntu' WHERE uuid = ?",
                vec![t["uuid"].clone()],
            )],
        );
    }
    let before = show(cli, CLOUD, "adopted");
    let live_before = capi_cluster(kube, &stack_id);
    cli.refused(
        CLOUD,
        &["coe", "cluster", "upgrade", "adopted", "mcapi-135"],
        400,
        "one minor version at a time",
    );
    let after = show(cli, CLOUD, "adopted");
    assert_eq!(after["status"], before["status"]);
    assert_eq!(after["cluster_template_id"], before["cluster_template_id"]);
    assert_eq!(after["labels"], before["labels"]);
    assert_eq!(
        capi_cluster(kube, &stack_id)["spec"],
        live_before["spec"],
        "a refused upgrade changed the Cluster"
    );
    let phase = Instant::now();
    cli.ok(
        CLOUD,
        &["coe", "cluster", "upgrade", "adopted", "mcapi-134"],
    );
    let c = wait_for(cli, CLOUD, "adopted", 180, |c| {
        status_is("UPDATE_COMPLETE")(c) && c["coe_version"] == "v1.34.2"
    });
    let upgraded = phase.elapsed();
    assert!(c["status_reason"].is_null(), "{c}");
    assert_eq!(c["labels"]["kube_tag"], "v1.34.2", "{c}");
    let live = capi_cluster(kube, &stack_id);
    assert_eq!(live["spec"]["topology"]["version"], "v1.34.2", "{live}");
    assert_eq!(machine_deployments(&live), [want.clone()], "{live}");
    assert_still_mcapis(kube, &stack_id, &original);
    let all = kube.list(
        V1BETA1,
        "machines",
        &format!("cluster.x-k8s.io/cluster-name={stack_id}"),
    );
    assert!(!all.is_empty());
    for m in &all {
        assert_eq!(m["spec"]["version"], "v1.34.2", "{m}");
    }

    // Delete: gone from the API, and nothing of it left in the management cluster, mcapi's
    // Secrets included.
    let phase = Instant::now();
    cli.ok(CLOUD, &["coe", "cluster", "delete", "adopted"]);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let listed = cli.json(CLOUD, &["coe", "cluster", "list"]);
        if listed.as_array().is_some_and(Vec::is_empty) {
            break;
        }
        assert!(Instant::now() < deadline, "never deleted: {listed}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let deleted = phase.elapsed();
    let left = leftovers(kube, &uuid, &stack_id);
    assert!(left.is_empty(), "left in the management cluster: {left:?}");
    for suffix in ["cloud-config", "ca", "etcd", "proxy", "sa"] {
        let s = kube.get(&format!(
            "/api/v1/namespaces/magnum-system/secrets/{stack_id}-{suffix}"
        ));
        assert_eq!(s["code"], 404, "{stack_id}-{suffix} is left: {s}");
    }
    assert_eq!(capi_cluster(kube, &stack_id)["code"], 404);

    eprintln!(
        "capi adopt: mcapi's v1beta1 Cluster {stack_id}: setup {setup:.1?}, status read to \
         CREATE_COMPLETE {read:.1?}, resize 1->2 {resized:.1?}, nodegroup create \
         {ng_created:.1?}, nodegroup delete {ng_deleted:.1?}, upgrade 1.33->1.34 {upgraded:.1?}, \
         cluster delete {deleted:.1?}, \
         total {:.1?} (CRD validation {})",
        started.elapsed(),
        if kube.validated { "on" } else { "OFF" }
    );
}

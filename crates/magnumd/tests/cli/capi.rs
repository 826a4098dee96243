//! The Cluster API driver with the real `openstack coe` client and a real Keystone, against
//! the Kubernetes API stand-in and the simulated CAPI/CAPO controller of test-support/kube
//! (no Kubernetes API server can be installed here; see its README). The stand-in checks
//! every object against the real CRD schemas when ../shared/fixtures/capi-crds is present.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::client::{Cli, repo_root};
use crate::lifecycle::{openssl, pem, show};

/// The stand-in and the simulated controller, stopped on drop.
pub(crate) struct Kube {
    dir: PathBuf,
    pub(crate) server: String,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) validated: bool,
}

impl Drop for Kube {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo_root().join("test-support/kube/stop.sh"))
            .arg(&self.dir)
            .output();
    }
}

fn kubeconfig_field(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in the stand-in's kubeconfig"))
        .trim()
        .trim_matches('"')
        .to_owned()
}

impl Kube {
    /// Starts both under `dir` (step time of the simulated controller in seconds).
    pub(crate) fn start(dir: &Path, step: &str) -> Self {
        Self::start_with(dir, step, &[])
    }

    /// As [`Kube::start`], with more of the simulated controller's environment (such as
    /// `CAPI_SIM_DEFAULT_FAULT`, a fault every new Cluster starts with).
    pub(crate) fn start_with(dir: &Path, step: &str, env: &[(&str, &str)]) -> Self {
        let out = Command::new("bash")
            .arg(repo_root().join("test-support/kube/start.sh"))
            .arg(dir)
            .env("CAPI_SIM_STEP_SECONDS", step)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "test-support/kube/start.sh failed: {}{}",
            crate::text(&out.stdout),
            crate::text(&out.stderr)
        );
        let kubeconfig = dir.join("kubeconfig");
        let text = std::fs::read_to_string(&kubeconfig).unwrap();
        let decode = |field: &str, file: &str| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(kubeconfig_field(&text, field))
                .unwrap();
            let path = dir.join(file);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let ready = std::fs::read_to_string(dir.join("apiserver.log")).unwrap_or_default();
        let validated = !ready.contains("crd-schemas: absent");
        if !validated {
            eprintln!(
                "NOTE: ../shared/fixtures/capi-crds is absent: the stand-in did NOT validate objects against the CRD schemas"
            );
        }
        Self {
            server: kubeconfig_field(&text, "server"),
            ca: decode("certificate-authority-data", "test-ca.pem"),
            cert: decode("client-certificate-data", "test-client.pem"),
            key: decode("client-key-data", "test-client.key"),
            dir: dir.to_owned(),
            kubeconfig,
            validated,
        }
    }

    fn curl(&self, args: &[&str]) -> Value {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "10", "--cacert"])
            .arg(&self.ca)
            .arg("--cert")
            .arg(&self.cert)
            .arg("--key")
            .arg(&self.key)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "curl {args:?}: {}",
            crate::text(&out.stderr)
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("curl {args:?}: {e}: {}", crate::text(&out.stdout)))
    }

    pub(crate) fn get(&self, path: &str) -> Value {
        self.curl(&[&format!("{}{path}", self.server)])
    }

    /// Adds a stand-in fault (README: `/_stand-in/faults`).
    pub(crate) fn fault(&self, fault: &Value) -> Value {
        self.post("/_stand-in/faults", fault)
    }

    pub(crate) fn clear_faults(&self) {
        self.curl(&["-X", "DELETE", &format!("{}/_stand-in/faults", self.server)]);
    }

    /// A merge patch as the test's own field manager (the faults' annotations).
    pub(crate) fn merge(&self, path: &str, body: &Value) -> Value {
        self.curl(&[
            "-X",
            "PATCH",
            "-H",
            "Content-Type: application/merge-patch+json",
            "--data",
            &body.to_string(),
            &format!("{}{path}?fieldManager=test", self.server),
        ])
    }

    /// A create (POST) of a JSON body; the server's answer (the object, or a Status).
    pub(crate) fn post(&self, path: &str, body: &Value) -> Value {
        self.curl(&[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "--data",
            &body.to_string(),
            &format!("{}{path}", self.server),
        ])
    }

    /// Items of a namespaced list in magnum-system, with a label selector.
    pub(crate) fn list(&self, group_version: &str, plural: &str, selector: &str) -> Vec<Value> {
        let base = if group_version == "v1" {
            "/api/v1".to_owned()
        } else {
            format!("/apis/{group_version}")
        };
        let sel: String = selector
            .bytes()
            .map(|b| match b {
                b'=' => "%3D".to_owned(),
                b',' => "%2C".to_owned(),
                b'/' => "%2F".to_owned(),
                _ => char::from(b).to_string(),
            })
            .collect();
        let v = self.get(&format!(
            "{base}/namespaces/magnum-system/{plural}?labelSelector={sel}"
        ));
        v["items"].as_array().cloned().unwrap_or_default()
    }
}

pub(crate) const CLUSTERS: &str = "cluster.x-k8s.io/v1beta2";

/// Polls `cluster show` until `done`; fails on a timeout with the last answer.
pub(crate) fn wait_for(
    cli: &Cli,
    cloud: &str,
    cluster: &str,
    secs: u64,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let c = show(cli, cloud, cluster);
        if done(&c) {
            return c;
        }
        assert!(
            Instant::now() < deadline,
            "{cluster}: timed out; last: {} {}",
            c["status"],
            c["status_reason"]
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

pub(crate) fn status_is(want: &'static str) -> impl Fn(&Value) -> bool {
    move |c: &Value| {
        let s = c["status"].as_str().unwrap_or_default();
        assert!(
            s == want || !s.ends_with("_FAILED"),
            "expected {want}, got {s}: {}",
            c["status_reason"]
        );
        s == want
    }
}

/// Polls `cluster list` until it is empty.
pub(crate) fn wait_all_deleted(cli: &Cli, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let listed = cli.json(CLOUD, &["coe", "cluster", "list"]);
        if listed.as_array().is_some_and(Vec::is_empty) {
            break;
        }
        assert!(Instant::now() < deadline, "never deleted: {listed}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// magnumd serving with Keystone and the Cluster API driver pointed at the stand-in.
pub(crate) struct Stack {
    pub(crate) cli: Cli,
    // Fields drop in this order: Keystone and magnumd (whose pid file and log are in
    // `work`) before the folder goes, or stop.sh finds nothing to stop and Keystone outlives
    // the test.
    _running: crate::client::Running,
    pub(crate) kube: Kube,
    pub(crate) work: tempfile::TempDir,
    pub(crate) api_port: u16,
    /// magnumd's SQLite database.
    pub(crate) db: PathBuf,
}

pub(crate) fn stack(step: &str, extra_conf: &str) -> Option<Stack> {
    stack_with(step, extra_conf, &[])
}

pub(crate) fn stack_with(step: &str, extra_conf: &str, sim_env: &[(&str, &str)]) -> Option<Stack> {
    if !magnum_testkit::flag("MAGNUM_TEST_KEYSTONE") {
        magnum_testkit::skip("MAGNUM_TEST_KEYSTONE is not 1");
        return None;
    }
    let work = tempfile::tempdir().unwrap();
    let kube = Kube::start_with(&work.path().join("kube"), step, sim_env);
    let api_port = magnum_testkit::free_port();
    let (mut running, env) = crate::client::start_keystone(work.path(), api_port);
    let db = work.path().join("magnum.sqlite");
    let conf = crate::write_conf(
        work.path(),
        "magnum.conf",
        &format!(
            "[DEFAULT]\nstate_path = {state}\n\n[api]\nhost = 127.0.0.1\nport = {api_port}\n\n\
             [database]\nconnection = sqlite:///{db}\n\n{ks}\n\
             [certificates]\ncert_manager_type = x509keypair\n\n\
             [drivers]\ndefault_driver = k8s_capi\n\n\
             [conductor]\nsync_interval = 5\n\n\
             [cluster_api]\nenabled = true\nkubeconfig = {kubeconfig}\n\n{extra_conf}",
            state = work.path().display(),
            db = db.display(),
            ks = crate::client::authtoken_section(&env),
            kubeconfig = kube.kubeconfig.display(),
        ),
    );
    assert!(
        crate::magnumd(&["--config-file", &conf, "db", "upgrade"])
            .status
            .success()
    );
    let log = work.path().join("magnumd.log");
    running.api = Some(crate::spawn_magnumd(&conf, "serve", &log, api_port));
    Some(Stack {
        cli: Cli::keystone(&env),
        kube,
        work,
        api_port,
        db,
        _running: running,
    })
}

const CLOUD: &str = "demo-member";

fn template(cli: &Cli, name: &str, kube_tag: &str) -> Value {
    let label = format!("kube_tag={kube_tag}");
    cli.create_template(
        CLOUD,
        name,
        "ubuntu-2204-kube",
        &[
            "--network-driver",
            "calico",
            "--flavor",
            "m1.medium",
            "--master-flavor",
            "m1.large",
            "--label",
            &label,
        ],
    )
}

/// The CAPI objects of a Magnum cluster still in the stand-in (Clusters, Secrets,
/// ClusterResourceSets, HelmChartProxies labelled with its uuid; Machines and MachineDeployments of its name).
pub(crate) fn leftovers(kube: &Kube, uuid: &str, stack_id: &str) -> Vec<String> {
    let mut left = Vec::new();
    let by_uuid = format!("cluster-uuid={uuid}");
    let by_name = format!("cluster.x-k8s.io/cluster-name={stack_id}");
    for (gv, plural, sel) in [
        (CLUSTERS, "clusters", &by_uuid),
        ("v1", "secrets", &by_uuid),
        ("v1", "secrets", &by_name),
        (
            "addons.cluster.x-k8s.io/v1beta2",
            "clusterresourcesets",
            &by_uuid,
        ),
        (
            "addons.cluster.x-k8s.io/v1alpha1",
            "helmchartproxies",
            &by_uuid,
        ),
        ("apps/v1", "deployments", &by_uuid),
        ("v1", "serviceaccounts", &by_uuid),
        ("rbac.authorization.k8s.io/v1", "roles", &by_uuid),
        ("rbac.authorization.k8s.io/v1", "rolebindings", &by_uuid),
        (CLUSTERS, "machines", &by_name),
        (CLUSTERS, "machinedeployments", &by_name),
        (
            "controlplane.cluster.x-k8s.io/v1beta2",
            "kubeadmcontrolplanes",
            &by_name,
        ),
        (
            "infrastructure.cluster.x-k8s.io/v1beta1",
            "openstackclusters",
            &by_name,
        ),
        (
            "bootstrap.cluster.x-k8s.io/v1beta2",
            "kubeadmconfigtemplates",
            &by_name,
        ),
    ] {
        for item in kube.list(gv, plural, sel) {
            left.push(format!(
                "{plural}/{}",
                item["metadata"]["name"].as_str().unwrap_or("?")
            ));
        }
    }
    left
}

#[test]
fn a_cluster_api_cluster_lives_its_whole_life_through_the_openstack_client() {
    let Some(st) = stack("0.2", "[kubernetes]\nhealth_polling_interval = 1\n") else {
        return;
    };
    let (cli, kube) = (&st.cli, &st.kube);
    let t = template(cli, "capi-133", "v1.33.1");
    assert_eq!(t["driver"], "k8s_capi", "{t}");
    template(cli, "capi-134", "v1.34.2");
    template(cli, "capi-136", "v1.36.0");

    // Create: CREATE_COMPLETE with the API address and version from the CAPI Cluster.
    cli.ok(
        CLOUD,
        &[
            "coe",
            "cluster",
            "create",
            "life",
            "--cluster-template",
            "capi-133",
            "--master-count",
            "1",
            "--node-count",
            "2",
        ],
    );
    let c = wait_for(cli, CLOUD, "life", 120, status_is("CREATE_COMPLETE"));
    let uuid = c["uuid"].as_str().unwrap().to_owned();
    let stack_id = c["cluster_id"].as_str().unwrap().to_owned();
    assert!(stack_id.starts_with("kube-") && stack_id.len() == 10, "{c}");
    assert!(
        c["api_address"].as_str().unwrap().starts_with("https://"),
        "{c}"
    );
    assert_eq!(c["coe_version"], "v1.33.1", "{c}");
    let capi = kube.get(&format!(
        "/apis/{CLUSTERS}/namespaces/magnum-system/clusters/{stack_id}"
    ));
    assert_eq!(capi["metadata"]["labels"]["cluster-uuid"], uuid.as_str());
    assert_eq!(capi["spec"]["topology"]["classRef"]["name"], "magnum-rs-v1");
    assert_eq!(capi["spec"]["topology"]["controlPlane"]["replicas"], 1);
    assert_eq!(
        capi["spec"]["topology"]["workers"]["machineDeployments"][0]["replicas"],
        2
    );
    for suffix in ["ca", "etcd", "proxy", "sa"] {
        let s = kube.get(&format!(
            "/api/v1/namespaces/magnum-system/secrets/{stack_id}-{suffix}"
        ));
        assert_eq!(s["type"], "cluster.x-k8s.io/secret", "{suffix}");
    }

    // `cluster config`: the kubeconfig's CA is the one in the cluster's `-ca` Secret (what
    // kubeadm adopted), so the client certificate works against the built cluster.
    // (check_kubeconfig verifies its client certificate against its CA with openssl.)
    let kc = crate::lifecycle::check_kubeconfig(cli, CLOUD, "life", st.work.path());
    let server = kubeconfig_field(&kc, "server");
    assert_eq!(server, c["api_address"].as_str().unwrap());
    let ca_secret = kube.get(&format!(
        "/api/v1/namespaces/magnum-system/secrets/{stack_id}-ca"
    ));
    let secret_ca = base64::engine::general_purpose::STANDARD
        .decode(ca_secret["data"]["tls.crt"].as_str().unwrap())
        .unwrap();
    let config_ca = base64::engine::general_purpose::STANDARD
        .decode(kubeconfig_field(&kc, "certificate-authority-data"))
        .unwrap();
    assert_eq!(pem(&crate::text(&secret_ca)), pem(&crate::text(&config_ca)));

    // The workload API, as a loopback server with a certificate from the cluster's own CA
    // (its key is in the `-ca` Secret) that checks client certificates against that CA:
    // the health worker probes it over mTLS with Magnum's admin certificate. CAPI keeps a
    // Cluster's controlPlaneEndpoint once set, so pointing it here moves the API address at
    // the next status sync (the resize below).
    let workload = WorkloadApi::start(st.work.path(), &secret_ca, &ca_secret);
    kube.merge(
        &cluster_path(&stack_id),
        &json!({"spec": {"controlPlaneEndpoint": {"host": "127.0.0.1", "port": workload.port}}}),
    );

    // Resize 2 -> 1 naming the node to remove: that Machine is the one that goes.
    let md_sel = format!(
        "cluster.x-k8s.io/cluster-name={stack_id},topology.cluster.x-k8s.io/deployment-name=default-worker"
    );
    let workers = kube.list(CLUSTERS, "machines", &md_sel);
    assert_eq!(workers.len(), 2, "{workers:?}");
    let victim = workers[1]["metadata"]["name"].as_str().unwrap().to_owned();
    let server_id = workers[1]["spec"]["providerID"]
        .as_str()
        .unwrap()
        .trim_start_matches("openstack:///")
        .to_owned();
    cli.ok(
        CLOUD,
        &[
            "coe",
            "cluster",
            "resize",
            "life",
            "1",
            "--nodes-to-remove",
            &server_id,
        ],
    );
    wait_for(cli, CLOUD, "life", 120, |c| {
        c["status"] == "UPDATE_COMPLETE" && c["node_count"] == 1
    });
    let left: Vec<String> = kube
        .list(CLUSTERS, "machines", &md_sel)
        .iter()
        .map(|m| m["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        !left.contains(&victim),
        "{victim} should have gone: {left:?}"
    );

    let c = wait_for(cli, CLOUD, "life", 60, |c| {
        c["health_status"] == "HEALTHY" && c["health_status_reason"]["source"] == "workload API"
    });
    assert_eq!(
        c["api_address"],
        format!("https://127.0.0.1:{}", workload.port)
    );
    assert_eq!(c["health_status_reason"]["node-a.Ready"], "True", "{c}");
    assert_eq!(c["health_status_reason"]["api"], "ok", "{c}");
    // Its API gone, the health comes from the management cluster and says so.
    drop(workload);
    let c = wait_for(cli, CLOUD, "life", 60, |c| {
        c["health_status_reason"]["source"] == "management cluster"
    });
    assert_eq!(c["health_status"], "HEALTHY", "{c}");
    assert!(
        c["health_status_reason"]["workload_api"].as_str().is_some(),
        "{c}"
    );

    // Two nodegroups created at once on one cluster both complete (no lock is held across
    // reconciles: each operation renders every nodegroup row), then both deleted at once
    // go with their MachineDeployments and Machines.
    for ng in ["extra", "extra2"] {
        cli.ok(
            CLOUD,
            &[
                "coe",
                "nodegroup",
                "create",
                "life",
                ng,
                "--node-count",
                "1",
            ],
        );
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    for ng in ["extra", "extra2"] {
        loop {
            let n = cli.json(CLOUD, &["coe", "nodegroup", "show", "life", ng]);
            if n["status"] == "CREATE_COMPLETE" {
                break;
            }
            assert!(
                !n["status"].as_str().unwrap_or_default().ends_with("FAILED"),
                "{n}"
            );
            assert!(Instant::now() < deadline, "{n}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let selector = |ng: &str| {
        format!(
            "cluster.x-k8s.io/cluster-name={stack_id},topology.cluster.x-k8s.io/deployment-name={ng}"
        )
    };
    for ng in ["extra", "extra2"] {
        assert_eq!(
            kube.list(CLUSTERS, "machinedeployments", &selector(ng))
                .len(),
            1,
            "{ng}"
        );
    }
    for ng in ["extra", "extra2"] {
        cli.ok(CLOUD, &["coe", "nodegroup", "delete", "life", ng]);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let listed = cli.json(CLOUD, &["coe", "nodegroup", "list", "life"]);
        let names: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n["name"].as_str())
            .collect();
        if !names.iter().any(|n| n.starts_with("extra")) {
            break;
        }
        assert!(Instant::now() < deadline, "nodegroups never went: {listed}");
        std::thread::sleep(Duration::from_millis(300));
    }
    for ng in ["extra", "extra2"] {
        assert!(
            kube.list(CLUSTERS, "machinedeployments", &selector(ng))
                .is_empty()
        );
        assert!(kube.list(CLUSTERS, "machines", &selector(ng)).is_empty());
    }

    // An upgrade that skips a minor version is refused with nothing changed.
    let before = show(cli, CLOUD, "life");
    cli.refused(
        CLOUD,
        &["coe", "cluster", "upgrade", "life", "capi-136"],
        400,
        "one minor version at a time",
    );
    let after = show(cli, CLOUD, "life");
    assert_eq!(after["status"], before["status"]);
    assert_eq!(after["cluster_template_id"], before["cluster_template_id"]);
    assert_eq!(after["labels"], before["labels"]);
    let capi = kube.get(&format!(
        "/apis/{CLUSTERS}/namespaces/magnum-system/clusters/{stack_id}"
    ));
    assert_eq!(capi["spec"]["topology"]["version"], "v1.33.1");

    // Upgrade one minor: every Machine ends at the new version.
    cli.ok(CLOUD, &["coe", "cluster", "upgrade", "life", "capi-134"]);
    let c = wait_for(cli, CLOUD, "life", 180, |c| {
        c["status"] == "UPDATE_COMPLETE" && c["coe_version"] == "v1.34.2"
    });
    assert_eq!(c["labels"]["kube_tag"], "v1.34.2");
    let machines = kube.list(
        CLUSTERS,
        "machines",
        &format!("cluster.x-k8s.io/cluster-name={stack_id}"),
    );
    assert!(!machines.is_empty());
    for m in &machines {
        assert_eq!(m["spec"]["version"], "v1.34.2", "{m}");
    }

    // CA rotation: refused cleanly, nothing changed.
    let before = show(cli, CLOUD, "life");
    cli.refused(
        CLOUD,
        &["coe", "ca", "rotate", "life"],
        400,
        "not supported",
    );
    let after = show(cli, CLOUD, "life");
    assert_eq!(after["status"], before["status"]);
    // The CAs stay: the `-ca` Secret as it was, and a kubeconfig fetched now trusts the same CA
    // as the one fetched before the refusal.
    let ca_after = kube.get(&format!(
        "/api/v1/namespaces/magnum-system/secrets/{stack_id}-ca"
    ));
    assert_eq!(ca_after["data"], ca_secret["data"]);
    let kc_after = crate::lifecycle::check_kubeconfig(cli, CLOUD, "life", st.work.path());
    assert_eq!(
        kubeconfig_field(&kc_after, "certificate-authority-data"),
        kubeconfig_field(&kc, "certificate-authority-data")
    );

    // Delete: nothing of it is left in the management cluster.
    cli.ok(CLOUD, &["coe", "cluster", "delete", "life"]);
    wait_all_deleted(cli, 120);
    let left = leftovers(kube, &uuid, &stack_id);
    assert!(left.is_empty(), "left in the management cluster: {left:?}");
    eprintln!(
        "capi lifecycle: done (CRD validation {})",
        if kube.validated {
            "on"
        } else {
            "OFF: ../shared/fixtures/capi-crds absent"
        }
    );
}

/// Auto-scaling through the client: the MachineDeployment carries the autoscaler's bounds;
/// when the autoscaler scales it, the nodegroup's node_count follows; a min/max PATCH reaches
/// the bounds; a nodegroup's own bad label is refused. (Every label's effect, and every bad
/// value's refusal, is capi_labels.rs's matrix.)
#[test]
fn cluster_api_autoscaling_follows_the_autoscaler_and_the_nodegroup_bounds() {
    let Some(st) = stack("0.2", "") else {
        return;
    };
    let (cli, kube) = (&st.cli, &st.kube);
    cli.create_template(
        CLOUD,
        "capi-labels",
        "ubuntu-2204-kube",
        &[
            "--network-driver",
            "calico",
            "--flavor",
            "m1.medium",
            "--master-flavor",
            "m1.large",
            "--labels",
            "kube_tag=v1.33.1,container_infra_prefix=mirror.example.com/k8s",
        ],
    );
    cli.ok(
        CLOUD,
        &[
            "coe",
            "cluster",
            "create",
            "labelled",
            "--cluster-template",
            "capi-labels",
            "--master-count",
            "1",
            "--node-count",
            "1",
            "--labels",
            "auto_scaling_enabled=true,min_node_count=1,max_node_count=4",
            "--merge-labels",
        ],
    );
    let c = wait_for(cli, CLOUD, "labelled", 120, status_is("CREATE_COMPLETE"));
    let stack_id = c["cluster_id"].as_str().unwrap().to_owned();
    let sel = format!("cluster.x-k8s.io/cluster-name={stack_id}");

    // The MachineDeployment carries the autoscaler's bounds and no count of ours; when the
    // autoscaler scales it, the nodegroup's node_count follows.
    let md_sel = format!("{sel},topology.cluster.x-k8s.io/deployment-name=default-worker");
    let md = &kube.list(CLUSTERS, "machinedeployments", &md_sel)[0];
    let ann = &md["metadata"]["annotations"];
    assert_eq!(
        ann["cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"], "1",
        "{md}"
    );
    assert_eq!(
        ann["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"], "4",
        "{md}"
    );
    let autoscaler = kube.list("apps/v1", "deployments", &sel);
    assert_eq!(
        autoscaler.len(),
        1,
        "one cluster autoscaler: {autoscaler:?}"
    );
    assert_eq!(
        autoscaler[0]["spec"]["template"]["spec"]["containers"][0]["image"],
        "mirror.example.com/k8s/cluster-autoscaler:v1.33.0"
    );
    let md_name = md["metadata"]["name"].as_str().unwrap();
    kube.merge(
        &format!("/apis/{CLUSTERS}/namespaces/magnum-system/machinedeployments/{md_name}"),
        &json!({"spec": {"replicas": 3}}),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = cli.json(
            CLOUD,
            &["coe", "nodegroup", "show", "labelled", "default-worker"],
        );
        if n["node_count"] == 3 {
            assert_eq!(n["status"], "CREATE_COMPLETE", "{n}");
            break;
        }
        if Instant::now() >= deadline {
            let log =
                std::fs::read_to_string(st.work.path().join("magnumd.log")).unwrap_or_default();
            let said: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("node count") || l.contains("node_count"))
                .collect();
            panic!(
                "node_count never followed the autoscaler: {n}\nmagnumd said:\n{}",
                said.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }

    // A min/max PATCH reaches the autoscaler's annotations.
    cli.ok(
        CLOUD,
        &[
            "coe",
            "nodegroup",
            "update",
            "labelled",
            "default-worker",
            "--min-nodes",
            "2",
            "--max-nodes",
            "6",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let md = &kube.list(CLUSTERS, "machinedeployments", &md_sel)[0];
        let ann = &md["metadata"]["annotations"];
        if ann["cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"] == "2"
            && ann["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"] == "6"
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the PATCH never reached the annotations: {ann}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = cli.json(
            CLOUD,
            &["coe", "nodegroup", "show", "labelled", "default-worker"],
        );
        assert_eq!(
            (&n["min_node_count"], &n["max_node_count"]),
            (&json!(2), &json!(6))
        );
        if n["status"] == "UPDATE_COMPLETE" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the nodegroup's update never completed: {n}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    // A nodegroup's own bad label: a 400 at its create, no nodegroup and no MachineDeployment.
    cli.refused(
        CLOUD,
        &[
            "coe",
            "nodegroup",
            "create",
            "labelled",
            "bad-ng",
            "--labels",
            "boot_volume_size=huge",
        ],
        400,
        "Invalid value for label boot_volume_size: 'huge'",
    );
    let groups = cli.ok(CLOUD, &["coe", "nodegroup", "list", "labelled"]);
    assert!(!groups.contains("bad-ng"), "{groups}");
    let mds = kube.list(CLUSTERS, "machinedeployments", &sel);
    assert_eq!(mds.len(), 1, "only default-worker's: {mds:?}");

    let uuid = c["uuid"].as_str().unwrap().to_owned();
    cli.ok(CLOUD, &["coe", "cluster", "delete", "labelled"]);
    wait_all_deleted(cli, 120);
    let left = leftovers(kube, &uuid, &stack_id);
    assert!(left.is_empty(), "left in the management cluster: {left:?}");
}

/// test-support/kube/workload_api.py: the cluster's API for the health worker.
struct WorkloadApi {
    port: u16,
    _child: magnum_testkit::ChildGuard,
}

impl WorkloadApi {
    fn start(work: &Path, ca_pem: &[u8], ca_secret: &Value) -> Self {
        let dir = work.join("workload-api");
        std::fs::create_dir_all(&dir).unwrap();
        let (ca, ca_key) = (dir.join("ca.pem"), dir.join("ca.key"));
        std::fs::write(&ca, ca_pem).unwrap();
        let key_pem = base64::engine::general_purpose::STANDARD
            .decode(ca_secret["data"]["tls.key"].as_str().unwrap())
            .unwrap();
        std::fs::write(&ca_key, key_pem).unwrap();
        let (key, csr, cert, ext) = (
            dir.join("server.key"),
            dir.join("server.csr"),
            dir.join("server.pem"),
            dir.join("ext.cnf"),
        );
        std::fs::write(&ext, "subjectAltName=IP:127.0.0.1\n").unwrap();
        let p = |x: &PathBuf| x.to_str().unwrap().to_owned();
        openssl(&[
            "req",
            "-new",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=kube-apiserver",
            "-keyout",
            &p(&key),
            "-out",
            &p(&csr),
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &p(&csr),
            "-CA",
            &p(&ca),
            "-CAkey",
            &p(&ca_key),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &p(&ext),
            "-out",
            &p(&cert),
        ]);
        let port_file = dir.join("port");
        let child = magnum_testkit::ChildGuard::new(
            Command::new("python3")
                .arg(repo_root().join("test-support/kube/workload_api.py"))
                .args([p(&ca), p(&cert), p(&key), p(&port_file)])
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        let port = loop {
            if let Some(port) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                break port;
            }
            assert!(Instant::now() < deadline, "workload_api.py did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Self {
            port,
            _child: child,
        }
    }
}

const FAULT: &str = "capi-sim.magnum-rs.dev/fault";

fn cluster_path(stack_id: &str) -> String {
    format!("/apis/{CLUSTERS}/namespaces/magnum-system/clusters/{stack_id}")
}

fn set_fault(kube: &Kube, stack_id: &str, fault: Option<&str>) {
    kube.merge(
        &cluster_path(stack_id),
        &json!({"metadata": {"annotations": {FAULT: fault}}}),
    );
}

/// Waits until the cluster has its CAPI name (the create cast was handled).
fn stack_id_of(cli: &Cli, name: &str) -> String {
    let c = wait_for(cli, CLOUD, name, 60, |c| {
        c["cluster_id"].as_str().is_some_and(|s| !s.is_empty())
    });
    c["cluster_id"].as_str().unwrap().to_owned()
}

/// The first Machine condition message of the cluster containing `needle`, if any.
fn machine_message(kube: &Kube, stack_id: &str, needle: &str) -> Option<String> {
    let machines = kube.list(
        CLUSTERS,
        "machines",
        &format!("cluster.x-k8s.io/cluster-name={stack_id}"),
    );
    machines.iter().find_map(|m| {
        m["status"]["conditions"]
            .as_array()?
            .iter()
            .filter_map(|c| c["message"].as_str())
            .find(|t| t.contains(needle))
            .map(str::to_owned)
    })
}

#[test]
fn cluster_api_faults_show_their_root_cause_time_out_recover_and_block_a_delete() {
    // Every Cluster starts with the quota fault, set by the simulated controller at first
    // sight, so it cannot lose a race with the provisioning on a loaded machine.
    let Some(st) = stack_with("0.3", "", &[("CAPI_SIM_DEFAULT_FAULT", "quota")]) else {
        return;
    };
    let (cli, kube) = (&st.cli, &st.kube);
    template(cli, "capi", "v1.33.1");
    let token = cli.token(CLOUD);

    // A Machine stuck on quota: its message is the cluster's status_reason.
    let mut uuids = Vec::new();
    for i in 0..5 {
        let name = format!("quota{i}");
        let mut args = vec![
            "coe",
            "cluster",
            "create",
            name.as_str(),
            "--cluster-template",
            "capi",
            "--node-count",
            "1",
        ];
        if i == 0 {
            args.extend(["--timeout", "1"]);
        }
        cli.ok(CLOUD, &args);
        let stack_id = stack_id_of(cli, &name);
        let c = wait_for(cli, CLOUD, &name, 90, |c| {
            c["status_reason"]
                .as_str()
                .is_some_and(|r| r.contains("Quota exceeded for instances"))
        });
        assert_eq!(c["status"], "CREATE_IN_PROGRESS", "{c}");
        let reason = c["status_reason"].as_str().unwrap();
        assert!(
            reason.starts_with("Machine "),
            "the reason names the Machine: {reason}"
        );
        assert!(machine_message(kube, &stack_id, "Quota exceeded for instances").is_some());
        uuids.push((name, c["uuid"].as_str().unwrap().to_owned(), stack_id));
    }
    // The figure: the quota lifted on four of them, the time from the Machine's condition
    // changing in the management cluster to the API's status_reason changing. The API is read
    // straight over HTTP every 10 ms on its own thread (the openstack client takes about a
    // second per call), the stand-in as fast as curl answers on this one.
    let mut latencies = Vec::new();
    for (name, uuid, stack_id) in &uuids[1..] {
        let (port, token, uuid) = (st.api_port, token.clone(), uuid.clone());
        let api_seen = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(90);
            loop {
                let (_, c) = crate::http(
                    port,
                    Some(&token),
                    "GET",
                    &format!("/v1/clusters/{uuid}"),
                    None,
                );
                if !c["status_reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("Quota exceeded"))
                {
                    return Instant::now();
                }
                assert!(
                    Instant::now() < deadline,
                    "the lifted quota never reached the API: {c}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        set_fault(kube, stack_id, None);
        let deadline = Instant::now() + Duration::from_secs(90);
        let seen_in_kube = loop {
            if machine_message(kube, stack_id, "Quota exceeded for instances").is_none() {
                break Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "{name}: the quota fault was never lifted"
            );
        };
        let seen_in_api = api_seen.join().unwrap();
        latencies.push(seen_in_api.saturating_duration_since(seen_in_kube));
        wait_for(cli, CLOUD, name, 90, status_is("CREATE_COMPLETE"));
    }
    latencies.sort();
    eprintln!(
        "capi: a Machine condition change in the management cluster to status_reason in the API, {} clusters: median {:?}, max {:?} (both sides polled: resolution about 20 ms)",
        latencies.len(),
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );

    // Past create_timeout (1 minute) the cluster is CREATE_FAILED with a reason; when the
    // controller finishes afterwards, it becomes CREATE_COMPLETE.
    let failed = wait_for(cli, CLOUD, "quota0", 150, |c| {
        c["status"] == "CREATE_FAILED"
    });
    assert!(
        failed["status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("create_timeout"),
        "{failed}"
    );
    let stack0 = failed["cluster_id"].as_str().unwrap().to_owned();
    set_fault(kube, &stack0, None);
    let recovered = wait_for(cli, CLOUD, "quota0", 90, |c| {
        c["status"] == "CREATE_COMPLETE"
    });
    assert!(recovered["status_reason"].is_null(), "{recovered}");
    assert!(recovered["api_address"].as_str().is_some(), "{recovered}");

    // A delete held up by the infrastructure shows why; it finishes once unblocked.
    let stack1 = show(cli, CLOUD, "quota1")["cluster_id"]
        .as_str()
        .unwrap()
        .to_owned();
    set_fault(kube, &stack1, Some("delete-blocked"));
    cli.ok(CLOUD, &["coe", "cluster", "delete", "quota1"]);
    let blocked = wait_for(cli, CLOUD, "quota1", 90, |c| {
        c["status"] == "DELETE_IN_PROGRESS"
            && c["status_reason"]
                .as_str()
                .is_some_and(|r| r.contains("load balancer"))
    });
    eprintln!("capi: blocked delete reads: {}", blocked["status_reason"]);
    set_fault(kube, &stack1, None);
    for name in ["quota0", "quota2", "quota3", "quota4"] {
        cli.ok(CLOUD, &["coe", "cluster", "delete", name]);
    }
    wait_all_deleted(cli, 180);
}

fn octavia_sql(env: &crate::cloud::Env, statement: &str) {
    let out = Command::new("mysql")
        .args(["-h127.0.0.1", "-umagnum_test", "-pmagnum_test"])
        .arg(format!("{}octavia", env.os["MAGNUM_TEST_OS_DB_PREFIX"]))
        .args(["-e", statement])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{statement}: {}",
        crate::text(&out.stderr)
    );
}

/// In the real cloud (Keystone, Barbican, the real Octavia API): the cluster's cloud-config
/// Secret carries its application credential, and a delete removes the load balancers the
/// workload's cloud controller made before the CAPI Cluster, saying what it waits for.
/// Octavia runs without its worker here, so the test plays the worker's part in Octavia's
/// database: a balancer stays PENDING_CREATE (which Octavia refuses to delete) until the test
/// marks it ACTIVE, and is gone once the test marks the requested deletion DELETED.
#[test]
fn in_the_cloud_a_delete_takes_the_cloud_controllers_load_balancers_first() {
    let Some(c) = crate::cloud::cloud() else {
        return;
    };
    let kube_dir = tempfile::tempdir().unwrap();
    let kube = Kube::start(kube_dir.path(), "0.2");
    let m = crate::cloud::start_magnum(
        &c,
        &format!(
            "\n[cluster_api]\nenabled = true\nkubeconfig = {}\n\n[drivers]\ndefault_driver = k8s_capi\n",
            kube.kubeconfig.display()
        ),
    );
    let cli = &m.cli;
    cli.json(
        CLOUD,
        &[
            "coe",
            "cluster",
            "template",
            "create",
            "capi",
            "--coe",
            "kubernetes",
            "--image",
            "fedora-coreos-40",
            "--external-network",
            "public",
            "--flavor",
            "m1.small",
            "--master-flavor",
            "m1.medium",
            "--network-driver",
            "calico",
            "--label",
            "kube_tag=v1.33.1",
        ],
    );
    // Manila on, with the share network seed.py made in the demo project.
    let share_network = c
        .os
        .get("MAGNUM_TEST_OS_SHARE_NETWORK_K8S_SHARES_ID")
        .expect("the cloud's env.sh has no Manila share network: start it again with test-support/openstack/start.sh");
    let manila = format!("manila_csi_enabled=true,manila_csi_share_network_id={share_network}");
    cli.ok(
        CLOUD,
        &[
            "coe",
            "cluster",
            "create",
            "lb",
            "--cluster-template",
            "capi",
            "--node-count",
            "1",
            "--labels",
            &manila,
            "--merge-labels",
        ],
    );
    let done = wait_for(cli, CLOUD, "lb", 120, status_is("CREATE_COMPLETE"));
    let stack_id = done["cluster_id"].as_str().unwrap().to_owned();

    // Manila's StorageClasses: one per share type the project sees (read from the real
    // Manila API with the cluster's credential), in that share network.
    let workload = kube.get(&format!(
        "/api/v1/namespaces/magnum-system/secrets/{stack_id}-workload-cloud-config"
    ));
    let mut shares: Vec<(String, Value)> = workload["data"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("storageclass-share-"))
        .map(|(k, v)| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap())
                .unwrap();
            (k.clone(), serde_json::from_slice(&bytes).unwrap())
        })
        .collect();
    shares.sort_by(|a, b| a.0.cmp(&b.0));
    let names: Vec<&str> = shares.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "storageclass-share-cephfs-fast.yaml",
            "storageclass-share-default.yaml"
        ],
        "the seeded share types"
    );
    for (_, sc) in &shares {
        assert_eq!(sc["provisioner"], "nfs.manila.csi.openstack.org", "{sc}");
        assert_eq!(
            sc["parameters"]["shareNetworkID"],
            share_network.as_str(),
            "{sc}"
        );
    }
    assert_eq!(shares[0].1["parameters"]["type"], "CephFS Fast");

    // Nova server groups (server_group_policies, default soft-anti-affinity): the control
    // plane's and the worker nodegroup's, made in the cluster's project with its own
    // credential, each named in its machine template.
    let ours = |g: &&Value| {
        g["name"]
            .as_str()
            .is_some_and(|n| n == stack_id || n.starts_with(&format!("{stack_id}-")))
    };
    let groups: Vec<Value> = c.server_groups().iter().filter(ours).cloned().collect();
    let group = |name: &str| {
        groups
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("no server group {name} in Nova: {groups:?}"))
    };
    let (cp_group, worker_group) = (
        group(&stack_id),
        group(&format!("{stack_id}-default-worker")),
    );
    assert_eq!(groups.len(), 2, "{groups:?}");
    for g in [cp_group, worker_group] {
        assert_eq!(g["policies"], json!(["soft-anti-affinity"]), "{g}");
        assert_eq!(
            g["project_id"], done["project_id"],
            "the cluster's project: {g}"
        );
    }
    let osmts = kube.list(
        "infrastructure.cluster.x-k8s.io/v1beta1",
        "openstackmachinetemplates",
        &format!("cluster.x-k8s.io/cluster-name={stack_id}"),
    );
    let mut named: Vec<String> = osmts
        .iter()
        .map(|o| o["spec"]["template"]["spec"]["serverGroup"]["id"].to_string())
        .collect();
    named.sort();
    let mut want = vec![cp_group["id"].to_string(), worker_group["id"].to_string()];
    want.sort();
    assert_eq!(named, want, "each machine template names its group");

    let secret = kube.get(&format!(
        "/api/v1/namespaces/magnum-system/secrets/{stack_id}-cloud-config"
    ));
    let clouds = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["clouds.yaml"].as_str().unwrap())
        .unwrap();
    let clouds: Value = serde_json::from_slice(&clouds).unwrap();
    let cloud = &clouds["clouds"]["default"];
    assert_eq!(cloud["auth_type"], "v3applicationcredential", "{cloud}");
    magnum_testkit::scan::secret(
        "the cloud-config Secret's application credential secret",
        cloud["auth"]["application_credential_secret"]
            .as_str()
            .unwrap_or_default(),
    );
    assert!(
        cloud["auth"]["application_credential_id"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{cloud}"
    );
    assert!(
        cloud["auth"]["auth_url"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://127.0.0.1")),
        "{cloud}"
    );
    // The real Cinder's volume types become the workload's StorageClasses (its default type
    // here is __DEFAULT__, which gets none, so no class is the default).
    let holder = kube.get(&format!(
        "/api/v1/namespaces/magnum-system/secrets/{stack_id}-workload-cloud-config"
    ));
    let standard = holder["data"]["storageclass-block-standard.yaml"]
        .as_str()
        .unwrap_or_else(|| panic!("no StorageClass for Cinder's type standard: {holder}"));
    let standard: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(standard)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(standard["parameters"], json!({"type": "standard"}));
    assert!(
        standard["metadata"].get("annotations").is_none(),
        "{standard}"
    );

    // Credential rotation (`openstack coe credential rotate`, 1.12): every Secret of the
    // cluster carries the new credential, which authenticates; the old one is gone from
    // Keystone.
    let auth_url = cloud["auth"]["auth_url"].as_str().unwrap().to_owned();
    let first = credential_in(&kube, &stack_id, "cloud-config");
    assert_eq!(
        app_credential_auth(&auth_url, &first),
        201,
        "the first credential works"
    );
    cli.ok(CLOUD, &["coe", "credential", "rotate", "lb"]);
    let second = credential_in(&kube, &stack_id, "cloud-config");
    assert_ne!(
        second.0, first.0,
        "the cloud-config Secret still holds the first credential"
    );
    magnum_testkit::scan::secret("a rotated application credential's secret", &second.1);
    assert_eq!(
        credential_in(&kube, &stack_id, "workload-cloud-config").0,
        second.0
    );
    assert_no_secret_holds(&kube, &stack_id, &first);
    assert_eq!(
        app_credential_auth(&auth_url, &second),
        201,
        "the new credential works"
    );
    // Keystone answers 404 for a credential it no longer has.
    assert_eq!(
        app_credential_auth(&auth_url, &first),
        404,
        "the old credential is gone"
    );
    let c2 = show(cli, CLOUD, "lb");
    assert_eq!(
        c2["status"], "CREATE_COMPLETE",
        "a rotation changes no status: {c2}"
    );

    // Cut short: the management cluster goes away half-way (the workload Secret's write gets
    // its connection closed, as a stopped server's would). The rotation fails, nothing is
    // deleted, and the credential each Secret holds still works.
    kube.fault(&json!({
        "verb": "PATCH",
        "path_regex": format!("/secrets/{stack_id}-workload-cloud-config"),
        "close": true,
        "count": null,
    }));
    // (The client prints a failed rotation and exits 0: its words are the outcome.)
    let out = cli.run(CLOUD, &["coe", "credential", "rotate", "lb"]);
    let said = crate::text(&out.stdout) + &crate::text(&out.stderr);
    assert!(
        said.contains("Credential rotation failed") && said.contains("(HTTP 5"),
        "a rotation cut short did not fail: {said}; faults {}",
        kube.get("/_stand-in/faults")
    );
    for name in ["cloud-config", "workload-cloud-config"] {
        let held = credential_in(&kube, &stack_id, name);
        magnum_testkit::scan::secret("a rotated application credential's secret", &held.1);
        assert_eq!(
            app_credential_auth(&auth_url, &held),
            201,
            "{name}: its credential fails"
        );
    }
    let half = credential_in(&kube, &stack_id, "cloud-config");
    kube.clear_faults();
    // The retry finishes: one credential left, in every Secret; the two before are gone.
    cli.ok(CLOUD, &["coe", "credential", "rotate", "lb"]);
    let third = credential_in(&kube, &stack_id, "cloud-config");
    magnum_testkit::scan::secret("a rotated application credential's secret", &third.1);
    assert!(
        third.0 != second.0 && third.0 != half.0,
        "no new credential after the retry"
    );
    assert_eq!(
        credential_in(&kube, &stack_id, "workload-cloud-config").0,
        third.0
    );
    assert_no_secret_holds(&kube, &stack_id, &second);
    assert_eq!(app_credential_auth(&auth_url, &third), 201);
    assert_eq!(app_credential_auth(&auth_url, &second), 404);
    if half.0 != second.0 {
        assert_eq!(app_credential_auth(&auth_url, &half), 404);
    }

    // A Service of type LoadBalancer, as the cloud controller makes it, in the cluster's
    // project (the noop provider: no amphora here).
    let token = cli.token(CLOUD);
    let octavia = c.os["MAGNUM_TEST_OS_OCTAVIA_URL"].clone();
    let body = json!({"loadbalancer": {
        "name": format!("kube_service_{stack_id}_default_web"),
        "description": format!("Kubernetes external service default/web from cluster {stack_id}"),
        "vip_network_id": c.os["MAGNUM_TEST_OS_NETWORK_PRIVATE_ID"],
        "provider": "noop_driver",
    }});
    let out = Command::new("curl")
        .args([
            "-sS",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-H",
        ])
        .arg(format!("X-Auth-Token: {token}"))
        .args(["--data", &body.to_string()])
        .arg(format!("{octavia}/v2/lbaas/loadbalancers"))
        .output()
        .unwrap();
    let lb: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("octavia: {e}: {}", crate::text(&out.stdout)));
    let lb_id = lb["loadbalancer"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{lb}"))
        .to_owned();

    cli.ok(CLOUD, &["coe", "cluster", "delete", "lb"]);
    let held = wait_for(cli, CLOUD, "lb", 60, |c| {
        c["status_reason"]
            .as_str()
            .is_some_and(|r| r.contains(&lb_id) && r.contains("cannot be deleted yet"))
    });
    eprintln!(
        "capi: delete waiting on Octavia reads: {}",
        held["status_reason"]
    );
    let capi = kube.get(&cluster_path(&stack_id));
    assert!(
        capi["metadata"]["deletionTimestamp"].is_null(),
        "the CAPI Cluster went before its load balancer"
    );
    // Octavia's worker would have made it ACTIVE: now the delete is accepted.
    octavia_sql(
        &c,
        &format!("UPDATE load_balancer SET provisioning_status = 'ACTIVE' WHERE id = '{lb_id}'"),
    );
    wait_for(cli, CLOUD, "lb", 60, |c| {
        c["status_reason"]
            .as_str()
            .is_some_and(|r| r.contains("being deleted"))
    });
    assert!(kube.get(&cluster_path(&stack_id))["metadata"]["deletionTimestamp"].is_null());
    octavia_sql(
        &c,
        &format!("UPDATE load_balancer SET provisioning_status = 'DELETED' WHERE id = '{lb_id}'"),
    );
    wait_all_deleted(cli, 120);
    let uuid = done["uuid"].as_str().unwrap();
    assert!(leftovers(&kube, uuid, &stack_id).is_empty());
    let left: Vec<Value> = c.server_groups().iter().filter(ours).cloned().collect();
    assert!(left.is_empty(), "server groups left in Nova: {left:?}");
}

/// The stand-in's and the simulated controller's own self-tests (test-support/kube): the
/// wire behaviour the driver relies on, and the object shapes and faults it reads.
#[test]
fn the_kube_stand_in_and_the_simulated_controller_pass_their_self_tests() {
    let venv =
        std::env::var("MAGNUM_KUBE_VENV").unwrap_or_else(|_| "/var/tmp/magnum-rs-kube-venv".into());
    let setup = Command::new("bash")
        .arg(repo_root().join("test-support/kube/setup-venv.sh"))
        .output()
        .unwrap();
    assert!(setup.status.success(), "{}", crate::text(&setup.stderr));
    for (script, args) in [
        ("selftest.py", vec![]),
        ("sim_selftest.py", vec!["--step", "0.5"]),
    ] {
        let out = Command::new(format!("{venv}/bin/python"))
            .arg(repo_root().join("test-support/kube").join(script))
            .args(&args)
            .output()
            .unwrap();
        let stdout = crate::text(&out.stdout);
        assert!(
            out.status.success(),
            "{script}: {stdout}{}",
            crate::text(&out.stderr)
        );
        let summary = stdout
            .lines()
            .rev()
            .find(|l| l.contains("checks passed"))
            .unwrap_or_default();
        eprintln!("{script}: {summary}");
    }
}

/// Every text a Secret's data holds, and those of the Secrets inside it (a
/// ClusterResourceSet's Secret carries the workload's Secrets as manifests).
fn secret_texts(secret: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for value in secret["data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, v)| v)
    {
        let Ok(bytes) =
            base64::engine::general_purpose::STANDARD.decode(value.as_str().unwrap_or_default())
        else {
            continue;
        };
        let text = crate::text(&bytes);
        if let Ok(inner) = serde_json::from_str::<Value>(&text)
            && inner["kind"] == "Secret"
        {
            out.extend(secret_texts(&inner));
        }
        out.push(text);
    }
    out
}

/// The application credential (id, secret) in the cluster's Secret `<stack_id>-<name>`: its
/// clouds.yaml (CAPO's) or its cloud.conf (the workload's).
fn credential_in(kube: &Kube, stack_id: &str, name: &str) -> (String, String) {
    let secret = kube.get(&format!(
        "/api/v1/namespaces/magnum-system/secrets/{stack_id}-{name}"
    ));
    for text in secret_texts(&secret) {
        if let Ok(clouds) = serde_json::from_str::<Value>(&text) {
            let auth = &clouds["clouds"]["default"]["auth"];
            if let (Some(id), Some(secret)) = (
                auth["application_credential_id"].as_str(),
                auth["application_credential_secret"].as_str(),
            ) {
                return (id.to_owned(), secret.to_owned());
            }
        }
        // cloud.conf: `application-credential-id="..."` lines.
        let field = |key: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
            })
        };
        if let (Some(id), Some(secret)) = (
            field("application-credential-id"),
            field("application-credential-secret"),
        ) {
            return (id, secret);
        }
    }
    panic!("no application credential in {stack_id}-{name}: {secret}");
}

/// No Secret of the cluster (nor one inside it) and none of its HelmChartProxies holds `cred`.
fn assert_no_secret_holds(kube: &Kube, stack_id: &str, cred: &(String, String)) {
    let secrets = kube.get("/api/v1/namespaces/magnum-system/secrets");
    for s in secrets["items"].as_array().unwrap() {
        let name = s["metadata"]["name"].as_str().unwrap_or_default();
        if !name.starts_with(&format!("{stack_id}-")) {
            continue;
        }
        for text in secret_texts(s) {
            assert!(
                !text.contains(&cred.0) && !text.contains(&cred.1),
                "Secret {name} still holds the old credential"
            );
        }
    }
    let proxies = kube
        .get("/apis/addons.cluster.x-k8s.io/v1alpha1/namespaces/magnum-system/helmchartproxies");
    let text = proxies.to_string();
    assert!(
        !text.contains(&cred.0) && !text.contains(&cred.1),
        "a HelmChartProxy still holds the old credential"
    );
}

/// Keystone's answer to a token request with the application credential (201: it works).
fn app_credential_auth(auth_url: &str, cred: &(String, String)) -> u16 {
    let base = auth_url.trim_end_matches('/');
    let url = if base.ends_with("/v3") {
        format!("{base}/auth/tokens")
    } else {
        format!("{base}/v3/auth/tokens")
    };
    let body = json!({"auth": {"identity": {"methods": ["application_credential"],
        "application_credential": {"id": cred.0, "secret": cred.1}}}});
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "--data",
            &body.to_string(),
            &url,
        ])
        .output()
        .unwrap();
    crate::text(&out.stdout).trim().parse().unwrap_or(0)
}

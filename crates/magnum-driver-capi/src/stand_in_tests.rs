//! The ClusterClass's patches run: the driver's objects for a cluster with many labels are
//! applied to the Kubernetes API stand-in (test-support/kube), whose simulated topology
//! controller resolves the variables, runs the patches and creates the control plane,
//! machine and bootstrap templates, each checked by the stand-in against the real CRD
//! schemas; then the fields each label must change are read back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use magnum_conf::config::ClusterApiSection;
use magnum_core::model::NodegroupRole;
use serde_json::{Value, json};

use crate::kube::{Kind, Management};
use crate::render::tests::{cluster, nodegroup, template};
use crate::render::{self, Addons, Inputs};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The stand-in, stopped on drop.
struct StandIn(PathBuf);

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo_root().join("test-support/kube/stop.sh"))
            .arg(&self.0)
            .output();
    }
}

fn arg<'a>(args: &'a [Value], name: &str) -> Option<&'a str> {
    args.iter()
        .find(|a| a["name"] == name)
        .and_then(|a| a["value"].as_str())
}

async fn wait_for(
    mgmt: &Management,
    sim_log: &Path,
    kind: Kind,
    selector: &str,
    n: usize,
) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let got = mgmt.list(kind, selector).await.unwrap();
        let failed = std::fs::read_to_string(sim_log)
            .unwrap_or_default()
            .contains("patches failed");
        if got.len() >= n || failed || Instant::now() > until {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_label_reaches_the_objects_the_topology_controller_creates() {
    let crds = repo_root().join("../shared/fixtures/capi-crds");
    if !crds.is_dir() {
        eprintln!(
            "SKIP: {} is absent: the patched objects cannot be checked against the CRD schemas",
            crds.display()
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("magnum-capi-patches-{}", uuid::Uuid::new_v4()));
    let out = Command::new("bash")
        .arg(repo_root().join("test-support/kube/start.sh"))
        .arg(&dir)
        .env("CAPI_SIM_STEP_SECONDS", "0.2")
        .output()
        .unwrap();
    let _stand_in = StandIn(dir.clone());
    assert!(
        out.status.success(),
        "start.sh: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg = ClusterApiSection {
        kubeconfig: dir.join("kubeconfig").display().to_string(),
        ..ClusterApiSection::default()
    };
    let mgmt = Management::connect(&cfg).await.unwrap();

    let mut c = cluster();
    c.labels = serde_json::from_value(json!({
        "kube_tag": "v1.33.1",
        "admission_control_list": "PodSecurity,NodeRestriction",
        "api_server_cert_sans": "api.example.com,10.1.2.3",
        "kubelet_tls_cipher_suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "audit_log_enabled": "True",
        "audit_log_max_age": "7",
        "oidc_issuer_url": "https://idp.example.com/realms/k8s",
        "oidc_client_id": "kubernetes",
        "oidc_groups_claim": "groups",
        "keystone_auth_enabled": "yes",
        "container_infra_prefix": "mirror.example.com:5000/k8s/",
        "etcd_volume_size": "20",
        "etcd_volume_type": "ssd",
        "availability_zone": "az1",
        "boot_volume_size": "40",
        "boot_volume_type": "fast",
        "control_plane_availability_zones": "az1,az2",
        "master_lb_floating_ip_enabled": "false",
        "octavia_provider": "ovn",
        "octavia_lb_algorithm": "SOURCE_IP_PORT",
        "api_server_lb_flavor": "lb.small",
        "api_master_lb_allowed_cidrs": "10.0.0.0/8, 192.168.0.0/16",
        "different_failure_domain": "on",
        "extra_network_names": "storage",
        "dns_cluster_domain": "corp.local",
        "fixed_subnet_cidr": "10.20.0.0/24",
        "calico_ipv4pool": "10.200.0.0/16",
        "auto_healing_enabled": "false",
    }))
    .unwrap();
    let mut t = template();
    t.docker_volume_size = Some(30);
    t.labels = serde_json::from_value(json!({"docker_volume_type": "ssd"})).unwrap();
    let mut gpu = nodegroup("gpu", NodegroupRole::Worker, 1);
    gpu.labels = serde_json::from_value(
        json!({"boot_volume_size": "100", "different_failure_domain": "n", "availability_zone": "az2",
               "auto_scaling_enabled": "true", "max_node_count": "3"}),
    )
    .unwrap();
    // Found by name; a root disk of 0 gives no ephemeral-disk capacity.
    gpu.flavor_id = Some("g1.gpu".into());
    let flavors = [render::FlavorSize {
        id: "f-gpu".into(),
        name: "g1.gpu".into(),
        vcpus: 16,
        ram_mib: 65536,
        disk_gb: 0,
    }];
    gpu.node_labels =
        serde_json::from_value(json!({"accelerator": "a100", "tier": "batch"})).unwrap();
    gpu.node_taints = vec![json!({"key": "gpu", "value": "true", "effect": "NoSchedule"})];
    let mut worker = nodegroup("default-worker", NodegroupRole::Worker, 2);
    worker.labels = c.labels.clone();
    let ngs = vec![
        nodegroup("default-master", NodegroupRole::Master, 1),
        worker,
        gpu,
    ];
    crate::check_labels(&c, &t, &ngs).unwrap();
    let addons = Addons::default();
    let stack = "kube-pt0001";
    // The control plane's group and each nodegroup's, as Nova made them.
    let groups = render::ServerGroups {
        control_plane: "0b9c8f8e-0000-4000-8000-000000000001".into(),
        workers: [
            ("default-worker", "0b9c8f8e-0000-4000-8000-000000000002"),
            ("gpu", "0b9c8f8e-0000-4000-8000-000000000003"),
        ]
        .into_iter()
        .map(|(n, id)| (n.to_owned(), id.to_owned()))
        .collect(),
    };
    let inputs = Inputs {
        cluster: &c,
        template: &t,
        nodegroups: &ngs,
        stack_id: stack,
        namespace: mgmt.namespace(),
        default_kube_tag: "v1.33.1",
        cloud: None,
        cas: None,
        addons: &addons,
        charts: None,
        flavors: &flavors,
        volume_types: &render::VolumeTypes {
            names: vec!["__DEFAULT__".into(), "SSD Fast".into(), "standard".into()],
            default: Some("standard".into()),
        },
        autoscaler_repository: "registry.k8s.io/autoscaling",
        server_groups: &groups,
        share_types: &[],
    };
    for obj in render::cluster_class(mgmt.namespace())
        .iter()
        .chain(&render::render(&inputs))
    {
        mgmt.apply(obj).await.unwrap();
    }

    let sel = format!("{}={stack}", render::CAPI_CLUSTER_LABEL);
    let kcp = wait_for(
        &mgmt,
        &dir.join("capi_sim.log"),
        Kind::KubeadmControlPlane,
        &sel,
        1,
    )
    .await;
    let osc = wait_for(
        &mgmt,
        &dir.join("capi_sim.log"),
        Kind::OpenStackCluster,
        &sel,
        1,
    )
    .await;
    let osmts = wait_for(
        &mgmt,
        &dir.join("capi_sim.log"),
        Kind::OpenStackMachineTemplate,
        &sel,
        3,
    )
    .await;
    let kcts = wait_for(
        &mgmt,
        &dir.join("capi_sim.log"),
        Kind::KubeadmConfigTemplate,
        &sel,
        2,
    )
    .await;
    let mds = wait_for(
        &mgmt,
        &dir.join("capi_sim.log"),
        Kind::MachineDeployment,
        &sel,
        2,
    )
    .await;
    let log = std::fs::read_to_string(dir.join("capi_sim.log")).unwrap_or_default();
    assert!(
        kcp.len() == 1 && osc.len() == 1 && osmts.len() == 3 && kcts.len() == 2,
        "the simulated controller did not create every object; its log:\n{log}"
    );

    // OpenStackCluster: zones, floating IP, load balancer, subnet.
    let o = &osc[0]["spec"];
    assert_eq!(o["controlPlaneAvailabilityZones"], json!(["az1", "az2"]));
    assert_eq!(o["disableAPIServerFloatingIP"], true);
    assert_eq!(o["apiServerLoadBalancer"]["enabled"], true);
    assert_eq!(o["apiServerLoadBalancer"]["provider"], "ovn");
    assert_eq!(o["apiServerLoadBalancer"]["flavor"], "lb.small");
    assert_eq!(
        o["apiServerLoadBalancer"]["allowedCIDRs"],
        json!(["10.0.0.0/8", "192.168.0.0/16"])
    );
    assert_eq!(o["managedSubnets"][0]["cidr"], "10.20.0.0/24");
    assert_eq!(o["externalNetwork"], json!({"filter": {"name": "public"}}));
    assert_eq!(o["identityRef"]["name"], format!("{stack}-cloud-config"));

    // KubeadmControlPlane: API server arguments, SANs, files, volumes, disks, registry.
    let k = &kcp[0]["spec"]["kubeadmConfigSpec"];
    let api = &k["clusterConfiguration"]["apiServer"];
    let args = api["extraArgs"].as_array().unwrap();
    assert_eq!(
        arg(args, "enable-admission-plugins"),
        Some("NodeRestriction,PodSecurity")
    );
    assert_eq!(
        arg(args, "tls-cipher-suites"),
        Some(crate::labels::API_CIPHERS)
    );
    assert_eq!(arg(args, "audit-log-maxage"), Some("7"));
    assert_eq!(arg(args, "audit-log-maxbackup"), Some("10"));
    assert_eq!(
        arg(args, "oidc-issuer-url"),
        Some("https://idp.example.com/realms/k8s")
    );
    assert_eq!(arg(args, "oidc-client-id"), Some("kubernetes"));
    assert_eq!(arg(args, "oidc-username-claim"), Some("sub"));
    assert_eq!(arg(args, "oidc-groups-claim"), Some("groups"));
    assert_eq!(arg(args, "authorization-mode"), Some("Node,RBAC,Webhook"));
    assert_eq!(api["certSANs"], json!(["api.example.com", "10.1.2.3"]));
    assert_eq!(api["extraVolumes"].as_array().unwrap().len(), 3);
    assert_eq!(k["files"].as_array().unwrap().len(), 2);
    assert_eq!(
        k["clusterConfiguration"]["imageRepository"],
        "mirror.example.com:5000/k8s"
    );
    // containerd's own pause image on the mirror too, on every node, before kubeadm runs.
    let sandbox = json!([
        "sed -i -E 's#^([[:space:]]*sandbox(_image)?[[:space:]]*=[[:space:]]*).*#\\1\"mirror.example.com:5000/k8s/pause:3.10\"#' /etc/containerd/config.toml",
        "systemctl restart containerd"
    ]);
    assert_eq!(k["preKubeadmCommands"], sandbox);
    for kct in &kcts {
        assert_eq!(
            kct["spec"]["template"]["spec"]["preKubeadmCommands"], sandbox,
            "{kct}"
        );
    }
    assert_eq!(
        k["mounts"],
        json!([
            ["LABEL=etcd_disk", "/var/lib/etcd"],
            ["LABEL=runtime_disk", "/var/lib/containerd"]
        ])
    );
    assert_eq!(k["diskSetup"]["partitions"][1]["device"], "/dev/vdc");
    let kubelet = k["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
        .as_array()
        .unwrap();
    assert_eq!(
        arg(kubelet, "tls-cipher-suites"),
        Some("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")
    );

    // Machine templates: the control plane's, and one per MachineDeployment.
    let by_role = |role: &str| {
        osmts
            .iter()
            .find(|o| o["metadata"]["annotations"]["capi-sim.magnum-rs.dev/template-role"] == role)
            .unwrap_or_else(|| panic!("no OpenStackMachineTemplate for {role}: {osmts:?}"))["spec"]
            ["template"]["spec"]
            .clone()
    };
    let cp = by_role("control-plane");
    assert_eq!(cp["flavor"], "m1.large");
    assert_eq!(
        cp["rootVolume"],
        // CAPO's schema defaults `from: Name`.
        json!({"sizeGiB": 40, "type": "fast", "availabilityZone": {"from": "Name", "name": "az1"}})
    );
    let disks = cp["additionalBlockDevices"].as_array().unwrap();
    assert_eq!(disks.len(), 2);
    assert_eq!(
        disks[0],
        json!({"name": "etcd", "sizeGiB": 20, "storage": {"type": "Volume",
               "volume": {"type": "ssd", "availabilityZone": {"from": "Name", "name": "az1"}}}})
    );
    assert_eq!(disks[1]["sizeGiB"], 30);
    assert_eq!(
        cp["schedulerHintAdditionalProperties"][0]["value"],
        json!({"type": "Bool", "bool": true})
    );
    // Each machine template names its own server group (the workers' overrides win over
    // the control plane's global value).
    assert_eq!(
        cp["serverGroup"],
        json!({"id": "0b9c8f8e-0000-4000-8000-000000000001"})
    );
    let w = by_role("md-default-worker");
    assert_eq!(
        w["serverGroup"],
        json!({"id": "0b9c8f8e-0000-4000-8000-000000000002"})
    );
    assert_eq!(
        by_role("md-gpu")["serverGroup"],
        json!({"id": "0b9c8f8e-0000-4000-8000-000000000003"})
    );
    assert_eq!(w["rootVolume"]["sizeGiB"], 40);
    assert_eq!(
        w["ports"],
        json!([{}, {"network": {"filter": {"name": "storage"}}}])
    );
    assert_eq!(w["additionalBlockDevices"].as_array().unwrap().len(), 1);
    let g = by_role("md-gpu");
    assert_eq!(g["flavor"], "g1.gpu");
    // The auto-scaled nodegroup's MachineDeployment: the autoscaler's bounds and its
    // scale-from-zero capacity from the flavor; the other has neither.
    let md = |ng: &str| {
        mds.iter()
            .find(|m| m["metadata"]["labels"]["topology.cluster.x-k8s.io/deployment-name"] == ng)
            .unwrap_or_else(|| panic!("no MachineDeployment for {ng}: {mds:?}"))["metadata"]
            ["annotations"]
            .clone()
    };
    let ann = md("gpu");
    assert_eq!(
        ann["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"],
        "3"
    );
    assert_eq!(ann["capacity.cluster-autoscaler.kubernetes.io/cpu"], "16");
    assert_eq!(
        ann["capacity.cluster-autoscaler.kubernetes.io/memory"],
        "65536Mi"
    );
    assert!(
        ann.get("capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk")
            .is_none()
    );
    let ann = md("default-worker");
    assert!(
        ann.get("capacity.cluster-autoscaler.kubernetes.io/cpu")
            .is_none(),
        "{ann}"
    );
    // The cluster autoscaler, beside the Cluster in the management cluster, on the mirror.
    let deployments = mgmt.list(Kind::Deployment, &sel).await.unwrap();
    assert_eq!(deployments.len(), 1, "{deployments:?}");
    let pod = &deployments[0]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], format!("{stack}-autoscaler"));
    assert_eq!(
        pod["containers"][0]["image"],
        "mirror.example.com:5000/k8s/cluster-autoscaler:v1.33.0"
    );
    for kind in [Kind::ServiceAccount, Kind::Role, Kind::RoleBinding] {
        assert_eq!(mgmt.list(kind, &sel).await.unwrap().len(), 1, "{kind:?}");
    }
    assert_eq!(g["rootVolume"]["sizeGiB"], 100, "the nodegroup's own label");
    assert_eq!(g["rootVolume"]["availabilityZone"]["name"], "az2");
    assert_eq!(
        g["schedulerHintAdditionalProperties"][0]["value"]["bool"],
        false
    );

    // Bootstrap templates (one per MachineDeployment): kubelet ciphers, runtime disk.
    let kct = &kcts[0]["spec"]["template"]["spec"];
    let kubelet = kct["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
        .as_array()
        .unwrap();
    assert_eq!(
        arg(kubelet, "tls-cipher-suites"),
        Some("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")
    );
    assert_eq!(
        kct["mounts"],
        json!([["LABEL=runtime_disk", "/var/lib/containerd"]])
    );
    assert_eq!(kct["diskSetup"]["partitions"][0]["device"], "/dev/vdb");

    // Microversion 1.14's node labels and taints reach their own nodegroup's registration.
    let registration = |taints_set: bool| {
        kcts.iter()
            .map(|k| &k["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"])
            .find(|r| {
                r["taints"]
                    .as_array()
                    .is_some_and(|t| t.is_empty() != taints_set)
            })
            .cloned()
            .unwrap_or_else(|| panic!("no bootstrap template with taints={taints_set}: {kcts:?}"))
    };
    let gpu_reg = registration(true);
    assert_eq!(
        gpu_reg["taints"],
        json!([{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    );
    let args = gpu_reg["kubeletExtraArgs"].as_array().unwrap();
    assert_eq!(
        arg(args, "node-labels"),
        Some("accelerator=a100,tier=batch")
    );
    let plain = registration(false);
    let args = plain["kubeletExtraArgs"].as_array().unwrap();
    assert_eq!(arg(args, "node-labels"), Some(""));

    // The Cluster itself: network and health checks.
    let cl = mgmt.get(Kind::Cluster, stack).await.unwrap().unwrap();
    assert_eq!(cl["spec"]["clusterNetwork"]["serviceDomain"], "corp.local");
    assert_eq!(
        cl["spec"]["clusterNetwork"]["pods"]["cidrBlocks"],
        json!(["10.200.0.0/16"])
    );
    assert_eq!(
        cl["spec"]["topology"]["controlPlane"]["healthCheck"]["enabled"],
        false
    );
    assert!(
        !log.contains("patches failed"),
        "the simulated controller reported a patch failure:\n{log}"
    );
}

/// Whether everything `sent` holds reads back the same (the schema may add defaults).
fn subset(sent: &Value, back: &Value) -> bool {
    match (sent, back) {
        (Value::Object(a), Value::Object(b)) => a
            .iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| subset(v, w))),
        _ => sent == back,
    }
}

/// Every HelmChartProxy the driver renders is accepted by the stand-in against CAAPH's real
/// CRD schema and reads back unchanged (nothing pruned as unknown, nothing rejected), for
/// both CNIs with every optional add-on and a mirror prefix; the delete's cleanup removes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_helm_chart_proxy_fits_the_caaph_schema() {
    let crds = repo_root().join("../shared/fixtures/capi-crds");
    let hcp_crd = crds.join("addons.cluster.x-k8s.io_helmchartproxies.yaml");
    if !hcp_crd.is_file() {
        eprintln!(
            "SKIP: {} is absent: the HelmChartProxies cannot be checked against CAAPH's schema",
            hcp_crd.display()
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("magnum-capi-hcp-{}", uuid::Uuid::new_v4()));
    let out = Command::new("bash")
        .arg(repo_root().join("test-support/kube/start.sh"))
        .arg(&dir)
        .arg("--no-controller")
        .output()
        .unwrap();
    let _stand_in = StandIn(dir.clone());
    assert!(
        out.status.success(),
        "start.sh: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg = ClusterApiSection {
        kubeconfig: dir.join("kubeconfig").display().to_string(),
        ..ClusterApiSection::default()
    };
    let mgmt = Management::connect(&cfg).await.unwrap();
    let settings = crate::addons::Settings::from_config(&cfg).unwrap();
    let cloud = crate::addons::tests::cloud();
    let addons = Addons::default();
    let mut seen = 0;
    for driver in ["calico", "cilium"] {
        let mut c = cluster();
        c.labels = serde_json::from_value(json!({
            "kube_tag": "v1.32.3",
            "container_infra_prefix": "mirror.example.com/k8s",
            "manila_csi_enabled": "true",
            "cilium_hubble_ui_enabled": "true",
            "cloud_provider_tag": "v1.32.1",
            "monitoring_enabled": "true",
            "kube_dashboard_enabled": "true",
        }))
        .unwrap();
        let mut t = template();
        t.network_driver = Some(driver.into());
        let i = crate::addons::tests::inputs(&c, &t, &[], &addons, &cloud, &settings);
        // The workload cloud-config ClusterResourceSet the charts read, schema-checked too.
        for obj in crate::addons::workload_cloud_config(&i) {
            mgmt.apply(&obj).await.unwrap();
        }
        let proxies = crate::addons::proxies(&i, &settings);
        assert_eq!(proxies.len(), 8);
        for p in &proxies {
            mgmt.apply(p)
                .await
                .unwrap_or_else(|e| panic!("{driver} {}: {e}", p["metadata"]["name"]));
            let name = p["metadata"]["name"].as_str().unwrap();
            let back = mgmt.get(Kind::HelmChartProxy, name).await.unwrap().unwrap();
            assert!(
                subset(&p["spec"], &back["spec"]),
                "{name}: the schema pruned or changed a field\nsent: {}\nread: {}",
                p["spec"],
                back["spec"]
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 16);
    let sel = format!("{}={}", render::UUID_LABEL, cluster().uuid);
    let listed = mgmt.list(Kind::HelmChartProxy, &sel).await.unwrap();
    assert_eq!(
        listed.len(),
        8,
        "one proxy per add-on: the CNI's name is shared"
    );
    for p in listed {
        let name = p["metadata"]["name"].as_str().unwrap();
        mgmt.delete(Kind::HelmChartProxy, name).await.unwrap();
    }
    assert!(
        mgmt.list(Kind::HelmChartProxy, &sel)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A management cluster without CAAPH's kinds: a create's HelmChartProxy names what is
/// missing instead of a bare 404, and the update path sees that CAAPH is absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_management_cluster_without_caaph_says_so() {
    let crds = repo_root().join("../shared/fixtures/capi-crds");
    let cluster_crd = crds.join("cluster.x-k8s.io_clusters.yaml");
    if !cluster_crd.is_file() {
        eprintln!(
            "SKIP: {} is absent: no CRD folder to serve without CAAPH's kinds",
            cluster_crd.display()
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("magnum-capi-nocaaph-{}", uuid::Uuid::new_v4()));
    // Only the Cluster kind: the stand-in serves what its CRD folder holds.
    let only = dir.join("crds");
    std::fs::create_dir_all(&only).unwrap();
    std::fs::copy(&cluster_crd, only.join("cluster.x-k8s.io_clusters.yaml")).unwrap();
    let out = Command::new("bash")
        .arg(repo_root().join("test-support/kube/start.sh"))
        .arg(&dir)
        .arg("--no-controller")
        .env("MAGNUM_TEST_CAPI_CRDS", &only)
        .output()
        .unwrap();
    let _stand_in = StandIn(dir.clone());
    assert!(
        out.status.success(),
        "start.sh: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg = ClusterApiSection {
        kubeconfig: dir.join("kubeconfig").display().to_string(),
        ..ClusterApiSection::default()
    };
    let mgmt = Management::connect(&cfg).await.unwrap();
    let settings = crate::addons::Settings::from_config(&cfg).unwrap();
    let cloud = crate::addons::tests::cloud();
    let (c, t, addons) = (cluster(), template(), Addons::default());
    let i = crate::addons::tests::inputs(&c, &t, &[], &addons, &cloud, &settings);
    let proxy = &crate::addons::proxies(&i, &settings)[0];
    let err = crate::apply_object(&mgmt, proxy).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("Cluster API add-on provider for Helm (CAAPH)"),
        "{err}"
    );
    assert!(!crate::caaph_installed(&mgmt, &i).await.unwrap());
}

/// The stand-in's simulated CAAPH (capi_sim.py) makes and deploys a HelmReleaseProxy for
/// each of a cluster's HelmChartProxies, so the status engine's wait for the add-ons ends;
/// a proxy deleted (an add-on turned off) loses its release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulated_caaph_deploys_each_proxy() {
    let crds = repo_root().join("../shared/fixtures/capi-crds");
    if !crds.is_dir() {
        eprintln!(
            "SKIP: {} is absent: the releases cannot be checked against CAAPH's schema",
            crds.display()
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("magnum-capi-caaph-{}", uuid::Uuid::new_v4()));
    let out = Command::new("bash")
        .arg(repo_root().join("test-support/kube/start.sh"))
        .arg(&dir)
        .env("CAPI_SIM_STEP_SECONDS", "0.2")
        .output()
        .unwrap();
    let _stand_in = StandIn(dir.clone());
    assert!(
        out.status.success(),
        "start.sh: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg = ClusterApiSection {
        kubeconfig: dir.join("kubeconfig").display().to_string(),
        ..ClusterApiSection::default()
    };
    let mgmt = Management::connect(&cfg).await.unwrap();
    let settings = crate::addons::Settings::from_config(&cfg).unwrap();
    let cloud = crate::addons::tests::cloud();
    let (c, t, addons) = (cluster(), template(), Addons::default());
    let ngs = vec![
        nodegroup("default-master", NodegroupRole::Master, 1),
        nodegroup("default-worker", NodegroupRole::Worker, 1),
    ];
    let i = crate::addons::tests::inputs(&c, &t, &ngs, &addons, &cloud, &settings);
    for obj in render::cluster_class(mgmt.namespace())
        .iter()
        .chain(&render::render(&i))
    {
        mgmt.apply(obj).await.unwrap();
    }
    let by_uuid = format!("{}={}", render::UUID_LABEL, c.uuid);
    let by_name = format!("{}=kube-ab12c", render::CAPI_CLUSTER_LABEL);
    let proxies = mgmt.list(Kind::HelmChartProxy, &by_uuid).await.unwrap();
    assert_eq!(proxies.len(), 4, "CNI, CCM, Cinder, keystone-auth");
    let until = Instant::now() + Duration::from_secs(30);
    let mut why = crate::addons::waiting(&proxies, &[]);
    while why.is_some() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let releases = mgmt.list(Kind::HelmReleaseProxy, &by_name).await.unwrap();
        why = crate::addons::waiting(&proxies, &releases);
    }
    let log = std::fs::read_to_string(dir.join("capi_sim.log")).unwrap_or_default();
    assert_eq!(
        why, None,
        "the simulated CAAPH did not deploy; its log:\n{log}"
    );
    let releases = mgmt.list(Kind::HelmReleaseProxy, &by_name).await.unwrap();
    assert_eq!(releases.len(), 4);
    assert!(
        releases
            .iter()
            .all(|r| r["spec"]["clusterRef"]["name"] == "kube-ab12c")
    );
    mgmt.delete(Kind::HelmChartProxy, "kube-ab12c-cinder-csi")
        .await
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let left = mgmt.list(Kind::HelmReleaseProxy, &by_name).await.unwrap();
        if left.len() == 3 || Instant::now() > until {
            assert_eq!(left.len(), 3, "the deleted proxy's release stays");
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

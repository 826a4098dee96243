//! The ClusterClass (CAPI v1beta2) and its four templates: the shape every cluster of this
//! driver version shares. What differs per cluster arrives as topology variables, and the
//! class's inline patches (`spec.patches`) carry each variable into the field CAPI/CAPO
//! reads, as CAPI's topology controller runs them: `enabledIf` and `valueFrom.template` are
//! Go templates over the variables (global ones for `enabledIf`, with a MachineDeployment's
//! overrides for its templates).
//!
//! Lists the CRDs require non-empty when present (`files`, `mounts`, `extraVolumes`,
//! `additionalBlockDevices`) are written whole by one template each, from every variable
//! that contributes, so two features never overwrite each other's entries.

use serde_json::{Value, json};

use super::kube::Kind;
use super::labels::{API_CIPHERS, KUBELET_CIPHERS};
use super::render::{CLASS, WORKER_CLASS};

const KCS: &str = "/spec/template/spec/kubeadmConfigSpec";
const API: &str = "/spec/template/spec/kubeadmConfigSpec/clusterConfiguration/apiServer";
const SPEC: &str = "/spec/template/spec";

const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: None\n  resources: [{group: \"\", resources: [events]}]\n- level: Metadata\n";
const AUDIT_POLICY_DIR: &str = "/etc/kubernetes/audit-policy";
const WEBHOOK_DIR: &str = "/etc/kubernetes/webhooks";
/// The kubeconfig kube-apiserver reaches k8s-keystone-auth with (host network, port 8443).
const KEYSTONE_WEBHOOK: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: keystone\n  cluster:\n    insecure-skip-tls-verify: true\n    server: https://127.0.0.1:8443/webhook\nusers:\n- name: keystone\ncontexts:\n- name: keystone\n  context: {cluster: keystone, user: keystone}\ncurrent-context: keystone\n";

fn shared_meta(name: &str, namespace: &str) -> Value {
    json!({"name": name, "namespace": namespace, "labels": {"magnum.openstack.org/driver": "k8s_capi"}})
}

fn template_ref(kind: Kind, name: &str) -> Value {
    json!({"apiVersion": kind.api_version(), "kind": kind.name(), "name": name})
}

fn var(name: &str, required: bool, schema: Value) -> Value {
    json!({"name": name, "required": required, "schema": {"openAPIV3Schema": schema}})
}

fn string(default: &str) -> Value {
    json!({"type": "string", "default": default})
}

fn boolean(default: bool) -> Value {
    json!({"type": "boolean", "default": default})
}

fn size(default: i64) -> Value {
    json!({"type": "integer", "minimum": 0, "default": default})
}

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}, "default": []})
}

fn volume() -> Value {
    json!({"type": "object", "default": {},
           "properties": {"size": size(0), "type": string(""), "availabilityZone": string("")}})
}

fn from_var(op: &str, path: &str, variable: &str) -> Value {
    json!({"op": op, "path": path, "valueFrom": {"variable": variable}})
}

fn from_template(op: &str, path: &str, template: &str) -> Value {
    json!({"op": op, "path": path, "valueFrom": {"template": template}})
}

/// An `extraArgs` entry (v1beta2: a name/value list) appended from a text expression.
fn add_arg(path: &str, name: &str, expr: &str) -> Value {
    let t = [
        "{\"name\": \"",
        name,
        "\", \"value\": {{ ",
        expr,
        " | toJson }}}",
    ]
    .concat();
    from_template("add", &format!("{path}/-"), &t)
}

fn add_fixed_arg(path: &str, name: &str, value: &str) -> Value {
    json!({"op": "add", "path": format!("{path}/-"), "value": {"name": name, "value": value}})
}

fn selector(kind: Kind, matches: Value) -> Value {
    json!({"apiVersion": kind.api_version(), "kind": kind.name(), "matchResources": matches})
}

fn definition(selector: &Value, patches: Vec<Value>) -> Value {
    json!({"selector": selector, "jsonPatches": patches})
}

fn patch(name: &str, enabled_if: Option<&str>, definitions: Vec<Value>) -> Value {
    let mut p = json!({"name": name, "definitions": definitions});
    if let Some(e) = enabled_if {
        p["enabledIf"] = json!(e);
    }
    p
}

/// A YAML list item holding one JSON object (JSON is YAML), on its own line.
fn item(v: &Value) -> String {
    format!("\n- {v}")
}

/// `{{- if COND }}` + body + `{{- end }}`.
fn when(cond: &str, body: &str) -> String {
    ["{{- if ", cond, " }}", body, "{{- end }}"].concat()
}

/// A volume's `storage` for `additionalBlockDevices`: type always, zone when given.
fn block_device(name: &str, v: &str) -> String {
    [
        "\n- {\"name\": \"",
        name,
        "\", \"sizeGiB\": {{ ",
        v,
        ".size }}, \"storage\": {\"type\": \"Volume\", \"volume\": {\"type\": {{ ",
        v,
        ".type | toJson }}{{ if ",
        v,
        ".availabilityZone }}, \"availabilityZone\": {\"name\": {{ ",
        v,
        ".availabilityZone | toJson }}}{{ end }}}}}",
    ]
    .concat()
}

/// The root volume, or null (pruned, as the API server prunes nulls) when no size is set.
const ROOT_VOLUME: &str = "{{ if .bootVolume.size }}{\"sizeGiB\": {{ .bootVolume.size }}, \"type\": {{ .bootVolume.type | toJson }}{{ if .bootVolume.availabilityZone }}, \"availabilityZone\": {\"name\": {{ .bootVolume.availabilityZone | toJson }}}{{ end }}}{{ else }}null{{ end }}";

/// Disks: the etcd volume, then the container runtime's. CAPO attaches them in list order,
/// so on the virtio bus they are the next disks after the root disk.
fn disk_setup(etcd: bool) -> (String, String) {
    let part =
        |dev: &str| json!({"device": dev, "layout": true, "overwrite": false, "tableType": "gpt"});
    let fs = |dev: &str, label: &str| json!({"device": format!("{dev}1"), "filesystem": "ext4", "label": label});
    let runtime_dev = if etcd {
        "{{ if .etcdVolume.size }}/dev/vdc{{ else }}/dev/vdb{{ end }}"
    } else {
        "/dev/vdb"
    };
    let mut parts = String::new();
    let mut fss = String::new();
    let mut mounts = String::new();
    if etcd {
        parts += &when(".etcdVolume.size", &item(&part("/dev/vdb")));
        fss += &when(".etcdVolume.size", &item(&fs("/dev/vdb", "etcd_disk")));
        mounts += &when(
            ".etcdVolume.size",
            &item(&json!(["LABEL=etcd_disk", "/var/lib/etcd"])),
        );
    }
    parts += &when(".runtimeVolume.size", &item(&part(runtime_dev)));
    fss += &when(
        ".runtimeVolume.size",
        &item(&fs(runtime_dev, "runtime_disk")),
    );
    mounts += &when(
        ".runtimeVolume.size",
        &item(&json!(["LABEL=runtime_disk", "/var/lib/containerd"])),
    );
    let setup = [
        "partitions:\n",
        &indent(&parts),
        "\nfilesystems:\n",
        &indent(&fss),
    ]
    .concat();
    (setup, mounts)
}

/// Indents a template's list items by two spaces (a nested YAML list).
fn indent(t: &str) -> String {
    t.replace("\n- ", "\n  - ")
}

fn api_server_patches(kcpt: &Value) -> Vec<Value> {
    let audit_volumes = [
        item(&json!({"name": "audit-policy", "hostPath": AUDIT_POLICY_DIR, "mountPath": AUDIT_POLICY_DIR, "readOnly": true, "pathType": "DirectoryOrCreate"})),
        item(&json!({"name": "audit-logs", "hostPath": "/var/log/kubernetes/audit", "mountPath": "/var/log/audit", "pathType": "DirectoryOrCreate"})),
    ]
    .concat();
    let webhook_volume = item(
        &json!({"name": "webhooks", "hostPath": WEBHOOK_DIR, "mountPath": WEBHOOK_DIR, "readOnly": true, "pathType": "DirectoryOrCreate"}),
    );
    let audit_file = item(
        &json!({"path": format!("{AUDIT_POLICY_DIR}/policy.yaml"), "owner": "root:root", "permissions": "0600", "content": AUDIT_POLICY}),
    );
    let webhook_file = item(
        &json!({"path": format!("{WEBHOOK_DIR}/webhook.yaml"), "owner": "root:root", "permissions": "0600", "content": KEYSTONE_WEBHOOK}),
    );
    let webhook = format!("{WEBHOOK_DIR}/webhook.yaml");
    vec![
        patch(
            "admissionPlugins",
            None,
            // Entry 1 of the class's list is enable-admission-plugins.
            vec![definition(
                kcpt,
                vec![from_var(
                    "replace",
                    &format!("{API}/extraArgs/1/value"),
                    "admissionPlugins",
                )],
            )],
        ),
        patch(
            "apiServerCertSANs",
            Some("{{ if .apiServerCertSANs }}true{{ end }}"),
            vec![definition(
                kcpt,
                vec![from_var(
                    "add",
                    &format!("{API}/certSANs"),
                    "apiServerCertSANs",
                )],
            )],
        ),
        patch(
            "apiServerTLSCipherSuites",
            Some("{{ if .apiServerTLSCipherSuites }}true{{ end }}"),
            vec![definition(
                kcpt,
                vec![add_arg(
                    &format!("{API}/extraArgs"),
                    "tls-cipher-suites",
                    ".apiServerTLSCipherSuites",
                )],
            )],
        ),
        patch(
            "auditLog",
            Some("{{ if .auditLog.enabled }}true{{ end }}"),
            vec![definition(
                kcpt,
                vec![
                    add_fixed_arg(
                        &format!("{API}/extraArgs"),
                        "audit-log-path",
                        "/var/log/audit/kube-apiserver-audit.log",
                    ),
                    add_fixed_arg(
                        &format!("{API}/extraArgs"),
                        "audit-policy-file",
                        &format!("{AUDIT_POLICY_DIR}/policy.yaml"),
                    ),
                    add_arg(
                        &format!("{API}/extraArgs"),
                        "audit-log-maxage",
                        ".auditLog.maxAge | toString",
                    ),
                    add_arg(
                        &format!("{API}/extraArgs"),
                        "audit-log-maxbackup",
                        ".auditLog.maxBackup | toString",
                    ),
                    add_arg(
                        &format!("{API}/extraArgs"),
                        "audit-log-maxsize",
                        ".auditLog.maxSize | toString",
                    ),
                ],
            )],
        ),
        patch(
            "oidc",
            Some("{{ if .oidc.issuerURL }}true{{ end }}"),
            vec![definition(
                kcpt,
                [
                    ("oidc-issuer-url", ".oidc.issuerURL"),
                    ("oidc-client-id", ".oidc.clientID"),
                    ("oidc-username-claim", ".oidc.usernameClaim"),
                    ("oidc-username-prefix", ".oidc.usernamePrefix"),
                    ("oidc-groups-claim", ".oidc.groupsClaim"),
                    ("oidc-groups-prefix", ".oidc.groupsPrefix"),
                ]
                .iter()
                .map(|(n, e)| add_arg(&format!("{API}/extraArgs"), n, e))
                .collect(),
            )],
        ),
        patch(
            "keystoneAuth",
            Some("{{ if .keystoneAuth }}true{{ end }}"),
            vec![definition(
                kcpt,
                vec![
                    add_fixed_arg(
                        &format!("{API}/extraArgs"),
                        "authentication-token-webhook-config-file",
                        &webhook,
                    ),
                    add_fixed_arg(
                        &format!("{API}/extraArgs"),
                        "authorization-webhook-config-file",
                        &webhook,
                    ),
                    add_fixed_arg(
                        &format!("{API}/extraArgs"),
                        "authorization-mode",
                        "Node,RBAC,Webhook",
                    ),
                ],
            )],
        ),
        // Files and host volumes of the audit log and keystone auth, written whole.
        patch(
            "apiServerFiles",
            Some("{{ if or .auditLog.enabled .keystoneAuth }}true{{ end }}"),
            vec![definition(
                kcpt,
                vec![
                    from_template(
                        "add",
                        &format!("{API}/extraVolumes"),
                        &[
                            when(".auditLog.enabled", &audit_volumes),
                            when(".keystoneAuth", &webhook_volume),
                        ]
                        .concat(),
                    ),
                    from_template(
                        "add",
                        &format!("{KCS}/files"),
                        &[
                            when(".auditLog.enabled", &audit_file),
                            when(".keystoneAuth", &webhook_file),
                        ]
                        .concat(),
                    ),
                ],
            )],
        ),
    ]
}

/// The ClusterClass's variables: each with its schema and default (CAPI fills a missing
/// variable from its default, and refuses a Cluster whose values break the schema).
fn variables() -> Vec<Value> {
    vec![
        var(
            "identityRef",
            true,
            json!({"type": "object", "required": ["name", "cloudName"],
                   "properties": {"type": {"type": "string", "enum": ["Secret", "ClusterIdentity"], "default": "Secret"},
                                  "name": {"type": "string"}, "cloudName": {"type": "string"}}}),
        ),
        var(
            "image",
            true,
            json!({"type": "object",
                   "properties": {"id": {"type": "string"},
                                  "filter": {"type": "object", "properties": {"name": {"type": "string"}}}}}),
        ),
        var("flavor", true, json!({"type": "string"})),
        var("controlPlaneFlavor", true, json!({"type": "string"})),
        var("sshKeyName", false, string("")),
        var(
            "externalNetwork",
            false,
            json!({"type": "object", "default": {},
                   "properties": {"id": {"type": "string"},
                                  "filter": {"type": "object", "properties": {"name": {"type": "string"}}}}}),
        ),
        var("nodeCidr", true, string("10.0.0.0/24")),
        var("apiServerLoadBalancer", true, boolean(true)),
        var(
            "dnsNameservers",
            true,
            json!({"type": "array", "items": {"type": "string"}}),
        ),
        var(
            "admissionPlugins",
            false,
            json!({"type": "string", "minLength": 1, "default": "NodeRestriction"}),
        ),
        var("apiServerCertSANs", false, strings()),
        var("apiServerTLSCipherSuites", false, string(API_CIPHERS)),
        var("kubeletTLSCipherSuites", false, string(KUBELET_CIPHERS)),
        var(
            "auditLog",
            false,
            json!({"type": "object", "default": {},
                   "properties": {"enabled": boolean(false), "maxAge": size(30), "maxBackup": size(10), "maxSize": size(100)}}),
        ),
        var(
            "oidc",
            false,
            json!({"type": "object", "default": {},
                   "properties": {"issuerURL": string(""), "clientID": string(""), "usernameClaim": string("sub"),
                                  "usernamePrefix": string("-"), "groupsClaim": string(""), "groupsPrefix": string("")}}),
        ),
        var("keystoneAuth", false, boolean(true)),
        var("imageRepository", false, string("")),
        // A registry path only: it is written into a node's boot command.
        var(
            "sandboxImage",
            false,
            json!({"type": "string", "default": "", "pattern": "^[A-Za-z0-9./:_-]*$"}),
        ),
        var("etcdVolume", false, volume()),
        var("runtimeVolume", false, volume()),
        var("bootVolume", false, volume()),
        var("differentFailureDomain", false, boolean(false)),
        // The Nova server group of the control plane (global) or of a nodegroup (its
        // override); empty: none (clusters made before server groups keep their machines).
        var("serverGroupID", false, string("")),
        var("controlPlaneAvailabilityZones", false, strings()),
        var("apiServerFloatingIP", false, string("")),
        var("disableAPIServerFloatingIP", false, boolean(false)),
        var(
            "apiServerLoadBalancerOptions",
            false,
            json!({"type": "object", "default": {},
                   "properties": {"provider": string(""), "flavor": string(""), "availabilityZone": string(""),
                                  "allowedCIDRs": strings()}}),
        ),
        var("extraNetworks", false, strings()),
        // A nodegroup's node_labels (as the kubelet's `k=v,...`) and node_taints (1.14).
        var("nodeLabels", false, string("")),
        var(
            "nodeTaints",
            false,
            json!({"type": "array", "default": [],
                   "items": {"type": "object", "required": ["key", "effect"],
                             "properties": {"key": {"type": "string", "minLength": 1},
                                            "value": {"type": "string"},
                                            "effect": {"type": "string",
                                                       "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}}}}),
        ),
    ]
}

fn patches() -> Vec<Value> {
    let osct = selector(
        Kind::OpenStackClusterTemplate,
        json!({"infrastructureCluster": true}),
    );
    let kcpt = selector(
        Kind::KubeadmControlPlaneTemplate,
        json!({"controlPlane": true}),
    );
    let cp_osmt = selector(
        Kind::OpenStackMachineTemplate,
        json!({"controlPlane": true}),
    );
    let workers = json!({"machineDeploymentClass": {"names": [WORKER_CLASS]}});
    let w_osmt = selector(Kind::OpenStackMachineTemplate, workers.clone());
    let kct = selector(Kind::KubeadmConfigTemplate, workers);
    let machine = |flavor: &str| {
        vec![
            from_var("add", &format!("{SPEC}/image"), "image"),
            from_var("add", &format!("{SPEC}/sshKeyName"), "sshKeyName"),
            from_var("add", &format!("{SPEC}/identityRef"), "identityRef"),
            from_var("add", &format!("{SPEC}/flavor"), flavor),
            from_template(
                "add",
                &format!("{SPEC}/schedulerHintAdditionalProperties"),
                "[{\"name\": \"different_failure_domain\", \"value\": {\"type\": \"Bool\", \"bool\": {{ .differentFailureDomain }}}}]",
            ),
        ]
    };
    let server_group = from_template(
        "add",
        &format!("{SPEC}/serverGroup"),
        "{\"id\": {{ .serverGroupID | toJson }}}",
    );
    let (cp_disks, cp_mounts) = disk_setup(true);
    let (w_disks, w_mounts) = disk_setup(false);
    let kubelet_arg = |path: &str| add_arg(path, "tls-cipher-suites", ".kubeletTLSCipherSuites");
    let lb = |field: &str| {
        patch(
            &format!("apiServerLoadBalancer-{field}"),
            Some(&format!(
                "{{{{ if .apiServerLoadBalancerOptions.{field} }}}}true{{{{ end }}}}"
            )),
            vec![definition(
                &osct,
                vec![from_var(
                    "add",
                    &format!("{SPEC}/apiServerLoadBalancer/{field}"),
                    &format!("apiServerLoadBalancerOptions.{field}"),
                )],
            )],
        )
    };
    let osct_var = |name: &str, field: &str| {
        patch(
            name,
            Some(&format!("{{{{ if .{name} }}}}true{{{{ end }}}}")),
            vec![definition(
                &osct,
                vec![from_var("add", &format!("{SPEC}/{field}"), name)],
            )],
        )
    };
    let mut out = vec![
        patch(
            "cluster",
            None,
            vec![definition(
                &osct,
                vec![
                    from_var("add", &format!("{SPEC}/identityRef"), "identityRef"),
                    from_var(
                        "add",
                        &format!("{SPEC}/apiServerLoadBalancer/enabled"),
                        "apiServerLoadBalancer",
                    ),
                    from_var("add", &format!("{SPEC}/managedSubnets/0/cidr"), "nodeCidr"),
                    from_var(
                        "add",
                        &format!("{SPEC}/managedSubnets/0/dnsNameservers"),
                        "dnsNameservers",
                    ),
                ],
            )],
        ),
        patch(
            "externalNetwork",
            Some("{{ if .externalNetwork }}true{{ end }}"),
            vec![definition(
                &osct,
                vec![from_var(
                    "add",
                    &format!("{SPEC}/externalNetwork"),
                    "externalNetwork",
                )],
            )],
        ),
        osct_var(
            "controlPlaneAvailabilityZones",
            "controlPlaneAvailabilityZones",
        ),
        osct_var("apiServerFloatingIP", "apiServerFloatingIP"),
        osct_var("disableAPIServerFloatingIP", "disableAPIServerFloatingIP"),
        lb("provider"),
        lb("flavor"),
        lb("availabilityZone"),
        lb("allowedCIDRs"),
        patch(
            "controlPlaneMachines",
            None,
            vec![definition(&cp_osmt, machine("controlPlaneFlavor"))],
        ),
        patch(
            "workerMachines",
            None,
            vec![definition(&w_osmt, machine("flavor"))],
        ),
        // The control plane's boot volume is global; a nodegroup's is its override, which
        // enabledIf (global variables only) cannot see, so the worker template decides.
        patch(
            "controlPlaneBootVolume",
            Some("{{ if .bootVolume.size }}true{{ end }}"),
            vec![definition(
                &cp_osmt,
                vec![from_template(
                    "add",
                    &format!("{SPEC}/rootVolume"),
                    ROOT_VOLUME,
                )],
            )],
        ),
        // node_labels and node_taints are nodegroup overrides, which enabledIf cannot see:
        // always written (no labels and no taints are the kubelet's and kubeadm's defaults).
        patch(
            "nodeRegistration",
            None,
            vec![definition(
                &kct,
                vec![
                    add_arg(
                        &format!("{SPEC}/joinConfiguration/nodeRegistration/kubeletExtraArgs"),
                        "node-labels",
                        ".nodeLabels",
                    ),
                    from_var(
                        "add",
                        &format!("{SPEC}/joinConfiguration/nodeRegistration/taints"),
                        "nodeTaints",
                    ),
                ],
            )],
        ),
        // Every nodegroup of a cluster with a control-plane group has its own (the driver
        // sees to it), so the global value can enable the workers' patch too.
        patch(
            "serverGroup",
            Some("{{ if .serverGroupID }}true{{ end }}"),
            vec![
                definition(&cp_osmt, vec![server_group.clone()]),
                definition(&w_osmt, vec![server_group]),
            ],
        ),
        patch(
            "workerBootVolume",
            None,
            vec![definition(
                &w_osmt,
                vec![from_template(
                    "add",
                    &format!("{SPEC}/rootVolume"),
                    ROOT_VOLUME,
                )],
            )],
        ),
        patch(
            "extraNetworks",
            Some("{{ if .extraNetworks }}true{{ end }}"),
            vec![definition(
                &w_osmt,
                vec![from_template(
                    "add",
                    &format!("{SPEC}/ports"),
                    "\n- {}{{- range .extraNetworks }}\n- {\"network\": {\"filter\": {\"name\": {{ . | toJson }}}}}{{- end }}",
                )],
            )],
        ),
        patch(
            "kubeletTLSCipherSuites",
            Some("{{ if .kubeletTLSCipherSuites }}true{{ end }}"),
            vec![
                definition(
                    &kcpt,
                    vec![
                        kubelet_arg(&format!(
                            "{KCS}/initConfiguration/nodeRegistration/kubeletExtraArgs"
                        )),
                        kubelet_arg(&format!(
                            "{KCS}/joinConfiguration/nodeRegistration/kubeletExtraArgs"
                        )),
                    ],
                ),
                definition(
                    &kct,
                    vec![kubelet_arg(&format!(
                        "{SPEC}/joinConfiguration/nodeRegistration/kubeletExtraArgs"
                    ))],
                ),
            ],
        ),
        // Workers join with the cluster's own ClusterConfiguration: the control plane's
        // is the one that names the registry.
        patch(
            "imageRepository",
            Some("{{ if .imageRepository }}true{{ end }}"),
            vec![definition(
                &kcpt,
                vec![from_var(
                    "add",
                    &format!("{KCS}/clusterConfiguration/imageRepository"),
                    "imageRepository",
                )],
            )],
        ),
        patch(
            "controlPlaneDisks",
            Some("{{ if or .etcdVolume.size .runtimeVolume.size }}true{{ end }}"),
            vec![
                definition(
                    &cp_osmt,
                    vec![from_template(
                        "add",
                        &format!("{SPEC}/additionalBlockDevices"),
                        &[
                            when(".etcdVolume.size", &block_device("etcd", ".etcdVolume")),
                            when(
                                ".runtimeVolume.size",
                                &block_device("runtime", ".runtimeVolume"),
                            ),
                        ]
                        .concat(),
                    )],
                ),
                definition(
                    &kcpt,
                    vec![
                        from_template("add", &format!("{KCS}/diskSetup"), &cp_disks),
                        from_template("add", &format!("{KCS}/mounts"), &cp_mounts),
                    ],
                ),
            ],
        ),
        patch(
            "workerDisks",
            Some("{{ if .runtimeVolume.size }}true{{ end }}"),
            vec![
                definition(
                    &w_osmt,
                    vec![from_template(
                        "add",
                        &format!("{SPEC}/additionalBlockDevices"),
                        &block_device("runtime", ".runtimeVolume"),
                    )],
                ),
                definition(
                    &kct,
                    vec![
                        from_template("add", &format!("{SPEC}/diskSetup"), &w_disks),
                        from_template("add", &format!("{SPEC}/mounts"), &w_mounts),
                    ],
                ),
            ],
        ),
    ];
    // containerd pulls its sandbox (pause) image itself, past kubeadm's imageRepository:
    // with a mirror, each node's containerd is pointed at the mirror's before kubeadm runs
    // (`sandbox_image` in containerd 1.x's config, `sandbox` in 2.x's).
    let sandbox = concat!(
        "\n- \"sed -i -E 's#^([[:space:]]*sandbox(_image)?[[:space:]]*=[[:space:]]*).*#",
        "\\\\1\\\"{{ .sandboxImage }}\\\"#' /etc/containerd/config.toml\"",
        "\n- systemctl restart containerd"
    );
    out.push(patch(
        "sandboxImage",
        Some("{{ if .sandboxImage }}true{{ end }}"),
        vec![
            definition(
                &kcpt,
                vec![from_template(
                    "add",
                    &format!("{KCS}/preKubeadmCommands"),
                    sandbox,
                )],
            ),
            definition(
                &kct,
                vec![from_template(
                    "add",
                    &format!("{SPEC}/preKubeadmCommands"),
                    sandbox,
                )],
            ),
        ],
    ));
    out.extend(api_server_patches(&kcpt));
    out
}

/// Machine health checks of the class (used when a topology enables them): a node not
/// Ready for five minutes is replaced, unless more than 80 % are (magnum-cluster-api's).
fn health_check() -> Value {
    json!({
        "checks": {"unhealthyNodeConditions": [
            {"type": "Ready", "status": "Unknown", "timeoutSeconds": 300},
            {"type": "Ready", "status": "False", "timeoutSeconds": 300},
        ]},
        "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": "80%"}},
    })
}

fn kubelet_args() -> Value {
    json!([
        {"name": "cloud-provider", "value": "external"},
        {"name": "provider-id", "value": "openstack:///{{ instance_id }}"},
    ])
}

/// The ClusterClass and its four templates, shared by every cluster of this driver version
/// (applied again, idempotently, on every create and upgrade).
pub fn cluster_class(namespace: &str) -> Vec<Value> {
    let cp_machine = format!("{CLASS}-control-plane");
    let worker_machine = format!("{CLASS}-worker");
    let machine = |name: &str| {
        json!({
            "apiVersion": Kind::OpenStackMachineTemplate.api_version(),
            "kind": "OpenStackMachineTemplate",
            "metadata": shared_meta(name, namespace),
            "spec": {"template": {"spec": {"flavor": "placeholder", "image": {"filter": {"name": "placeholder"}}}}},
        })
    };
    vec![
        json!({
            "apiVersion": Kind::OpenStackClusterTemplate.api_version(),
            "kind": "OpenStackClusterTemplate",
            "metadata": shared_meta(CLASS, namespace),
            "spec": {"template": {"spec": {
                "managedSecurityGroups": {"allowAllInClusterTraffic": true},
                "managedSubnets": [{"cidr": "10.0.0.0/24"}],
                "apiServerLoadBalancer": {"enabled": false},
                "identityRef": {"type": "Secret", "name": "placeholder", "cloudName": "default"},
            }}},
        }),
        machine(&cp_machine),
        machine(&worker_machine),
        json!({
            "apiVersion": Kind::KubeadmControlPlaneTemplate.api_version(),
            "kind": "KubeadmControlPlaneTemplate",
            "metadata": shared_meta(CLASS, namespace),
            "spec": {"template": {"spec": {"kubeadmConfigSpec": {
                "clusterConfiguration": {"apiServer": {"extraArgs": [
                    {"name": "cloud-provider", "value": "external"},
                    {"name": "enable-admission-plugins", "value": "NodeRestriction"},
                ]}},
                "initConfiguration": {"nodeRegistration": {"name": "{{ local_hostname }}", "kubeletExtraArgs": kubelet_args()}},
                "joinConfiguration": {"nodeRegistration": {"name": "{{ local_hostname }}", "kubeletExtraArgs": kubelet_args()}},
            }}}},
        }),
        json!({
            "apiVersion": Kind::KubeadmConfigTemplate.api_version(),
            "kind": "KubeadmConfigTemplate",
            "metadata": shared_meta(CLASS, namespace),
            "spec": {"template": {"spec": {
                "joinConfiguration": {"nodeRegistration": {"name": "{{ local_hostname }}", "kubeletExtraArgs": kubelet_args()}},
            }}},
        }),
        json!({
            "apiVersion": Kind::ClusterClass.api_version(),
            "kind": "ClusterClass",
            "metadata": shared_meta(CLASS, namespace),
            "spec": {
                "infrastructure": {"templateRef": template_ref(Kind::OpenStackClusterTemplate, CLASS)},
                "controlPlane": {
                    "templateRef": template_ref(Kind::KubeadmControlPlaneTemplate, CLASS),
                    "machineInfrastructure": {"templateRef": template_ref(Kind::OpenStackMachineTemplate, &cp_machine)},
                    "healthCheck": health_check(),
                },
                "workers": {"machineDeployments": [{
                    "class": WORKER_CLASS,
                    "bootstrap": {"templateRef": template_ref(Kind::KubeadmConfigTemplate, CLASS)},
                    "infrastructure": {"templateRef": template_ref(Kind::OpenStackMachineTemplate, &worker_machine)},
                    "healthCheck": health_check(),
                }]},
                "variables": variables(),
                "patches": patches(),
            },
        }),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_patch_reads_declared_variables_and_every_variable_has_a_default_or_is_required() {
        let objs = cluster_class("ns");
        let cc = &objs[5];
        let vars = cc["spec"]["variables"].as_array().unwrap();
        let names: Vec<&str> = vars.iter().map(|v| v["name"].as_str().unwrap()).collect();
        for v in vars {
            let s = &v["schema"]["openAPIV3Schema"];
            assert!(
                v["required"] == true || !s["default"].is_null(),
                "{} has neither",
                v["name"]
            );
        }
        for p in cc["spec"]["patches"].as_array().unwrap() {
            for d in p["definitions"].as_array().unwrap() {
                for jp in d["jsonPatches"].as_array().unwrap() {
                    if let Some(v) = jp["valueFrom"]["variable"].as_str() {
                        let root = v.split('.').next().unwrap();
                        assert!(names.contains(&root), "{v} in {}", p["name"]);
                    }
                    let path = jp["path"].as_str().unwrap();
                    assert!(path.starts_with("/spec/template/spec/"), "{path}");
                }
            }
        }
        // Each template the patches select exists in the class.
        let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        for k in [
            "OpenStackClusterTemplate",
            "OpenStackMachineTemplate",
            "KubeadmControlPlaneTemplate",
            "KubeadmConfigTemplate",
        ] {
            assert!(kinds.contains(&k));
        }
    }
}

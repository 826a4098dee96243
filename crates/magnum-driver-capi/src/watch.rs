//! Status from watches: one watch per kind the status engine reads keeps a slim copy of the
//! management cluster's objects, and every change the engine can see wakes the status sync
//! for its Magnum cluster, so a condition reaches the API within one event instead of at the
//! next poll (magnum-cluster-api polls, and lags a minute, #57). A poll then reads the
//! copies: no request to the management cluster per cluster and sweep, so a slow management
//! cluster delays no status that its watches already delivered.
//!
//! The copies keep only what [`crate::status`], [`crate::health`] and [`crate::addons`] read
//! (see [`slim`]), indexed by the CAPI cluster they belong to: a management cluster with
//! thousands of clusters holds tens of thousands of objects whose managed fields, addresses
//! and specs would otherwise be kept whole, and a poll would scan them all.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use magnum_core::Result;
use serde_json::{Map, Value, json};
use tokio::sync::watch as signal;

use super::addons::{ADDON_LABEL, PROXY_NAME_LABEL};
use super::kube::{Kind, Management, to_value};
use super::render::{CAPI_CLUSTER_LABEL, UUID_LABEL};
use super::status::AUTOSCALER_MIN;
use magnum_driver::StatusWaker;

/// How long a poll waits for the first listing before asking the API server directly.
const READY_WAIT: Duration = Duration::from_secs(2);

/// The kinds every poll reads.
const CORE: [Kind; 5] = [
    Kind::Cluster,
    Kind::KubeadmControlPlane,
    Kind::MachineDeployment,
    Kind::Machine,
    Kind::OpenStackCluster,
];

/// CAAPH's kinds, watched when the driver delivers add-ons through it. A management cluster
/// without CAAPH never lists them: polls then ask the API server, which says so.
const ADDONS: [Kind; 2] = [Kind::HelmChartProxy, Kind::HelmReleaseProxy];

/// The labels the readers look at; every other label is dropped from the copies.
const KEPT_LABELS: [&str; 6] = [
    UUID_LABEL,
    CAPI_CLUSTER_LABEL,
    "cluster.x-k8s.io/deployment-name",
    "topology.cluster.x-k8s.io/deployment-name",
    PROXY_NAME_LABEL,
    ADDON_LABEL,
];

/// The autoscaler's min/max annotations share this prefix; no other annotation is kept.
fn kept_annotation(key: &str) -> bool {
    let prefix = AUTOSCALER_MIN.trim_end_matches("min-size");
    key.starts_with(prefix)
}

/// The objects of one Magnum cluster.
#[derive(Debug, Default)]
pub struct Objects {
    pub cluster: Option<Value>,
    pub control_plane: Option<Value>,
    pub machine_deployments: Vec<Value>,
    pub machines: Vec<Value>,
    pub openstack_cluster: Option<Value>,
}

/// The copy of `obj` the readers need: its kind, name, generation, deletion mark, the kept
/// labels and annotations; of its spec the replicas, versions and control plane endpoint; of
/// its status the scalars (counters, phase, failure reason and message, CAAPH's release
/// status), the conditions (without their timestamps), the node's name and the same of the
/// v1beta1 status kept beside a v1beta2 one. Addresses, node info, network and load
/// balancer details, managed fields and the rest of the spec are dropped.
pub fn slim(obj: &Value) -> Value {
    let mut out = Map::new();
    for k in ["apiVersion", "kind"] {
        if let Some(v) = obj.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    let meta = &obj["metadata"];
    let mut m = Map::new();
    for k in ["name", "generation", "deletionTimestamp"] {
        if let Some(v) = meta.get(k).filter(|v| !v.is_null()) {
            m.insert(k.into(), v.clone());
        }
    }
    let pick = |field: &str, keep: &dyn Fn(&str) -> bool| -> Option<Value> {
        let kept: Map<String, Value> = meta
            .get(field)?
            .as_object()?
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (!kept.is_empty()).then_some(Value::Object(kept))
    };
    if let Some(labels) = pick("labels", &|k| KEPT_LABELS.contains(&k)) {
        m.insert("labels".into(), labels);
    }
    if let Some(annotations) = pick("annotations", &kept_annotation) {
        m.insert("annotations".into(), annotations);
    }
    out.insert("metadata".into(), Value::Object(m));
    if let Some(spec) = obj.get("spec").and_then(Value::as_object) {
        let mut s = Map::new();
        for k in ["replicas", "version", "controlPlaneEndpoint"] {
            if let Some(v) = spec.get(k) {
                s.insert(k.into(), v.clone());
            }
        }
        if let Some(version) = spec.get("topology").and_then(|t| t.get("version")) {
            s.insert("topology".into(), json!({ "version": version }));
        }
        out.insert("spec".into(), Value::Object(s));
    }
    // Present or absent as on the object: a status-less object is read as not yet current.
    if let Some(status) = obj.get("status") {
        out.insert("status".into(), slim_status(status));
    }
    Value::Object(out)
}

fn slim_status(status: &Value) -> Value {
    let Some(fields) = status.as_object() else {
        return status.clone();
    };
    let mut out = Map::new();
    for (k, v) in fields {
        let kept = match (k.as_str(), v) {
            ("conditions", Value::Array(cs)) => Value::Array(
                cs.iter()
                    .map(|c| {
                        let mut kept = Map::new();
                        for f in ["type", "status", "reason", "message", "severity"] {
                            if let Some(v) = c.get(f) {
                                kept.insert(f.into(), v.clone());
                            }
                        }
                        Value::Object(kept)
                    })
                    .collect(),
            ),
            ("nodeRef", Value::Object(r)) => json!({ "name": r.get("name") }),
            ("deprecated", Value::Object(d)) => match d.get("v1beta1") {
                Some(v1) => json!({ "v1beta1": slim_status(v1) }),
                None => continue,
            },
            ("v1beta2", Value::Object(_)) => slim_status(v),
            (_, Value::Bool(_) | Value::Number(_) | Value::String(_)) => v.clone(),
            _ => continue,
        };
        out.insert(k.clone(), kept);
    }
    Value::Object(out)
}

/// The key a kind's copies are found by: a Cluster's own name, a HelmChartProxy's Magnum
/// cluster (it selects its cluster by that label), everything else its CAPI cluster's name.
fn key_of(kind: Kind, obj: &Value) -> Option<String> {
    let label = |k: &str| obj["metadata"]["labels"][k].as_str().map(str::to_owned);
    match kind {
        Kind::Cluster => obj["metadata"]["name"].as_str().map(str::to_owned),
        Kind::HelmChartProxy => label(UUID_LABEL),
        _ => label(CAPI_CLUSTER_LABEL),
    }
}

/// One kind's copies, by name, and the names under each key. Each copy is kept as compact
/// JSON text and parsed when read: a `serde_json::Value` of a Machine's copy takes about
/// 10 KB (a map and an allocation per key and condition field), its text under 1 KB, and a
/// poll parses only one cluster's objects (scripts/bench-capi at 2,000 clusters: 550 MiB of
/// RSS with Values).
#[derive(Default)]
struct Copies {
    objects: HashMap<String, (String, Box<str>)>,
    by_key: HashMap<String, BTreeSet<String>>,
}

/// A copy's text (a `Value` always serializes).
fn text_of(obj: &Value) -> Box<str> {
    serde_json::to_string(obj)
        .unwrap_or_default()
        .into_boxed_str()
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

impl Copies {
    /// Keeps `obj`; false when the copy it replaces was the same (nothing a reader sees
    /// changed).
    fn put(&mut self, key: String, name: String, text: Box<str>) -> bool {
        if let Some((old_key, old)) = self.objects.get(&name) {
            if *old_key == key && *old == text {
                return false;
            }
            if *old_key != key {
                let old_key = old_key.clone();
                self.unindex(&old_key, &name);
            }
        }
        self.by_key
            .entry(key.clone())
            .or_default()
            .insert(name.clone());
        self.objects.insert(name, (key, text));
        true
    }

    /// Whether the copy of `name` is `text`, under `key`.
    fn holds(&self, key: &str, name: &str, text: &str) -> bool {
        self.objects
            .get(name)
            .is_some_and(|(k, kept)| k == key && **kept == *text)
    }

    fn get(&self, name: &str) -> Option<Value> {
        self.objects.get(name).map(|(_, text)| parsed(text))
    }

    fn remove(&mut self, name: &str) {
        if let Some((key, _)) = self.objects.remove(name) {
            self.unindex(&key, name);
        }
    }

    fn unindex(&mut self, key: &str, name: &str) {
        if let Some(names) = self.by_key.get_mut(key) {
            names.remove(name);
            if names.is_empty() {
                self.by_key.remove(key);
            }
        }
    }

    fn of(&self, key: &str) -> Vec<Value> {
        self.by_key.get(key).map_or_else(Vec::new, |names| {
            names.iter().filter_map(|n| self.get(n)).collect()
        })
    }
}

/// A kind's copies and whether they hold a whole listing yet.
struct Watched {
    kind: Kind,
    /// Locked only to read or apply one event: never across an await.
    copies: RwLock<Copies>,
    ready: signal::Sender<bool>,
}

impl Watched {
    fn read<T>(&self, f: impl FnOnce(&Copies) -> T) -> T {
        f(&self.copies.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn write<T>(&self, f: impl FnOnce(&mut Copies) -> T) -> T {
        f(&mut self.copies.write().unwrap_or_else(PoisonError::into_inner))
    }

    fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    async fn wait_ready(&self) -> bool {
        let mut rx = self.ready.subscribe();
        tokio::time::timeout(READY_WAIT, rx.wait_for(|r| *r))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

pub struct Cache {
    mgmt: Management,
    kinds: Arc<Vec<Watched>>,
}

impl Cache {
    /// Starts one watch per kind on the runtime (CAAPH's kinds too with `addons`); they run
    /// (and re-list after errors, with backoff) for the life of the process.
    pub fn start(mgmt: &Management, waker: Option<Arc<dyn StatusWaker>>, addons: bool) -> Self {
        let kinds: Vec<Kind> = CORE
            .into_iter()
            .chain(addons.then_some(ADDONS).into_iter().flatten())
            .collect();
        let kinds = Arc::new(
            kinds
                .into_iter()
                .map(|kind| Watched {
                    kind,
                    copies: RwLock::default(),
                    ready: signal::channel(false).0,
                })
                .collect::<Vec<_>>(),
        );
        for i in 0..kinds.len() {
            let kinds = kinds.clone();
            let api = mgmt.api(kinds[i].kind);
            let waker = waker.clone();
            tokio::spawn(async move {
                let stream = watcher(api, watcher::Config::default()).default_backoff();
                futures::pin_mut!(stream);
                // The listing being read after a (re)start; the old copies serve until done.
                let mut listing: Option<Copies> = None;
                let this = &kinds[i];
                while let Some(event) = stream.next().await {
                    let changed = match event {
                        Ok(watcher::Event::Init) => {
                            listing = Some(Copies::default());
                            continue;
                        }
                        Ok(watcher::Event::InitApply(o)) => {
                            let o = slim(&to_value(o));
                            let (Some(list), Some(key), Some(name)) =
                                (listing.as_mut(), key_of(this.kind, &o), name_of(&o))
                            else {
                                continue;
                            };
                            // A re-list wakes only the clusters whose objects changed meanwhile.
                            let text = text_of(&o);
                            let known = this.read(|c| c.holds(&key, &name, &text));
                            list.put(key, name, text);
                            (!known).then_some(o)
                        }
                        Ok(watcher::Event::InitDone) => {
                            let gone = match listing.take() {
                                Some(list) => this.write(|c| {
                                    let old = std::mem::replace(c, list);
                                    old.objects
                                        .into_iter()
                                        .filter(|(name, _)| !c.objects.contains_key(name))
                                        .map(|(_, (_, text))| parsed(&text))
                                        .collect::<Vec<_>>()
                                }),
                                None => Vec::new(),
                            };
                            this.ready.send_replace(true);
                            // Deleted while the watch was down: their clusters look again.
                            if let Some(waker) = &waker {
                                for o in gone {
                                    if let Some(uuid) = uuid_of(this.kind, &o, &kinds) {
                                        waker.wake(&uuid);
                                    }
                                }
                            }
                            continue;
                        }
                        Ok(watcher::Event::Apply(o)) => {
                            let o = slim(&to_value(o));
                            match (key_of(this.kind, &o), name_of(&o)) {
                                (Some(key), Some(name)) => {
                                    this.write(|c| c.put(key, name, text_of(&o))).then_some(o)
                                }
                                _ => None,
                            }
                        }
                        Ok(watcher::Event::Delete(o)) => {
                            let o = slim(&to_value(o));
                            if let Some(name) = name_of(&o) {
                                this.write(|c| c.remove(&name));
                            }
                            Some(o)
                        }
                        Err(e) => {
                            tracing::warn!(kind = this.kind.name(), error = %e, "management cluster watch");
                            continue;
                        }
                    };
                    if let (Some(o), Some(waker)) = (changed, &waker)
                        && let Some(uuid) = uuid_of(this.kind, &o, &kinds)
                    {
                        waker.wake(&uuid);
                    }
                }
            });
        }
        Self {
            mgmt: mgmt.clone(),
            kinds,
        }
    }

    fn watched(&self, kind: Kind) -> Option<&Watched> {
        self.kinds.iter().find(|w| w.kind == kind)
    }

    /// What the management cluster shows for the CAPI cluster `stack_id`, from the watch
    /// copies once they hold a full listing, else straight from the API server.
    pub async fn snapshot(&self, stack_id: &str) -> Result<Objects> {
        let mut out = Objects::default();
        for kind in CORE {
            let copies = match self.watched(kind) {
                Some(w) if w.wait_ready().await => Some(w.read(|c| c.of(stack_id))),
                _ => None,
            };
            let items: Vec<Value> = match copies {
                Some(items) => items,
                None if kind == Kind::Cluster => self
                    .mgmt
                    .get(kind, stack_id)
                    .await?
                    .iter()
                    .map(slim)
                    .collect(),
                None => self
                    .mgmt
                    .list(kind, &format!("{CAPI_CLUSTER_LABEL}={stack_id}"))
                    .await?
                    .iter()
                    .map(slim)
                    .collect(),
            };
            match kind {
                Kind::Cluster => out.cluster = items.into_iter().next(),
                Kind::KubeadmControlPlane => out.control_plane = items.into_iter().next(),
                Kind::MachineDeployment => out.machine_deployments = items,
                Kind::Machine => out.machines = items,
                Kind::OpenStackCluster => out.openstack_cluster = items.into_iter().next(),
                _ => {}
            }
        }
        Ok(out)
    }

    /// The cluster's HelmChartProxies and its HelmReleaseProxies from the copies, when both
    /// kinds are watched and listed; `None` means ask the API server.
    pub fn addons(&self, uuid: &str, stack_id: &str) -> Option<(Vec<Value>, Vec<Value>)> {
        let proxies = self.watched(Kind::HelmChartProxy)?;
        let releases = self.watched(Kind::HelmReleaseProxy)?;
        if !(proxies.is_ready() && releases.is_ready()) {
            return None;
        }
        Some((
            proxies.read(|c| c.of(uuid)),
            releases.read(|c| c.of(stack_id)),
        ))
    }
}

fn name_of(o: &Value) -> Option<String> {
    o["metadata"]["name"].as_str().map(str::to_owned)
}

/// The Magnum cluster an object belongs to: its own `cluster-uuid` label, else its CAPI
/// Cluster's (from the Cluster copies).
fn uuid_of(kind: Kind, o: &Value, kinds: &[Watched]) -> Option<String> {
    if let Some(u) = o["metadata"]["labels"][UUID_LABEL].as_str() {
        return Some(u.to_owned());
    }
    let stack = key_of(kind, o)?;
    let clusters = kinds.iter().find(|w| w.kind == Kind::Cluster)?;
    let cluster = clusters.read(|c| c.get(&stack))?;
    cluster["metadata"]["labels"][UUID_LABEL]
        .as_str()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Value {
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {
                "name": "m1", "namespace": "magnum-system", "generation": 3,
                "resourceVersion": "42", "uid": "u",
                "labels": {CAPI_CLUSTER_LABEL: "kube-a", "cluster.x-k8s.io/deployment-name": "kube-a-md",
                           "cluster.x-k8s.io/set-name": "kube-a-ms"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}",
                                AUTOSCALER_MIN: "1",
                                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5"},
                "managedFields": [{"manager": "capi", "fieldsV1": {"f:spec": {}}}],
                "ownerReferences": [{"kind": "MachineSet", "name": "kube-a-ms"}]
            },
            "spec": {"version": "v1.33.1", "clusterName": "kube-a",
                     "bootstrap": {"dataSecretName": "s"}, "infrastructureRef": {"name": "o"}},
            "status": {
                "phase": "Running", "observedGeneration": 3,
                "nodeRef": {"name": "n1", "uid": "x"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.4"}],
                "nodeInfo": {"kernelVersion": "6.1", "osImage": "Ubuntu"},
                "conditions": [{"type": "NodeHealthy", "status": "False", "reason": "R",
                                "message": "M", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "deprecated": {"v1beta1": {"failureReason": "X", "failureMessage": "Y",
                                           "conditions": [{"type": "Ready", "status": "True",
                                                           "severity": ""}]}}
            }
        })
    }

    #[test]
    fn the_copy_keeps_what_the_readers_read_and_drops_the_rest() {
        let full = machine();
        let s = slim(&full);
        assert_eq!(
            s,
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                "metadata": {"name": "m1", "generation": 3,
                    "labels": {CAPI_CLUSTER_LABEL: "kube-a", "cluster.x-k8s.io/deployment-name": "kube-a-md"},
                    "annotations": {AUTOSCALER_MIN: "1",
                        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5"}},
                "spec": {"version": "v1.33.1"},
                "status": {
                    "phase": "Running", "observedGeneration": 3, "nodeRef": {"name": "n1"},
                    "conditions": [{"type": "NodeHealthy", "status": "False", "reason": "R", "message": "M"}],
                    "deprecated": {"v1beta1": {"failureReason": "X", "failureMessage": "Y",
                        "conditions": [{"type": "Ready", "status": "True", "severity": ""}]}}
                }
            })
        );
        assert!(
            serde_json::to_vec(&s).map_or(0, |b| b.len())
                < serde_json::to_vec(&full).map_or(0, |b| b.len())
        );
        // A status-less object stays status-less (read as not yet current).
        let mut fresh = machine();
        fresh.as_object_mut().map(|o| o.remove("status"));
        assert!(slim(&fresh).get("status").is_none());
    }

    #[test]
    fn copies_are_found_by_their_cluster_and_unchanged_copies_wake_nobody() {
        let mut c = Copies::default();
        let m = slim(&machine());
        assert!(c.put("kube-a".into(), "m1".into(), text_of(&m)));
        assert_eq!(
            c.of("kube-a"),
            std::slice::from_ref(&m),
            "read back as kept"
        );
        assert!(
            !c.put("kube-a".into(), "m1".into(), text_of(&m)),
            "same copy"
        );
        // What only the dropped fields change is no change.
        let mut touched = machine();
        touched["metadata"]["resourceVersion"] = json!("43");
        touched["status"]["conditions"][0]["lastTransitionTime"] = json!("2026-02-02T00:00:00Z");
        assert!(!c.put("kube-a".into(), "m1".into(), text_of(&slim(&touched))));
        let mut seen = machine();
        seen["status"]["conditions"][0]["message"] = json!("changed");
        assert!(c.put("kube-a".into(), "m1".into(), text_of(&slim(&seen))));
        assert_eq!(c.of("kube-a").len(), 1);
        // Moved to another cluster (a relabel): found only there.
        assert!(c.put("kube-b".into(), "m1".into(), text_of(&m)));
        assert!(c.of("kube-a").is_empty());
        assert_eq!(c.of("kube-b").len(), 1);
        c.remove("m1");
        assert!(c.of("kube-b").is_empty() && c.by_key.is_empty());
    }

    #[test]
    fn keys_follow_how_each_kind_names_its_cluster() {
        let m = slim(&machine());
        assert_eq!(key_of(Kind::Machine, &m).as_deref(), Some("kube-a"));
        let cluster = json!({"metadata": {"name": "kube-a", "labels": {UUID_LABEL: "u-1"}}});
        assert_eq!(key_of(Kind::Cluster, &cluster).as_deref(), Some("kube-a"));
        assert_eq!(
            key_of(Kind::HelmChartProxy, &cluster).as_deref(),
            Some("u-1")
        );
    }
}

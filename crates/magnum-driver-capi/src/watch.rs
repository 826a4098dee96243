//! Status from watches: one reflector per kind the status engine reads keeps a copy of the
//! management cluster's objects, and every change wakes the status sync for its Magnum
//! cluster, so a condition reaches the API within one event instead of at the next poll
//! (magnum-cluster-api polls, and lags a minute, #57). A poll then reads the copies: no
//! request to the management cluster per cluster and sweep.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use magnum_core::Result;
use serde_json::Value;

use super::kube::{Kind, Management, to_value};
use super::render::{CAPI_CLUSTER_LABEL, UUID_LABEL};
use magnum_driver::StatusWaker;

/// How long a poll waits for the first listing before asking the API server directly.
const READY_WAIT: Duration = Duration::from_secs(2);

const WATCHED: [Kind; 5] = [
    Kind::Cluster,
    Kind::KubeadmControlPlane,
    Kind::MachineDeployment,
    Kind::Machine,
    Kind::OpenStackCluster,
];

/// The objects of one Magnum cluster.
#[derive(Debug, Default)]
pub struct Objects {
    pub cluster: Option<Value>,
    pub control_plane: Option<Value>,
    pub machine_deployments: Vec<Value>,
    pub machines: Vec<Value>,
    pub openstack_cluster: Option<Value>,
}

pub struct Cache {
    mgmt: Management,
    stores: Vec<(Kind, Store<DynamicObject>)>,
}

fn label<'a>(o: &'a DynamicObject, key: &str) -> Option<&'a str> {
    o.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The CAPI cluster name an object belongs to.
fn stack_of(kind: Kind, o: &DynamicObject) -> Option<String> {
    if kind == Kind::Cluster {
        return o.metadata.name.clone();
    }
    label(o, CAPI_CLUSTER_LABEL).map(str::to_owned)
}

impl Cache {
    /// Starts one watch per kind on the runtime; they run (and re-list after errors, with
    /// backoff) for the life of the process.
    pub fn start(mgmt: &Management, waker: Option<Arc<dyn StatusWaker>>) -> Self {
        let mut stores = Vec::new();
        let mut cluster_store: Option<Store<DynamicObject>> = None;
        for kind in WATCHED {
            let writer = reflector::store::Writer::new(kind.resource());
            let reader = writer.as_reader();
            if kind == Kind::Cluster {
                cluster_store = Some(reader.clone());
            }
            stores.push((kind, reader));
            let api = mgmt.api(kind);
            let stream = reflector::reflector(
                writer,
                watcher(api, watcher::Config::default()).default_backoff(),
            );
            let waker = waker.clone();
            let clusters = cluster_store.clone();
            tokio::spawn(async move {
                futures::pin_mut!(stream);
                while let Some(event) = stream.next().await {
                    let objects: Vec<DynamicObject> = match event {
                        Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => vec![o],
                        Ok(watcher::Event::InitApply(o)) => vec![o],
                        Ok(_) => continue,
                        Err(e) => {
                            tracing::warn!(kind = kind.name(), error = %e, "management cluster watch");
                            continue;
                        }
                    };
                    let Some(waker) = &waker else { continue };
                    for o in objects {
                        if let Some(uuid) = uuid_of(kind, &o, clusters.as_ref()) {
                            waker.wake(&uuid);
                        }
                    }
                }
            });
        }
        Self {
            mgmt: mgmt.clone(),
            stores,
        }
    }

    /// What the management cluster shows for the CAPI cluster `stack_id`, from the watch
    /// copies once they hold a full listing, else straight from the API server.
    pub async fn snapshot(&self, stack_id: &str) -> Result<Objects> {
        let mut out = Objects::default();
        for (kind, store) in &self.stores {
            let ready = tokio::time::timeout(READY_WAIT, store.wait_until_ready())
                .await
                .is_ok_and(|r| r.is_ok());
            let items: Vec<Value> = if ready {
                store
                    .state_filter(|o| stack_of(*kind, o).as_deref() == Some(stack_id))
                    .into_iter()
                    .map(|o| to_value((*o).clone()))
                    .collect()
            } else if *kind == Kind::Cluster {
                self.mgmt.get(*kind, stack_id).await?.into_iter().collect()
            } else {
                self.mgmt
                    .list(*kind, &format!("{CAPI_CLUSTER_LABEL}={stack_id}"))
                    .await?
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
}

/// The Magnum cluster an object belongs to: its own `cluster-uuid` label, else its CAPI
/// Cluster's.
fn uuid_of(
    kind: Kind,
    o: &DynamicObject,
    clusters: Option<&Store<DynamicObject>>,
) -> Option<String> {
    if let Some(u) = label(o, UUID_LABEL) {
        return Some(u.to_owned());
    }
    let stack = stack_of(kind, o)?;
    let found = clusters?.find(|c| c.metadata.name.as_deref() == Some(stack.as_str()))?;
    label(&found, UUID_LABEL).map(str::to_owned)
}

//! Nova server groups for `server_group_policies`, as magnum-cluster-api names them:
//! `<stack_id>` for the control plane, `<stack_id>-<nodegroup>` for each nodegroup, made in the
//! cluster's project with its own application credential. CAPO puts each machine into its
//! template's group. After the create, the live Cluster says which groups its machines have:
//! Nova is asked only for a nodegroup that has none yet, and a Nova or Keystone outage can
//! never drop a group from a template (that would roll every machine). A cluster made before
//! the driver made groups gets none, for the same reason.

use magnum_core::Result;
use magnum_core::model::{Cluster, ClusterTemplate, Nodegroup, NodegroupRole};
use serde_json::Value;

use super::render::{ServerGroups, nodegroup_labels};
use super::{Source, deleting};

/// Nova takes one policy per group: the first the label names, else the label's default.
fn policy(ng: Option<&Nodegroup>, c: &Cluster, t: &ClusterTemplate) -> String {
    nodegroup_labels(ng, c, t)
        .list("server_group_policies")
        .first()
        .cloned()
        .unwrap_or_else(|| "soft-anti-affinity".to_owned())
}

fn worker_name(stack_id: &str, ng: &str) -> String {
    format!("{stack_id}-{ng}")
}

/// The `serverGroupID` in a topology variables list, when set.
fn variable(vars: &Value) -> Option<String> {
    vars.as_array()?
        .iter()
        .find(|v| v["name"] == "serverGroupID")?["value"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// The groups a live Cluster's machines have.
pub(crate) fn from_live(live: &Value) -> ServerGroups {
    let topology = &live["spec"]["topology"];
    let Some(control_plane) = variable(&topology["variables"]) else {
        return ServerGroups::default();
    };
    let workers = topology["workers"]["machineDeployments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|md| {
            let id = variable(&md["variables"]["overrides"])?;
            Some((md["name"].as_str()?.to_owned(), id))
        })
        .collect();
    ServerGroups {
        control_plane,
        workers,
    }
}

/// The groups of the cluster's machines: at the create (`live` none) all made, or found when
/// a create is retried; later the live Cluster's, plus one made for each nodegroup without.
pub(crate) async fn ensure(
    source: &dyn Source,
    live: Option<&Value>,
    cluster: &Cluster,
    template: &ClusterTemplate,
    ngs: &[Nodegroup],
    stack_id: &str,
) -> Result<ServerGroups> {
    let mut out = live.map(from_live).unwrap_or_default();
    if live.is_some() && out.control_plane.is_empty() {
        return Ok(out);
    }
    let workers: Vec<&Nodegroup> = ngs
        .iter()
        .filter(|n| n.role != NodegroupRole::Master && !deleting(n))
        .collect();
    out.workers
        .retain(|name, _| workers.iter().any(|n| n.name.as_str() == name));
    let missing: Vec<&Nodegroup> = workers
        .into_iter()
        .filter(|n| !out.workers.contains_key(n.name.as_str()))
        .collect();
    let mut wanted = Vec::new();
    if out.control_plane.is_empty() {
        wanted.push((stack_id.to_owned(), policy(None, cluster, template)));
    }
    for ng in &missing {
        let name = worker_name(stack_id, ng.name.as_str());
        wanted.push((name, policy(Some(ng), cluster, template)));
    }
    if wanted.is_empty() {
        return Ok(out);
    }
    let Some(ids) = source.ensure_server_groups(cluster, &wanted).await? else {
        return Ok(out);
    };
    let mut ids = ids.into_iter();
    if out.control_plane.is_empty() {
        out.control_plane = ids.next().unwrap_or_default();
    }
    for (ng, id) in missing.iter().zip(ids) {
        out.workers.insert(ng.name.to_string(), id);
    }
    Ok(out)
}

/// Deletes the groups of the cluster (`nodegroup`: of that nodegroup only).
pub(crate) async fn remove(
    source: &dyn Source,
    cluster: &Cluster,
    stack_id: &str,
    nodegroup: Option<&str>,
) -> Result<()> {
    let prefix = format!("{stack_id}-");
    let ours = |name: &str| match nodegroup {
        Some(ng) => name == worker_name(stack_id, ng),
        None => name == stack_id || name.starts_with(&prefix),
    };
    source.delete_server_groups(cluster, &ours).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Mutex;
    use std::sync::atomic::Ordering;

    use async_trait::async_trait;
    use magnum_core::status::ClusterStatus;
    use magnum_core::{Error, RequestContext};
    use serde_json::json;

    use super::*;
    use crate::LoadBalancer;
    use crate::render::tests::{cluster, nodegroup, template};
    use crate::render::{Cas, CloudConfig};

    /// Nova's groups of one project, in memory: (id, name, policy).
    #[derive(Default)]
    struct Nova {
        groups: Mutex<Vec<(String, String, String)>>,
        /// Every call fails, as when Nova or Keystone is away.
        down: std::sync::atomic::AtomicBool,
        /// Calls made (each one session).
        calls: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl Source for Nova {
        async fn template(&self, _: &Cluster) -> Result<ClusterTemplate> {
            Err(Error::Internal("not used".into()))
        }
        async fn nodegroups(&self, _: &Cluster) -> Result<Vec<Nodegroup>> {
            Ok(Vec::new())
        }
        async fn cas(&self, _: &RequestContext, _: &Cluster) -> Result<Cas> {
            Err(Error::Internal("not used".into()))
        }
        async fn cloud(&self, _: &Cluster) -> Result<Option<CloudConfig>> {
            Ok(None)
        }
        async fn load_balancers(&self, _: &Cluster) -> Result<Vec<LoadBalancer>> {
            Ok(Vec::new())
        }
        async fn delete_load_balancer(&self, _: &Cluster, _: &str) -> Result<()> {
            Ok(())
        }
        async fn ensure_server_groups(
            &self,
            _: &Cluster,
            wanted: &[(String, String)],
        ) -> Result<Option<Vec<String>>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if self.down.load(Ordering::SeqCst) {
                return Err(Error::ServiceUnavailable {
                    message: "Nova is away".into(),
                });
            }
            let mut groups = self.groups.lock().unwrap();
            let mut ids = Vec::new();
            for (name, policy) in wanted {
                let id = match groups.iter().find(|g| &g.1 == name) {
                    Some(g) => g.0.clone(),
                    None => {
                        let id = format!("g{}", groups.len() + 1);
                        groups.push((id.clone(), name.clone(), policy.clone()));
                        id
                    }
                };
                ids.push(id);
            }
            Ok(Some(ids))
        }
        async fn delete_server_groups(
            &self,
            _: &Cluster,
            ours: &(dyn for<'n> Fn(&'n str) -> bool + Sync),
        ) -> Result<()> {
            self.groups.lock().unwrap().retain(|g| !ours(&g.1));
            Ok(())
        }
    }

    impl Nova {
        fn named(&self) -> Vec<(String, String)> {
            let groups = self.groups.lock().unwrap();
            groups
                .iter()
                .map(|(_, n, p)| (n.clone(), p.clone()))
                .collect()
        }
    }

    #[tokio::test]
    async fn a_new_cluster_gets_one_group_per_nodegroup_and_an_old_one_none() {
        let nova = Nova::default();
        let mut c = cluster();
        c.labels =
            serde_json::from_value(json!({"server_group_policies": "anti-affinity,affinity"}))
                .unwrap();
        let t = template();
        let mut gpu = nodegroup("gpu", NodegroupRole::Worker, 1);
        gpu.labels =
            serde_json::from_value(json!({"server_group_policies": "soft-affinity"})).unwrap();
        let mut gone = nodegroup("old", NodegroupRole::Worker, 1);
        gone.status = Some(ClusterStatus::DeleteInProgress);
        let ngs = vec![
            nodegroup("default-master", NodegroupRole::Master, 1),
            nodegroup("default-worker", NodegroupRole::Worker, 2),
            gpu,
            gone,
        ];

        // A cluster made before server groups: nothing made, nothing named.
        let before =
            json!({"spec": {"topology": {"variables": [{"name": "kubeTag", "value": "v1"}]}}});
        let old = ensure(&nova, Some(&before), &c, &t, &ngs, "kube-old01")
            .await
            .unwrap();
        assert_eq!(old, ServerGroups::default());
        assert!(nova.named().is_empty());

        let made = ensure(&nova, None, &c, &t, &ngs, "kube-ab12c")
            .await
            .unwrap();
        assert_eq!(
            nova.named(),
            [
                ("kube-ab12c".to_owned(), "anti-affinity".to_owned()),
                (
                    "kube-ab12c-default-worker".to_owned(),
                    "anti-affinity".to_owned()
                ),
                ("kube-ab12c-gpu".to_owned(), "soft-affinity".to_owned()),
            ],
            "the first policy; a nodegroup's own label wins; none for a nodegroup being deleted"
        );
        assert_eq!(made.control_plane, "g1");
        assert_eq!(made.workers.get("gpu").map(String::as_str), Some("g3"));
        assert_eq!(
            nova.calls.load(Ordering::SeqCst),
            1,
            "all three in one session"
        );
        // A retried create finds them.
        let again = ensure(&nova, None, &c, &t, &ngs, "kube-ab12c")
            .await
            .unwrap();
        assert_eq!(again, made);
        assert_eq!(nova.named().len(), 3);

        // Later, the live Cluster names them: Nova is not asked, so it being away drops none.
        let var = |id: &str| json!([{"name": "serverGroupID", "value": id}]);
        let live = json!({"spec": {"topology": {
            "variables": var("g1"),
            "workers": {"machineDeployments": [
                {"name": "default-worker", "variables": {"overrides": var("g2")}},
                {"name": "gpu", "variables": {"overrides": var("g3")}},
            ]},
        }}});
        assert_eq!(from_live(&live), made);
        nova.down.store(true, Ordering::SeqCst);
        let kept = ensure(&nova, Some(&live), &c, &t, &ngs, "kube-ab12c")
            .await
            .unwrap();
        assert_eq!(kept, made);
        assert_eq!(nova.calls.load(Ordering::SeqCst), 2, "the retry's only");
        // A nodegroup added later needs Nova: its failure fails the operation.
        let mut more = ngs.clone();
        more.push(nodegroup("extra", NodegroupRole::Worker, 1));
        assert!(
            ensure(&nova, Some(&live), &c, &t, &more, "kube-ab12c")
                .await
                .is_err()
        );
        nova.down.store(false, Ordering::SeqCst);
        let grown = ensure(&nova, Some(&live), &c, &t, &more, "kube-ab12c")
            .await
            .unwrap();
        assert_eq!(grown.control_plane, "g1");
        assert_eq!(grown.workers.get("extra").map(String::as_str), Some("g4"));
        assert_eq!(nova.named().len(), 4);

        // A nodegroup's delete takes its group; the cluster's, the rest (and no other's).
        nova.groups
            .lock()
            .unwrap()
            .push(("g9".into(), "kube-ab12cd".into(), "affinity".into()));
        remove(&nova, &c, "kube-ab12c", Some("gpu")).await.unwrap();
        assert!(!nova.named().iter().any(|(n, _)| n == "kube-ab12c-gpu"));
        remove(&nova, &c, "kube-ab12c", None).await.unwrap();
        assert_eq!(
            nova.named(),
            [("kube-ab12cd".to_owned(), "affinity".to_owned())]
        );
    }
}

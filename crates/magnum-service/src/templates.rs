//! Cluster templates: the checks that need no other service, driver selection, the row's
//! defaults, and create / update / delete.
//!
//! A template is a bag of some thirty optional attributes whose absent-versus-null
//! distinction matters (absent booleans take defaults, an explicit null stays null), so the
//! request is the attribute map the API's input rules produced ([`TemplateAttrs`]).

use magnum_core::ids::Identity;
use magnum_core::{Error, RequestContext, Result};
use magnum_db::json::{dumps, loads};
use magnum_db::repo::cluster_template::ClusterTemplate;
use serde_json::{Map, Value};

use crate::{Checks, LabelsToCheck, Services, generate_name, invalid};

/// A template's attributes as the API's input rules left them (types checked, values
/// coerced), keyed by attribute name.
pub type TemplateAttrs = Map<String, Value>;

const NETWORK_DRIVERS: [&str; 3] = ["flannel", "calico", "cilium"];

const NOT_PUBLISHER: &str = "Not authorized to set public or hidden flag for cluster template.";

fn text(doc: &TemplateAttrs, k: &str) -> Option<String> {
    doc.get(k).and_then(Value::as_str).map(str::to_owned)
}

fn int(doc: &TemplateAttrs, k: &str) -> Option<i32> {
    doc.get(k)
        .and_then(Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
}

fn boolean(doc: &TemplateAttrs, k: &str) -> Option<bool> {
    doc.get(k).and_then(Value::as_bool)
}

/// Copy the writable attributes onto a row.
fn apply_doc(t: &mut ClusterTemplate, doc: &TemplateAttrs) {
    t.name = text(doc, "name");
    t.coe = text(doc, "coe");
    t.image_id = text(doc, "image_id");
    t.flavor_id = text(doc, "flavor_id");
    t.master_flavor_id = text(doc, "master_flavor_id");
    t.dns_nameserver = text(doc, "dns_nameserver");
    t.keypair_id = text(doc, "keypair_id");
    t.external_network_id = text(doc, "external_network_id");
    t.fixed_network = text(doc, "fixed_network");
    t.fixed_subnet = text(doc, "fixed_subnet");
    t.network_driver = text(doc, "network_driver");
    t.apiserver_port = int(doc, "apiserver_port");
    t.docker_volume_size = int(doc, "docker_volume_size");
    t.cluster_distro = text(doc, "cluster_distro");
    t.http_proxy = text(doc, "http_proxy");
    t.https_proxy = text(doc, "https_proxy");
    t.no_proxy = text(doc, "no_proxy");
    t.volume_driver = text(doc, "volume_driver");
    t.registry_enabled = boolean(doc, "registry_enabled");
    t.labels = doc.get("labels").filter(|v| !v.is_null()).map(dumps);
    t.tls_disabled = boolean(doc, "tls_disabled");
    t.public = boolean(doc, "public");
    t.server_type = text(doc, "server_type");
    t.insecure_registry = text(doc, "insecure_registry");
    t.docker_storage_driver = text(doc, "docker_storage_driver");
    t.master_lb_enabled = boolean(doc, "master_lb_enabled");
    t.floating_ip_enabled = boolean(doc, "floating_ip_enabled");
    t.hidden = boolean(doc, "hidden");
    t.tags = text(doc, "tags");
    t.driver = text(doc, "driver");
}

pub struct Templates<'a> {
    pub(crate) s: &'a Services,
}

impl Templates<'_> {
    /// The checks that need no other service, in upstream's order (api.md §6.1.3 steps
    /// 2-5). On create (`fill_default`) an absent network driver becomes the default one.
    pub fn check(&self, doc: &mut TemplateAttrs, fill_default: bool) -> Result<()> {
        let settings = &self.s.settings;
        let coe = text(doc, "coe");
        if coe.as_deref() != Some("kubernetes") {
            return Err(invalid(format!(
                "Requested COE type {} is not supported.",
                coe.as_deref().unwrap_or("Unset")
            )));
        }
        if let Some(st) = text(doc, "server_type")
            && st != "vm"
            && st != "bm"
        {
            return Err(invalid(format!(
                "Server type {st} is not supported, expecting a vm/bm/unspecified server type."
            )));
        }
        if fill_default && doc.get("network_driver").is_none_or(Value::is_null) {
            doc.insert(
                "network_driver".into(),
                Value::String(settings.default_network_driver.clone()),
            );
        }
        if let Some(nd) = text(doc, "network_driver") {
            if !NETWORK_DRIVERS.contains(&nd.as_str()) {
                return Err(invalid(format!(
                    "Network driver type {nd} is not supported, expecting a flannel/calico/cilium/unspecified network driver."
                )));
            }
            let allowed = &settings.allowed_network_drivers;
            if !allowed.iter().any(|a| a == "all" || *a == nd) {
                return Err(invalid(format!(
                    "Network driver type {nd} is not allowed, expecting a {}/unspecified network driver. ",
                    allowed.join("/")
                )));
            }
        }
        if let Some(vd) = text(doc, "volume_driver")
            && vd != "cinder"
        {
            return Err(invalid(format!(
                "Volume driver type {vd} is not supported, expecting a cinder/unspecified volume driver."
            )));
        }
        if text(doc, "docker_storage_driver").as_deref() == Some("devicemapper") {
            let size = int(doc, "docker_volume_size");
            if size.is_none_or(|s| s < 3) {
                return Err(invalid(format!(
                    "docker volume size {} GB is not valid, expecting minimum value 3GB for devicemapper storage driver.",
                    size.map(|s| s.to_string()).unwrap_or_else(|| "None".into())
                )));
            }
        }
        if let Some(dns) = text(doc, "dns_nameserver")
            && !dns
                .split(',')
                .all(|ip| ip.trim().parse::<std::net::Ipv4Addr>().is_ok())
        {
            return Err(invalid(format!(
                "Expected a single dns address or comma separated dns list, but received {dns}."
            )));
        }
        Ok(())
    }

    /// The driver a new template gets: the requested one, else the image's `magnum_driver`,
    /// else `[drivers] default_driver`, else the only (or first) driver of this deployment.
    /// The image part of upstream's pre-policy checks of a new template (see
    /// [`crate::Checks::image_before_policy`]); only when the body leaves the driver or the
    /// distro to the image.
    /// The returned checks carry the lookup on to [`Self::create`], so Glance is asked once.
    pub async fn check_image(&self, ctx: &RequestContext, doc: &TemplateAttrs) -> Result<Checks> {
        let mut checks = self.s.checks(ctx);
        if text(doc, "cluster_distro").is_some() && text(doc, "driver").is_some() {
            return Ok(checks);
        }
        if let Some(image) = text(doc, "image_id") {
            checks.image_before_policy(&image).await?;
        }
        Ok(checks)
    }

    fn pick_driver(
        &self,
        requested: Option<String>,
        image_driver: Option<String>,
    ) -> Result<Option<String>> {
        let settings = &self.s.settings;
        let name = requested
            .or(image_driver)
            .or_else(|| settings.default_driver.clone());
        match name {
            Some(n) if settings.drivers.contains(&n) => Ok(Some(n)),
            Some(n) => Err(invalid(format!("Cluster driver ({n}) not supported."))),
            None => Ok(settings.drivers.iter().min().cloned()),
        }
    }

    /// Create a template from checked attributes (see [`Self::check`]) with the request's
    /// checks (from [`Self::check_image`]). `may_publish` is the caller's
    /// `clustertemplate:publish` right, needed to set `public` or `hidden`.
    pub async fn create(
        &self,
        ctx: &RequestContext,
        mut checks: Checks,
        mut doc: TemplateAttrs,
        may_publish: bool,
    ) -> Result<ClusterTemplate> {
        let image = checks.os_resources(&doc, None).await?;
        if let Some(distro) = image.as_ref().and_then(|i| i.os_distro.clone()) {
            doc.insert("cluster_distro".into(), Value::String(distro));
        }
        let driver = self.pick_driver(text(&doc, "driver"), image.and_then(|i| i.magnum_driver))?;
        // A label value the template's driver cannot use is refused now, not at each cluster.
        if let (Some(check), Some(d)) = (&self.s.label_check, driver.as_deref()) {
            let labels = doc
                .get("labels")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            check(
                d,
                LabelsToCheck::Cluster {
                    cluster: &Map::new(),
                    template: &labels,
                },
            )?;
        }
        doc.insert(
            "driver".into(),
            driver.map(Value::String).unwrap_or(Value::Null),
        );
        if (boolean(&doc, "public") == Some(true) || boolean(&doc, "hidden") == Some(true))
            && !may_publish
        {
            return Err(Error::Forbidden {
                message: NOT_PUBLISHER.into(),
            });
        }
        // Upstream checks the flavors the body names, a null one included.
        let boot = self.s.boot_volume_size(doc.get("labels"));
        for key in ["flavor_id", "master_flavor_id"] {
            if let Some(v) = doc.get(key) {
                checks.root_disk(v.as_str(), &boot).await?;
            }
        }
        if text(&doc, "name").is_none_or(|n| n.is_empty()) {
            doc.insert("name".into(), Value::String(generate_name("template")));
        }
        let mut row = ClusterTemplate {
            uuid: text(&doc, "uuid"),
            project_id: ctx.project_id.clone(),
            user_id: ctx.user_id.clone(),
            ..ClusterTemplate::default()
        };
        apply_doc(&mut row, &doc);
        // Absent booleans take the API's defaults; an explicit null stays null.
        for (key, slot, default) in [
            ("registry_enabled", &mut row.registry_enabled, false),
            ("tls_disabled", &mut row.tls_disabled, false),
            ("public", &mut row.public, false),
            ("master_lb_enabled", &mut row.master_lb_enabled, false),
            ("hidden", &mut row.hidden, false),
            ("floating_ip_enabled", &mut row.floating_ip_enabled, true),
        ] {
            if !doc.contains_key(key) {
                *slot = Some(default);
            }
        }
        if !doc.contains_key("server_type") {
            row.server_type = Some("vm".into());
        }
        if !doc.contains_key("labels") {
            row.labels = Some("{}".into());
        }
        self.s.db.cluster_templates().create(row).await
    }

    /// Save a patched template: `doc` is `original` as the API showed it with the patch
    /// applied and checked (see [`Self::check`]).
    pub async fn update(
        &self,
        ctx: &RequestContext,
        original: &ClusterTemplate,
        doc: TemplateAttrs,
        may_publish: bool,
    ) -> Result<ClusterTemplate> {
        let mut checks = self.s.checks(ctx);
        checks.os_resources(&doc, None).await?;
        // As the API shows them: a NULL flag reads false, so leaving it alone is no change.
        let changed_flag =
            |k: &str, was: Option<bool>| boolean(&doc, k) != Some(was.unwrap_or(false));
        if (changed_flag("public", original.public) || changed_flag("hidden", original.hidden))
            && !may_publish
        {
            return Err(Error::Forbidden {
                message: NOT_PUBLISHER.into(),
            });
        }
        // The stored labels decide the boot volume, as upstream reads them.
        let stored_labels: Option<Value> = loads(original.labels.as_deref());
        let boot = self.s.boot_volume_size(stored_labels.as_ref());
        for key in ["flavor_id", "master_flavor_id"] {
            checks
                .root_disk(doc.get(key).and_then(Value::as_str), &boot)
                .await?;
        }
        let mut modified = original.clone();
        apply_doc(&mut modified, &doc);
        // Unchanged JSON keeps its stored text byte for byte.
        let stored: Value = loads(original.labels.as_deref()).unwrap_or(Value::Null);
        if stored == doc.get("labels").cloned().unwrap_or(Value::Null) {
            modified.labels = original.labels.clone();
        }
        self.s
            .db
            .cluster_templates()
            .save(original, &modified)
            .await
    }

    /// Refused while any cluster uses the template.
    pub async fn delete(&self, t: &ClusterTemplate) -> Result<()> {
        match self
            .s
            .db
            .cluster_templates()
            .destroy(&Identity::Id(t.id))
            .await
        {
            Err(Error::ClusterTemplateReferenced { .. }) => Err(Error::ClusterTemplateReferenced {
                template: t.uuid.clone().unwrap_or_default(),
            }),
            other => other,
        }
    }
}

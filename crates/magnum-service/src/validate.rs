//! Validation that needs other OpenStack services: Glance images, Nova flavors and keypairs,
//! Neutron networks and subnets (upstream's `attr_validator`), and Keystone's project lookup.
//! The rules, their order and their messages live here; a [`ResourceValidator`] only answers
//! lookups. Under `noauth` (the embedded default) without a catalogue nothing is looked up.
//!
//! Fixes upstream's flaw of listing every flavor up to four times per request: one
//! [`Checks`] serves one request and lists flavors at most once.

use std::sync::Arc;

use async_trait::async_trait;
use magnum_core::{Error, RequestContext, Result};
pub use magnum_openstack::resources::{Flavor, Found, Image, Named};
use magnum_openstack::{OpenStack, OsError, resources};
use serde_json::{Map, Value};

pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Answers the lookups of one request, as the caller. A method answering `Ok(None)` means
/// "this kind of resource is not checked here" and its rules are skipped.
#[async_trait]
pub trait Lookups: Send {
    async fn image(&mut self, name_or_id: &str) -> Result<Option<Found<Image>>>;
    async fn flavors(&mut self) -> Result<Option<Vec<Flavor>>>;
    async fn networks(&mut self, external_only: bool) -> Result<Option<Vec<Named>>>;
    async fn subnets(&mut self) -> Result<Option<Vec<Named>>>;
    async fn keypair_exists(&mut self, name: &str) -> Result<Option<bool>>;
    /// Whether the cloud has a load balancer service; `None` when that is not checked.
    async fn has_load_balancer(&mut self) -> Result<Option<bool>> {
        Ok(None)
    }
}

pub trait ResourceValidator: Send + Sync {
    /// Lookups acting as the caller of `ctx`; `None` when nothing is validated.
    fn lookups(&self, ctx: &RequestContext) -> Option<Box<dyn Lookups>>;

    /// Whether Keystone knows the project (quota create), asked as the caller when the
    /// caller's token allows it.
    fn project_exists<'a>(
        &'a self,
        ctx: &'a RequestContext,
        project_id: &'a str,
    ) -> BoxFuture<'a, Result<bool>>;
}

/// Validation off: everything passes and nothing is learned.
pub struct NoValidation;

impl ResourceValidator for NoValidation {
    fn lookups(&self, _ctx: &RequestContext) -> Option<Box<dyn Lookups>> {
        None
    }

    fn project_exists<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        _project_id: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async { Ok(true) })
    }
}

/// The real services: Keystone for projects; Glance, Nova and Neutron for everything else,
/// through the caller's token and catalogue, or (`as_service`, for `noauth` deployments with
/// `[keystone_auth]` configured) as Magnum's service user. A service absent from the
/// catalogue is not checked (a warning says so): a cloud without Glance has no images to
/// check.
pub struct OpenStackValidator {
    pub keystone: Option<Arc<magnum_openstack::keystone::Keystone>>,
    pub openstack: Arc<OpenStack>,
    pub as_service: bool,
}

impl ResourceValidator for OpenStackValidator {
    fn lookups(&self, ctx: &RequestContext) -> Option<Box<dyn Lookups>> {
        let session = match &ctx.user_token {
            Some(token) => Some(self.openstack.user_session(token)),
            None if self.as_service => None,
            // Without a caller's token there is no one to act for.
            None => return None,
        };
        Some(Box::new(OsLookups {
            session,
            openstack: self.openstack.clone(),
        }))
    }

    fn project_exists<'a>(
        &'a self,
        ctx: &'a RequestContext,
        project_id: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            // As the caller first, as upstream asks Keystone with the request's token; a
            // refusal (or no identity endpoint) falls back to Magnum's service user.
            if let Some(token) = &ctx.user_token {
                let s = self.openstack.user_session(token);
                match project_as_caller(&s, project_id).await {
                    Ok(found) => return Ok(found),
                    Err(e)
                        if e.status() == Some(403) || matches!(e, OsError::NoEndpoint { .. }) => {}
                    Err(e) => return Err(unavailable(e)),
                }
            }
            let Some(keystone) = &self.keystone else {
                return Ok(true);
            };
            keystone.project_exists(project_id).await.map_err(|e| {
                tracing::error!("project lookup failed: {e}");
                Error::ServiceUnavailable {
                    message: "The identity service (Keystone) cannot be reached to look up the project; try again later.".into(),
                }
            })
        })
    }
}

async fn project_as_caller(
    s: &magnum_openstack::Session,
    project_id: &str,
) -> std::result::Result<bool, OsError> {
    let v3 = s.identity_v3()?;
    // A project id is one path segment: anything else cannot name a project.
    if project_id.contains(['/', '?', '#']) {
        return Ok(false);
    }
    Ok(s.get_json(
        magnum_openstack::ServiceType::Identity,
        &format!("{v3}/projects/{project_id}"),
    )
    .await?
    .is_some())
}

struct OsLookups {
    /// The caller's session, or the service user's once first needed.
    session: Option<magnum_openstack::Session>,
    openstack: Arc<OpenStack>,
}

impl OsLookups {
    async fn session(&mut self) -> Result<&magnum_openstack::Session> {
        if self.session.is_none() {
            let s = self
                .openstack
                .service_session()
                .await
                .map_err(unavailable)?;
            self.session = Some(s);
        }
        self.session
            .as_ref()
            .ok_or_else(|| Error::Internal("no OpenStack session".into()))
    }
}

/// A service that failed us: 503 naming it (its own error text, never a token or URL).
pub fn unavailable(e: OsError) -> Error {
    tracing::warn!("OpenStack call failed: {e}");
    Error::ServiceUnavailable {
        message: format!("{e}; try again later."),
    }
}

/// `Ok(None)` (not checked) when the catalogue lacks the service; other failures are 503s.
fn answer<T>(r: std::result::Result<T, OsError>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e @ OsError::NoEndpoint { .. }) => {
            tracing::warn!("not validated: {e}");
            Ok(None)
        }
        Err(e) => Err(unavailable(e)),
    }
}

#[async_trait]
impl Lookups for OsLookups {
    async fn image(&mut self, name_or_id: &str) -> Result<Option<Found<Image>>> {
        let s = self.session().await?;
        answer(resources::find_image(s, name_or_id).await)
    }

    async fn flavors(&mut self) -> Result<Option<Vec<Flavor>>> {
        let s = self.session().await?;
        answer(resources::flavors(s).await)
    }

    async fn networks(&mut self, external_only: bool) -> Result<Option<Vec<Named>>> {
        let s = self.session().await?;
        answer(resources::networks(s, external_only).await)
    }

    async fn subnets(&mut self) -> Result<Option<Vec<Named>>> {
        let s = self.session().await?;
        answer(resources::subnets(s).await)
    }

    async fn keypair_exists(&mut self, name: &str) -> Result<Option<bool>> {
        let s = self.session().await?;
        answer(resources::keypair_exists(s, name).await)
    }

    /// Judged only in a cloud whose catalogue has Neutron: without a network service there
    /// is nothing to put a load balancer on, and nothing else is checked either.
    async fn has_load_balancer(&mut self) -> Result<Option<bool>> {
        let s = self.session().await?;
        if !s.has_service(magnum_openstack::ServiceType::Network) {
            return Ok(None);
        }
        Ok(Some(resources::octavia_enabled(s)))
    }
}

fn invalid(message: String) -> Error {
    Error::InvalidParameterValue { message }
}

fn conflict(message: String) -> Error {
    Error::Conflict { message }
}

/// The checks of one request, in upstream's order and words.
pub struct Checks {
    lookups: Option<Box<dyn Lookups>>,
    /// The request's one flavor listing.
    flavors: Option<Option<Vec<Flavor>>>,
    /// The request's image lookup (the pre-policy check and the full one share it).
    image: Option<(String, Option<Found<Image>>)>,
}

impl Checks {
    pub fn new(lookups: Option<Box<dyn Lookups>>) -> Self {
        Self {
            lookups,
            flavors: None,
            image: None,
        }
    }

    /// Glance's answer for `image`, asked once per request.
    async fn lookup_image(&mut self, image: &str) -> Result<Option<Found<Image>>> {
        if let Some((name, found)) = &self.image
            && name == image
        {
            return Ok(found.clone());
        }
        let Some(l) = self.lookups.as_mut() else {
            return Ok(None);
        };
        let found = l.image(image).await?;
        self.image = Some((image.to_owned(), found.clone()));
        Ok(found)
    }

    /// The image by name or id; `None` when images are not checked.
    pub async fn image(&mut self, image: &str) -> Result<Option<Image>> {
        match self.lookup_image(image).await? {
            None => Ok(None),
            Some(Found::One(i)) => {
                if i.os_distro.is_none() {
                    return Err(invalid(format!(
                        "Image {image} doesn't contain os_distro field."
                    )));
                }
                Ok(Some(i))
            }
            Some(Found::None) => Err(invalid(format!("Image {image} could not be found."))),
            Some(Found::Many) => Err(conflict(format!(
                "Multiple images exist with same name '{image}'. Please use the image ID instead."
            ))),
            Some(Found::Forbidden) => Err(Error::Forbidden {
                message: format!("Not authorized for image {image}."),
            }),
        }
    }

    /// Upstream's driver resolution, before the caller's policy: an image that does not
    /// exist, or that the caller may not see, is refused there; anything else waits for
    /// [`Self::os_resources`].
    pub async fn image_before_policy(&mut self, image: &str) -> Result<()> {
        match self.lookup_image(image).await {
            Ok(Some(Found::None)) => Err(invalid(format!("Image {image} could not be found."))),
            Ok(Some(Found::Forbidden)) => Err(Error::Forbidden {
                message: format!("Not authorized for image {image}."),
            }),
            _ => Ok(()),
        }
    }

    async fn flavor_list(&mut self) -> Result<Option<&[Flavor]>> {
        if self.flavors.is_none() {
            let listed = match self.lookups.as_mut() {
                Some(l) => l.flavors().await?,
                None => None,
            };
            self.flavors = Some(listed);
        }
        Ok(self.flavors.as_ref().and_then(|f| f.as_deref()))
    }

    /// `flavor` (a name or id; `None` as Python shows it) must exist.
    pub async fn flavor(&mut self, flavor: Option<&str>) -> Result<Option<Flavor>> {
        let Some(list) = self.flavor_list().await? else {
            return Ok(None);
        };
        let found = flavor.and_then(|f| list.iter().find(|x| x.name == f || x.id == f));
        match found {
            Some(f) => Ok(Some(f.clone())),
            None => Err(invalid(format!(
                "Unable to find flavor {}.",
                flavor.unwrap_or("None")
            ))),
        }
    }

    /// Upstream's root-disk rule: with no boot volume, the flavor needs a root disk.
    /// `boot_volume_size` is the label's value, else the configured default.
    pub async fn root_disk(
        &mut self,
        flavor: Option<&str>,
        boot_volume_size: &Value,
    ) -> Result<()> {
        let size = match boot_volume_size {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        }
        .ok_or_else(|| {
            invalid(format!(
                "boot_volume_size must be an integer, not {boot_volume_size}."
            ))
        })?;
        if size > 0 {
            return Ok(());
        }
        if let Some(f) = self.flavor(flavor).await?
            && f.disk == 0
        {
            return Err(invalid(
                "Flavor with zero root volume size is not supported when boot_volume_size is zero."
                    .into(),
            ));
        }
        Ok(())
    }

    pub async fn external_network(&mut self, network: &str) -> Result<()> {
        let Some(l) = self.lookups.as_mut() else {
            return Ok(());
        };
        let Some(nets) = l.networks(true).await? else {
            return Ok(());
        };
        match matches(&nets, network) {
            0 => Err(invalid(format!(
                "Unable to find external network {network}."
            ))),
            1 => Ok(()),
            _ => Err(conflict(format!(
                "Multiple external networks exist with same name '{network}'. Please use the external network ID instead."
            ))),
        }
    }

    pub async fn fixed_network(&mut self, network: &str) -> Result<()> {
        let Some(l) = self.lookups.as_mut() else {
            return Ok(());
        };
        let Some(nets) = l.networks(false).await? else {
            return Ok(());
        };
        match matches(&nets, network) {
            0 => Err(invalid(format!("Unable to find fixed network {network}."))),
            1 => Ok(()),
            _ => Err(conflict(format!(
                "Multiple networks exist with same name '{network}'. Please use the network ID instead."
            ))),
        }
    }

    pub async fn fixed_subnet(&mut self, subnet: &str) -> Result<()> {
        let Some(l) = self.lookups.as_mut() else {
            return Ok(());
        };
        let Some(subnets) = l.subnets().await? else {
            return Ok(());
        };
        match matches(&subnets, subnet) {
            0 => Err(invalid(format!("Unable to find fixed subnet {subnet}."))),
            1 => Ok(()),
            _ => Err(conflict(format!(
                "Multiple subnets exist with same name '{subnet}'. Please use the subnet ID instead."
            ))),
        }
    }

    /// A cluster's keypair must be the caller's: 404 otherwise.
    pub async fn keypair(&mut self, keypair: &str) -> Result<()> {
        let Some(l) = self.lookups.as_mut() else {
            return Ok(());
        };
        match l.keypair_exists(keypair).await? {
            Some(false) => Err(Error::NotFound {
                message: format!("Unable to find keypair {keypair}."),
            }),
            _ => Ok(()),
        }
    }

    /// A cluster with `master_lb_enabled` needs Octavia in the catalogue (upstream let the
    /// create go on and fail in the driver).
    pub async fn load_balancer(&mut self) -> Result<()> {
        let Some(l) = self.lookups.as_mut() else {
            return Ok(());
        };
        match l.has_load_balancer().await? {
            Some(false) => Err(invalid(
                "master_lb_enabled needs a load balancer service (Octavia), and this cloud's catalogue has none."
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// Upstream's `validate_os_resources`: each resource attribute of the cluster when set
    /// (truthy), else of the template when not null, in upstream's order; then the cluster's
    /// keypair. Returns the image when it was looked up.
    pub async fn os_resources(
        &mut self,
        template: &Map<String, Value>,
        cluster: Option<&Map<String, Value>>,
    ) -> Result<Option<Image>> {
        let mut image = None;
        for attr in [
            "image_id",
            "flavor_id",
            "master_flavor_id",
            "external_network_id",
            "fixed_network",
            "fixed_subnet",
        ] {
            let from_cluster = cluster.and_then(|c| c.get(attr)).filter(|v| truthy(v));
            let Some(value) = from_cluster.or_else(|| template.get(attr).filter(|v| !v.is_null()))
            else {
                continue;
            };
            let text = shown(value);
            match attr {
                "image_id" => image = self.image(&text).await?,
                "flavor_id" | "master_flavor_id" => {
                    self.flavor(Some(&text)).await?;
                }
                "external_network_id" => self.external_network(&text).await?,
                "fixed_network" => self.fixed_network(&text).await?,
                _ => self.fixed_subnet(&text).await?,
            }
        }
        if let Some(c) = cluster
            && let Some(k) = c.get("keypair").filter(|v| !v.is_null())
        {
            self.keypair(&shown(k)).await?;
        }
        Ok(image)
    }
}

fn matches(list: &[Named], wanted: &str) -> usize {
    list.iter()
        .filter(|n| n.id == wanted || n.name.as_deref() == Some(wanted))
        .count()
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    /// Counts flavor listings; knows one image, two flavors, networks with a duplicate.
    struct Fake {
        listings: Arc<std::sync::atomic::AtomicUsize>,
    }

    /// Counts image lookups: one request asks Glance once.
    struct CountingImages(Arc<std::sync::atomic::AtomicUsize>);

    #[async_trait]
    impl Lookups for CountingImages {
        async fn image(&mut self, name: &str) -> Result<Option<Found<Image>>> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Some(Found::One(Image {
                id: "i".into(),
                name: Some(name.into()),
                os_distro: Some("fedora-coreos".into()),
                magnum_driver: None,
            })))
        }
        async fn flavors(&mut self) -> Result<Option<Vec<Flavor>>> {
            Ok(None)
        }
        async fn networks(&mut self, _: bool) -> Result<Option<Vec<Named>>> {
            Ok(None)
        }
        async fn subnets(&mut self) -> Result<Option<Vec<Named>>> {
            Ok(None)
        }
        async fn keypair_exists(&mut self, _: &str) -> Result<Option<bool>> {
            Ok(None)
        }
    }

    #[tokio::test]
    async fn the_pre_policy_image_check_and_the_full_one_ask_glance_once() {
        let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut c = Checks::new(Some(Box::new(CountingImages(n.clone()))));
        c.image_before_policy("fcos").await.unwrap();
        let img = c
            .os_resources(&doc(json!({"image_id": "fcos"})), None)
            .await
            .unwrap();
        assert_eq!(img.unwrap().os_distro.as_deref(), Some("fedora-coreos"));
        assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[async_trait]
    impl Lookups for Fake {
        async fn image(&mut self, name: &str) -> Result<Option<Found<Image>>> {
            Ok(Some(match name {
                "fcos" => Found::One(Image {
                    id: "i1".into(),
                    name: Some("fcos".into()),
                    os_distro: Some("fedora-coreos".into()),
                    magnum_driver: None,
                }),
                "bare" => Found::One(Image {
                    id: "i2".into(),
                    name: Some("bare".into()),
                    os_distro: None,
                    magnum_driver: None,
                }),
                "dup" => Found::Many,
                _ => Found::None,
            }))
        }
        async fn flavors(&mut self) -> Result<Option<Vec<Flavor>>> {
            self.listings
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Some(vec![
                Flavor {
                    id: "f1".into(),
                    name: "m1.small".into(),
                    disk: 20,
                    vcpus: 1,
                    ram: 2048,
                },
                Flavor {
                    id: "f0".into(),
                    name: "zero".into(),
                    disk: 0,
                    vcpus: 1,
                    ram: 512,
                },
            ]))
        }
        async fn networks(&mut self, external: bool) -> Result<Option<Vec<Named>>> {
            let mut v = vec![Named {
                id: "n1".into(),
                name: Some("public".into()),
            }];
            if !external {
                v.push(Named {
                    id: "n2".into(),
                    name: Some("private".into()),
                });
                v.push(Named {
                    id: "n3".into(),
                    name: Some("private".into()),
                });
            }
            Ok(Some(v))
        }
        async fn subnets(&mut self) -> Result<Option<Vec<Named>>> {
            Ok(Some(vec![]))
        }
        async fn keypair_exists(&mut self, name: &str) -> Result<Option<bool>> {
            Ok(Some(name == "mine"))
        }
        async fn has_load_balancer(&mut self) -> Result<Option<bool>> {
            Ok(Some(false))
        }
    }

    fn checks() -> (Checks, Arc<std::sync::atomic::AtomicUsize>) {
        let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        (
            Checks::new(Some(Box::new(Fake {
                listings: n.clone(),
            }))),
            n,
        )
    }

    fn doc(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[tokio::test]
    async fn upstream_messages_and_one_flavor_listing() {
        let (mut c, listings) = checks();
        let t = doc(json!({"image_id": "fcos", "flavor_id": "m1.small",
            "master_flavor_id": "f1", "external_network_id": "public"}));
        let img = c.os_resources(&t, None).await.unwrap().unwrap();
        assert_eq!(img.os_distro.as_deref(), Some("fedora-coreos"));
        c.root_disk(Some("m1.small"), &json!(0)).await.unwrap();
        let e = c.root_disk(Some("zero"), &json!("0")).await.unwrap_err();
        assert!(
            e.to_string().starts_with("Flavor with zero root volume"),
            "{e}"
        );
        c.root_disk(Some("zero"), &json!("10")).await.unwrap();
        let e = c.root_disk(None, &json!(0)).await.unwrap_err();
        assert_eq!(e.to_string(), "Unable to find flavor None.");
        assert_eq!(listings.load(std::sync::atomic::Ordering::SeqCst), 1);

        let cases = [
            (
                json!({"image_id": "nope"}),
                "Image nope could not be found.",
                400,
            ),
            (
                json!({"image_id": "bare"}),
                "Image bare doesn't contain os_distro field.",
                400,
            ),
            (
                json!({"image_id": "dup"}),
                "Multiple images exist with same name 'dup'. Please use the image ID instead.",
                409,
            ),
            (
                json!({"flavor_id": "aaa"}),
                "Unable to find flavor aaa.",
                400,
            ),
            (
                json!({"external_network_id": "private"}),
                "Unable to find external network private.",
                400,
            ),
            (
                json!({"fixed_network": "private"}),
                "Multiple networks exist with same name 'private'. Please use the network ID instead.",
                409,
            ),
            (
                json!({"fixed_subnet": "s"}),
                "Unable to find fixed subnet s.",
                400,
            ),
        ];
        for (body, message, status) in cases {
            let e = c.os_resources(&doc(body), None).await.unwrap_err();
            assert_eq!(e.to_string(), message);
            assert_eq!(e.kind().http_status(), status, "{message}");
        }
        // A cluster's own value wins over the template's; the keypair is the cluster's.
        let cluster = doc(json!({"flavor_id": "m1.small", "keypair": "theirs"}));
        let e = c
            .os_resources(&doc(json!({"flavor_id": "aaa"})), Some(&cluster))
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "Unable to find keypair theirs.");
        assert_eq!(e.kind().http_status(), 404);
        assert_eq!(listings.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_load_balancer_needs_octavia() {
        let (mut c, _) = checks();
        let e = c.load_balancer().await.unwrap_err();
        assert!(e.to_string().contains("Octavia"), "{e}");
        assert_eq!(e.kind().http_status(), 400);
        Checks::new(None).load_balancer().await.unwrap();
    }

    #[tokio::test]
    async fn nothing_is_checked_without_lookups() {
        let mut c = Checks::new(None);
        let t = doc(json!({"image_id": "nope", "flavor_id": "aaa"}));
        assert!(c.os_resources(&t, None).await.unwrap().is_none());
        c.root_disk(None, &json!(0)).await.unwrap();
    }
}

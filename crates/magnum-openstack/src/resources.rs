//! The reads Magnum's validation makes: Glance images, Nova flavors and keypairs, Neutron
//! networks and subnets, Cinder volume types, and whether Octavia is in the catalogue.

use serde_json::Value;

use crate::catalog::ServiceType;
use crate::error::OsError;
use crate::session::Session;

/// A Glance image as Magnum reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub id: String,
    pub name: Option<String>,
    pub os_distro: Option<String>,
    /// Image property naming the Magnum driver for templates on it.
    pub magnum_driver: Option<String>,
}

/// What a lookup by name or id found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found<T> {
    None,
    One(T),
    /// Several share the name.
    Many,
    /// The service refused the caller (HTTP 403).
    Forbidden,
}

fn image_of(v: &Value) -> Option<Image> {
    let text = |k: &str| v[k].as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    Some(Image {
        id: text("id")?,
        name: text("name"),
        os_distro: text("os_distro"),
        magnum_driver: text("magnum_driver"),
    })
}

fn query(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

fn segment(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// Finds an image by id, then by name, as openstacksdk's `find_image` does.
pub async fn find_image(s: &Session, name_or_id: &str) -> Result<Found<Image>, OsError> {
    let svc = ServiceType::Image;
    if uuid::Uuid::parse_str(name_or_id).is_ok() {
        match s.get_json(svc, &format!("/v2/images/{name_or_id}")).await {
            Ok(Some(v)) => return Ok(image_of(&v).map_or(Found::None, Found::One)),
            Ok(None) => {}
            Err(e) if e.status() == Some(403) => return Ok(Found::Forbidden),
            Err(e) => return Err(e),
        }
    }
    let listed = match s
        .get_json(svc, &format!("/v2/images?name={}", query(name_or_id)))
        .await
    {
        Ok(v) => v.unwrap_or(Value::Null),
        Err(e) if e.status() == Some(403) => return Ok(Found::Forbidden),
        Err(e) => return Err(e),
    };
    let images: Vec<Image> = listed["images"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(image_of)
        .collect();
    Ok(match images.len() {
        0 => Found::None,
        1 => images.into_iter().next().map_or(Found::None, Found::One),
        _ => Found::Many,
    })
}

/// A Nova flavor as Magnum reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flavor {
    pub id: String,
    pub name: String,
    /// Root disk in GB; 0 means the image's size (boot from volume needed).
    pub disk: i64,
    pub vcpus: i64,
    /// Memory in MiB.
    pub ram: i64,
}

/// Every flavor the caller can use (`GET /flavors/detail`, all pages).
pub async fn flavors(s: &Session) -> Result<Vec<Flavor>, OsError> {
    let svc = ServiceType::Compute;
    let mut out = Vec::new();
    let mut next = Some("/flavors/detail".to_owned());
    // Pages follow Nova's `next` links; the bound only guards against a link loop.
    for _ in 0..100 {
        let Some(path) = next.take() else { break };
        let v = s.get_json(svc, &path).await?.unwrap_or(Value::Null);
        for f in v["flavors"].as_array().into_iter().flatten() {
            if let (Some(id), Some(name)) = (f["id"].as_str(), f["name"].as_str()) {
                out.push(Flavor {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    disk: f["disk"].as_i64().unwrap_or(0),
                    vcpus: f["vcpus"].as_i64().unwrap_or(0),
                    ram: f["ram"].as_i64().unwrap_or(0),
                });
            }
        }
        next = v["flavors_links"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|l| l["rel"] == "next")
            .and_then(|l| l["href"].as_str())
            .map(str::to_owned);
    }
    Ok(out)
}

/// Whether the caller has a keypair of that name (keypairs belong to users).
pub async fn keypair_exists(s: &Session, name: &str) -> Result<bool, OsError> {
    Ok(s.get_json(
        ServiceType::Compute,
        &format!("/os-keypairs/{}", segment(name)),
    )
    .await?
    .is_some())
}

/// A network or subnet: what name-or-id matching needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    pub id: String,
    pub name: Option<String>,
}

fn named_list(v: &Value, key: &str) -> Vec<Named> {
    v[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| {
            Some(Named {
                id: n["id"].as_str()?.to_owned(),
                name: n["name"].as_str().map(str::to_owned),
            })
        })
        .collect()
}

/// The networks the caller sees; with `external_only`, those with `router:external`.
pub async fn networks(s: &Session, external_only: bool) -> Result<Vec<Named>, OsError> {
    let filter = if external_only {
        "&router%3Aexternal=True"
    } else {
        ""
    };
    let v = s
        .get_json(
            ServiceType::Network,
            &format!("/v2.0/networks?fields=id&fields=name{filter}"),
        )
        .await?
        .unwrap_or(Value::Null);
    Ok(named_list(&v, "networks"))
}

/// The subnets the caller sees.
pub async fn subnets(s: &Session) -> Result<Vec<Named>, OsError> {
    let v = s
        .get_json(ServiceType::Network, "/v2.0/subnets?fields=id&fields=name")
        .await?
        .unwrap_or(Value::Null);
    Ok(named_list(&v, "subnets"))
}

/// Cinder's volume type names, in Cinder's order (drivers take the first as a default).
pub async fn volume_types(s: &Session) -> Result<Vec<String>, OsError> {
    let v = s
        .get_json(ServiceType::BlockStorage, "/types")
        .await?
        .unwrap_or(Value::Null);
    Ok(v["volume_types"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect())
}

/// Cinder's default volume type for the caller's project; None when Cinder names none.
pub async fn default_volume_type(s: &Session) -> Result<Option<String>, OsError> {
    let v = s
        .get_json(ServiceType::BlockStorage, "/types/default")
        .await?
        .unwrap_or(Value::Null);
    Ok(v["volume_type"]["name"].as_str().map(str::to_owned))
}

/// Whether the cloud has a load balancer service (upstream's `is_octavia_enabled`).
pub fn octavia_enabled(s: &Session) -> bool {
    s.has_service(ServiceType::LoadBalancer)
}

/// An Octavia load balancer, as a cluster delete reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadBalancer {
    pub id: String,
    pub name: String,
    pub description: String,
    pub provisioning_status: String,
}

/// The load balancers of `project_id` (the service user lists any project's).
pub async fn load_balancers(s: &Session, project_id: &str) -> Result<Vec<LoadBalancer>, OsError> {
    let v = s
        .get_json(
            ServiceType::LoadBalancer,
            &format!("/v2/lbaas/loadbalancers?project_id={}", query(project_id)),
        )
        .await?
        .unwrap_or(Value::Null);
    let text = |lb: &Value, k: &str| lb[k].as_str().unwrap_or_default().to_owned();
    Ok(v["loadbalancers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|lb| LoadBalancer {
            id: text(lb, "id"),
            name: text(lb, "name"),
            description: text(lb, "description"),
            provisioning_status: text(lb, "provisioning_status"),
        })
        .filter(|lb| !lb.id.is_empty() && lb.provisioning_status != "DELETED")
        .collect())
}

/// Deletes a load balancer with everything on it (cascade); already gone is fine. Octavia
/// refuses (409) while the balancer is in a PENDING_* state: the error says so.
pub async fn delete_load_balancer(s: &Session, id: &str) -> Result<(), OsError> {
    let path = format!("/v2/lbaas/loadbalancers/{}?cascade=true", segment(id));
    delete(s, ServiceType::LoadBalancer, &path).await
}

/// A DELETE; what is gone already is no error.
async fn delete(s: &Session, service: ServiceType, path: &str) -> Result<(), OsError> {
    let (status, text) = s
        .call(
            service,
            reqwest::Method::DELETE,
            path,
            crate::session::Body::None,
            "application/json",
        )
        .await?;
    match status {
        200..=299 | 404 => Ok(()),
        s => Err(OsError::Status {
            service,
            status: s,
            detail: crate::error::message_of(&text),
        }),
    }
}

/// A 2xx answer's JSON; any other status is an error naming what the service said.
fn answer(service: ServiceType, status: u16, text: &str) -> Result<Value, OsError> {
    if !(200..300).contains(&status) {
        return Err(OsError::Status {
            service,
            status,
            detail: crate::error::message_of(text),
        });
    }
    crate::session::parse(service, text)
}

/// A Nova server group of the session's project.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerGroup {
    pub id: String,
    pub name: String,
}

/// Compute 2.15 takes the soft policies, and still the `policies` list.
const SERVER_GROUP_VERSION: [(&str, &str); 1] = [("OpenStack-API-Version", "compute 2.15")];

/// The server groups of the session's project.
pub async fn server_groups(s: &Session) -> Result<Vec<ServerGroup>, OsError> {
    let svc = ServiceType::Compute;
    let (status, text) = s
        .call_with(
            svc,
            reqwest::Method::GET,
            "/os-server-groups",
            crate::session::Body::None,
            "application/json",
            &SERVER_GROUP_VERSION,
        )
        .await?;
    let v = answer(svc, status, &text)?;
    Ok(v["server_groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| {
            Some(ServerGroup {
                id: g["id"].as_str()?.to_owned(),
                name: g["name"].as_str().unwrap_or_default().to_owned(),
            })
        })
        .collect())
}

/// Creates a server group with one policy (Nova takes exactly one).
pub async fn create_server_group(
    s: &Session,
    name: &str,
    policy: &str,
) -> Result<ServerGroup, OsError> {
    let svc = ServiceType::Compute;
    let body = serde_json::json!({"server_group": {"name": name, "policies": [policy]}});
    let (status, text) = s
        .call_with(
            svc,
            reqwest::Method::POST,
            "/os-server-groups",
            crate::session::Body::Json(&body),
            "application/json",
            &SERVER_GROUP_VERSION,
        )
        .await?;
    let v = answer(svc, status, &text)?;
    let g = &v["server_group"];
    Ok(ServerGroup {
        id: g["id"].as_str().unwrap_or_default().to_owned(),
        name: name.to_owned(),
    })
}

/// Deletes a server group; one already gone is no error.
pub async fn delete_server_group(s: &Session, id: &str) -> Result<(), OsError> {
    let path = format!("/os-server-groups/{}", segment(id));
    delete(s, ServiceType::Compute, &path).await
}

/// The Manila share types the session's project sees (public and its own).
pub async fn share_types(s: &Session) -> Result<Vec<String>, OsError> {
    let v = s
        .get_json(ServiceType::SharedFileSystem, "/types")
        .await?
        .unwrap_or(Value::Null);
    Ok(v["share_types"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect())
}

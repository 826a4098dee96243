//! The service catalogue of a Keystone v3 token, and endpoint lookup as keystoneauth does it:
//! by service type (with its historical aliases), interface and, when set, region. Without a
//! region the first matching endpoint wins, which is why every `[<service>_client]` should
//! name one on a cloud with several regions.

use serde_json::Value;

/// An identity URL as its v3 endpoint: clouds register Keystone with and without `/v3`.
pub fn identity_v3(url: &str) -> String {
    let base = url.trim_end_matches('/');
    if base.ends_with("/v3") {
        base.to_owned()
    } else {
        format!("{base}/v3")
    }
}

/// The services Magnum calls, by catalogue type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServiceType {
    Identity,
    Image,
    Compute,
    Network,
    BlockStorage,
    LoadBalancer,
    KeyManager,
    SharedFileSystem,
}

impl ServiceType {
    /// Catalogue types this service may be registered under, preferred first.
    pub fn catalog_types(self) -> &'static [&'static str] {
        match self {
            ServiceType::Identity => &["identity"],
            ServiceType::Image => &["image"],
            ServiceType::Compute => &["compute"],
            ServiceType::Network => &["network"],
            ServiceType::BlockStorage => &["block-storage", "volumev3", "volumev2", "volume"],
            ServiceType::LoadBalancer => &["load-balancer"],
            ServiceType::KeyManager => &["key-manager"],
            ServiceType::SharedFileSystem => &["shared-file-system", "sharev2", "share"],
        }
    }

    /// How errors name the service to a user.
    pub fn display(self) -> &'static str {
        match self {
            ServiceType::Identity => "The identity service (Keystone)",
            ServiceType::Image => "The image service (Glance)",
            ServiceType::Compute => "The compute service (Nova)",
            ServiceType::Network => "The network service (Neutron)",
            ServiceType::BlockStorage => "The block storage service (Cinder)",
            ServiceType::LoadBalancer => "The load balancer service (Octavia)",
            ServiceType::KeyManager => "The key manager service (Barbican)",
            ServiceType::SharedFileSystem => "The shared file system service (Manila)",
        }
    }

    /// The `[<name>_client]` section of magnum.conf.
    pub fn config_section(self) -> &'static str {
        match self {
            ServiceType::Identity => "keystone_auth",
            ServiceType::Image => "glance_client",
            ServiceType::Compute => "nova_client",
            ServiceType::Network => "neutron_client",
            ServiceType::BlockStorage => "cinder_client",
            ServiceType::LoadBalancer => "octavia_client",
            ServiceType::KeyManager => "barbican_client",
            ServiceType::SharedFileSystem => "manila_client",
        }
    }
}

/// Which endpoint of a service to take (`[<service>_client] region_name / endpoint_type`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointFilter {
    pub region: Option<String>,
    /// `public`, `internal` or `admin`; the `publicURL` spellings are accepted.
    pub interface: String,
}

impl EndpointFilter {
    pub fn new(region: Option<String>, endpoint_type: &str) -> Self {
        Self {
            region: region.filter(|r| !r.is_empty()),
            interface: normalize_interface(endpoint_type),
        }
    }
}

fn normalize_interface(s: &str) -> String {
    let s = s.trim();
    let s = s.strip_suffix("URL").unwrap_or(s);
    if s.is_empty() {
        "public".into()
    } else {
        s.to_ascii_lowercase()
    }
}

/// One endpoint of the catalogue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub service_type: String,
    pub interface: String,
    pub region: Option<String>,
    pub url: String,
}

/// A token's catalogue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    endpoints: Vec<Endpoint>,
}

impl Catalog {
    /// Reads `token.catalog` of a Keystone v3 token body (empty when the token has none).
    pub fn from_token_body(body: &Value) -> Self {
        let mut endpoints = Vec::new();
        for svc in body["token"]["catalog"].as_array().into_iter().flatten() {
            let Some(service_type) = svc["type"].as_str() else {
                continue;
            };
            for ep in svc["endpoints"].as_array().into_iter().flatten() {
                let (Some(interface), Some(url)) = (ep["interface"].as_str(), ep["url"].as_str())
                else {
                    continue;
                };
                endpoints.push(Endpoint {
                    service_type: service_type.to_owned(),
                    interface: interface.to_owned(),
                    region: ep["region_id"]
                        .as_str()
                        .or_else(|| ep["region"].as_str())
                        .map(str::to_owned),
                    url: url.trim_end_matches('/').to_owned(),
                });
            }
        }
        Self { endpoints }
    }

    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// The endpoint of `service` that `filter` selects; aliases are tried in order.
    pub fn endpoint(&self, service: ServiceType, filter: &EndpointFilter) -> Option<&str> {
        service.catalog_types().iter().find_map(|ty| {
            self.endpoints
                .iter()
                .find(|e| {
                    e.service_type == *ty
                        && e.interface == filter.interface
                        && filter
                            .region
                            .as_ref()
                            .is_none_or(|r| e.region.as_ref() == Some(r))
                })
                .map(|e| e.url.as_str())
        })
    }

    /// Whether the catalogue has `service` at all, in `filter`'s region and interface.
    pub fn has(&self, service: ServiceType, filter: &EndpointFilter) -> bool {
        self.endpoint(service, filter).is_some()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn body() -> Value {
        json!({"token": {"catalog": [
            {"type": "image", "endpoints": [
                {"interface": "public", "region_id": "RegionOne", "url": "http://one:9292/"},
                {"interface": "public", "region_id": "RealOne", "url": "http://real:9292"},
                {"interface": "internal", "region_id": "RealOne", "url": "http://real-int:9292"}]},
            {"type": "volumev3", "endpoints": [
                {"interface": "public", "region": "RealOne", "url": "http://c:8776/v3/p1"}]}
        ]}})
    }

    #[test]
    fn picks_by_region_and_interface_with_aliases() {
        let c = Catalog::from_token_body(&body());
        let real = EndpointFilter::new(Some("RealOne".into()), "publicURL");
        assert_eq!(
            c.endpoint(ServiceType::Image, &real),
            Some("http://real:9292")
        );
        let internal = EndpointFilter::new(Some("RealOne".into()), "internalURL");
        assert_eq!(
            c.endpoint(ServiceType::Image, &internal),
            Some("http://real-int:9292")
        );
        // No region: the first endpoint of the type, as keystoneauth takes it.
        let any = EndpointFilter::new(None, "public");
        assert_eq!(
            c.endpoint(ServiceType::Image, &any),
            Some("http://one:9292")
        );
        assert_eq!(
            c.endpoint(ServiceType::BlockStorage, &real),
            Some("http://c:8776/v3/p1")
        );
        assert!(!c.has(ServiceType::KeyManager, &any));
        assert!(!c.has(
            ServiceType::Image,
            &EndpointFilter::new(Some("Nowhere".into()), "public")
        ));
    }
}

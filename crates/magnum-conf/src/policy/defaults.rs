//! Magnum's registered policy defaults, in upstream registration order.

/// A rule Magnum registers: its default check string and the metadata oslo keeps with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleDefault {
    pub name: &'static str,
    pub check_str: &'static str,
    pub description: &'static str,
    /// API calls the rule guards; empty for the base alias rules.
    pub operations: &'static [Operation],
    /// `["project"]` or empty (no scope check).
    pub scope_types: &'static [&'static str],
    /// OR-ed into the default when `enforce_new_defaults` is false.
    pub deprecated_rule: Option<&'static DeprecatedRule>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operation {
    pub method: &'static str,
    pub path: &'static str,
}

/// The rule a default replaced. Upstream names these with a `rule:` prefix, which no policy
/// file key normally carries; kept as is since it decides whether a file overrides them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeprecatedRule {
    pub name: &'static str,
    pub check_str: &'static str,
    pub reason: &'static str,
    pub since: &'static str,
}

const DEPRECATED_REASON: &str =
    "Magnum now enforces scoped tokens and the default reader and member roles.";
const DEPRECATED_SINCE: &str = "OpenStack 2023.2 (Magnum 17.0.0)";

pub static DEPRECATED_ADMIN_OR_OWNER: DeprecatedRule = DeprecatedRule {
    name: "rule:admin_or_owner",
    check_str: "is_admin:True or project_id:%(project_id)s",
    reason: DEPRECATED_REASON,
    since: DEPRECATED_SINCE,
};

pub static DEPRECATED_ADMIN_OR_USER: DeprecatedRule = DeprecatedRule {
    name: "rule:admin_or_user",
    check_str: "((rule:context_is_admin) or (rule:is_user))",
    reason: DEPRECATED_REASON,
    since: DEPRECATED_SINCE,
};

const PROJECT: &[&str] = &["project"];

const fn base(
    name: &'static str,
    check_str: &'static str,
    description: &'static str,
    deprecated_rule: Option<&'static DeprecatedRule>,
) -> RuleDefault {
    RuleDefault {
        name,
        check_str,
        description,
        operations: &[],
        scope_types: &[],
        deprecated_rule,
    }
}

/// An API rule; `scoped` sets `scope_types=["project"]`.
const fn api(
    name: &'static str,
    check_str: &'static str,
    scoped: bool,
    description: &'static str,
    operations: &'static [Operation],
) -> RuleDefault {
    RuleDefault {
        name,
        check_str,
        description,
        operations,
        scope_types: if scoped { PROJECT } else { &[] },
        deprecated_rule: None,
    }
}

const fn op(method: &'static str, path: &'static str) -> Operation {
    Operation { method, path }
}

const ADMIN: &str = "rule:context_is_admin";
const ADMIN_OR_PROJECT_READER: &str = "rule:admin_or_project_reader";
const ADMIN_OR_PROJECT_MEMBER: &str = "rule:admin_or_project_member";
const ADMIN_OR_PROJECT_MEMBER_USER: &str = "rule:admin_or_project_member_user";
const ADMIN_OR_PROJECT_MEMBER_USER_OR_CLUSTER_USER: &str =
    "rule:admin_or_project_member_user_or_cluster_user";
const PROJECT_MEMBER_DENY_CLUSTER_USER: &str = "rule:project_member_deny_cluster_user";
const ADMIN_OR_PROJECT_MEMBER_DENY_CLUSTER_USER: &str =
    "rule:admin_or_project_member_deny_cluster_user";
const ADMIN_OR_PROJECT_READER_DENY_CLUSTER_USER: &str =
    "rule:admin_or_project_reader_deny_cluster_user";
const ADMIN_OR_PROJECT_READER_USER: &str = "rule:admin_or_project_reader_user";

const CLUSTERS: &[Operation] = &[op("GET", "/v1/clusters")];
const CLUSTER_ONE_GET: &[Operation] = &[op("GET", "/v1/clusters/{cluster_ident}")];
const CLUSTER_ONE_PATCH: &[Operation] = &[op("PATCH", "/v1/clusters/{cluster_ident}")];
const CLUSTER_ONE_DELETE: &[Operation] = &[op("DELETE", "/v1/clusters/{cluster_ident}")];
const CLUSTER_UPGRADE: &[Operation] = &[op("POST", "/v1/clusters/{cluster_ident}/actions/upgrade")];
const TEMPLATES: &[Operation] = &[op("GET", "/v1/clustertemplates")];
const TEMPLATE_ONE_GET: &[Operation] = &[op("GET", "/v1/clustertemplates/{clustertemplate_ident}")];
const TEMPLATE_ONE_PATCH: &[Operation] =
    &[op("PATCH", "/v1/clustertemplates/{clustertemplate_ident}")];
const TEMPLATE_ONE_DELETE: &[Operation] =
    &[op("DELETE", "/v1/clustertemplates/{clustertemplate_ident}")];
const NODEGROUPS: &[Operation] = &[op("GET", "/v1/clusters/{cluster_id}/nodegroups")];
const NODEGROUP_ONE: &[Operation] = &[op(
    "GET",
    "/v1/clusters/{cluster_id}/nodegroups/{nodegroup}",
)];
const QUOTA_ONE_GET: &[Operation] = &[op("GET", "/v1/quotas/{project_id}/{resource}")];

static DEFAULTS: [RuleDefault; 66] = [
    // Base aliases.
    base(
        "context_is_admin",
        "role:admin",
        "Decides who is an administrator.",
        None,
    ),
    base(
        "admin_or_owner",
        "is_admin:True or project_id:%(project_id)s",
        "Legacy: an administrator or anyone in the target's project.",
        None,
    ),
    base(
        "admin_or_user",
        "is_admin:True or user_id:%(user_id)s",
        "Legacy: an administrator or the target's user.",
        None,
    ),
    base(
        "is_user",
        "user_id:%(user_id)s",
        "The caller is the target's user.",
        None,
    ),
    base(
        "project_member",
        "role:member and project_id:%(project_id)s",
        "A member of the target's project.",
        None,
    ),
    base(
        "project_reader",
        "role:reader and project_id:%(project_id)s",
        "A reader of the target's project.",
        None,
    ),
    base(
        "admin_or_project_reader",
        "(rule:context_is_admin) or (rule:project_reader)",
        "An administrator or a reader of the target's project.",
        Some(&DEPRECATED_ADMIN_OR_OWNER),
    ),
    base(
        "admin_or_project_member",
        "(rule:context_is_admin) or (rule:project_member)",
        "An administrator or a member of the target's project.",
        Some(&DEPRECATED_ADMIN_OR_OWNER),
    ),
    base(
        "admin_or_project_member_user",
        "(rule:context_is_admin) or ((rule:project_member) and (rule:is_user))",
        "An administrator, or a member of the target's project who is its user.",
        Some(&DEPRECATED_ADMIN_OR_USER),
    ),
    base(
        "admin_or_project_member_user_or_cluster_user",
        "(rule:context_is_admin) or ((rule:project_member) and (rule:is_user))",
        "An administrator, or a member of the target's project who is its user.",
        Some(&DEPRECATED_ADMIN_OR_USER),
    ),
    base(
        "project_member_deny_cluster_user",
        "(rule:project_member)",
        "A member of the target's project.",
        Some(&DEPRECATED_ADMIN_OR_OWNER),
    ),
    base(
        "admin_or_project_member_deny_cluster_user",
        "(rule:context_is_admin) or (rule:project_member)",
        "An administrator or a member of the target's project.",
        Some(&DEPRECATED_ADMIN_OR_OWNER),
    ),
    base(
        "project_reader_deny_cluster_user",
        "(rule:project_reader)",
        "A reader of the target's project.",
        Some(&DEPRECATED_ADMIN_OR_OWNER),
    ),
    base(
        "admin_or_project_reader_deny_cluster_user",
        "(rule:context_is_admin) or (rule:project_reader)",
        "An administrator or a reader of the target's project.",
        Some(&DEPRECATED_ADMIN_OR_OWNER),
    ),
    base(
        "admin_or_project_reader_user",
        "(rule:context_is_admin) or ((rule:project_reader) and (rule:is_user))",
        "An administrator, or a reader of the target's project who is its user.",
        Some(&DEPRECATED_ADMIN_OR_USER),
    ),
    // Certificates.
    api(
        "certificate:create",
        ADMIN_OR_PROJECT_MEMBER_USER,
        true,
        "Have the cluster CA sign a certificate.",
        &[op("POST", "/v1/certificates")],
    ),
    api(
        "certificate:get",
        ADMIN_OR_PROJECT_READER_USER,
        true,
        "Show the CA certificate of a cluster.",
        &[op("GET", "/v1/certificates/{cluster_uuid}")],
    ),
    api(
        "certificate:rotate_ca",
        ADMIN_OR_PROJECT_MEMBER,
        true,
        "Replace the CA of a cluster.",
        &[op("PATCH", "/v1/certificates/{cluster_uuid}")],
    ),
    // Clusters.
    api(
        "cluster:create",
        ADMIN_OR_PROJECT_MEMBER_DENY_CLUSTER_USER,
        true,
        "Create a cluster.",
        &[op("POST", "/v1/clusters")],
    ),
    api(
        "cluster:delete",
        ADMIN_OR_PROJECT_MEMBER_DENY_CLUSTER_USER,
        true,
        "Delete a cluster.",
        CLUSTER_ONE_DELETE,
    ),
    api(
        "cluster:delete_all_projects",
        ADMIN,
        false,
        "Delete a cluster of any project.",
        CLUSTER_ONE_DELETE,
    ),
    api(
        "cluster:detail",
        ADMIN_OR_PROJECT_READER_DENY_CLUSTER_USER,
        true,
        "List clusters with all their fields.",
        &[op("GET", "/v1/clusters/detail")],
    ),
    api(
        "cluster:detail_all_projects",
        ADMIN,
        false,
        "List clusters of all projects with all their fields.",
        &[op("GET", "/v1/clusters/detail")],
    ),
    api(
        "cluster:get",
        ADMIN_OR_PROJECT_READER_DENY_CLUSTER_USER,
        true,
        "Show a cluster.",
        CLUSTER_ONE_GET,
    ),
    api(
        "cluster:get_one_all_projects",
        ADMIN,
        false,
        "Show a cluster of any project.",
        CLUSTER_ONE_GET,
    ),
    api(
        "cluster:get_all",
        ADMIN_OR_PROJECT_READER_DENY_CLUSTER_USER,
        true,
        "List clusters.",
        CLUSTERS,
    ),
    api(
        "cluster:get_all_all_projects",
        ADMIN,
        false,
        "List the clusters of all projects.",
        CLUSTERS,
    ),
    api(
        "cluster:update",
        ADMIN_OR_PROJECT_MEMBER_DENY_CLUSTER_USER,
        true,
        "Update a cluster.",
        CLUSTER_ONE_PATCH,
    ),
    api(
        "cluster:update_health_status",
        ADMIN_OR_PROJECT_MEMBER_USER_OR_CLUSTER_USER,
        true,
        "Update the health status of a cluster.",
        CLUSTER_ONE_PATCH,
    ),
    api(
        "cluster:update_all_projects",
        ADMIN,
        false,
        "Update a cluster of any project.",
        CLUSTER_ONE_PATCH,
    ),
    api(
        "cluster:resize",
        ADMIN_OR_PROJECT_MEMBER_DENY_CLUSTER_USER,
        true,
        "Resize a cluster.",
        &[op("POST", "/v1/clusters/{cluster_ident}/actions/resize")],
    ),
    api(
        "cluster:upgrade",
        ADMIN_OR_PROJECT_MEMBER_DENY_CLUSTER_USER,
        true,
        "Upgrade a cluster.",
        CLUSTER_UPGRADE,
    ),
    api(
        "cluster:upgrade_all_projects",
        ADMIN,
        false,
        "Upgrade a cluster of any project.",
        CLUSTER_UPGRADE,
    ),
    // Cluster templates.
    api(
        "clustertemplate:create",
        ADMIN_OR_PROJECT_MEMBER_DENY_CLUSTER_USER,
        true,
        "Create a cluster template.",
        &[op("POST", "/v1/clustertemplates")],
    ),
    api(
        "clustertemplate:delete",
        ADMIN_OR_PROJECT_MEMBER,
        true,
        "Delete a cluster template.",
        TEMPLATE_ONE_DELETE,
    ),
    api(
        "clustertemplate:delete_all_projects",
        ADMIN,
        false,
        "Delete a cluster template of any project.",
        TEMPLATE_ONE_DELETE,
    ),
    api(
        "clustertemplate:detail_all_projects",
        ADMIN,
        false,
        "List cluster templates of all projects with all their fields.",
        &[op("GET", "/v1/clustertemplates/detail")],
    ),
    api(
        "clustertemplate:detail",
        ADMIN_OR_PROJECT_READER_DENY_CLUSTER_USER,
        true,
        "List cluster templates with all their fields.",
        &[op("GET", "/v1/clustertemplates/detail")],
    ),
    api(
        "clustertemplate:get",
        ADMIN_OR_PROJECT_READER_DENY_CLUSTER_USER,
        true,
        "Show a cluster template that is not public.",
        TEMPLATE_ONE_GET,
    ),
    api(
        "clustertemplate:get_one_all_projects",
        ADMIN,
        false,
        "Show a cluster template of any project.",
        TEMPLATE_ONE_GET,
    ),
    api(
        "clustertemplate:get_all",
        ADMIN_OR_PROJECT_READER_DENY_CLUSTER_USER,
        true,
        "List cluster templates.",
        TEMPLATES,
    ),
    api(
        "clustertemplate:get_all_all_projects",
        ADMIN,
        false,
        "List the cluster templates of all projects.",
        TEMPLATES,
    ),
    api(
        "clustertemplate:update",
        ADMIN_OR_PROJECT_MEMBER,
        true,
        "Update a cluster template.",
        TEMPLATE_ONE_PATCH,
    ),
    api(
        "clustertemplate:update_all_projects",
        ADMIN,
        false,
        "Update a cluster template of any project.",
        TEMPLATE_ONE_PATCH,
    ),
    api(
        "clustertemplate:publish",
        ADMIN,
        false,
        "Set the public or hidden flag of a cluster template.",
        &[
            op("POST", "/v1/clustertemplates"),
            op("PATCH", "/v1/clustertemplates/{clustertemplate_ident}"),
        ],
    ),
    // Credentials.
    api(
        "credential:rotate",
        PROJECT_MEMBER_DENY_CLUSTER_USER,
        true,
        "Rotate the credential a cluster uses towards OpenStack.",
        &[op("PATCH", "/v1/credentials/{cluster_uuid}")],
    ),
    // Federations.
    api(
        "federation:create",
        ADMIN_OR_PROJECT_MEMBER_DENY_CLUSTER_USER,
        true,
        "Create a federation.",
        &[op("POST", "/v1/federations")],
    ),
    api(
        "federation:delete",
        ADMIN_OR_PROJECT_MEMBER_DENY_CLUSTER_USER,
        true,
        "Delete a federation.",
        &[op("DELETE", "/v1/federations/{federation_ident}")],
    ),
    api(
        "federation:detail",
        ADMIN_OR_PROJECT_READER_DENY_CLUSTER_USER,
        true,
        "List federations with all their fields.",
        &[op("GET", "/v1/federations/detail")],
    ),
    api(
        "federation:get",
        ADMIN_OR_PROJECT_READER_DENY_CLUSTER_USER,
        true,
        "Show a federation.",
        &[op("GET", "/v1/federations/{federation_ident}")],
    ),
    api(
        "federation:get_all",
        ADMIN_OR_PROJECT_READER_DENY_CLUSTER_USER,
        true,
        "List federations.",
        &[op("GET", "/v1/federations")],
    ),
    api(
        "federation:update",
        ADMIN_OR_PROJECT_MEMBER_DENY_CLUSTER_USER,
        true,
        "Update a federation.",
        &[op("PATCH", "/v1/federations/{federation_ident}")],
    ),
    // Magnum services.
    api(
        "magnum-service:get_all",
        ADMIN,
        false,
        "List the Magnum conductor services.",
        &[op("GET", "/v1/mservices")],
    ),
    // Quotas.
    api(
        "quota:create",
        ADMIN,
        false,
        "Set a quota.",
        &[op("POST", "/v1/quotas")],
    ),
    api(
        "quota:delete",
        ADMIN,
        false,
        "Delete the quota of a project for a resource.",
        &[op("DELETE", "/v1/quotas/{project_id}/{resource}")],
    ),
    api(
        "quota:get",
        ADMIN_OR_PROJECT_READER,
        true,
        "Show the quota of a project for a resource.",
        QUOTA_ONE_GET,
    ),
    api(
        "quota:get_all",
        ADMIN,
        false,
        "List quotas.",
        &[op("GET", "/v1/quotas")],
    ),
    api(
        "quota:update",
        ADMIN,
        false,
        "Change the quota of a project for a resource.",
        &[op("PATCH", "/v1/quotas/{project_id}/{resource}")],
    ),
    // Statistics.
    api(
        "stats:get_all",
        ADMIN_OR_PROJECT_READER,
        true,
        "Show cluster and node counts.",
        &[op("GET", "/v1/stats")],
    ),
    // Nodegroups.
    api(
        "nodegroup:get",
        ADMIN_OR_PROJECT_READER,
        true,
        "Show a nodegroup.",
        NODEGROUP_ONE,
    ),
    api(
        "nodegroup:get_all",
        ADMIN_OR_PROJECT_READER,
        true,
        "List the nodegroups of a cluster.",
        NODEGROUPS,
    ),
    api(
        "nodegroup:get_all_all_projects",
        ADMIN,
        false,
        "List the nodegroups of a cluster of any project.",
        NODEGROUPS,
    ),
    api(
        "nodegroup:get_one_all_projects",
        ADMIN,
        false,
        "Show a nodegroup of a cluster of any project.",
        NODEGROUP_ONE,
    ),
    api(
        "nodegroup:create",
        ADMIN_OR_PROJECT_MEMBER,
        true,
        "Add a nodegroup to a cluster.",
        &[op("POST", "/v1/clusters/{cluster_id}/nodegroups")],
    ),
    api(
        "nodegroup:delete",
        ADMIN_OR_PROJECT_MEMBER,
        true,
        "Delete a nodegroup.",
        &[op(
            "DELETE",
            "/v1/clusters/{cluster_id}/nodegroups/{nodegroup}",
        )],
    ),
    api(
        "nodegroup:update",
        ADMIN_OR_PROJECT_MEMBER,
        true,
        "Update a nodegroup.",
        &[op(
            "PATCH",
            "/v1/clusters/{cluster_id}/nodegroups/{nodegroup}",
        )],
    ),
];

/// Every rule Magnum registers, base aliases first, in upstream registration order.
pub fn defaults() -> &'static [RuleDefault] {
    &DEFAULTS
}

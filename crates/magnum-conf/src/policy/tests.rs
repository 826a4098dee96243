#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use super::*;
use magnum_core::RequestContext;

/// The project and creator of the resource the `R` rows act on.
const PROJECT_A: &str = "A";
const OWNER: &str = "owner";

/// Personas, in the column order of [`MATRIX`]. Roles arrive expanded by Keystone.
const PERSONAS: [(&str, &[&str], &str, &str); 5] = [
    (
        "admin",
        &["admin", "member", "reader"],
        PROJECT_A,
        "u-admin",
    ),
    ("member", &["member", "reader"], PROJECT_A, "u-member"),
    ("reader", &["reader"], PROJECT_A, "u-reader"),
    ("other", &["member", "reader"], "B", "u-other"),
    // A member of A who created the resource (the certificate rules look at user_id).
    ("creator", &["member", "reader"], PROJECT_A, OWNER),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tgt {
    /// The caller's default target (`{project_id, user_id}` of the context).
    C,
    /// The resource in project A created by `owner`.
    R,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// `scope_types=["project"]`.
    P,
    /// No scope types.
    No,
}
use Scope::No;
use Scope::P;
use Tgt::{C, R};

/// Every registered rule, from policy.md §2/§3: which target Magnum passes, whether it is
/// project-scoped, and who passes, one letter per persona: admin, member (of A), reader (of
/// A), other (member of B), creator (member of A owning the resource). `new` is the default
/// (`enforce_new_defaults = True`), `legacy` has the deprecated alternatives OR-ed in. The
/// base rules are shown against the resource, where their project/user clauses matter.
/// (Cross-checked against oslo.policy 6.0.1 evaluating upstream Magnum's defaults.)
#[rustfmt::skip]
const MATRIX: &[(&str, Tgt, Scope, &str, &str)] = &[
    //  rule                                            target scope  new      legacy
    ("context_is_admin",                                 R, No, "YNNNN", "YNNNN"),
    ("admin_or_owner",                                   R, No, "YYYNY", "YYYNY"),
    ("admin_or_user",                                    R, No, "YNNNY", "YNNNY"),
    ("is_user",                                          R, No, "NNNNY", "NNNNY"),
    ("project_member",                                   R, No, "YYNNY", "YYNNY"),
    ("project_reader",                                   R, No, "YYYNY", "YYYNY"),
    ("admin_or_project_reader",                          R, No, "YYYNY", "YYYNY"),
    ("admin_or_project_member",                          R, No, "YYNNY", "YYYNY"),
    ("admin_or_project_member_user",                     R, No, "YNNNY", "YNNNY"),
    ("admin_or_project_member_user_or_cluster_user",     R, No, "YNNNY", "YNNNY"),
    ("project_member_deny_cluster_user",                 R, No, "YYNNY", "YYYNY"),
    ("admin_or_project_member_deny_cluster_user",        R, No, "YYNNY", "YYYNY"),
    ("project_reader_deny_cluster_user",                 R, No, "YYYNY", "YYYNY"),
    ("admin_or_project_reader_deny_cluster_user",        R, No, "YYYNY", "YYYNY"),
    ("admin_or_project_reader_user",                     R, No, "YNNNY", "YNNNY"),
    ("certificate:create",                               R, P,  "YNNNY", "YNNNY"),
    ("certificate:get",                                  R, P,  "YNNNY", "YNNNY"),
    ("certificate:rotate_ca",                            R, P,  "YYNNY", "YYYNY"),
    ("cluster:create",                                   C, P,  "YYNYY", "YYYYY"),
    ("cluster:delete",                                   R, P,  "YYNNY", "YYYNY"),
    ("cluster:delete_all_projects",                      C, No, "YNNNN", "YNNNN"),
    ("cluster:detail",                                   C, P,  "YYYYY", "YYYYY"),
    ("cluster:detail_all_projects",                      C, No, "YNNNN", "YNNNN"),
    ("cluster:get",                                      R, P,  "YYYNY", "YYYNY"),
    ("cluster:get_one_all_projects",                     C, No, "YNNNN", "YNNNN"),
    ("cluster:get_all",                                  C, P,  "YYYYY", "YYYYY"),
    ("cluster:get_all_all_projects",                     C, No, "YNNNN", "YNNNN"),
    ("cluster:update",                                   R, P,  "YYNNY", "YYYNY"),
    ("cluster:update_health_status",                     C, P,  "YYNYY", "YYYYY"),
    ("cluster:update_all_projects",                      C, No, "YNNNN", "YNNNN"),
    ("cluster:resize",                                   R, P,  "YYNNY", "YYYNY"),
    ("cluster:upgrade",                                  R, P,  "YYNNY", "YYYNY"),
    ("cluster:upgrade_all_projects",                     C, No, "YNNNN", "YNNNN"),
    ("clustertemplate:create",                           C, P,  "YYNYY", "YYYYY"),
    ("clustertemplate:delete",                           R, P,  "YYNNY", "YYYNY"),
    ("clustertemplate:delete_all_projects",              C, No, "YNNNN", "YNNNN"),
    ("clustertemplate:detail_all_projects",              C, No, "YNNNN", "YNNNN"),
    ("clustertemplate:detail",                           C, P,  "YYYYY", "YYYYY"),
    ("clustertemplate:get",                              R, P,  "YYYNY", "YYYNY"),
    ("clustertemplate:get_one_all_projects",             C, No, "YNNNN", "YNNNN"),
    ("clustertemplate:get_all",                          C, P,  "YYYYY", "YYYYY"),
    ("clustertemplate:get_all_all_projects",             C, No, "YNNNN", "YNNNN"),
    ("clustertemplate:update",                           R, P,  "YYNNY", "YYYNY"),
    ("clustertemplate:update_all_projects",              C, No, "YNNNN", "YNNNN"),
    ("clustertemplate:publish",                          C, No, "YNNNN", "YNNNN"),
    ("credential:rotate",                                C, P,  "YYNYY", "YYYYY"),
    ("federation:create",                                C, P,  "YYNYY", "YYYYY"),
    ("federation:delete",                                R, P,  "YYNNY", "YYYNY"),
    ("federation:detail",                                C, P,  "YYYYY", "YYYYY"),
    ("federation:get",                                   R, P,  "YYYNY", "YYYNY"),
    ("federation:get_all",                               C, P,  "YYYYY", "YYYYY"),
    ("federation:update",                                R, P,  "YYNNY", "YYYNY"),
    ("magnum-service:get_all",                           C, No, "YNNNN", "YNNNN"),
    ("quota:create",                                     C, No, "YNNNN", "YNNNN"),
    ("quota:delete",                                     C, No, "YNNNN", "YNNNN"),
    ("quota:get",                                        C, P,  "YYYYY", "YYYYY"),
    ("quota:get_all",                                    C, No, "YNNNN", "YNNNN"),
    ("quota:update",                                     C, No, "YNNNN", "YNNNN"),
    ("stats:get_all",                                    C, P,  "YYYYY", "YYYYY"),
    ("nodegroup:get",                                    C, P,  "YYYYY", "YYYYY"),
    ("nodegroup:get_all",                                C, P,  "YYYYY", "YYYYY"),
    ("nodegroup:get_all_all_projects",                   C, No, "YNNNN", "YNNNN"),
    ("nodegroup:get_one_all_projects",                   C, No, "YNNNN", "YNNNN"),
    ("nodegroup:create",                                 C, P,  "YYNYY", "YYYYY"),
    ("nodegroup:delete",                                 C, P,  "YYNYY", "YYYYY"),
    ("nodegroup:update",                                 C, P,  "YYNYY", "YYYYY"),
];

/// A persona's context with `is_admin` computed the way Magnum's context does.
fn persona(enforcer: &Enforcer, roles: &[&str], project: &str, user: &str) -> RequestContext {
    let mut ctx = RequestContext {
        project_id: Some(project.into()),
        user_id: Some(user.into()),
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        ..RequestContext::default()
    };
    ctx.is_admin = enforcer.is_admin(&ctx);
    ctx
}

fn target_for(tgt: Tgt, ctx: &RequestContext) -> Target {
    match tgt {
        Tgt::C => Target::from_context(ctx),
        Tgt::R => Target::owned_by(Some(PROJECT_A), Some(OWNER)),
    }
}

fn outcomes(enforcer: &Enforcer, rule: &str, tgt: Tgt) -> String {
    PERSONAS
        .iter()
        .map(|(_, roles, project, user)| {
            let ctx = persona(enforcer, roles, project, user);
            let target = target_for(tgt, &ctx);
            let allowed = enforcer.authorize(rule, &target, &ctx).is_ok();
            assert_eq!(allowed, enforcer.check(rule, &target, &ctx), "{rule}");
            if allowed { 'Y' } else { 'N' }
        })
        .collect()
}

fn legacy_enforcer() -> Enforcer {
    Enforcer::new(PolicyOptions {
        enforce_new_defaults: false,
        ..PolicyOptions::default()
    })
    .unwrap()
}

#[test]
fn matrix_covers_every_registered_rule_once() {
    let in_matrix: Vec<&str> = MATRIX.iter().map(|row| row.0).collect();
    let registered: Vec<&str> = defaults().iter().map(|d| d.name).collect();
    assert_eq!(in_matrix, registered);
    assert_eq!(registered.len(), 66);
    for (name, _, scope, _, _) in MATRIX {
        let default = defaults().iter().find(|d| d.name == *name).unwrap();
        let expected: &[&str] = if *scope == P { &["project"] } else { &[] };
        assert_eq!(default.scope_types, expected, "scope of {name}");
        // Every default parses cleanly.
        try_parse_rule(default.check_str).unwrap();
    }
}

#[test]
fn matrix_new_defaults() {
    let enforcer = Enforcer::new(PolicyOptions::default()).unwrap();
    for (rule, tgt, _, new, _) in MATRIX {
        assert_eq!(
            outcomes(&enforcer, rule, *tgt),
            *new,
            "{rule} (admin member reader other creator)"
        );
    }
}

#[test]
fn matrix_legacy_defaults() {
    let enforcer = legacy_enforcer();
    for (rule, tgt, _, _, legacy) in MATRIX {
        assert_eq!(
            outcomes(&enforcer, rule, *tgt),
            *legacy,
            "{rule} (admin member reader other creator)"
        );
    }
}

#[test]
fn legacy_defaults_or_in_the_deprecated_check() {
    let enforcer = legacy_enforcer();
    assert_eq!(
        enforcer
            .rule("admin_or_project_member")
            .unwrap()
            .to_string(),
        "((rule:context_is_admin or rule:project_member) or (is_admin:True or project_id:%(project_id)s))"
    );
    // Rules without a deprecated alternative are untouched.
    assert_eq!(
        enforcer.rule("project_member").unwrap().to_string(),
        "(role:member and project_id:%(project_id)s)"
    );
    let new = Enforcer::new(PolicyOptions::default()).unwrap();
    assert_eq!(
        new.rule("admin_or_project_member").unwrap().to_string(),
        "(rule:context_is_admin or rule:project_member)"
    );
    // policy.md §1: with a ctx target, every authenticated caller passes these rules.
    let nobody = persona(&enforcer, &[], "Z", "uz");
    assert!(enforcer.check("cluster:create", &Target::from_context(&nobody), &nobody));
    assert!(!new.check("cluster:create", &Target::from_context(&nobody), &nobody));
}

fn system_admin(enforcer: &Enforcer) -> RequestContext {
    let mut ctx = RequestContext {
        user_id: Some("u-sys".into()),
        system_scope: Some("all".into()),
        roles: vec!["admin".into(), "member".into(), "reader".into()],
        ..RequestContext::default()
    };
    ctx.is_admin = enforcer.is_admin(&ctx);
    ctx
}

#[test]
fn enforce_scope_denies_project_rules_to_system_tokens() {
    let enforcer = Enforcer::new(PolicyOptions::default()).unwrap();
    let ctx = system_admin(&enforcer);
    assert!(ctx.is_admin);
    for (rule, _, scope, _, _) in MATRIX {
        let target = Target::from_context(&ctx);
        let result = enforcer.authorize(rule, &target, &ctx);
        // Unscoped rules are all admin-only or base rules an admin passes.
        assert_eq!(result.is_ok(), *scope == No, "{rule}");
        if let Err(err) = result {
            assert_eq!(
                err.to_string(),
                format!("Policy doesn't allow {rule} to be performed.")
            );
        }
    }
    // Without enforce_scope the same token passes on its roles alone.
    let lax = Enforcer::new(PolicyOptions {
        enforce_scope: false,
        ..PolicyOptions::default()
    })
    .unwrap();
    for (rule, _, _, _, _) in MATRIX {
        assert!(lax.check(rule, &Target::from_context(&ctx), &ctx), "{rule}");
    }
}

#[test]
fn domain_scoped_tokens_fail_project_rules() {
    let enforcer = Enforcer::new(PolicyOptions::default()).unwrap();
    let mut ctx = persona(&enforcer, &["admin", "member", "reader"], PROJECT_A, "u");
    ctx.domain_id = Some("default".into());
    let target = Target::from_context(&ctx);
    assert!(!enforcer.check("cluster:get_all", &target, &ctx));
    assert!(enforcer.check("cluster:get_all_all_projects", &target, &ctx));
    // Only the token's own domain counts, not the user's or project's domain.
    ctx.domain_id = None;
    ctx.user_domain_id = Some("default".into());
    ctx.project_domain_id = Some("default".into());
    assert!(enforcer.check("cluster:get_all", &target, &ctx));
}

#[test]
fn is_admin_and_unregistered_rules() {
    let enforcer = Enforcer::new(PolicyOptions::default()).unwrap();
    let mut ctx = RequestContext::for_project("p", "u");
    assert!(!enforcer.is_admin(&ctx));
    ctx.roles.push("ADMIN".into());
    assert!(enforcer.is_admin(&ctx), "role checks ignore case");
    // The flag itself is not consulted: it is what is_admin computes.
    let flagged = RequestContext {
        is_admin: true,
        ..RequestContext::for_project("p", "u")
    };
    assert!(!enforcer.is_admin(&flagged));

    let err = enforcer
        .authorize("cluster:explode", &Target::from_context(&ctx), &ctx)
        .unwrap_err();
    assert!(matches!(err, PolicyError::NotRegistered { .. }));
    assert_eq!(
        err.to_string(),
        "Policy cluster:explode has not been registered"
    );
    assert!(!enforcer.check("cluster:explode", &Target::from_context(&ctx), &ctx));
}

#[test]
fn generic_checks_against_credentials() {
    let ctx = RequestContext {
        project_id: Some("p1".into()),
        user_id: Some("u1".into()),
        user_name: Some("alice".into()),
        roles: vec!["Admin".into(), "member".into()],
        is_admin: true,
        ..RequestContext::default()
    };
    let target = Target::owned_by(Some("p1"), Some("u1"))
        .with_opt("none", None::<&str>)
        .with("enabled", "True")
        .with("name", "alice")
        .with("role", "ADMIN")
        .with("num", "5");
    // Rule → outcome, as oslo.policy 6.0.1 evaluates it for the same dicts.
    let cases = [
        ("is_admin:True", true),
        ("is_admin:true", false),
        ("is_admin:False", false),
        ("user_name:%(name)s", true),
        ("'alice':%(name)s", true),
        ("\"alice\":%(name)s", true),
        ("True:%(enabled)s", true),
        ("True:True", true),
        ("roles:admin", false),
        ("roles:Admin", true),
        ("role:%(role)s", true),
        ("role:ADMIN", true),
        ("project_id:%(missing)s", false),
        ("project_name:%(none)s", true),
        ("project_name:None", true),
        ("None:%(none)s", true),
        ("5:%(num)s", true),
        ("+5:%(num)s", true),
        ("all_tenants:False", true),
        ("user_id:u1 and not role:reader", true),
        ("not role:admin or user_id:%(user_id)s", true),
        ("unknown:x", false),
        ("user_id:%(user_id)s-x", false),
        ("user_id:u%(num)s", false),
        ("project_id:p1 or rule:nonexistent", true),
        ("rule:nonexistent", false),
        (
            "role:member and (role:x or project_id:%(project_id)s)",
            true,
        ),
        ("domain:None", true),
        ("@", true),
        ("!", false),
        ("", true),
        ("not @", false),
        ("roles.x:y", false),
        ("system:all", false),
        ("https://policy.example", false),
    ];
    for (rule, expected) in cases {
        let enforcer = Enforcer::with_overrides([("cluster:get", rule)], true, true);
        assert_eq!(
            enforcer.check("cluster:get", &target, &ctx),
            expected,
            "{rule:?}"
        );
    }
}

#[test]
fn python_none_renders_as_none() {
    // An unscoped caller with the default target: `project_id:%(project_id)s` compares
    // "None" with "None", as in oslo.
    let enforcer = Enforcer::new(PolicyOptions::default()).unwrap();
    let ctx = RequestContext {
        roles: vec!["reader".into()],
        ..RequestContext::default()
    };
    assert!(enforcer.check("cluster:get_all", &Target::from_context(&ctx), &ctx));
    // A federation target has no user_id at all: user clauses fail rather than match None.
    let creator = enforcer.authorize(
        "is_user",
        &Target::new().with("project_id", "p"),
        &RequestContext::default(),
    );
    assert!(matches!(creator, Err(PolicyError::NotAuthorized { .. })));
}

#[test]
fn undefined_references_deny_unless_a_default_rule_exists() {
    let ctx = RequestContext::for_project("p", "u");
    let target = Target::from_context(&ctx);
    let enforcer = Enforcer::with_overrides([("cluster:create", "rule:nope")], true, true);
    assert!(!enforcer.check("cluster:create", &target, &ctx));
    let enforcer = Enforcer::with_overrides(
        [("cluster:create", "rule:nope"), ("default", "@")],
        true,
        true,
    );
    assert!(enforcer.check("cluster:create", &target, &ctx));
}

#[test]
fn cycles_deny_instead_of_overflowing() {
    let ctx = RequestContext::for_project("p", "u");
    let enforcer = Enforcer::with_overrides(
        [
            ("cluster:create", "rule:a"),
            ("a", "rule:b"),
            ("b", "rule:a or rule:a"),
        ],
        true,
        true,
    );
    assert!(!enforcer.check("cluster:create", &Target::from_context(&ctx), &ctx));
    // The loop denies the whole decision: `not` around it must not turn it into an allow.
    let enforcer = Enforcer::with_overrides(
        [("cluster:create", "not rule:a"), ("a", "rule:a")],
        true,
        true,
    );
    assert!(!enforcer.check("cluster:create", &Target::from_context(&ctx), &ctx));
    // A loop that short-circuiting never reaches is harmless, as in oslo.
    let enforcer =
        Enforcer::with_overrides([("cluster:create", "@ or rule:cluster:create")], true, true);
    assert!(enforcer.check("cluster:create", &Target::from_context(&ctx), &ctx));
}

#[test]
fn unparsable_overrides_deny() {
    let ctx = RequestContext::for_project("p", "u");
    let enforcer = Enforcer::with_overrides([("cluster:get_all", "role:member and (")], true, true);
    assert_eq!(enforcer.rule("cluster:get_all"), Some(&Check::False));
    assert!(!enforcer.check("cluster:get_all", &Target::from_context(&ctx), &ctx));
}

#[test]
fn enforcer_is_cheap_to_share() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Enforcer>();
}

// ---- policy files ----

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("magnum-policy-")
        .tempdir()
        .unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn member() -> RequestContext {
    RequestContext::for_project("p", "u")
}

#[test]
fn yaml_overrides_replace_defaults_by_name() {
    let dir = temp_dir();
    let file = write(
        dir.path(),
        "policy.yaml",
        "# operators' overrides\n\
         \"cluster:create\": \"role:creator\"\n\
         'my_alias': 'role:reader'\n\
         cluster:get_all: rule:my_alias and not role:banned\n",
    );
    let enforcer = Enforcer::new(PolicyOptions {
        policy_file: Some(file.clone()),
        ..PolicyOptions::default()
    })
    .unwrap();
    assert_eq!(enforcer.files(), [file]);
    let ctx = member();
    let target = Target::from_context(&ctx);
    assert!(!enforcer.check("cluster:create", &target, &ctx));
    let creator = RequestContext {
        roles: vec!["Creator".into()],
        ..member()
    };
    assert!(enforcer.check("cluster:create", &target, &creator));
    // An unregistered alias is usable through rule:, but not enforceable by itself.
    assert!(enforcer.check("cluster:get_all", &target, &ctx));
    let banned = RequestContext {
        roles: vec!["reader".into(), "banned".into()],
        ..member()
    };
    assert!(!enforcer.check("cluster:get_all", &target, &banned));
    assert!(matches!(
        enforcer.authorize("my_alias", &target, &ctx),
        Err(PolicyError::NotRegistered { .. })
    ));
    // The override keeps the registered scope types.
    let mut system = creator.clone();
    system.system_scope = Some("all".into());
    assert!(!enforcer.check("cluster:create", &target, &system));
    // Untouched defaults stay.
    assert!(enforcer.check("cluster:delete", &target, &ctx));
}

#[test]
fn json_overrides_and_list_syntax() {
    let dir = temp_dir();
    let file = write(
        dir.path(),
        "policy.json",
        r#"{
            "cluster:create": [["role:member", "project_id:%(project_id)s"], ["role:admin"]],
            "cluster:delete": [],
            "cluster:update": "",
            "cluster:resize": "!",
            "cluster:upgrade": null
        }"#,
    );
    let enforcer = Enforcer::new(PolicyOptions {
        policy_file: Some(file),
        ..PolicyOptions::default()
    })
    .unwrap();
    assert_eq!(
        enforcer.rule("cluster:create").unwrap().to_string(),
        "((role:member and project_id:%(project_id)s) or role:admin)"
    );
    let reader = RequestContext {
        roles: vec!["reader".into()],
        ..member()
    };
    let target = Target::owned_by(Some("elsewhere"), Some("x"));
    assert!(!enforcer.check("cluster:create", &target, &reader));
    for allowed in ["cluster:delete", "cluster:update", "cluster:upgrade"] {
        assert!(enforcer.check(allowed, &target, &reader), "{allowed}");
    }
    assert!(!enforcer.check("cluster:resize", &target, &member()));
}

#[test]
fn policy_dirs_apply_in_sorted_order_after_the_file() {
    let dir = temp_dir();
    let file = write(
        dir.path(),
        "policy.yaml",
        "cluster:create: role:one\nquota:get: role:q\n",
    );
    let d = dir.path().join("policy.d");
    std::fs::create_dir(&d).unwrap();
    write(&d, "20-b.yaml", "cluster:create: role:three\n");
    write(
        &d,
        "10-a.json",
        r#"{"cluster:create": "role:two", "quota:update": "role:u"}"#,
    );
    write(&d, ".hidden.yaml", "cluster:create: role:hidden\n");
    std::fs::create_dir(d.join("sub")).unwrap();
    write(&d.join("sub"), "x.yaml", "cluster:create: role:sub\n");

    let enforcer = Enforcer::new(PolicyOptions {
        policy_file: Some(file),
        // Relative directories are found through the search path; missing ones are skipped.
        policy_dirs: vec!["policy.d".into(), "missing.d".into()],
        search_dirs: vec![dir.path().join("nowhere"), dir.path().to_owned()],
        ..PolicyOptions::default()
    })
    .unwrap();
    assert_eq!(
        enforcer.rule("cluster:create").unwrap().to_string(),
        "role:three"
    );
    assert_eq!(enforcer.rule("quota:get").unwrap().to_string(), "role:q");
    assert_eq!(enforcer.rule("quota:update").unwrap().to_string(), "role:u");
    let names: Vec<_> = enforcer
        .files()
        .iter()
        .map(|p| p.file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["policy.yaml", "10-a.json", "20-b.yaml"]);

    // A policy_dirs entry that is a file is an error, as in oslo.
    let err = Enforcer::new(PolicyOptions {
        policy_dirs: vec![dir.path().join("policy.yaml")],
        ..PolicyOptions::default()
    })
    .unwrap_err();
    assert!(matches!(err, PolicyError::NotADirectory { .. }));
}

#[test]
fn policy_file_resolution() {
    let dir = temp_dir();
    // No file anywhere: the defaults alone.
    let enforcer = Enforcer::new(PolicyOptions {
        search_dirs: vec![dir.path().to_owned()],
        ..PolicyOptions::default()
    })
    .unwrap();
    assert!(enforcer.files().is_empty());
    // The default name, or a relative name, is found in the search directories in order.
    let second = dir.path().join("second");
    std::fs::create_dir(&second).unwrap();
    write(&second, "policy.yaml", "cluster:create: '!'\n");
    write(&second, "custom.yaml", "cluster:create: '@'\n");
    let found = |policy_file: Option<&str>| {
        Enforcer::new(PolicyOptions {
            policy_file: policy_file.map(PathBuf::from),
            search_dirs: vec![dir.path().to_owned(), second.clone()],
            ..PolicyOptions::default()
        })
        .unwrap()
    };
    assert_eq!(found(None).rule("cluster:create"), Some(&Check::False));
    assert_eq!(
        found(Some("policy.yaml")).rule("cluster:create"),
        Some(&Check::False)
    );
    assert_eq!(
        found(Some("custom.yaml")).rule("cluster:create"),
        Some(&Check::True)
    );
    // A relative name found nowhere is tolerated like the default.
    assert!(found(Some("absent.yaml")).files().is_empty());
    // An absolute path that does not exist is a configuration error.
    let missing = dir.path().join("absent.yaml");
    let err = Enforcer::new(PolicyOptions {
        policy_file: Some(missing.clone()),
        ..PolicyOptions::default()
    })
    .unwrap_err();
    assert!(matches!(&err, PolicyError::FileNotFound { path } if *path == missing));
}

#[test]
fn unparsable_files_name_file_and_line() {
    let dir = temp_dir();
    let yaml = write(
        dir.path(),
        "policy.yaml",
        "cluster:create: role:admin\ncluster:get: [unclosed\nquota:get: x\n",
    );
    let err = Enforcer::new(PolicyOptions {
        policy_file: Some(yaml.clone()),
        ..PolicyOptions::default()
    })
    .unwrap_err();
    let PolicyError::Parse { path, line, .. } = &err else {
        panic!("parse error expected, got {err:?}");
    };
    assert_eq!(path, &yaml);
    assert!(line.is_some_and(|l| (2..=4).contains(&l)), "{err}");
    assert!(
        err.to_string().contains(&yaml.display().to_string()),
        "{err}"
    );
    assert!(err.to_string().contains(" line "), "{err}");

    let json = write(
        dir.path(),
        "policy.json",
        "{\n  \"cluster:create\": \"role:a\",\n  \"quota:get: \"x\"\n}\n",
    );
    let err = Enforcer::new(PolicyOptions {
        policy_file: Some(json),
        ..PolicyOptions::default()
    })
    .unwrap_err();
    assert!(
        matches!(err, PolicyError::Parse { line: Some(3), .. }),
        "{err}"
    );

    // A rule of the wrong type is refused, naming the rule.
    let typed = write(dir.path(), "typed.yaml", "cluster:create: 42\n");
    let err = Enforcer::new(PolicyOptions {
        policy_file: Some(typed),
        ..PolicyOptions::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("cluster:create"), "{err}");

    // An empty file has no rules.
    let empty = write(dir.path(), "empty.yaml", "# nothing\n");
    let enforcer = Enforcer::new(PolicyOptions {
        policy_file: Some(empty),
        ..PolicyOptions::default()
    })
    .unwrap();
    assert_eq!(
        enforcer.rule("cluster:create").unwrap().to_string(),
        "rule:admin_or_project_member_deny_cluster_user"
    );
}

#[test]
fn overriding_a_deprecated_name_carries_over() {
    // Upstream names the deprecated rules `rule:admin_or_owner`/`rule:admin_or_user`, so
    // only a file key spelled that way is carried over to the new rules.
    let enforcer = Enforcer::with_overrides([("rule:admin_or_owner", "role:legacy")], true, true);
    assert_eq!(
        enforcer
            .rule("admin_or_project_member")
            .unwrap()
            .to_string(),
        "role:legacy"
    );
    assert_eq!(
        enforcer
            .rule("admin_or_project_member_user")
            .unwrap()
            .to_string(),
        "(rule:context_is_admin or (rule:project_member and rule:is_user))"
    );
    // An override equal to the old default, or aliasing the new rule, is not carried over.
    let same = Enforcer::with_overrides(
        [(
            "rule:admin_or_owner",
            "is_admin:True or project_id:%(project_id)s",
        )],
        true,
        true,
    );
    assert_eq!(
        same.rule("admin_or_project_member").unwrap().to_string(),
        "(rule:context_is_admin or rule:project_member)"
    );
    // Overriding the new name itself also drops the legacy OR.
    let own = Enforcer::with_overrides([("admin_or_project_member", "role:x")], true, false);
    assert_eq!(
        own.rule("admin_or_project_member").unwrap().to_string(),
        "role:x"
    );
}

#[test]
fn options_from_config() {
    let cfg = crate::config::Config::from_ini_str(
        "[oslo_policy]\npolicy_file = /etc/magnum/custom.yaml\nenforce_scope = false\n\
         enforce_new_defaults = false\npolicy_dirs = a.d\npolicy_dirs = b.d\n",
    )
    .unwrap();
    let opts = PolicyOptions::from_config(&cfg, &[PathBuf::from("/srv/conf.d")]);
    assert_eq!(
        opts.policy_file,
        Some(PathBuf::from("/etc/magnum/custom.yaml"))
    );
    assert_eq!(
        opts.policy_dirs,
        [PathBuf::from("a.d"), PathBuf::from("b.d")]
    );
    assert!(!opts.enforce_scope && !opts.enforce_new_defaults);
    assert_eq!(
        opts.search_dirs.first(),
        Some(&PathBuf::from("/srv/conf.d"))
    );
    assert_eq!(opts.search_dirs.last(), Some(&PathBuf::from("/etc")));

    let dirs = oslo_search_dirs(
        &[
            PathBuf::from("/a/magnum.conf"),
            PathBuf::from("/b/extra.conf"),
        ],
        &[PathBuf::from("/c")],
    );
    assert_eq!(
        &dirs[..3],
        [
            PathBuf::from("/c"),
            PathBuf::from("/b"),
            PathBuf::from("/a")
        ]
    );
}

#[test]
fn sample_file_round_trips_to_the_defaults() {
    let sample = sample_policy_yaml();
    assert!(sample.lines().all(|l| l.is_empty() || l.starts_with('#')));
    assert!(sample.contains("# Intended scope(s): project\n#\"cluster:create\": \"rule:admin_or_project_member_deny_cluster_user\"\n"));
    // Uncommenting the rule lines gives a policy file equal to the defaults.
    let uncommented: String = sample
        .lines()
        .filter_map(|l| l.strip_prefix("#\""))
        .map(|l| format!("\"{l}\n"))
        .collect();
    let dir = temp_dir();
    let file = write(dir.path(), "policy.yaml", &uncommented);
    let from_sample = Enforcer::new(PolicyOptions {
        policy_file: Some(file),
        ..PolicyOptions::default()
    })
    .unwrap();
    let defaults_only = Enforcer::new(PolicyOptions::default()).unwrap();
    for default in defaults() {
        assert_eq!(
            from_sample.rule(default.name),
            defaults_only.rule(default.name),
            "{}",
            default.name
        );
    }
}

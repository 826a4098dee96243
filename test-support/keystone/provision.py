"""Provision a bootstrapped test Keystone: personas, the magnum service user, the
container-infra catalog entry; then write env.sh and clouds.yaml. Run by start.sh with the venv's
python; one Python process instead of ~30 `openstack` calls keeps startup to a few seconds.

usage: provision.py WORKDIR AUTH_URL MAGNUM_URL
"""

import json
import os
import shlex
import sys

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
from keystoneclient.v3 import client as ks_client

REGION = "RegionOne"
DOMAIN = "default"  # the Default domain's id, made by bootstrap

# name -> (project, roles). Only the explicit role is granted: Keystone's implied roles
# (admin => manager => member => reader, made by bootstrap) expand it in tokens, as in a real
# cloud.
PERSONAS = {
    "admin": ("admin", ["admin"]),  # user, project and grant made by bootstrap
    "demo-admin": ("demo", ["admin"]),
    "demo-member": ("demo", ["member"]),
    "demo-reader": ("demo", ["reader"]),
    "alt-member": ("alt", ["member"]),
}
# The service user magnum-rs validates tokens with ([keystone_authtoken]); the `service` role
# is what keystonemiddleware's service_token_roles expects.
SERVICE_USER = ("magnum", "service", ["admin", "service"])


def password(user):
    return "secret-" + user


def one(items, what):
    if len(items) != 1:
        sys.exit(f"provision: expected one {what}, found {len(items)}")
    return items[0]


def get_or_create(manager, name, **create):
    found = manager.list(name=name, **({"domain": DOMAIN} if "domain" in create else {}))
    return found[0] if found else manager.create(name=name, **create)


def main():
    workdir, auth_url, magnum_url = sys.argv[1:4]
    magnum_url = magnum_url.rstrip("/")
    auth = v3.Password(
        auth_url=auth_url,
        username="admin",
        password=password("admin"),  # start.sh bootstraps with this
        user_domain_id=DOMAIN,
        project_name="admin",
        project_domain_id=DOMAIN,
    )
    ks = ks_client.Client(session=ks_session.Session(auth=auth, timeout=30), interface="public")

    roles = {r.name: r for r in ks.roles.list()}
    for name in ("admin", "member", "reader"):
        if name not in roles:
            sys.exit(f"provision: bootstrap did not create role {name!r}")
    # Tests rely on the implied-role chain (bootstrap makes admin => manager => member =>
    # reader); fail loudly if this Keystone lacks it.
    names = {r.id: r.name for r in roles.values()}
    direct = {}
    for rule in ks.inference_rules.list_inference_roles():
        direct[names[rule.prior_role["id"]]] = {names[r["id"]] for r in rule.implies}

    def implied(role):
        out, todo = set(), [role]
        while todo:
            for r in direct.get(todo.pop(), ()):
                if r not in out:
                    out.add(r)
                    todo.append(r)
        return out

    for prior, want in (("admin", {"member", "reader"}), ("member", {"reader"})):
        if not want <= implied(prior):
            sys.exit(f"provision: {prior} implies {sorted(implied(prior))}, want {sorted(want)}")
    if "service" not in roles:
        roles["service"] = ks.roles.create(name="service")

    projects = {}
    for name in ("admin", "demo", "alt", "service"):
        projects[name] = get_or_create(
            ks.projects, name, domain=DOMAIN, description=f"magnum-rs test project {name}"
        )

    users = {}
    grants = [(u, p, r) for u, (p, r) in PERSONAS.items()] + [SERVICE_USER]
    for user, project, user_roles in grants:
        if user == "admin":
            users[user] = one(ks.users.list(name="admin", domain=DOMAIN), "admin user")
        else:
            users[user] = get_or_create(
                ks.users,
                user,
                domain=DOMAIN,
                password=password(user),
                default_project=projects[project],
            )
        for role in user_roles:
            ks.roles.grant(roles[role], user=users[user], project=projects[project])

    service = get_or_create(ks.services, "magnum", type="container-infra",
                            description="Container Infrastructure Management Service")
    have = {(e.interface, e.region) for e in ks.endpoints.list(service=service)}
    for interface in ("public", "internal", "admin"):
        if (interface, REGION) not in have:
            ks.endpoints.create(service=service, url=magnum_url + "/v1",
                                interface=interface, region=REGION)

    write_files(workdir, auth_url, magnum_url, projects, users)


def write_files(workdir, auth_url, magnum_url, projects, users):
    clouds = {}
    for user, (project, _) in list(PERSONAS.items()) + [("magnum", ("service", None))]:
        clouds[user if user != "magnum" else "magnum-service"] = {
            "auth": {
                "auth_url": auth_url,
                "username": user,
                "password": password(user),
                "project_name": project,
                "user_domain_name": "Default",
                "project_domain_name": "Default",
            },
            "region_name": REGION,
            "identity_api_version": 3,
            "interface": "public",
        }
        # A Keystone on HTTPS (start.sh with KEYSTONE_TLS_CERT): clients trust its certificate.
        if os.environ.get("REQUESTS_CA_BUNDLE"):
            clouds[user if user != "magnum" else "magnum-service"]["cacert"] = os.environ[
                "REQUESTS_CA_BUNDLE"
            ]
    # JSON is valid YAML, and json needs no extra module.
    with open(os.path.join(workdir, "clouds.yaml"), "w") as f:
        json.dump({"clouds": clouds}, f, indent=2)
        f.write("\n")

    env = {
        "OS_CLIENT_CONFIG_FILE": os.path.join(workdir, "clouds.yaml"),
        "MAGNUM_TEST_KEYSTONE_URL": auth_url[: -len("/v3")],
        "MAGNUM_TEST_AUTH_URL": auth_url,
        "MAGNUM_TEST_MAGNUM_URL": magnum_url,
        "MAGNUM_TEST_REGION": REGION,
        "MAGNUM_TEST_SERVICE_USER": "magnum",
        "MAGNUM_TEST_SERVICE_PASSWORD": password("magnum"),
        "MAGNUM_TEST_SERVICE_PROJECT": "service",
        "MAGNUM_TEST_SERVICE_USER_ID": users["magnum"].id,
    }
    for name in ("admin", "demo", "alt", "service"):
        env[f"MAGNUM_TEST_{name.upper()}_PROJECT_ID"] = projects[name].id
    for user in PERSONAS:
        key = "MAGNUM_TEST_" + user.upper().replace("-", "_")
        env[key + "_PASSWORD"] = password(user)
        env[key + "_USER_ID"] = users[user].id
    # start.sh appends the PID and log lines after this.
    with open(os.path.join(workdir, "env.sh"), "w") as f:
        for key, value in env.items():
            f.write(f"export {key}={shlex.quote(value)}\n")


if __name__ == "__main__":
    main()

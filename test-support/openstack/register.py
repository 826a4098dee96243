"""Registers services in a test Keystone's catalogue, in one region (used by start.sh).

    register.py AUTH_URL ADMIN_PASSWORD REGION TYPE=NAME=URL...

Runs as the Keystone harness's `admin` (project admin, domain Default) with the Keystone
venv's keystoneauth1 and python-keystoneclient. Creates the region if needed; for each
TYPE it reuses the first service entry of that type (so `openstack service show TYPE`
stays unambiguous when several regions are registered) or creates one named NAME; then it
replaces that service's public and internal endpoints in REGION with URL. Idempotent.
"""
import sys

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session
from keystoneauth1.identity import v3
from keystoneclient.v3 import client

INTERFACES = ("public", "internal")


def main(argv):
    auth_url, password, region = argv[1:4]
    entries = [a.split("=", 2) for a in argv[4:]]
    sess = session.Session(
        auth=v3.Password(
            auth_url=auth_url,
            username="admin",
            password=password,
            project_name="admin",
            user_domain_id="default",
            project_domain_id="default",
        )
    )
    # Talk to the Keystone named, whatever its catalogue lists.
    ks = client.Client(session=sess, endpoint_override=auth_url, interface="public")
    try:
        ks.regions.get(region)
    except ks_exc.NotFound:
        ks.regions.create(id=region, description="real OpenStack services (test-support/openstack)")
    for stype, name, url in entries:
        existing = ks.services.list(type=stype)
        service = existing[0] if existing else ks.services.create(name=name, type=stype, enabled=True)
        for itf in INTERFACES:
            for ep in ks.endpoints.list(service=service, interface=itf, region_id=region):
                ks.endpoints.delete(ep)
            ks.endpoints.create(service=service, url=url, interface=itf, region=region, enabled=True)
        print("%-14s %-10s %s" % (stype, service.name, url))


if __name__ == "__main__":
    main(sys.argv)

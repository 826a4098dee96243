"""Seeds the real services with the test data magnum-rs's tests validate against (start.sh).

    seed.py AUTH_URL REGION ADMIN_PASSWORD DEMO_MEMBER_PASSWORD KEY_FILE SERVICE_USER SERVICE_PASSWORD SERVICE_PROJECT

Every endpoint is looked up in the catalogue, in REGION, so this also checks the
registration. As `admin` (project admin): public images, public flavors, networks and
subnets, a public volume type, public share types. As `demo-member` (project demo): its
keypair `demo-key` (keypairs belong to a user) with the public key KEY_FILE.pub, and its
share network `k8s-shares` on the shared private network; then what demo-member sees
through each API with its own token. Plain REST over keystoneauth1 sessions; the services
are independent, so each is seeded in a thread of its own (a service's first request with
a new token costs ~1.5 s while its keystonemiddleware validates it).

stdout: MAGNUM_TEST_OS_<KIND>_<NAME>_ID=<id> lines (a second resource of the same name gets
_1_ID and _2_ID); stderr: a summary. Exits 1 if anything is not as expected.
"""
import concurrent.futures
import re
import sys

from keystoneauth1 import session
from keystoneauth1.identity import v3

AUTH_URL, REGION, ADMIN_PASSWORD, DEMO_PASSWORD, KEY_FILE = sys.argv[1:6]
SERVICE_USER, SERVICE_PASSWORD, SERVICE_PROJECT = sys.argv[6:9]
TINY_RAW = b"\0" * 1024  # format inspection accepts zeros as raw; fake qcow2 gets 415

IMAGES = [  # name, extra properties (os_distro etc.)
    ("fedora-coreos-40", {"os_distro": "fedora-coreos"}),
    ("ubuntu-jammy", {"os_distro": "ubuntu", "magnum_driver": "simulated"}),
    ("no-distro-image", {}),
    ("dup-image", {}),
    ("dup-image", {}),
]
FLAVORS = [("m1.small", 1, 2048, 20), ("m1.medium", 2, 4096, 40), ("m1.zero-disk", 1, 2048, 0)]
SHARE_TYPES = ["default", "CephFS Fast"]  # public, driver_handles_share_servers=False
# Manila's microversion for every call (share network subnets, 2.51+; 2.0 without the header).
MANILA = {"X-OpenStack-Manila-API-Version": "2.51"}


def sess_for(user, password, project):
    return session.Session(
        auth=v3.Password(
            auth_url=AUTH_URL,
            username=user,
            password=password,
            project_name=project,
            user_domain_id="default",
            project_domain_id="default",
        )
    )


ADMIN = sess_for("admin", ADMIN_PASSWORD, "admin")
DEMO = sess_for("demo-member", DEMO_PASSWORD, "demo")


SERVICE_OF = {"image": "glance", "compute": "nova", "network": "neutron", "block-storage": "cinder",
              "load-balancer": "octavia", "key-manager": "barbican", "sharev2": "manila"}


class Failed(Exception):
    def __init__(self, svc, msg):
        super().__init__(msg)
        self.svc = svc


class Api:
    """One service in REGION, for one persona: the catalogue's public endpoint."""

    def __init__(self, sess, stype):
        self.sess = sess
        self.svc = SERVICE_OF[stype]
        self.base = sess.get_endpoint(service_type=stype, interface="public", region_name=REGION)
        if not self.base:
            raise Failed(self.svc, "no public %s endpoint in region %s" % (stype, REGION))
        self.base = self.base.rstrip("/")

    def call(self, method, path, want=(200,), **kw):
        kw.setdefault("headers", {}).setdefault("Accept", "application/json")
        try:
            r = self.sess.request(self.base + path, method, raise_exc=False, timeout=120, **kw)
        except Exception as e:  # connection refused, timeout
            raise Failed(self.svc, "%s %s%s: %s" % (method, self.base, path, e))
        if r.status_code not in want:
            raise Failed(self.svc, "%s %s%s -> %s: %s" % (method, self.base, path, r.status_code, r.text[:300]))
        return r.json() if r.content and "json" in r.headers.get("Content-Type", "") else None


def key(kind, name, i=None):
    n = re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")
    return "MAGNUM_TEST_OS_%s_%s%s_ID" % (kind, n, "" if i is None else "_%d" % i)


def keyed(kind, pairs):
    """[(name, id)] -> {env name: id}; names that occur twice get _1/_2."""
    counts = {}
    for name, _ in pairs:
        counts[name] = counts.get(name, 0) + 1
    seen, out = {}, {}
    for name, rid in pairs:
        if counts[name] > 1:
            seen[name] = seen.get(name, 0) + 1
            out[key(kind, name, seen[name])] = rid
        else:
            out[key(kind, name)] = rid
    return out


def seed_glance():
    g = Api(ADMIN, "image")
    made = []
    for name, props in IMAGES:
        body = dict(name=name, disk_format="raw", container_format="bare", visibility="public", **props)
        img = g.call("POST", "/v2/images", want=(201,), json=body)
        g.call(
            "PUT",
            "/v2/images/%s/file" % img["id"],
            want=(204,),
            data=TINY_RAW,
            headers={"Content-Type": "application/octet-stream"},
        )
        made.append((name, img["id"]))
    return keyed("IMAGE", made), "glance: %d public raw images (1 KiB each)" % len(made)


def seed_nova():
    n = Api(ADMIN, "compute")
    made = []
    for name, vcpus, ram, disk in FLAVORS:
        f = n.call("POST", "/flavors", json={"flavor": {"name": name, "vcpus": vcpus, "ram": ram, "disk": disk}})
        made.append((name, f["flavor"]["id"]))
    with open(KEY_FILE + ".pub") as f:
        public_key = f.read().strip()
    # A keypair belongs to the user who makes it: demo-member makes its own.
    kp = Api(DEMO, "compute").call(
        "POST", "/os-keypairs", json={"keypair": {"name": "demo-key", "public_key": public_key}}
    )["keypair"]
    # Every Cluster API cluster takes a server group per nodegroup and one for its control
    # plane; Nova's default of 10 per project is two tests' worth.
    n.call(
        "PUT",
        "/os-quota-sets/%s" % DEMO.get_project_id(),
        json={"quota_set": {"server_groups": 100}},
    )
    out = keyed("FLAVOR", made)
    out["MAGNUM_TEST_OS_KEYPAIR_DEMO_KEY_FINGERPRINT"] = kp["fingerprint"]
    return out, "nova: %d public flavors; keypair demo-key of demo-member (%s)" % (len(made), kp["fingerprint"])


def seed_neutron():
    q = Api(ADMIN, "network")

    def net(name, **attrs):
        return q.call("POST", "/v2.0/networks", want=(201,), json={"network": dict(name=name, **attrs)})["network"]["id"]

    def subnet(name, network_id, cidr, **attrs):
        body = dict(name=name, network_id=network_id, ip_version=4, cidr=cidr, **attrs)
        return q.call("POST", "/v2.0/subnets", want=(201,), json={"subnet": body})["subnet"]["id"]

    nets, subnets = [], []
    pub = net("public", **{"router:external": True, "provider:network_type": "flat", "provider:physical_network": "public"})
    nets.append(("public", pub))
    subnets.append(("public-subnet", subnet("public-subnet", pub, "172.24.4.0/24", enable_dhcp=False)))
    # ML2 allows one flat network per physical network; the other external ones are vxlan.
    nets.append(("public2", net("public2", **{"router:external": True})))
    priv = net("private", shared=True)
    nets.append(("private", priv))
    subnets.append(("private-subnet", subnet("private-subnet", priv, "10.0.0.0/24")))
    for _ in range(2):
        nets.append(("dup-ext", net("dup-ext", **{"router:external": True})))
    for _ in range(2):
        nets.append(("dup-net", net("dup-net", shared=True)))
    out = keyed("NETWORK", nets)
    out.update(keyed("SUBNET", subnets))
    return out, "neutron: external public (flat) + public2 + 2x dup-ext; shared private + 2x dup-net; 2 subnets"


def seed_cinder():
    c = Api(ADMIN, "block-storage")
    t = c.call(
        "POST", "/types", json={"volume_type": {"name": "standard", "os-volume-type-access:is_public": True}}
    )["volume_type"]
    return keyed("VOLUME_TYPE", [("standard", t["id"])]), "cinder: public volume type standard"


def seed_manila(neutron):
    """Share types as admin; demo-member's share network once `neutron` (a future) is done."""
    m = Api(ADMIN, "sharev2")
    made = []
    for name in SHARE_TYPES:
        body = {"share_type": {"name": name, "share_type_access:is_public": True,
                               "extra_specs": {"driver_handles_share_servers": False}}}
        made.append((name, m.call("POST", "/types", json=body, headers=dict(MANILA))["share_type"]["id"]))
    # demo-member's first call validates its token meanwhile; the share network needs the
    # private network. Manila stores a share network without asking Neutron or a share service.
    d = Api(DEMO, "sharev2")
    d.call("GET", "/share-networks", headers=dict(MANILA))
    net = neutron.result()[0]
    body = {"share_network": {"name": "k8s-shares", "description": "magnum-rs tests",
                              "neutron_net_id": net[key("NETWORK", "private")],
                              "neutron_subnet_id": net[key("SUBNET", "private-subnet")]}}
    sn = d.call("POST", "/share-networks", json=body, headers=dict(MANILA))["share_network"]
    out = keyed("SHARE_TYPE", made)
    out.update(keyed("SHARE_NETWORK", [("k8s-shares", sn["id"])]))
    return out, "manila: public share types %s; share network k8s-shares of demo-member on private/private-subnet: %s" % (
        ", ".join(SHARE_TYPES), sn["id"])


def check_demo(ids):
    """What demo-member sees with its own token; returns summary lines."""
    lines = []

    def expect(what, got, want, svc):
        missing = sorted(set(want) - set(got))
        if missing:
            raise Failed(svc, "demo-member cannot see %s: %s (sees %s)" % (what, missing, sorted(got)))
        lines.append("demo-member sees %s: %s" % (what, ", ".join(sorted(got))))

    g = Api(DEMO, "image").call("GET", "/v2/images?limit=100")["images"]
    expect("images", [i["id"] for i in g], [v for k, v in ids.items() if k.startswith("MAGNUM_TEST_OS_IMAGE_")], "glance")
    lines[-1] = "demo-member sees images: " + ", ".join(sorted(i["name"] for i in g))
    f = Api(DEMO, "compute").call("GET", "/flavors/detail")["flavors"]
    expect("flavors", [x["name"] for x in f], [x[0] for x in FLAVORS], "nova")
    kp = Api(DEMO, "compute").call("GET", "/os-keypairs/demo-key")["keypair"]
    lines.append("demo-member sees its keypair %s (%s)" % (kp["name"], kp["fingerprint"]))
    Api(DEMO, "compute").call("GET", "/os-keypairs/no-such-key", want=(404,))
    quota = Api(DEMO, "compute").call("GET", "/os-quota-sets/%s" % DEMO.get_project_id())["quota_set"]
    if quota["server_groups"] != 100:
        raise Failed("nova", "demo's server group quota is %s, not 100" % quota["server_groups"])
    lines.append("demo may have %d server groups" % quota["server_groups"])
    q = Api(DEMO, "network")
    ext = q.call("GET", "/v2.0/networks?router:external=True")["networks"]
    expect("external networks", [n["name"] for n in ext], ["public", "public2", "dup-ext", "dup-ext"], "neutron")
    allnets = q.call("GET", "/v2.0/networks")["networks"]
    shared = [n["name"] for n in allnets if n["shared"]]
    expect("shared networks", shared, ["private", "dup-net"], "neutron")
    if len([n for n in allnets if n["name"] == "dup-net"]) != 2 or len([n for n in ext if n["name"] == "dup-ext"]) != 2:
        raise Failed("neutron", "demo-member does not see both dup-net and both dup-ext networks")
    sn = q.call("GET", "/v2.0/subnets")["subnets"]
    expect("subnets", [s["name"] for s in sn], ["public-subnet", "private-subnet"], "neutron")
    t = Api(DEMO, "block-storage").call("GET", "/types")["volume_types"]
    expect("volume types", [x["name"] for x in t], ["standard"], "cinder")
    p = Api(DEMO, "load-balancer").call("GET", "/v2/lbaas/providers")["providers"]
    expect("load-balancer providers", [x["name"] for x in p], ["amphora"], "octavia")
    s = Api(DEMO, "key-manager").call("GET", "/v1/secrets")
    lines.append("demo-member lists its Barbican secrets: %d" % s["total"])
    m = Api(DEMO, "sharev2")
    t = m.call("GET", "/types", headers=dict(MANILA))["share_types"]
    expect("share types", [x["name"] for x in t], SHARE_TYPES, "manila")
    sn = m.call("GET", "/share-networks/%s" % ids[key("SHARE_NETWORK", "k8s-shares")], headers=dict(MANILA))
    sn = sn["share_network"]
    if sn["name"] != "k8s-shares" or [x["neutron_subnet_id"] for x in sn["share_network_subnets"]] != [
        ids[key("SUBNET", "private-subnet")]
    ]:
        raise Failed("manila", "demo-member's share network is not as made: %s" % sn)
    lines.append("demo-member sees its share network k8s-shares: %s" % sn["id"])
    return lines


def main():
    ids, summary = {}, []
    # Tokens first, so the threads share them instead of racing to authenticate. The service
    # user too: each service's keystonemiddleware logs in as it on its first request, and
    # Keystone records a user's first login of the day with a write that SQLite refuses to
    # run concurrently ("database is locked": a 500, which the services pass on as 503).
    sess_for(SERVICE_USER, SERVICE_PASSWORD, SERVICE_PROJECT).get_token()
    ADMIN.get_token()
    DEMO.get_token()
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        neutron = pool.submit(seed_neutron)
        futures = [pool.submit(seed_nova), pool.submit(seed_glance), neutron, pool.submit(seed_cinder),
                   pool.submit(seed_manila, neutron)]
        for f in futures:
            out, line = f.result()
            ids.update(out)
            summary.append(line)
    summary += check_demo(ids)
    for line in summary:
        print("seed.py: " + line, file=sys.stderr)
    for k, v in sorted(ids.items()):
        print("%s=%s" % (k, v))


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        # start.sh reads the service name from this line, to show that service's logs.
        print("seed.py: failed at %s: %s" % (e.svc, e), file=sys.stderr)
        sys.exit(1)

"""The suite-wide secrets scan: after the whole test run, looks for credentials in everything
our processes wrote or sent.

    scan.py SCAN_DIR [ENV_FILE...]

Reads what the tests kept in SCAN_DIR (crates/magnum-testkit/src/scan.rs): logs/* (every
`magnumd` the tests started, and what one-shot `magnumd` commands printed),
error-bodies.tsv (every answer of status 400 and up a test received), secrets.tsv (the
passwords and application credential secrets the tests handled), exempt.tsv (exchanges where
upstream's Python Magnum takes part), and rabbit.jsonl (every message published to RabbitMQ
during the run, test-support/secrets/tap.py). ENV_FILEs add their *PASSWORD values.

It looks for: any known secret value; a Keystone Fernet token (they all begin `gAAAAA`); a PEM
private key; a value given to a password, secret or token key. It prints the figures and, for
each hit, what and where (never the value), and exits 1 on any hit.
"""
import glob
import json
import os
import re
import sys

FERNET = re.compile(r"gAAAAA[A-Za-z0-9_\-]{40,}")
PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----")
# `"password": "x"`, `password = x`, `"auth_token": "x"`, `application_credential_secret: x`,
# `X-Auth-Token: x`; masked values (`***`, `<redacted>`, empty) are fine.
KEYED = re.compile(
    r"""(?ix)["']?\b(password|passwd|application_credential_secret|auth_token|x-auth-token
         |x-subject-token|trustee_password|private_key|secret)\b["']?\s*[:=]\s*["']?
         ([^"'\s,;&}\]]*)""")
MASKED = re.compile(r"^(\*+|<[a-z ]+>|redacted|null|none|true|false|)$", re.I)


def env_passwords(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("export ") and "=" in line:
                    k, v = line[7:].strip().split("=", 1)
                    v = v.strip("'\"")
                    if k.endswith("PASSWORD") and len(v) >= 8:
                        out[v] = k
    except OSError:
        pass
    return out


def tsv(path):
    try:
        with open(path, errors="replace") as f:
            return [line.rstrip("\n").split("\t", 1) for line in f if "\t" in line]
    except OSError:
        return []


def main(scan_dir, env_files):
    secrets = {}
    for what, value in tsv(os.path.join(scan_dir, "secrets.tsv")):
        secrets[value] = what
    for path in env_files:
        secrets.update(env_passwords(path))
    exempt = {ex for ex, _ in tsv(os.path.join(scan_dir, "exempt.tsv"))}

    sources = []  # (kind, name, text)
    logs = sorted(glob.glob(os.path.join(scan_dir, "logs", "*")))
    log_lines = 0
    for p in logs:
        with open(p, errors="replace") as f:
            text = f.read()
        log_lines += text.count("\n")
        sources.append(("log", os.path.basename(p), text))
    bodies = tsv(os.path.join(scan_dir, "error-bodies.tsv"))
    sources.append(("error bodies", "error-bodies.tsv", "\n".join(b for _, b in bodies)))
    published = notifications = skipped = 0
    skipped_on = set()
    try:
        with open(os.path.join(scan_dir, "rabbit.jsonl"), errors="replace") as f:
            for n, line in enumerate(f, 1):
                try:
                    m = json.loads(line)
                except ValueError:
                    continue
                if m.get("exchange") in exempt:
                    skipped += 1
                    skipped_on.add(m["exchange"])
                    continue
                published += 1
                body = m.get("body", "")
                if '\\"event_type\\"' in body or '"event_type"' in body:
                    notifications += 1
                sources.append(("RabbitMQ message", f"rabbit.jsonl:{n} ({m.get('key')})", body))
    except OSError:
        pass
    tap = {}
    try:
        with open(os.path.join(scan_dir, "rabbit.jsonl.summary")) as f:
            tap = json.load(f)
    except (OSError, ValueError):
        pass

    found = []
    for kind, name, text in sources:
        for value, what in secrets.items():
            if value in text:
                found.append(f"{what} in {kind} {name}")
        for pattern, what in ((FERNET, "a Fernet token"), (PRIVATE_KEY, "a private key")):
            hits = len(pattern.findall(text))
            if hits:
                found.append(f"{what} in {kind} {name} ({hits}x)")
        for m in KEYED.finditer(text):
            if not MASKED.match(m.group(2)) and len(m.group(2)) >= 8:
                found.append(f"a value for {m.group(1)!r} in {kind} {name}")

    print(f"secrets scan: {len(logs)} log files ({log_lines} lines), {len(bodies)} error bodies, "
          f"{published} RabbitMQ messages ({notifications} notifications; the tap connected "
          f"{tap.get('connections', 0)} times), {len(secrets)} known secret values: "
          f"{len(found)} found")
    if skipped:
        print(f"secrets scan: left out {skipped} messages on {len(skipped_on)} exchanges where "
              "upstream's Python Magnum takes part (it sends the user's token in the RPC "
              "context, and so does our API to Python conductors, as upstream's)")
    for f in found[:50]:
        print(f"secrets scan: FOUND {f}")
    print(f"secrets: {0 if found else 1} passed, {1 if found else 0} failed")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))

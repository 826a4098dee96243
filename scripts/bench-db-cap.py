#!/usr/bin/env python3
"""The database's own ceiling for one API request (scripts/bench-api, scripts/bench-scale):
what MariaDB alone serves, to a C client, of exactly the SQL magnumd sends for that request.

    bench-db-cap.py ACCOUNT DATABASE CONCURRENCY SECONDS -- COMMAND...

1. Captures the statements: MariaDB's general log on for the duration of a few runs of
   COMMAND (which makes one request, e.g. curl), keeping the statements of magnumd's own
   ACCOUNT's connections in the last run, as executed, with their values (see capture()).
   The general log's previous settings are restored at once.
2. Runs them with mysqlslap (libmariadb, text protocol, TCP to 127.0.0.1:3306) as a
   throwaway account with SELECT on DATABASE, CONCURRENCY connections each running the whole
   set in order, for about SECONDS (the query count is calibrated on a short run first).
   The statements the server executed are counted from the account's USER_STATISTICS.
3. Prints the statements, the CPU time of the server and of mysqlslap per statement set,
   then "cap <sets/s>": statement sets (one per request) per second,
   which is the most requests per second a client could get from this database.
Root reaches MariaDB over its local socket. Everything it creates is removed, also on failure.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

account, database, concurrency, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
command = sys.argv[sys.argv.index("--") + 1:]
SLAP = "magnum_bench_slap"
DELIM = "\x01"  # between statements in mysqlslap's query file; never in SQL text


def root(sql):
    return subprocess.run(["mariadb", "-uroot", "-N", "-B", "-e", sql], check=True,
                          capture_output=True, text=True).stdout


def slap_selects():
    out = root(f"SELECT SELECT_COMMANDS FROM information_schema.USER_STATISTICS WHERE USER = '{SLAP}'")
    return int(out.split()[0]) if out.strip() else 0


def kill_connections():
    """Closes ACCOUNT's connections: magnumd's pool opens new ones, which prepare their
    statements afresh."""
    ids = root(f"SELECT ID FROM information_schema.PROCESSLIST WHERE USER = '{account}'").split()
    for i in ids:
        subprocess.run(["mariadb", "-uroot", "-e", f"KILL CONNECTION {i}"], capture_output=True)
    time.sleep(1)


def requests(n):
    """COMMAND until it has succeeded n times in a row: the first requests after
    kill_connections fail, one per dead pooled connection."""
    ok, deadline = 0, time.monotonic() + 60
    while time.monotonic() < deadline:
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ok = ok + 1 if done.returncode == 0 else 0
        if ok >= n:
            return
        if ok == 0:
            time.sleep(0.2)  # magnumd answers 503 until it has seen the server back
    sys.exit(f"{' '.join(command)} kept failing after magnumd's connections were closed")


def capture():
    """The statements ACCOUNT's connections send during one run of COMMAND. MariaDB writes a
    prepared statement's values into the general log only if the log was on when it was
    prepared, so magnumd's connections are closed with the log on (its pool reconnects and
    prepares again), and once more after the log is off, so that what follows runs as before.
    Only the statements after a marker, i.e. of the last run, are kept."""
    before = root("SELECT @@global.general_log, @@global.general_log_file").split("\t")
    log = os.path.join(tempfile.gettempdir(), f"bench-genlog-{os.getpid()}.log")
    marker = f"bench-db-cap-marker-{os.getpid()}"
    try:
        root(f"SET GLOBAL general_log_file = '{log}'; SET GLOBAL general_log = 1")
        kill_connections()
        requests(6)
        for _ in range(10):  # a late 503 (magnumd's database watch) means: mark again
            root(f"SELECT '{marker}'")
            if subprocess.run(command, stdout=subprocess.DEVNULL).returncode == 0:
                break
            requests(3)
        else:
            sys.exit(f"{' '.join(command)} kept failing while the general log was on")
    finally:
        root(f"SET GLOBAL general_log = {before[0].strip()}; "
             f"SET GLOBAL general_log_file = '{before[1].strip()}'")
        kill_connections()
        requests(6)
    try:
        text = open(log, errors="replace").read()
        if os.environ.get("BENCH_CAP_LOG"):  # for looking at what was captured
            open(os.environ["BENCH_CAP_LOG"], "w").write(text)
    finally:
        if os.path.exists(log):
            os.unlink(log)
    entry = re.compile(r"^(?:\d{6}\s+\d{1,2}:\d{2}:\d{2})?\s+(\d+)\s+([A-Z][a-z]*(?: [a-z]+)?)\t(.*)$")
    entries = []  # [thread, command, text]
    for line in text.splitlines():
        m = entry.match(line)
        if m:
            entries.append([m.group(1), m.group(2), m.group(3)])
        elif entries and not line.startswith(("Time\t", "Tcp port:", "/")):
            entries[-1][2] += "\n" + line  # a statement over several lines
    ids = {t for t, cmd, arg in entries if cmd == "Connect" and arg.startswith(account + "@")}
    at = max((i for i, e in enumerate(entries) if marker in e[2]), default=len(entries))
    # Session set-up (SET time_zone, sql_mode) belongs to a connection the pool opened during
    # the request, not to the request.
    found = [arg.strip() for thread, cmd, arg in entries[at + 1:]
             if thread in ids and cmd in ("Query", "Execute") and arg.strip()
             and not re.match(r"\s*SET\s", arg, re.I)]
    if any(re.search(r"(=|IN \(|LIMIT) \?", s) for s in found):
        sys.exit(f"captured statements still have placeholders: {[s[:200] for s in found]}")
    return found


def server_ticks():
    """CPU time the MariaDB server has used so far, in clock ticks (0 if not found)."""
    pid = subprocess.run(["pidof", "mariadbd"], capture_output=True, text=True).stdout.split()
    if not pid:
        return 0
    with open(f"/proc/{pid[0]}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def slap(statements, count, qfile):
    """Runs COUNT statements over CONCURRENCY connections; (seconds, statements executed,
    server CPU seconds, mysqlslap CPU seconds)."""
    before = slap_selects()
    ticks, children = server_ticks(), os.times()
    run = subprocess.run(
        ["mysqlslap", "--protocol=tcp", "-h", "127.0.0.1", "-P", "3306", "-u", SLAP,
         f"-p{SLAP}", f"--create-schema={database}", "--no-drop", f"--query={qfile}",
         f"--delimiter={DELIM}", f"--concurrency={concurrency}", "--iterations=1",
         f"--number-of-queries={count}"],
        capture_output=True, text=True)
    m = re.search(r"Average number of seconds to run all queries: ([\d.]+)", run.stdout)
    if run.returncode != 0 or not m:
        sys.exit(f"mysqlslap failed ({run.returncode}): {run.stdout[-800:]} {run.stderr[-800:]}")
    hz, done = os.sysconf("SC_CLK_TCK"), os.times()
    server = (server_ticks() - ticks) / hz
    client = done.children_user + done.children_system - children.children_user - children.children_system
    return float(m.group(1)), slap_selects() - before, server, client


def main():
    statements = capture()
    if not statements:
        sys.exit(f"no statement of account {account} seen during {' '.join(command)}")
    selects = sum(1 for s in statements if re.match(r"\s*(SELECT|WITH)\b", s, re.I))
    if selects != len(statements):
        sys.exit(f"only read-only requests can be replayed; captured: {statements}")
    root(f"CREATE USER IF NOT EXISTS '{SLAP}'@'127.0.0.1' IDENTIFIED BY '{SLAP}'; "
         f"GRANT SELECT ON `{database}`.* TO '{SLAP}'@'127.0.0.1'")
    fd, qfile = tempfile.mkstemp(suffix=".sql")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(DELIM.join(" ".join(s.split("\n")) for s in statements))
        k = len(statements)
        count = k * concurrency * 20
        took, _, _, _ = slap(statements, count, qfile)
        count = max(count, int(count * seconds / max(took, 0.001)) // (k * concurrency) * k * concurrency)
        took, executed, server, client = slap(statements, count, qfile)
    finally:
        os.unlink(qfile)
        root(f"DROP USER IF EXISTS '{SLAP}'@'127.0.0.1'")
    for s in statements:
        print(f"  SQL ({len(s)} chars): {s[:160]}{' ...' if len(s) > 160 else ''}")
    if executed <= 0:  # userstat off: trust mysqlslap's own count
        executed = count
    sets = executed / k / took
    print(f"  mysqlslap: {executed} statements ({count} asked) in {took:.2f} s over "
          f"{concurrency} connection(s): {executed / took:.1f} statements/s")
    # CPU per statement set: where a request's time goes when only the database works.
    sets_run = max(executed / k, 1)
    print(f"  CPU per statement set: MariaDB {1e6 * server / sets_run:.0f} us, "
          f"mysqlslap {1e6 * client / sets_run:.0f} us")
    print(f"cap {sets:.2f}")


signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
main()

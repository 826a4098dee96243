#!/usr/bin/env python3
"""CPU seconds and SQL statements per sweep cycle of each conductor (scripts/bench-scale).

    bench-scale-sample.py SECONDS SYNC_INTERVAL MARIADBD_PID NAME:PID:ACCOUNT...

Samples every 0.1 s, for SECONDS, each process's utime+stime (/proc/PID/stat) and each
MariaDB account's statements (information_schema.USER_STATISTICS, userstat=1: SELECT, UPDATE
and OTHER commands), over one `mariadb` client session as root (its own statements are on
root's account, not counted). A conductor's cycle is a burst of its SELECTs (its sweep;
bursts further apart than half the sync interval are different cycles); the window
runs from halfway between its first two bursts to halfway between its last two, so it holds
whole cycles only and every figure is a delta over that window divided by the cycles in it.
Also prints MariaDB's own CPU per sync interval (over the whole sampling, every client's) and
the machine's load.
"""
import os
import subprocess
import sys
import time

seconds, interval, mariadbd = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
procs = [a.split(":") for a in sys.argv[4:]]
TICK = os.sysconf("SC_CLK_TCK")
STEP = 0.1


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        # Fields after the command (which may hold spaces): utime is 14th, stime 15th.
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def machine_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


sql = subprocess.Popen(["mariadb", "-uroot", "-N", "-B", "--unbuffered"], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, text=True, bufsize=1)
accounts = ", ".join("'" + a + "'" for _, _, a in procs)


def statements():
    sql.stdin.write(f"SELECT USER, SELECT_COMMANDS, UPDATE_COMMANDS, OTHER_COMMANDS FROM "
                    f"information_schema.USER_STATISTICS WHERE USER IN ({accounts}); "
                    f"SELECT '--end--';\n")
    sql.stdin.flush()
    out = {}
    while True:
        line = sql.stdout.readline()
        if not line or line.strip() == "--end--":
            return out
        user, s, u, o = line.split("\t")
        out[user] = (int(s), int(u), int(o))


samples = []  # (time, {pid: ticks}, {account: (select, update, other)}, mariadbd ticks)
load_before = open("/proc/loadavg").read().split()[:3]
busy0 = machine_busy()
start = time.monotonic()
while time.monotonic() - start < seconds:
    t = time.monotonic()
    samples.append((t, {p: cpu_ticks(p) for _, p, _ in procs}, statements(), cpu_ticks(mariadbd)))
    time.sleep(max(0.0, STEP - (time.monotonic() - t)))
busy1 = machine_busy()
load_after = open("/proc/loadavg").read().split()[:3]
sql.stdin.close()
sql.wait()

print(f"machine: load average {' '.join(load_before)} before, {' '.join(load_after)} after; "
      f"all cores {100 * (busy1[0] - busy0[0]) / (busy1[1] - busy0[1]):.0f}% busy "
      f"during the {samples[-1][0] - samples[0][0]:.0f} s sampled")
print(f"{'conductor':<12} {'cycles':>6} {'CPU s/cycle':>12} {'SQL/cycle':>10} "
      f"{'(select/update/other)':>22} {'window':>8}")
for name, pid, account in procs:
    # Bursts: runs of samples whose SELECT count went up (a sweep reads; the heartbeat is
    # one UPDATE, whatever its phase), split by quiet gaps.
    active = [i for i in range(1, len(samples))
              if samples[i][2].get(account, (0,))[0] > samples[i - 1][2].get(account, (0,))[0]]
    bursts = []
    for i in active:
        if bursts and samples[i][0] - samples[bursts[-1][1]][0] < interval / 2:
            bursts[-1][1] = i
        else:
            bursts.append([i - 1, i])  # from the quiet sample before to the last active one
    if len(bursts) < 3:
        print(f"{name:<12} fewer than 3 sweeps seen in {seconds:.0f} s ({len(bursts)}); "
              f"nothing to measure")
        continue
    a = (bursts[0][1] + bursts[1][0]) // 2
    b = (bursts[-2][1] + bursts[-1][0]) // 2
    n = len(bursts) - 2
    ta, pa, sa, _ = samples[a]
    tb, pb, sb, _ = samples[b]
    cpu = (pb[pid] - pa[pid]) / TICK / n
    per = [(y - x) / n for x, y in zip(sa.get(account, (0, 0, 0)), sb.get(account, (0, 0, 0)))]
    print(f"{name:<12} {n:>6} {cpu:>12.3f} {sum(per):>10.1f} "
          f"{'/'.join(f'{x:g}' for x in per):>22} {tb - ta:>7.1f}s")
span = samples[-1][0] - samples[0][0]
db_cpu = (samples[-1][3] - samples[0][3]) / TICK
print(f"MariaDB (mariadbd, every client's statements): {db_cpu / (span / interval):.3f} CPU s "
      f"per {interval:g} s sync interval")

"""A Galera health check for HAProxy's `option httpchk`, one port per node.

    clustercheck.py PORT=SOCKET [PORT=SOCKET ...]

Answers any HTTP request on 127.0.0.1:PORT with 200 when the node behind SOCKET says it is
Synced (wsrep_local_state 4) and accepts queries (wsrep_ready ON), else 503. This is the job
of the clustercheck script that kolla-ansible (and most Galera deployments) put behind
HAProxy: a node that is still joining, or cut off from the primary component, answers the
SQL port but must get no traffic. Standard library only; asks the node with the mariadb
client over its socket.
"""
import http.server
import socketserver
import subprocess
import sys
import threading


def state(sock):
    try:
        out = subprocess.run(
            ["mariadb", "--no-defaults", "-S", sock, "-uroot", "-N", "-B", "-e",
             "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_state', 'wsrep_ready')"],
            capture_output=True, text=True, timeout=1.5).stdout
    except (subprocess.TimeoutExpired, OSError):
        return {}
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


def handler_for(sock):
    class Check(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            s = state(sock)
            ok = s.get("wsrep_local_state") == "4" and s.get("wsrep_ready") == "ON"
            body = ("Galera node is synced\n" if ok else "Galera node is not synced: %r\n" % s).encode()
            self.send_response(200 if ok else 503)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        do_OPTIONS = do_GET
        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    return Check


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main(args):
    servers = []
    for arg in args:
        port, sock = arg.split("=", 1)
        servers.append(Server(("127.0.0.1", int(port)), handler_for(sock)))
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    servers[0].serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])

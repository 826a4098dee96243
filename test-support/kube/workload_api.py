"""A workload cluster's Kubernetes API for the health worker's tests: HTTPS on loopback with
a server certificate from the cluster's CA, client certificates required and checked against
that CA (Magnum's admin certificate is the only one the conductor has), answering /healthz
and /api/v1/nodes in the real shapes. Nothing else of Kubernetes is needed for health.

usage: workload_api.py CA_PEM CERT_PEM KEY_PEM PORT_FILE [NODE=Ready ...]
"""

import http.server
import json
import ssl
import sys

ca, cert, key, port_file = sys.argv[1:5]
nodes = [arg.split("=", 1) for arg in sys.argv[5:]] or [["node-a", "True"]]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        code = 200
        if self.path.startswith("/healthz"):
            body, kind = b"ok", "text/plain"
        elif self.path.startswith("/api/v1/nodes"):
            items = [
                {"metadata": {"name": n}, "status": {"conditions": [{"type": "Ready", "status": s}]}}
                for n, s in nodes
            ]
            body = json.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items}).encode()
            kind = "application/json"
        else:
            code, body, kind = 404, b'{"kind":"Status","apiVersion":"v1","code":404}', "application/json"
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
context.load_verify_locations(ca)
context.verify_mode = ssl.CERT_REQUIRED
server.socket = context.wrap_socket(server.socket, server_side=True)
with open(port_file, "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()

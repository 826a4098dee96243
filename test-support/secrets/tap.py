"""What crosses RabbitMQ during the whole test run, for the secrets scan.

Turns the broker's firehose on (`rabbitmqctl trace_on`), binds a queue of its own to
`amq.rabbitmq.trace` and appends one JSON line per published message (routing key, the
exchange it was published to, body) to OUT, until SIGTERM. Tests restart the broker on
purpose: the tap then reconnects and turns the firehose on again (what is published in the
second or so that takes is not seen; the summary counts the reconnections). Deliveries are
not recorded: they repeat what was published. Uses kombu from the oslo.messaging venv
(test-support/oslo).

    tap.py URL OUT        (touches OUT.ready once it listens; writes OUT.summary at the end)
"""
import json
import signal
import socket
import subprocess
import sys
import time

import kombu

stop = False


def on_term(*_):
    global stop
    stop = True


def main(url, out):
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    exchange = kombu.Exchange("amq.rabbitmq.trace", type="topic", passive=True)
    published = 0
    connections = 0
    with open(out, "a") as f:

        def seen(body, message):
            nonlocal published
            key = message.delivery_info.get("routing_key") or ""
            if key.startswith("publish."):
                raw = message.body
                if isinstance(raw, bytes):
                    raw = raw.decode("utf-8", "replace")
                headers = message.headers or {}
                f.write(json.dumps({"key": key,
                                    "exchange": headers.get("exchange_name", ""),
                                    "body": raw}) + "\n")
                f.flush()
                published += 1
            message.ack()

        while not stop:
            try:
                with kombu.Connection(url.replace("rabbit://", "amqp://"),
                                      connect_timeout=2) as conn:
                    conn.connect()
                    # RABBITMQ_NODENAME comes from the caller (scripts/services.sh).
                    subprocess.run(["rabbitmqctl", "-q", "trace_on"], check=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   timeout=30)
                    queue = kombu.Queue("magnum-rs-suite-tap", exchange=exchange,
                                        routing_key="#", exclusive=True, auto_delete=True)
                    with conn.Consumer(queue, callbacks=[seen], accept=None):
                        connections += 1
                        if connections == 1:
                            open(out + ".ready", "w").close()
                        while not stop:
                            try:
                                conn.drain_events(timeout=0.5)
                            except socket.timeout:
                                pass
            except Exception:  # the broker went away or is not back yet
                if not stop:
                    time.sleep(0.2)
    with open(out + ".summary", "w") as s:
        json.dump({"published": published, "connections": connections}, s)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

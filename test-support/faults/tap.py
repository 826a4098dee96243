"""Everything that crosses RabbitMQ, for the secrets scan: with the broker's firehose on
(`rabbitmqctl trace_on`), binds a queue of its own to `amq.rabbitmq.trace` and writes each
traced message's routing key and body, one JSON line each, until stdin closes (stop it
before the broker is restarted: its queue goes with the broker). Uses kombu
from the oslo.messaging venv (test-support/oslo).

    tap.py URL OUT
"""
import json
import sys
import threading

import kombu


def main(url, out):
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    exchange = kombu.Exchange("amq.rabbitmq.trace", type="topic", passive=True)
    with kombu.Connection(url.replace("rabbit://", "amqp://")) as conn, open(out, "w") as f:
        queue = kombu.Queue("magnum-rs-tap", exchange=exchange, routing_key="#",
                            exclusive=True, auto_delete=True)

        def seen(body, message):
            raw = message.body
            if isinstance(raw, bytes):
                raw = raw.decode("utf-8", "replace")
            f.write(json.dumps({"key": message.delivery_info.get("routing_key"),
                                "body": raw}) + "\n")
            f.flush()
            message.ack()

        with conn.Consumer(queue, callbacks=[seen], accept=None):
            print("READY", flush=True)
            while not stop.is_set():
                try:
                    conn.drain_events(timeout=0.5)
                except TimeoutError:
                    pass


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

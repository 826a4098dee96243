"""One pass's figures from schemathesis's reports, on one line each:
    fuzz: version V: operations N, cases N, failures N, errors N
    fuzz: version V: statuses 200 x N, 400 x N, ... (5xx: N)
usage: summary.py VERSION JUNIT_XML EVENTS_NDJSON
Operations are the distinct operations tested, cases the requests sent and answered,
failures the checks that failed (each case's each check), errors the operations schemathesis
could not test (junit's errors, e.g. a schema it cannot read).
"""

import collections
import json
import sys
import xml.etree.ElementTree as ET


def main():
    version, junit, events = sys.argv[1:4]
    operations = set()
    statuses = collections.Counter()
    cases = failures = 0
    with open(events) as f:
        for line in f:
            event = json.loads(line)
            done = event.get("ScenarioFinished")
            if not done:
                continue
            recorder = done["recorder"]
            operations.add(recorder["label"])
            for interaction in recorder.get("interactions", {}).values():
                response = interaction.get("response")
                if response:
                    cases += 1
                    statuses[response["status_code"]] += 1
            for checks in recorder.get("checks", {}).values():
                failures += sum(1 for c in checks if c["status"] == "failure")
    root = ET.parse(junit).getroot()
    errors = int(root.get("errors", "0"))
    print(f"fuzz: version {version}: operations {len(operations)}, cases {cases}, "
          f"failures {failures}, errors {errors}")
    shown = ", ".join(f"{s} x {n}" for s, n in sorted(statuses.items()))
    fives = sum(n for s, n in statuses.items() if s >= 500)
    print(f"fuzz: version {version}: statuses {shown} (5xx: {fives})")


if __name__ == "__main__":
    main()

"""Upstream Magnum's object layer as an oracle for magnum-rs's object codec.

Usage: objects.py MODE < request.json > answer.json (run with the venv of setup-venv.sh).
A JSON list of requests is answered with the list of answers (for hydrate, a list is the
request itself).

Modes (the request is one JSON document):
  hydrate       a primitive (or a list of them) -> {"primitive": re-serialized,
                "changes": sorted obj_what_changed()} (a list for a list), through
                MagnumObjectSerializer exactly as an RPC peer deserializes and serializes.
  from_db       {"name": class, "row": {column: value}} -> the primitive of the object
                upstream's _from_db_object loads from that row (JSON columns given decoded).
  build         {"name": class, "fields": {field: value}} -> the primitive of a new object
                with those fields set (all of them changed), as upstream's API builds one.
  class_action  {"name", "method", "args", "kwargs", "reply"} -> calls the remotable
                classmethod through an indirection API that records the request and answers
                with `reply`: {"request": the serialized call, "result": serialized result}.
  object_action {"objinst", "method", "reply"} -> the same for an instance method:
                {"request", "result", "object": the instance after applying the updates,
                "changes": its sorted obj_what_changed()}.
Failures print {"error": "<Class>: <message>"} (plus "request" when the call was sent) and
exit 0, so callers can assert on them; answering with a null reply thus shows the request.
"""

import json
import sys
import warnings

warnings.simplefilter("ignore")

from magnum import objects  # noqa: E402
from magnum.common import context as magnum_context  # noqa: E402
from magnum.objects import base  # noqa: E402
from oslo_versionedobjects import base as ovo_base  # noqa: E402

objects.register_all() if hasattr(objects, "register_all") else None
SERIALIZER = base.MagnumObjectSerializer()


def ctx():
    return magnum_context.RequestContext(user_id="u", project_id="p", is_admin=True)


def cls_of(name):
    return getattr(objects, name)


def dump(obj):
    return SERIALIZER.serialize_entity(None, obj)


def hydrate(doc):
    if isinstance(doc, list):
        return [hydrate(d) for d in doc]
    obj = SERIALIZER.deserialize_entity(ctx(), doc)
    return {"primitive": dump(obj), "changes": sorted(obj.obj_what_changed())}


def from_db(doc):
    cls = cls_of(doc["name"])
    obj = cls(ctx())
    row = doc["row"]
    for name in cls.fields:
        if name in row:
            setattr(obj, name, row[name])
    obj.obj_reset_changes()
    return dump(obj)


def build(doc):
    obj = cls_of(doc["name"])(ctx(), **doc["fields"])
    return dump(obj)


class Recorder:
    """An indirection API answering every call with a canned reply, as the RPC client would
    return it (deserialized), and keeping what the client would have sent (serialized)."""

    last = None

    def __init__(self, reply):
        self.reply = reply
        self.request = None
        Recorder.last = self

    def _answer(self, context, method, **kwargs):
        self.request = {"method": method,
                        "args": SERIALIZER.serialize_entity(context, kwargs)}
        return SERIALIZER.deserialize_entity(context, self.reply)

    def object_class_action_versions(self, context, objname, objmethod,
                                     object_versions, args, kwargs):
        return self._answer(context, "object_class_action_versions",
                            objname=objname, objmethod=objmethod,
                            object_versions=object_versions, args=args,
                            kwargs=kwargs)

    def object_action(self, context, objinst, objmethod, args, kwargs):
        return self._answer(context, "object_action", objinst=objinst,
                            objmethod=objmethod, args=args, kwargs=kwargs)

    def object_backport_versions(self, context, objinst, object_versions):
        return self._answer(context, "object_backport_versions",
                            objinst=objinst, object_versions=object_versions)


def class_action(doc):
    rec = Recorder(doc["reply"])
    ovo_base.VersionedObject.indirection_api = rec
    try:
        result = getattr(cls_of(doc["name"]), doc["method"])(
            ctx(), *doc.get("args", []), **doc.get("kwargs", {}))
    finally:
        ovo_base.VersionedObject.indirection_api = None
    return {"request": rec.request, "result": dump(result)}


def object_action(doc):
    obj = SERIALIZER.deserialize_entity(ctx(), doc["objinst"])
    rec = Recorder(doc["reply"])
    ovo_base.VersionedObject.indirection_api = rec
    try:
        result = getattr(obj, doc["method"])()
    finally:
        ovo_base.VersionedObject.indirection_api = None
    return {"request": rec.request, "result": dump(result), "object": dump(obj),
            "changes": sorted(obj.obj_what_changed())}


MODES = {"hydrate": hydrate, "from_db": from_db, "build": build,
         "class_action": class_action, "object_action": object_action}


def run(mode, doc):
    Recorder.last = None
    try:
        return MODES[mode](doc)
    except Exception as e:  # the caller asserts on upstream's refusals too
        out = {"error": "%s: %s" % (type(e).__name__, e)}
        if Recorder.last is not None:
            # What the client sent before it choked on the (placeholder) reply.
            out["request"] = Recorder.last.request
        return out


def main():
    mode = sys.argv[1]
    doc = json.load(sys.stdin)
    # A list is a batch (one interpreter start for many cases), except for hydrate, which
    # takes lists itself.
    if isinstance(doc, list) and mode != "hydrate":
        out = [run(mode, d) for d in doc]
    else:
        out = run(mode, doc)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

"""topology_patches: a ClusterClass's variables and inline patches, run as Cluster API's
topology controller runs them (CAPI v1beta2 `spec.variables` and `spec.patches`), for the
simulated controller (capi_sim.py).

- Variables: the Cluster's `spec.topology.variables` (and a MachineDeployment's
  `variables.overrides`) checked against each class variable's `openAPIV3Schema`; absent ones
  take the schema's `default`, nested defaults fill objects; a required one missing, an
  undeclared one, or a value breaking the schema is an error.
- Builtins: `builtin.cluster.{name,namespace,topology.{version,class}}`,
  `builtin.controlPlane.{version,replicas}`, `builtin.machineDeployment.{version,class,name,
  topologyName,replicas}`.
- `enabledIf` and `valueFrom.template`: a Go text/template subset (below) over the variables;
  `enabledIf` sees the global variables only, a template sees the target's (overrides
  applied). A template's output is read as YAML.
- `jsonPatches`: RFC 6902 add / replace / remove with RFC 6901 paths (`-` appends); a missing
  parent is an error, as in CAPI. `valueFrom.variable` takes a name or a dotted path.
- Selectors: `apiVersion`, `kind` and `matchResources` (infrastructureCluster, controlPlane for
  both the control plane's template and its machine template, machineDeploymentClass names
  with `*` globs).

Go template subset: `{{ .a.b }}`, `{{ $.a }}`, `{{ . }}`, literals, `if`/`else if`/`else`/`end`,
`range` (dot = item) / `else` / `end`, `with` / `end`, pipes, trim markers `{{-`/`-}}`, and the
functions not, and, or, eq, ne, lt, le, gt, ge, len, toJson, toString, quote, join, default.
Not covered: variable declarations (`$x :=`), `define`/`template`/`block`, parentheses, the rest
of sprig.

Standard library, plus PyYAML for templates' output.
"""

import copy
import json
import re

try:
    import yaml
except ImportError:  # pragma: no cover - the stand-in's venv has PyYAML
    yaml = None


class PatchError(Exception):
    """A variable or patch CAPI would refuse (the topology is not reconciled)."""


# ---------------------------------------------------------------------------------------------
# Go text/template subset

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
NO_VALUE = object()


def _tokens(text):
    out, pos = [], 0
    for m in _ACTION.finditer(text):
        lit = text[pos:m.start()]
        if m.group(1):
            lit = lit.rstrip()
        if out and out[-1][0] == "trim":
            out.pop()
            lit = lit.lstrip()
        out.append(("text", lit))
        out.append(("action", m.group(2).strip()))
        if m.group(3):
            out.append(("trim", None))
        pos = m.end()
    lit = text[pos:]
    if out and out[-1][0] == "trim":
        out.pop()
        lit = lit.lstrip()
    out.append(("text", lit))
    return out


def _desugar(tokens):
    """`{{ else if X }}` becomes `{{ else }}{{ if X }}`, with one more `{{ end }}` at the end."""
    out, stack = [], []
    for kind, val in tokens:
        if kind == "action":
            word = val.split(None, 1)[0] if val else ""
            rest = val[4:].strip() if word == "else" else ""
            if word in ("if", "range", "with"):
                stack.append(0)
            elif word == "else" and rest.startswith("if "):
                out += [("action", "else"), ("action", rest)]
                if stack:
                    stack[-1] += 1
                continue
            elif word == "end":
                out += [("action", "end")] * (stack.pop() if stack else 0)
        out.append((kind, val))
    return out


def _parse(tokens, i=0, stop=()):
    """Nodes until an action whose keyword is in `stop`; returns (nodes, index, stop action)."""
    nodes = []
    while i < len(tokens):
        kind, val = tokens[i]
        i += 1
        if kind == "text":
            if val:
                nodes.append(("text", val))
            continue
        word = val.split(None, 1)[0] if val else ""
        if word in stop:
            return nodes, i, word
        if word in ("if", "range", "with"):
            cond = val[len(word):].strip()
            body, i, end = _parse(tokens, i, ("else", "end"))
            other = []
            if end == "else":
                other, i, _ = _parse(tokens, i, ("end",))
            nodes.append((word, cond, body, other))
            continue
        if word in ("end", "else"):
            raise PatchError("template: unexpected {{ %s }}" % val)
        nodes.append(("action", val))
    if stop:
        raise PatchError("template: missing {{ end }}")
    return nodes, i, None


def _split_pipe(expr):
    parts, cur, quote = [], "", None
    for ch in expr:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
        elif ch in "\"'`":
            quote = ch
            cur += ch
        elif ch == "|":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def _words(cmd):
    return re.findall(r'"(?:\\.|[^"\\])*"|`[^`]*`|\S+', cmd)


def _truthy(v):
    if v is NO_VALUE or v is None:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return v != 0
    if isinstance(v, (str, list, dict)):
        return len(v) > 0
    return True


def _field(v, path):
    for key in path:
        if not key:
            continue
        if isinstance(v, dict) and key in v:
            v = v[key]
        else:
            return NO_VALUE
    return v


def _show(v):
    if v is NO_VALUE or v is None:
        return "<no value>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + " ".join(_show(x) for x in v) + "]"
    if isinstance(v, dict):
        return "map[" + " ".join("%s:%s" % (k, _show(v[k])) for k in sorted(v)) + "]"
    return str(v)


def _plain(v):
    return None if v is NO_VALUE else v


FUNCS = {
    "not": lambda a: not _truthy(a),
    "and": lambda *a: next((x for x in a if not _truthy(x)), a[-1]),
    "or": lambda *a: next((x for x in a if _truthy(x)), a[-1]),
    "eq": lambda a, *b: any(_plain(a) == _plain(x) for x in b),
    "ne": lambda a, b: _plain(a) != _plain(b),
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "len": lambda a: len(a),
    "toJson": lambda a: json.dumps(_plain(a), separators=(",", ":")),
    "toString": lambda a: _show(a),
    "quote": lambda *a: " ".join(json.dumps(_show(x)) for x in a),
    "join": lambda sep, lst: sep.join(_show(x) for x in (lst if isinstance(lst, list) else [])),
    "default": lambda d, *v: v[0] if v and _truthy(v[0]) else d,
}


def _operand(word, dot, root):
    if word == ".":
        return dot
    if word == "$":
        return root
    if word.startswith("$."):
        return _field(root, word[2:].split("."))
    if word.startswith("."):
        return _field(dot, word[1:].split("."))
    if word.startswith('"'):
        return json.loads(word)
    if word.startswith("`"):
        return word[1:-1]
    if word in ("true", "false"):
        return word == "true"
    if word == "nil":
        return None
    if re.fullmatch(r"-?\d+", word):
        return int(word)
    if re.fullmatch(r"-?\d+\.\d*", word):
        return float(word)
    raise PatchError("template: unsupported operand %r" % word)


def _pipeline(expr, dot, root):
    value, first = NO_VALUE, True
    for cmd in _split_pipe(expr):
        words = _words(cmd)
        if not words:
            raise PatchError("template: empty command in %r" % expr)
        head = words[0]
        if head in FUNCS:
            args = [_operand(w, dot, root) for w in words[1:]]
            if not first:
                args.append(value)
            try:
                value = FUNCS[head](*args)
            except TypeError as e:
                raise PatchError("template: %s: %s" % (head, e))
        elif len(words) == 1 and first:
            value = _operand(head, dot, root)
        else:
            raise PatchError("template: unsupported command %r" % cmd)
        first = False
    return value


def _exec(nodes, dot, root, out):
    for node in nodes:
        kind = node[0]
        if kind == "text":
            out.append(node[1])
        elif kind == "action":
            out.append(_show(_pipeline(node[1], dot, root)))
        elif kind == "if":
            branch = node[2] if _truthy(_pipeline(node[1], dot, root)) else node[3]
            _exec(branch, dot, root, out)
        elif kind == "with":
            v = _pipeline(node[1], dot, root)
            if _truthy(v):
                _exec(node[2], v, root, out)
            else:
                _exec(node[3], dot, root, out)
        elif kind == "range":
            v = _pipeline(node[1], dot, root)
            items = v if isinstance(v, list) else [v[k] for k in sorted(v)] if isinstance(v, dict) else []
            if items:
                for item in items:
                    _exec(node[2], item, root, out)
            else:
                _exec(node[3], dot, root, out)


def render(text, data):
    """Runs template `text` over `data` (a dict); returns the output text."""
    nodes, _, _ = _parse(_desugar(_tokens(text)))
    out = []
    _exec(nodes, data, data, out)
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Variables

_TYPES = {"string": str, "boolean": bool, "object": dict, "array": list}


def check_schema(value, schema, path, errors):
    """The openAPIV3Schema subset CAPI variables use: type, enum, bounds, lengths, pattern,
    required, properties (unknown fields refused), items, item counts."""
    if not isinstance(schema, dict):
        return
    t = schema.get("type")
    if value is None:
        if not schema.get("nullable"):
            errors.append("%s: null is not allowed" % path)
        return
    if t == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif t == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif t in _TYPES:
        ok = isinstance(value, _TYPES[t])
    else:
        ok = True
    if not ok:
        errors.append("%s: must be of type %s" % (path, t))
        return
    if "enum" in schema and value not in schema["enum"]:
        errors.append("%s: must be one of %s" % (path, schema["enum"]))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append("%s: must be at least %s" % (path, schema["minimum"]))
        if "maximum" in schema and value > schema["maximum"]:
            errors.append("%s: must be at most %s" % (path, schema["maximum"]))
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append("%s: shorter than %d" % (path, schema["minLength"]))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append("%s: longer than %d" % (path, schema["maxLength"]))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append("%s: does not match %s" % (path, schema["pattern"]))
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append("%s: fewer than %d items" % (path, schema["minItems"]))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append("%s: more than %d items" % (path, schema["maxItems"]))
        for i, item in enumerate(value):
            check_schema(item, schema.get("items"), "%s[%d]" % (path, i), errors)
    if isinstance(value, dict):
        props = schema.get("properties")
        for r in schema.get("required", []):
            if r not in value:
                errors.append("%s.%s: required" % (path, r))
        for k, v in value.items():
            if isinstance(props, dict) and k in props:
                check_schema(v, props[k], "%s.%s" % (path, k), errors)
            elif isinstance(schema.get("additionalProperties"), dict):
                check_schema(v, schema["additionalProperties"], "%s.%s" % (path, k), errors)
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append("%s.%s: field not declared in the schema" % (path, k))


def apply_defaults(value, schema):
    """Structural defaulting: a missing property with a default takes it, then recursively."""
    if isinstance(value, dict) and isinstance(schema, dict):
        for k, sub in (schema.get("properties") or {}).items():
            if k not in value and isinstance(sub, dict) and "default" in sub:
                value[k] = copy.deepcopy(sub["default"])
            if k in value:
                value[k] = apply_defaults(value[k], sub)
    elif isinstance(value, list) and isinstance(schema, dict):
        return [apply_defaults(v, schema.get("items")) for v in value]
    return value


def _given(entries):
    out = {}
    for v in entries or []:
        if isinstance(v, dict) and isinstance(v.get("name"), str):
            out[v["name"]] = copy.deepcopy(v.get("value"))
    return out


def resolve_variables(cc, topology_variables, overrides=None):
    """The values of the class's variables for a target: the Cluster's, overridden by a
    MachineDeployment's, defaulted and checked. Raises PatchError listing what is wrong."""
    declared = {}
    for v in (cc.get("spec") or {}).get("variables") or []:
        if isinstance(v, dict) and isinstance(v.get("name"), str):
            declared[v["name"]] = v
    given = _given(topology_variables)
    given.update(_given(overrides))
    errors = ["variable %s: not defined in the ClusterClass" % n for n in given if n not in declared]
    out = {}
    for name, d in declared.items():
        schema = ((d.get("schema") or {}).get("openAPIV3Schema")) or {}
        if name in given:
            value = given[name]
        elif "default" in schema:
            value = copy.deepcopy(schema["default"])
        elif d.get("required"):
            errors.append("variable %s: required" % name)
            continue
        else:
            continue
        value = apply_defaults(value, schema)
        check_schema(value, schema, name, errors)
        out[name] = value
    if errors:
        raise PatchError("; ".join(errors))
    return out


# ---------------------------------------------------------------------------------------------
# JSON patch (RFC 6902 add / replace / remove)


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("json patch: path %r does not start with /" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container, key, path, append_ok):
    if key == "-" and append_ok:
        return len(container)
    if not re.fullmatch(r"0|[1-9]\d*", key):
        raise PatchError("json patch: %s: %r is not an array index" % (path, key))
    i = int(key)
    if i > len(container) or (i == len(container) and not append_ok):
        raise PatchError("json patch: %s: index %d out of range" % (path, i))
    return i


def apply_json_patch(doc, ops):
    for op in ops:
        kind, path = op.get("op"), op.get("path", "")
        keys = _pointer(path)
        if not keys:
            raise PatchError("json patch: the whole document cannot be patched")
        parent = doc
        for k in keys[:-1]:
            if isinstance(parent, dict) and k in parent:
                parent = parent[k]
            elif isinstance(parent, list):
                parent = parent[_index(parent, k, path, False)]
            else:
                raise PatchError("json patch: %s %s: missing parent %r" % (kind, path, k))
        last = keys[-1]
        if kind == "add":
            if isinstance(parent, dict):
                parent[last] = copy.deepcopy(op["value"])
            elif isinstance(parent, list):
                parent.insert(_index(parent, last, path, True), copy.deepcopy(op["value"]))
            else:
                raise PatchError("json patch: add %s: parent is not a container" % path)
        elif kind in ("replace", "remove"):
            if isinstance(parent, dict):
                if last not in parent:
                    raise PatchError("json patch: %s %s: no such member" % (kind, path))
                if kind == "replace":
                    parent[last] = copy.deepcopy(op["value"])
                else:
                    del parent[last]
            elif isinstance(parent, list):
                i = _index(parent, last, path, False)
                if kind == "replace":
                    parent[i] = copy.deepcopy(op["value"])
                else:
                    del parent[i]
            else:
                raise PatchError("json patch: %s %s: parent is not a container" % (kind, path))
        else:
            raise PatchError("json patch: unsupported op %r" % kind)
    return doc


# ---------------------------------------------------------------------------------------------
# Patches


def _glob(pattern, name):
    if pattern == "*":
        return True
    if pattern.startswith("*") and pattern.endswith("*") and len(pattern) > 1:
        return pattern[1:-1] in name
    if pattern.startswith("*"):
        return name.endswith(pattern[1:])
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return pattern == name


def selector_matches(sel, obj, target):
    """`target`: ("infrastructureCluster",), ("controlPlane",) or ("machineDeploymentClass", class)."""
    if not isinstance(sel, dict):
        return False
    if sel.get("apiVersion") != obj.get("apiVersion") or sel.get("kind") != obj.get("kind"):
        return False
    m = sel.get("matchResources") or {}
    if target[0] == "infrastructureCluster":
        return m.get("infrastructureCluster") is True
    if target[0] == "controlPlane":
        return m.get("controlPlane") is True
    if target[0] == "machineDeploymentClass":
        names = ((m.get("machineDeploymentClass") or {}).get("names")) or []
        return any(isinstance(n, str) and _glob(n, target[1]) for n in names)
    return False


def _variable(values, ref):
    v = _field(values, ref.split("."))
    if v is NO_VALUE:
        raise PatchError("valueFrom.variable %s: no such variable" % ref)
    return copy.deepcopy(v)


def _from_template(text, values):
    out = render(text, values)
    if yaml is None:
        raise PatchError("valueFrom.template needs PyYAML")
    try:
        return yaml.safe_load(out)
    except yaml.YAMLError as e:
        raise PatchError("valueFrom.template output is not YAML: %s\n%s" % (e, out))


def builtins(cluster, cp=None, md=None):
    """The `builtin` variable: the Cluster's, and the control plane's or a MachineDeployment
    topology entry's (`md`: dict with class, name, replicas)."""
    topo = (cluster.get("spec") or {}).get("topology") or {}
    cls = topo.get("classRef", {}).get("name") if isinstance(topo.get("classRef"), dict) else topo.get("class")
    meta = cluster.get("metadata") or {}
    b = {"cluster": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                     "topology": {"version": topo.get("version"), "class": cls}}}
    if cp is not None:
        b["controlPlane"] = {"version": topo.get("version"), "replicas": cp.get("replicas")}
    if md is not None:
        b["machineDeployment"] = {"version": topo.get("version"), "class": md.get("class"),
                                  "topologyName": md.get("name"), "name": md.get("objectName"),
                                  "replicas": md.get("replicas")}
    return b


def apply_patches(cc, template, target, global_values, target_values):
    """Runs every inline patch of the class on `template` (a copy is returned). `enabledIf`
    sees `global_values`; values and templates see `target_values` (both include builtin)."""
    doc = copy.deepcopy(template)
    for p in (cc.get("spec") or {}).get("patches") or []:
        if not isinstance(p, dict):
            continue
        if p.get("external"):
            raise PatchError("patch %s: external patches are not simulated" % p.get("name"))
        cond = p.get("enabledIf")
        if cond and render(cond, global_values).strip() != "true":
            continue
        for d in p.get("definitions") or []:
            if not selector_matches(d.get("selector"), doc, target):
                continue
            ops = []
            for jp in d.get("jsonPatches") or []:
                op = {"op": jp.get("op"), "path": jp.get("path")}
                vf = jp.get("valueFrom")
                if op["op"] != "remove":
                    if isinstance(vf, dict) and vf.get("variable"):
                        op["value"] = _variable(target_values, vf["variable"])
                    elif isinstance(vf, dict) and vf.get("template") is not None:
                        op["value"] = _from_template(vf["template"], target_values)
                    else:
                        op["value"] = jp.get("value")
                ops.append(op)
            try:
                apply_json_patch(doc, ops)
            except PatchError as e:
                raise PatchError("patch %s: %s" % (p.get("name"), e))
    return doc


def prune_nulls(v):
    """What the API server does to nulls in fields that are not nullable: drops them."""
    if isinstance(v, dict):
        return {k: prune_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [prune_nulls(x) for x in v]
    return v

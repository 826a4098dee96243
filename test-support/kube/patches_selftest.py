#!/usr/bin/env python3
"""Self-test of topology_patches.py (no server): the Go template subset, variables with
defaults and schema checks, JSON patches and selectors, as CAPI's topology controller runs
them. Run directly or through sim_selftest.py."""

import sys
import unittest

import topology_patches as tp

CC = {"spec": {
    "variables": [
        {"name": "flavor", "required": True, "schema": {"openAPIV3Schema": {"type": "string"}}},
        {"name": "audit", "required": False, "schema": {"openAPIV3Schema": {
            "type": "object", "default": {},
            "properties": {"enabled": {"type": "boolean", "default": False},
                           "maxAge": {"type": "integer", "minimum": 0, "default": 30}}}}},
        {"name": "zones", "required": False, "schema": {"openAPIV3Schema": {
            "type": "array", "items": {"type": "string"}, "default": []}}},
        {"name": "mode", "required": False, "schema": {"openAPIV3Schema": {
            "type": "string", "enum": ["a", "b"], "default": "a"}}},
    ],
    "patches": [
        {"name": "flavor", "definitions": [{
            "selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                         "kind": "OpenStackMachineTemplate",
                         "matchResources": {"machineDeploymentClass": {"names": ["default-*"]}}},
            "jsonPatches": [{"op": "add", "path": "/spec/template/spec/flavor",
                             "valueFrom": {"variable": "flavor"}}]}]},
        {"name": "audit", "enabledIf": "{{ if .audit.enabled }}true{{ end }}", "definitions": [{
            "selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                         "kind": "OpenStackMachineTemplate",
                         "matchResources": {"machineDeploymentClass": {"names": ["default-*"]}}},
            "jsonPatches": [
                {"op": "add", "path": "/spec/template/spec/tags/-",
                 "valueFrom": {"template": "audit-{{ .audit.maxAge }}-{{ .builtin.cluster.name }}"}},
                {"op": "remove", "path": "/spec/template/spec/tags/0"},
                {"op": "add", "path": "/spec/template/spec/zones",
                 "valueFrom": {"template": "{{- range .zones }}\n- {{ . | toJson }}{{- end }}"}},
            ]}]},
    ]}}

OSMT = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OpenStackMachineTemplate",
        "spec": {"template": {"spec": {"flavor": "placeholder", "tags": ["old"]}}}}


class Templates(unittest.TestCase):
    def test_subset(self):
        d = {"a": {"b": 3, "s": 'x"y'}, "l": ["n1", "n2"], "f": False, "z": 0, "e": ""}
        self.assertEqual(tp.render("{{ if .a.b }}yes{{ else }}no{{ end }}", d), "yes")
        self.assertEqual(tp.render("{{ if .f }}1{{ else if .z }}2{{ else if .a.b }}3{{ else }}4{{ end }}", d), "3")
        self.assertEqual(tp.render("{{ range .l }}[{{ . }}]{{ else }}none{{ end }}", d), "[n1][n2]")
        self.assertEqual(tp.render("{{ range .e }}x{{ else }}none{{ end }}", d), "none")
        self.assertEqual(tp.render("{{ .a.s | toJson }} {{ .a.b | toString | toJson }}", d), '"x\\"y" "3"')
        self.assertEqual(tp.render("{{ or .f .a.b }} {{ and .a.b .z }} {{ not .e }}", d), "3 0 true")
        self.assertEqual(tp.render('{{ eq .a.b 3 }} {{ ne .a.s "q" }} {{ join "," .l }}', d), "true true n1,n2")
        self.assertEqual(tp.render("{{ .missing }}|{{ with .a }}{{ .b }}{{ end }}", d), "<no value>|3")
        self.assertEqual(tp.render("a  {{- if .f }}x{{ end -}}  b", d), "ab")
        with self.assertRaises(tp.PatchError):
            tp.render("{{ if .a }}open", d)


class Variables(unittest.TestCase):
    def test_defaults_nested_and_overrides(self):
        v = tp.resolve_variables(CC, [{"name": "flavor", "value": "m1"}, {"name": "audit", "value": {"enabled": True}}],
                                 [{"name": "flavor", "value": "g1"}])
        self.assertEqual(v["flavor"], "g1")
        self.assertEqual(v["audit"], {"enabled": True, "maxAge": 30})
        self.assertEqual(v["zones"], [])
        self.assertEqual(v["mode"], "a")

    def test_refusals(self):
        for given, needle in [([], "flavor: required"),
                              ([{"name": "flavor", "value": 3}], "must be of type string"),
                              ([{"name": "flavor", "value": "m"}, {"name": "mode", "value": "c"}], "one of"),
                              ([{"name": "flavor", "value": "m"}, {"name": "audit", "value": {"maxAge": -1}}],
                               "at least 0"),
                              ([{"name": "flavor", "value": "m"}, {"name": "audit", "value": {"x": 1}}],
                               "not declared"),
                              ([{"name": "flavor", "value": "m"}, {"name": "nope", "value": 1}], "not defined")]:
            with self.assertRaises(tp.PatchError) as e:
                tp.resolve_variables(CC, given)
            self.assertIn(needle, str(e.exception))


class Patches(unittest.TestCase):
    def run_patches(self, variables, md_class="default-worker"):
        cl = {"metadata": {"name": "c1", "namespace": "ns"},
              "spec": {"topology": {"classRef": {"name": "cc"}, "version": "v1.33.1"}}}
        glob = tp.resolve_variables(CC, variables)
        glob["builtin"] = tp.builtins(cl)
        values = dict(glob, builtin=tp.builtins(cl, md={"class": md_class, "name": "w"}))
        return tp.apply_patches(CC, OSMT, ("machineDeploymentClass", md_class), glob, values)

    def test_enabled_if_templates_and_ops(self):
        out = self.run_patches([{"name": "flavor", "value": "m1"}])
        self.assertEqual(out["spec"]["template"]["spec"], {"flavor": "m1", "tags": ["old"]})
        out = self.run_patches([{"name": "flavor", "value": "m1"}, {"name": "audit", "value": {"enabled": True}},
                                {"name": "zones", "value": ["z1", "z2"]}])
        self.assertEqual(out["spec"]["template"]["spec"],
                         {"flavor": "m1", "tags": ["audit-30-c1"], "zones": ["z1", "z2"]})
        self.assertEqual(OSMT["spec"]["template"]["spec"]["tags"], ["old"], "the class's template is untouched")

    def test_selector(self):
        out = self.run_patches([{"name": "flavor", "value": "m1"}], md_class="gpu")
        self.assertEqual(out["spec"]["template"]["spec"]["flavor"], "placeholder")

    def test_json_patch_errors(self):
        doc = {"a": {"l": [1, 2]}}
        tp.apply_json_patch(doc, [{"op": "add", "path": "/a/l/1", "value": 9},
                                  {"op": "replace", "path": "/a/l/0", "value": 0},
                                  {"op": "add", "path": "/a/m~1n", "value": True}])
        self.assertEqual(doc, {"a": {"l": [0, 9, 2], "m/n": True}})
        for op in [{"op": "add", "path": "/x/y", "value": 1}, {"op": "replace", "path": "/a/zz", "value": 1},
                   {"op": "remove", "path": "/a/l/7"}, {"op": "move", "path": "/a", "from": "/b"}]:
            with self.assertRaises(tp.PatchError):
                tp.apply_json_patch(doc, [op])


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=1).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())

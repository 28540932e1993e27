#!/usr/bin/env python3
"""Evaluates the ValidatingAdmissionPolicies of deploy/publish (kueue, health) with cel-python, a
CEL implementation nobody here wrote, on Node updates zonemesh's publisher makes and on ones it
must not make. Usage: admission-cel.py POLICY.yaml...  Prints one line per case and policy;
exits 1 when a case is decided wrongly, 2 when an expression does not compile.
"""
import copy
import sys

import celpy
import yaml

OURS = {"key": "zonemesh.io/network-fault", "value": "degraded", "effect": "NoSchedule"}
GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "a2",
        "labels": {"kubernetes.io/hostname": "a2", "zonemesh.io/zone": "zone-a"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
    },
    "spec": {"podCIDR": "10.0.2.0/24", "podCIDRs": ["10.0.2.0/24"], "taints": [GPU]},
}


def changed(edit):
    node = copy.deepcopy(NODE)
    edit(node)
    return node


# (what, new object, allowed)
CASES = [
    ("add its taint", changed(lambda n: n["spec"]["taints"].append(OURS)), True),
    (
        "change its taint's value and effect",
        changed(lambda n: n["spec"]["taints"].append(dict(OURS, value="down", effect="NoExecute"))),
        True,
    ),
    ("set its health label", changed(lambda n: n["metadata"]["labels"].update({"zonemesh.io/network-health": "down"})), True),
    ("remove its zone label", changed(lambda n: n["metadata"]["labels"].pop("zonemesh.io/zone")), True),
    ("remove another's taint", changed(lambda n: n["spec"].update(taints=[OURS])), False),
    (
        "add another taint",
        changed(lambda n: n["spec"]["taints"].append({"key": "x", "effect": "NoSchedule"})),
        False,
    ),
    ("cordon the node", changed(lambda n: n["spec"].update(unschedulable=True)), False),
    ("change the pod CIDR", changed(lambda n: n["spec"].update(podCIDR="10.9.0.0/24")), False),
    ("set a provider ID", changed(lambda n: n["spec"].update(providerID="aws:///i-1")), False),
    ("change another label", changed(lambda n: n["metadata"]["labels"].update({"kubernetes.io/hostname": "x"})), False),
    ("add another label", changed(lambda n: n["metadata"]["labels"].update({"team": "ml"})), False),
    ("change an annotation", changed(lambda n: n["metadata"]["annotations"].update({"a": "b"})), False),
    ("add a finalizer", changed(lambda n: n["metadata"].update(finalizers=["x"])), False),
]


def passes(result):
    # An evaluation error (a missing field read without has()) is a denial, as in the API server.
    return isinstance(result, celpy.celtypes.BoolType) and bool(result)


def main(paths):
    env = celpy.Environment()
    wrong = 0
    for path in paths:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "ValidatingAdmissionPolicy"]
        for policy in docs:
            name = policy["metadata"]["name"]
            programs = []
            for v in policy["spec"]["validations"]:
                try:
                    programs.append((v["message"], env.program(env.compile(v["expression"]))))
                except Exception as e:  # a compile error is a broken policy
                    print(f"{name}: does not compile: {v['expression']!r}: {e}")
                    sys.exit(2)
            for what, new, allowed in CASES:
                activation = {"object": celpy.json_to_cel(new), "oldObject": celpy.json_to_cel(NODE)}
                denied = [m for m, p in programs if not passes(p.evaluate(activation))]
                ok = (not denied) == allowed
                wrong += not ok
                verdict = "allowed" if not denied else f"denied ({denied[0]})"
                print(f"{'ok   ' if ok else 'WRONG'} {name}: {what}: {verdict}")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main(sys.argv[1:])

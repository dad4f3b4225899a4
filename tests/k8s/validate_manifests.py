#!/usr/bin/python3
"""Structural check of ci/k8s/: the manifests parse, the shard Job is an Indexed Job whose Pods
each run one `crucible run --shard I/N` into their own database on a shared volume, and the merge
Job reads the same volume. Then the same checks must reject broken copies (a test that can fail).
Not a cluster run: none is reachable here.   validate_manifests.py CI_K8S_DIR"""
import copy
import subprocess
import sys
from pathlib import Path

import yaml


def container(job):
    cs = job["spec"]["template"]["spec"]["containers"]
    if len(cs) != 1:
        raise ValueError(f"{job['metadata']['name']}: one container expected, found {len(cs)}")
    return cs[0]


def env_of(c):
    return {e["name"]: e for e in c.get("env", [])}


def script_of(c):
    if c.get("command") != ["/bin/bash", "-c"] or len(c.get("args", [])) != 1:
        raise ValueError(f"{c['name']}: command must be bash -c with one script argument")
    script = c["args"][0]
    check = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
    if check.returncode:
        raise ValueError(f"{c['name']}: script is not valid bash: {check.stderr.strip()}")
    return script


def results_claim(job, pvcs):
    spec = job["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in container(job).get("volumeMounts", [])}
    for v in spec.get("volumes", []):
        claim = v.get("persistentVolumeClaim", {}).get("claimName")
        if claim and mounts.get(v["name"]) == "/results":
            if claim not in pvcs:
                raise ValueError(f"{job['metadata']['name']}: claim {claim} is not defined")
            if "ReadWriteMany" not in pvcs[claim]["spec"]["accessModes"]:
                raise ValueError(f"{claim}: shards on several nodes need ReadWriteMany")
            return claim
    raise ValueError(f"{job['metadata']['name']}: no persistent volume mounted at /results")


def validate(docs):
    """Returns a summary line; raises ValueError naming what is wrong."""
    for d in docs:
        for key in ("apiVersion", "kind", "metadata"):
            if key not in d:
                raise ValueError(f"a document has no {key}")
    pvcs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PersistentVolumeClaim"}
    jobs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Job"}
    for name in ("crucible-shards", "crucible-merge"):
        if name not in jobs:
            raise ValueError(f"no Job named {name}")
        if jobs[name]["apiVersion"] != "batch/v1":
            raise ValueError(f"{name}: apiVersion must be batch/v1")
        if jobs[name]["spec"]["template"]["spec"].get("restartPolicy") != "Never":
            raise ValueError(f"{name}: restartPolicy must be Never (a failed shard is a new Pod)")
    shards = jobs["crucible-shards"]
    spec = shards["spec"]
    if spec.get("completionMode") != "Indexed":
        raise ValueError("crucible-shards: completionMode must be Indexed")
    c = container(shards)
    env = env_of(c)
    n = int(env["CRUCIBLE_SHARDS"]["value"]) if "CRUCIBLE_SHARDS" in env else None
    if n is None or spec.get("completions") != n or spec.get("parallelism") != n:
        raise ValueError(f"crucible-shards: completions {spec.get('completions')}, parallelism "
                         f"{spec.get('parallelism')} and CRUCIBLE_SHARDS {n} must be equal")
    index = env.get("JOB_COMPLETION_INDEX", {}).get("valueFrom", {}).get("fieldRef", {})
    if index.get("fieldPath") != \
            "metadata.annotations['batch.kubernetes.io/job-completion-index']":
        raise ValueError("crucible-shards: JOB_COMPLETION_INDEX must come from the Pod's "
                         "job-completion-index annotation")
    script = script_of(c)
    for needed in ('--shard "$JOB_COMPLETION_INDEX/$CRUCIBLE_SHARDS"',
                   '--db "/results/shard_$JOB_COMPLETION_INDEX.db"', "crucible run"):
        if needed not in script:
            raise ValueError(f"crucible-shards: the script lacks {needed}")
    claim = results_claim(shards, pvcs)
    merge = jobs["crucible-merge"]
    mc = container(merge)
    if env_of(mc).get("CRUCIBLE_SHARDS", {}).get("value") != str(n):
        raise ValueError("crucible-merge: CRUCIBLE_SHARDS differs from the shard Job's")
    mscript = script_of(mc)
    if "crucible db merge /results/merged.db" not in mscript:
        raise ValueError("crucible-merge: the script does not run crucible db merge")
    if results_claim(merge, pvcs) != claim:
        raise ValueError("crucible-merge: reads another volume than the shards write")
    return f"{n} shards, Indexed Job, volume {claim}"


def broken_copies(docs):
    """(what was broken, docs) pairs that validate() must reject."""
    def job(ds, name):
        return next(d for d in ds if d.get("metadata", {}).get("name") == name)

    def edit(what, fn):
        ds = copy.deepcopy(docs)
        fn(ds)
        return what, ds

    return [
        edit("not Indexed", lambda ds: job(ds, "crucible-shards")["spec"].pop("completionMode")),
        edit("completions != shards",
             lambda ds: job(ds, "crucible-shards")["spec"].update(completions=3)),
        edit("index not wired", lambda ds: container(job(ds, "crucible-shards"))["env"].pop()),
        edit("no --shard", lambda ds: container(job(ds, "crucible-shards"))["args"].__setitem__(
            0, "crucible run --suite tutorial")),
        edit("merge on another claim",
             lambda ds: job(ds, "crucible-merge")["spec"]["template"]["spec"]["volumes"][0]
             ["persistentVolumeClaim"].update(claimName="elsewhere")),
        edit("ReadWriteOnce volume",
             lambda ds: job(ds, "crucible-results")["spec"].update(accessModes=["ReadWriteOnce"])),
        edit("bad bash", lambda ds: container(job(ds, "crucible-merge"))["args"].__setitem__(
            0, "for x in; do")),
    ]


def main():
    d = Path(sys.argv[1])
    docs = []
    for f in sorted(d.glob("*.yaml")):
        try:
            docs += [x for x in yaml.safe_load_all(f.read_text()) if x is not None]
        except yaml.YAMLError as e:
            print(f"FAIL: {f}: does not parse: {e}")
            return 1
    try:
        print(f"manifests in {d}: {validate(docs)}")
    except (ValueError, KeyError) as e:
        print(f"FAIL: {e}")
        return 1
    failures = 0
    for what, ds in broken_copies(docs):
        try:
            validate(ds)
            print(f"FAIL: a copy with '{what}' was accepted")
            failures += 1
        except (ValueError, KeyError) as e:
            print(f"rejected '{what}': {e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

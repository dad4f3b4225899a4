#!/usr/bin/python3
"""Structural check of ci/k8s/: the manifests parse, the shard Job is an Indexed Job whose Pods
each run one `crucible run --shard I/N` into their own database on a shared volume, with
--threads from the container's CPU limit, and the merge Job checks every shard on the same volume
before it merges. Both Jobs are new each night (generateName, ttlSecondsAfterFinished) and run a
locally built image (imagePullPolicy IfNotPresent, not :latest); the repository's .dockerignore
keeps build trees and stores out of the image. Then the same checks must reject broken copies (a
test that can fail). Not a cluster run: none is reachable here.   validate_manifests.py CI_K8S_DIR"""
import copy
import subprocess
import sys
from pathlib import Path

import yaml


def name_of(doc):
    """A document's name, or its generateName without the trailing dash."""
    meta = doc["metadata"]
    return meta.get("name") or meta.get("generateName", "").rstrip("-")


def container(job):
    cs = job["spec"]["template"]["spec"]["containers"]
    if len(cs) != 1:
        raise ValueError(f"{name_of(job)}: one container expected, found {len(cs)}")
    return cs[0]


def check_nightly_job(name, job):
    """A Job a nightly creates again and again: a fresh name each time, cleaned up afterwards, on
    an image a cluster can run without pulling a locally built tag."""
    meta = job["metadata"]
    if "name" in meta or not meta.get("generateName", "").endswith("-"):
        raise ValueError(f"{name}: use metadata.generateName ('{name}-'), not a fixed name: a "
                         "second night must start a new Job (kubectl create)")
    ttl = job["spec"].get("ttlSecondsAfterFinished")
    if not isinstance(ttl, int) or ttl <= 0:
        raise ValueError(f"{name}: spec.ttlSecondsAfterFinished must be a positive number of "
                         "seconds, or finished Jobs pile up")
    c = container(job)
    image = c.get("image", "")
    if ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest"):
        raise ValueError(f"{name}: image '{image}' needs an explicit tag other than latest "
                         "(latest makes Kubernetes pull it always)")
    if c.get("imagePullPolicy") != "IfNotPresent":
        raise ValueError(f"{name}: imagePullPolicy must be IfNotPresent, so an image loaded "
                         "into the nodes (kind load, minikube image load) runs")


def check_threads(name, c, script):
    """--threads comes from the container's own CPU limit through the downward API."""
    env = env_of(c)
    ref = env.get("CRUCIBLE_THREADS", {}).get("valueFrom", {}).get("resourceFieldRef", {})
    if ref.get("resource") != "limits.cpu" or ref.get("containerName") != c["name"]:
        raise ValueError(f"{name}: CRUCIBLE_THREADS must come from resourceFieldRef limits.cpu "
                         f"of container {c['name']}")
    if str(ref.get("divisor", "1")) != "1":
        raise ValueError(f"{name}: CRUCIBLE_THREADS must count whole cores (divisor 1)")
    if "cpu" not in c.get("resources", {}).get("limits", {}):
        raise ValueError(f"{name}: a CPU limit is needed for --threads to follow it")
    if '--threads "$CRUCIBLE_THREADS"' not in script:
        raise ValueError(f'{name}: the script must pass --threads "$CRUCIBLE_THREADS"')


def check_dockerignore(path):
    if not path.is_file():
        raise ValueError(f"{path}: missing (the image would copy build trees and stores)")
    lines = {l.strip() for l in path.read_text().splitlines()
             if l.strip() and not l.startswith("#")}
    for needed in ("build/", "build-*/", "*.db", "crucible_out/"):
        if needed not in lines:
            raise ValueError(f"{path}: lacks '{needed}'")


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
                raise ValueError(f"{name_of(job)}: claim {claim} is not defined")
            if "ReadWriteMany" not in pvcs[claim]["spec"]["accessModes"]:
                raise ValueError(f"{claim}: shards on several nodes need ReadWriteMany")
            return claim
    raise ValueError(f"{name_of(job)}: no persistent volume mounted at /results")


def validate(docs):
    """Returns a summary line; raises ValueError naming what is wrong."""
    for d in docs:
        for key in ("apiVersion", "kind", "metadata"):
            if key not in d:
                raise ValueError(f"a document has no {key}")
    pvcs = {name_of(d): d for d in docs if d["kind"] == "PersistentVolumeClaim"}
    jobs = {name_of(d): d for d in docs if d["kind"] == "Job"}
    for name in ("crucible-shards", "crucible-merge"):
        if name not in jobs:
            raise ValueError(f"no Job named {name}")
        if jobs[name]["apiVersion"] != "batch/v1":
            raise ValueError(f"{name}: apiVersion must be batch/v1")
        if jobs[name]["spec"]["template"]["spec"].get("restartPolicy") != "Never":
            raise ValueError(f"{name}: restartPolicy must be Never (a failed shard is a new Pod)")
        check_nightly_job(name, jobs[name])
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
    check_threads("crucible-shards", c, script)
    claim = results_claim(shards, pvcs)
    merge = jobs["crucible-merge"]
    mc = container(merge)
    if env_of(mc).get("CRUCIBLE_SHARDS", {}).get("value") != str(n):
        raise ValueError("crucible-merge: CRUCIBLE_SHARDS differs from the shard Job's")
    mscript = script_of(mc)
    if "crucible db merge /results/merged.db" not in mscript:
        raise ValueError("crucible-merge: the script does not run crucible db merge")
    if "crucible db check" not in mscript or "exit 1" not in mscript:
        raise ValueError("crucible-merge: the script must check each shard (crucible db check) "
                         "and fail on a lost one")
    if results_claim(merge, pvcs) != claim:
        raise ValueError("crucible-merge: reads another volume than the shards write")
    return f"{n} shards, Indexed Job, volume {claim}"


def broken_copies(docs):
    """(what was broken, docs) pairs that validate() must reject."""
    def job(ds, name):
        return next(d for d in ds if name_of(d) == name)

    def drop_env(j, name):
        c = container(j)
        c["env"] = [e for e in c["env"] if e["name"] != name]

    def edit(what, fn):
        ds = copy.deepcopy(docs)
        fn(ds)
        return what, ds

    return [
        edit("not Indexed", lambda ds: job(ds, "crucible-shards")["spec"].pop("completionMode")),
        edit("completions != shards",
             lambda ds: job(ds, "crucible-shards")["spec"].update(completions=3)),
        edit("index not wired", lambda ds: drop_env(job(ds, "crucible-shards"),
                                                    "JOB_COMPLETION_INDEX")),
        edit("no --shard", lambda ds: container(job(ds, "crucible-shards"))["args"].__setitem__(
            0, "crucible run --suite tutorial")),
        edit("merge on another claim",
             lambda ds: job(ds, "crucible-merge")["spec"]["template"]["spec"]["volumes"][0]
             ["persistentVolumeClaim"].update(claimName="elsewhere")),
        edit("ReadWriteOnce volume",
             lambda ds: job(ds, "crucible-results")["spec"].update(accessModes=["ReadWriteOnce"])),
        edit("bad bash", lambda ds: container(job(ds, "crucible-merge"))["args"].__setitem__(
            0, "for x in; do")),
        edit("fixed Job name", lambda ds: job(ds, "crucible-shards")["metadata"].update(
            name="crucible-shards")),
        edit("no ttlSecondsAfterFinished",
             lambda ds: job(ds, "crucible-merge")["spec"].pop("ttlSecondsAfterFinished")),
        edit("image :latest",
             lambda ds: container(job(ds, "crucible-shards")).update(image="crucible:latest")),
        edit("pull always",
             lambda ds: container(job(ds, "crucible-merge")).update(imagePullPolicy="Always")),
        edit("threads not from the CPU limit",
             lambda ds: drop_env(job(ds, "crucible-shards"), "CRUCIBLE_THREADS")),
        edit("no CPU limit", lambda ds: container(job(ds, "crucible-shards"))["resources"]
             ["limits"].pop("cpu")),
        edit("merge without checking shards",
             lambda ds: container(job(ds, "crucible-merge"))["args"].__setitem__(
                 0, "crucible db merge /results/merged.db /results/shard_0.db")),
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
        dockerignore = d.resolve().parent.parent / ".dockerignore"
        check_dockerignore(dockerignore)
        print(f"{dockerignore}: keeps build trees, stores and outputs out of the image")
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

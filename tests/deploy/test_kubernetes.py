"""deploy/kubernetes/: the manifests validate offline against the Kubernetes JSON schemas
(kubernetes-validate, strict: an unknown or misspelt field fails) and the KEDA ScaledObject's
CRD schema (copied beside this file); they say what kiln needs (probes, grace, resources from
RUN_CONCURRENCY, the rootless securityContext); and the capabilities they grant are enough for a
real kiln server to serve plain, prestarted and templated runs and kill a timed-out one.

scripts/install-deploy-tools.sh installs kubernetes-validate (`make test` runs it)."""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

try:
    import kubernetes_validate
except ImportError as error:  # pragma: no cover - a setup problem, said plainly
    raise ImportError("kubernetes-validate is missing: run scripts/install-deploy-tools.sh (make test does)") from error

from kiln import langs as kiln_langs
from kilntest import KILN, REPO, Server, wait_until

KUBE = REPO / "deploy" / "kubernetes"
KEDA_SCHEMA = json.loads((Path(__file__).parent / "keda-scaledobject.schema.json").read_text())
# the oldest Kubernetes the rootless Deployment is written for (user namespaces and
# procMount: Unmasked on by default; appArmorProfile exists from 1.30), and the newest schemas
# kubernetes-validate bundles
VERSIONS = ("1.33.0", kubernetes_validate.utils.latest_version())
# keys KEDA's prometheus scaler reads from a trigger's metadata (pkg/scalers/prometheus_scaler.go)
PROMETHEUS_TRIGGER_KEYS = {
    "serverAddress", "query", "queryParameters", "threshold", "activationThreshold", "namespace",
    "customHeaders", "ignoreNullValues", "unsafeSsl", "awsRegion", "timeout", "identityOwner",
}  # fmt: skip
# what the rootless pods grant (README.md: what fails without each one)
ROOTLESS_CAPABILITIES = {"SYS_ADMIN", "SYS_CHROOT", "SETUID", "SETGID", "SETPCAP", "CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL"}
ZYGOTE_EXIT_WAIT_S = 10  # kiln/http/server.py: how long the front waits for its zygote to exit


def documents() -> list[tuple[str, dict]]:
    found = []
    for path in sorted(KUBE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found.append((path.name, doc))
    return found


def of_kind(kind: str) -> list[tuple[str, dict]]:
    return [(name, doc) for name, doc in documents() if doc["kind"] == kind]


def deployment(file: str) -> dict:
    return next(doc for name, doc in of_kind("Deployment") if name == file)


def container(doc: dict) -> dict:
    (only,) = doc["spec"]["template"]["spec"]["containers"]
    return only


def env_of(doc: dict) -> dict[str, str]:
    """A Deployment's kiln settings: the ConfigMap's, then the container's own values."""
    config = next(cm["data"] for _, cm in of_kind("ConfigMap") if cm["metadata"]["name"] == "kiln")
    settings = dict(config)
    for var in container(doc).get("env", []):
        if "value" in var:
            settings[var["name"]] = var["value"]
    return settings


def strict(schema):
    """An OpenAPI (CRD) schema that refuses unknown properties, as `kubernetes-validate --strict`
    does for the core kinds (a CRD's structural schema would prune them silently)."""
    if isinstance(schema, dict):
        schema = {key: strict(value) for key, value in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    return schema


def validate(doc: dict, version: str) -> None:
    """Raise on the first problem: the core kinds against Kubernetes' schemas, ScaledObjects
    against KEDA's CRD schema plus the prometheus scaler's own metadata keys."""
    if doc["apiVersion"] == "keda.sh/v1alpha1":
        assert doc["kind"] == "ScaledObject"
        jsonschema.validate(doc, strict(KEDA_SCHEMA))
        for trigger in doc["spec"]["triggers"]:
            assert trigger["type"] == "prometheus", trigger
            metadata = trigger["metadata"]
            assert set(metadata) <= PROMETHEUS_TRIGGER_KEYS, set(metadata) - PROMETHEUS_TRIGGER_KEYS
            assert {"serverAddress", "query", "threshold"} <= set(metadata)
            float(metadata["threshold"])
            assert all(isinstance(value, str) for value in metadata.values())
        # the HPA behavior KEDA hands over is Kubernetes' own: validate it as such
        behavior = doc["spec"].get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior")
        if behavior:
            hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "x"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "x"}, "maxReplicas": 1, "behavior": behavior}}
            kubernetes_validate.validate(hpa, version, strict=True)
        return
    kubernetes_validate.validate(doc, version, strict=True)  # SchemaNotFoundError for an unknown kind


@pytest.mark.parametrize("version", VERSIONS)
def test_manifests_validate(version):
    docs = documents()
    assert {doc["kind"] for _, doc in docs} >= {"Namespace", "RuntimeClass", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "ScaledObject", "HorizontalPodAutoscaler"}
    for name, doc in docs:
        try:
            validate(doc, version)
        except (jsonschema.ValidationError, kubernetes_validate.ValidationError) as error:
            pytest.fail(f"{name}: {doc['kind']}/{doc['metadata']['name']} at {'.'.join(map(str, error.path))}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            pytest.fail(f"{name}: {error.message}")
        assert doc["kind"] in ("Namespace", "RuntimeClass") or doc["metadata"]["namespace"] == "kiln", name


@pytest.mark.parametrize(
    "file, kind, mutate",
    [
        ("kiln.yaml", "Deployment", lambda d: d["spec"]["template"]["spec"].update(hostUser=False)),
        ("kiln.yaml", "Deployment", lambda d: container(d)["securityContext"]["capabilities"].update(add="SYS_ADMIN")),
        ("kiln.yaml", "Deployment", lambda d: container(d)["livenessProbe"]["httpGet"].update(port=["http"])),
        ("keda.yaml", "ScaledObject", lambda d: d["spec"].update(minReplicas=2)),
        ("keda.yaml", "ScaledObject", lambda d: d["spec"]["triggers"][0]["metadata"].update(treshold="6")),
        ("keda.yaml", "ScaledObject", lambda d: d["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"].update(stabilisationWindowSeconds=0)),
    ],
)
def test_validation_catches_mistakes(file, kind, mutate):
    """The validation above is not a formality: a misspelt field or a wrong value fails it."""
    doc = copy.deepcopy(next(doc for name, doc in documents() if name == file and doc["kind"] == kind))
    validate(doc, VERSIONS[-1])
    mutate(doc)
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError, AssertionError)):
        validate(doc, VERSIONS[-1])


def test_rootless_pods():
    """hostUsers: false with exactly what kiln needs; never privileged."""
    for file in ("kiln.yaml", "kiln-jvm.yaml"):
        doc = deployment(file)
        pod = doc["spec"]["template"]["spec"]
        assert pod["hostUsers"] is False
        assert pod["runtimeClassName"] == next(rc["metadata"]["name"] for _, rc in of_kind("RuntimeClass"))
        assert pod["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
        assert pod["securityContext"]["appArmorProfile"] == {"type": "Unconfined"}
        security = container(doc)["securityContext"]
        assert "privileged" not in security
        assert security["runAsUser"] == 0 and security["runAsNonRoot"] is False
        assert security["procMount"] == "Unmasked"
        assert security["allowPrivilegeEscalation"] is True  # the API refuses false beside SYS_ADMIN
        assert security["capabilities"]["drop"] == ["ALL"]
        assert set(security["capabilities"]["add"]) == ROOTLESS_CAPABILITIES
        settings = env_of(doc)
        assert int(settings.get("RUN_UID_BASE", 10001)) + int(settings["RUN_CONCURRENCY"]) <= 65536  # slot uids in the pod's range
    privileged = deployment("kiln-privileged.yaml")
    assert container(privileged)["securityContext"]["privileged"] is True
    assert privileged["spec"]["template"]["spec"].get("hostUsers", True) is True
    text = (KUBE / "kiln-privileged.yaml").read_text()
    for reason in ("every capability", "writable /sys/fs/cgroup", "unmasked /proc", "seccomp", "AppArmor", "MKNOD"):
        assert reason in text, f"kiln-privileged.yaml does not say why it needs: {reason}"


def duration_s(text: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(ms|s|m)?", text).groups()
    return int(number) * {"ms": 0.001, "s": 1, "m": 60, None: 1}[unit]


@pytest.mark.parametrize("file", ["kiln.yaml", "kiln-privileged.yaml", "kiln-jvm.yaml"])
def test_probes_and_shutdown(file):
    doc = deployment(file)
    pod, kiln = doc["spec"]["template"]["spec"], container(doc)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert kiln[probe]["httpGet"] == {"path": "/health", "port": "http"}, probe
    assert kiln["ports"] == [{"name": "http", "containerPort": int(env_of(doc)["PORT"])}]
    pre_stop = kiln["lifecycle"]["preStop"]["sleep"]["seconds"]
    grace = duration_s(env_of(doc).get("RUN_SHUTDOWN_GRACE", "30s"))
    # the grace period counts from the preStop hook; then kiln lets runs finish and waits for its zygote
    assert pod["terminationGracePeriodSeconds"] > pre_stop + grace + ZYGOTE_EXIT_WAIT_S
    assert doc["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def quantity(text) -> float:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "m": 1e-3, "": 1}
    number, unit = re.fullmatch(r"([\d.]+)([A-Za-z]*)", str(text)).groups()
    return float(number) * units[unit]


def size(text: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", text.lower()).groups()
    return int(number) * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[unit]


@pytest.mark.parametrize("file", ["kiln.yaml", "kiln-privileged.yaml", "kiln-jvm.yaml"])
def test_resources_follow_run_concurrency(file):
    """The memory limit holds every slot at its language's memory limit plus kiln's own, so
    that the container's OOM killer never has to pick among kiln's processes; a cpu request, no
    cpu limit (a quota throttles runs whose timeouts are wall-clock time)."""
    doc = deployment(file)
    settings = env_of(doc)
    served = settings["RUN_LANGS"].split(",") if "RUN_LANGS" in settings else list(kiln_langs.LANGUAGES)
    assert set(served) <= set(kiln_langs.LANGUAGES), set(served) - set(kiln_langs.LANGUAGES)
    default = size(settings.get("RUN_CGROUP_MEMORY_MAX", "1g"))
    per_run = max(size(settings[f"RUN_CGROUP_MEMORY_MAX_{slug.upper()}"]) if f"RUN_CGROUP_MEMORY_MAX_{slug.upper()}" in settings else kiln_langs.LANGUAGES[slug].memory_max or default for slug in served)
    slots = int(settings["RUN_CONCURRENCY"])
    resources = container(doc)["resources"]
    assert quantity(resources["limits"]["memory"]) >= slots * per_run + 512 * 2**20
    assert quantity(resources["requests"]["memory"]) <= quantity(resources["limits"]["memory"])
    assert quantity(resources["requests"]["cpu"]) >= slots / 2
    assert "cpu" not in resources["limits"]


def without_group_fields(doc: dict) -> dict:
    """A Deployment less what a language group may change."""
    doc = copy.deepcopy(doc)
    doc["metadata"].pop("name")
    for labels in (doc["metadata"]["labels"], doc["spec"]["selector"]["matchLabels"], doc["spec"]["template"]["metadata"]["labels"]):
        labels.pop("app.kubernetes.io/instance")
    doc["spec"].pop("replicas")
    kiln = container(doc)
    kiln.pop("resources")
    kiln["env"] = [var for var in kiln["env"] if var["name"] not in ("RUN_LANGS", "RUN_CONCURRENCY")]
    kiln["image"] = kiln["image"].split(":")[0].removesuffix("-jvm")
    return doc


def test_language_group_is_the_same_pod():
    """kiln-jvm.yaml is kiln.yaml's pod with its own name, languages and size: nothing else
    drifts between the copies."""
    assert without_group_fields(deployment("kiln-jvm.yaml")) == without_group_fields(deployment("kiln.yaml"))
    assert set(env_of(deployment("kiln-jvm.yaml"))["RUN_LANGS"].split(",")) == {"java", "kotlin", "clojure"}


def pod_names(deploy: dict) -> list[str]:
    return [f"{deploy['metadata']['name']}-{hash_}-{suffix}" for hash_, suffix in (("7d9f8b6c5d", "x2x7q"), ("5c4b9", "abcde"), ("6fb8d9c7b4", "zz9k2"))]


def test_services_and_autoscalers_find_their_pods():
    deployments = {doc["metadata"]["name"]: doc for file, doc in of_kind("Deployment") if file != "kiln-privileged.yaml"}
    for _, service in of_kind("Service"):
        selector = service["spec"]["selector"]
        matching = [name for name, doc in deployments.items() if selector.items() <= doc["spec"]["template"]["metadata"]["labels"].items()]
        assert matching == [service["metadata"]["name"]], (service["metadata"]["name"], matching)
        assert service["spec"]["ports"][0]["targetPort"] == "http"
    scaled = of_kind("ScaledObject")
    assert {doc["spec"]["scaleTargetRef"]["name"] for _, doc in scaled} == set(deployments)
    for _, doc in scaled:
        target = doc["spec"]["scaleTargetRef"]["name"]
        slots = int(env_of(deployments[target])["RUN_CONCURRENCY"])
        assert 1 <= doc["spec"]["minReplicaCount"] <= doc["spec"]["maxReplicaCount"]
        for trigger in doc["spec"]["triggers"]:
            assert 0 < float(trigger["metadata"]["threshold"]) < slots  # busy slots wanted per pod
            regexes = re.findall(r'pod=~"([^"]+)"', trigger["metadata"]["query"])
            assert regexes
            for regex in regexes:
                for name, other in deployments.items():
                    for pod in pod_names(other):
                        assert bool(re.fullmatch(regex, pod)) == (name == target), (regex, pod)
    for _, hpa in of_kind("HorizontalPodAutoscaler"):
        assert hpa["spec"]["scaleTargetRef"]["name"] in deployments


# Start kiln (this checkout, as the test suite does) with the capability bounding set reduced
# to what the rootless pods grant, plus MKNOD: outside a user namespace kiln makes each slot's
# /dev nodes, which a user namespace never may (kiln's rootless mode binds them instead).
DROP_AND_EXEC = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
keep = set(map(int, sys.argv[1].split(",")))
cap = 0
while libc.prctl(23, cap, 0, 0, 0) >= 0:  # PR_CAPBSET_READ: up to the kernel's last capability
    if cap not in keep and libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
        raise OSError(ctypes.get_errno(), f"cannot drop capability {cap}")
    cap += 1
os.execv(sys.argv[2], [sys.argv[2], "serve"])
"""
CAPABILITY_NUMBERS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "KILL": 5, "SETGID": 6, "SETUID": 7, "SETPCAP": 8, "SYS_CHROOT": 18, "SYS_ADMIN": 21, "MKNOD": 27}


def test_granted_capabilities_are_enough():
    keep = ",".join(str(CAPABILITY_NUMBERS[name]) for name in ROOTLESS_CAPABILITIES | {"MKNOD"})
    server = Server({"RUN_LANGS": "python,js", "RUN_CONCURRENCY": "2"}, argv=[sys.executable, "-c", DROP_AND_EXEC, keep, str(KILN)])
    try:
        server.wait_ready(30)
        bounding = int(next(line for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines() if line.startswith("CapBnd:")).split()[1], 16)
        assert bounding == sum(1 << int(n) for n in keep.split(","))
        for slug, text in (("python", "print(6 * 7)"), ("js", "console.log(6 * 7)")):
            served_by = []  # the first runs may take plain slots; a slot's replacement is prestarted for its language
            while len(served_by) < 10 and not any(served_by):
                answer, record = server.run_logged(lang_slug=slug, solution_text=text)
                assert answer["stdout"] == "42\n", answer
                served_by.append(record.get("prestarted"))
            assert any(served_by), f"no {slug} run was served by a prestarted slot: {served_by}"
        hung = server.run("python", "import os, time\nos.fork()\nwhile True:\n    time.sleep(0.01)\n", timeout="1s").json()
        assert hung["stats"]["outcome"] == "timed_out" and hung["stats"]["signal"] == 9, hung  # killed, not left to linger
        assert hung["stats"]["wall_ms"] < 2000, hung
        failures = server.logged("slot warm-up failed") + server.logged("template failed")
        assert not failures, failures
        assert wait_until(lambda: len(server.templates()) == 2, 10), server.templates()  # python's and js's templates are up
    finally:
        assert server.stop() == 0

"""deploy/kubernetes/: the manifests validate offline against the Kubernetes JSON schemas
(kubernetes-validate, strict: an unknown or misspelt field fails), and the KEDA ScaledObjects
against the table of a ScaledObject's fields below (as strictly); they say what kiln needs (probes,
grace, resources from RUN_CONCURRENCY, the rootless securityContext); and the capabilities they
grant are enough for a real kiln server to serve plain, prestarted and forked runs and kill a
timed-out one.

scripts/install-deploy-tools.sh installs kubernetes-validate (`make test` runs it)."""

from __future__ import annotations

import copy
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
import yaml

try:
    import kubernetes_validate
except ImportError as error:  # pragma: no cover - a setup problem, said plainly
    raise ImportError("kubernetes-validate is missing: run scripts/install-deploy-tools.sh (make test does)") from error

from kiln import langs as kiln_langs
from kilntest import KILN, REPO, Server, wait_until

KUBE = REPO / "deploy" / "kubernetes"
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


# The fields a KEDA ScaledObject (keda.sh/v1alpha1) may have, written down from KEDA's
# ScaledObject reference (keda.sh/docs, "ScaledObject specification"). How to read it: a dict is an
# object that may hold only its own keys, a trailing "!" marking a required one; {str: str} is a
# map of strings; [x] is a list of x; a tuple is the strings allowed; str, int and bool are
# themselves (every int here counts replicas, seconds or failures: never negative). KEDA's API
# server would keep an unknown field and ignore it; this refuses it, so that a misspelling fails.
HPA_BEHAVIOR = dict  # Kubernetes' own HorizontalPodAutoscalerBehavior: validate() checks it as such
SCALED_OBJECT = {
    "apiVersion!": str,
    "kind!": str,
    "metadata!": dict,  # Kubernetes' own ObjectMeta: validate() checks it as such
    "spec!": {
        "scaleTargetRef!": {"name!": str, "kind": str, "apiVersion": str, "envSourceContainerName": str},
        "pollingInterval": int,
        "cooldownPeriod": int,
        "initialCooldownPeriod": int,
        "idleReplicaCount": int,
        "minReplicaCount": int,
        "maxReplicaCount": int,
        "fallback": {
            "failureThreshold!": int,
            "replicas!": int,
            "behavior": ("static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"),
        },
        "advanced": {
            "restoreToOriginalReplicaCount": bool,
            "horizontalPodAutoscalerConfig": {"name": str, "behavior": HPA_BEHAVIOR},
            "scalingModifiers": {"formula!": str, "target!": str, "activationTarget": str, "metricType": ("AverageValue", "Value")},
        },
        "triggers!": [
            {
                "type!": str,
                "metadata!": {str: str},
                "name": str,
                "authenticationRef": {"name!": str, "kind": ("TriggerAuthentication", "ClusterTriggerAuthentication")},
                "metricType": ("AverageValue", "Value", "Utilization"),
                "useCachedMetrics": bool,
            }
        ],
    },
}
KEDA_DEFAULT_MAX_REPLICAS = 100


class ShapeError(Exception):
    """A ScaledObject that does not have SCALED_OBJECT's shape; path and message as
    kubernetes-validate's errors have them."""

    def __init__(self, path: list, message: str):
        super().__init__(f"{'.'.join(map(str, path))}: {message}")
        self.path, self.message = path, message


def check_shape(value, shape, path: list) -> None:
    """Raise ShapeError where value is not of shape (see SCALED_OBJECT)."""
    if shape == {str: str}:
        if not isinstance(value, dict) or not all(isinstance(item, str) for item in [*value, *value.values()]):
            raise ShapeError(path, f"wants a map of strings to strings, not {value!r}")
    elif isinstance(shape, dict):
        if not isinstance(value, dict):
            raise ShapeError(path, f"wants an object, not {value!r}")
        fields = {key.removesuffix("!"): item for key, item in shape.items()}
        unknown = sorted(value.keys() - fields.keys())
        if unknown:
            raise ShapeError([*path, unknown[0]], f"is not a field here (one of: {', '.join(sorted(fields))})")
        for key in (key.removesuffix("!") for key in shape if key.endswith("!")):
            if key not in value:
                raise ShapeError([*path, key], "is required")
        for key, item in value.items():
            check_shape(item, fields[key], [*path, key])
    elif isinstance(shape, list):
        if not isinstance(value, list) or not value:
            raise ShapeError(path, f"wants a non-empty list, not {value!r}")
        for index, item in enumerate(value):
            check_shape(item, shape[0], [*path, index])
    elif isinstance(shape, tuple):
        if value not in shape:
            raise ShapeError(path, f"wants one of {', '.join(shape)}, not {value!r}")
    elif shape is int:
        if type(value) is not int or value < 0:  # type(), as a bool is an int to isinstance
            raise ShapeError(path, f"wants a whole number, 0 or more, not {value!r}")
    elif not isinstance(value, shape):
        raise ShapeError(path, f"wants a {shape.__name__}, not {value!r}")


def check_scaled_object(doc: dict) -> None:
    """SCALED_OBJECT's shape, and replica counts in order: idle < min <= max, max at least 1."""
    check_shape(doc, SCALED_OBJECT, [])
    spec = doc["spec"]
    low, high = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", KEDA_DEFAULT_MAX_REPLICAS)
    if high < 1:
        raise ShapeError(["spec", "maxReplicaCount"], "must be at least 1")
    if low > high:
        raise ShapeError(["spec", "minReplicaCount"], f"{low} is more than maxReplicaCount {high}")
    if "idleReplicaCount" in spec and not spec["idleReplicaCount"] < low:
        raise ShapeError(["spec", "idleReplicaCount"], f"must be less than minReplicaCount {low}")


def validate(doc: dict, version: str) -> None:
    """Raise on the first problem: the core kinds against Kubernetes' schemas, ScaledObjects
    against SCALED_OBJECT plus the prometheus scaler's own metadata keys."""
    if doc["apiVersion"] == "keda.sh/v1alpha1":
        assert doc["kind"] == "ScaledObject"
        check_scaled_object(doc)
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"]}, version, strict=True)
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
        except (ShapeError, kubernetes_validate.ValidationError) as error:
            pytest.fail(f"{name}: {doc['kind']}/{doc['metadata']['name']} at {'.'.join(map(str, error.path))}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            pytest.fail(f"{name}: {error.message}")
        assert doc["kind"] in ("Namespace", "RuntimeClass") or doc["metadata"]["namespace"] == "kiln", name


@pytest.mark.parametrize(
    "file, kind, mutate, caught_by",
    [
        ("kiln.yaml", "Deployment", lambda d: d["spec"]["template"]["spec"].update(hostUser=False), kubernetes_validate.ValidationError),
        ("kiln.yaml", "Deployment", lambda d: container(d)["securityContext"]["capabilities"].update(add="SYS_ADMIN"), kubernetes_validate.ValidationError),
        ("kiln.yaml", "Deployment", lambda d: container(d)["livenessProbe"]["httpGet"].update(port=["http"]), kubernetes_validate.ValidationError),
        # a misspelt ScaledObject field, at the top of spec and further in
        ("keda.yaml", "ScaledObject", lambda d: d["spec"].update(minReplicas=2), ShapeError),
        ("keda.yaml", "ScaledObject", lambda d: d["spec"]["scaleTargetRef"].update(apiversion="apps/v1"), ShapeError),
        ("keda.yaml", "ScaledObject", lambda d: d["spec"]["advanced"].update(restoreToOriginalReplicas=True), ShapeError),
        # a ScaledObject field of the wrong type, or a value it does not take
        ("keda.yaml", "ScaledObject", lambda d: d["spec"].update(maxReplicaCount="20"), ShapeError),
        ("keda.yaml", "ScaledObject", lambda d: d["spec"].update(pollingInterval=True), ShapeError),
        ("keda.yaml", "ScaledObject", lambda d: d["spec"]["triggers"][0]["metadata"].update(threshold=6), ShapeError),
        ("keda.yaml", "ScaledObject", lambda d: d["spec"]["triggers"][0].update(metricType="Average"), ShapeError),
        ("keda.yaml", "ScaledObject", lambda d: d["metadata"].update(namspace="kiln"), kubernetes_validate.ValidationError),
        # replica counts out of order
        ("keda.yaml", "ScaledObject", lambda d: d["spec"].update(minReplicaCount=30), ShapeError),
        # the prometheus trigger's own keys, and the HPA behavior Kubernetes checks
        ("keda.yaml", "ScaledObject", lambda d: d["spec"]["triggers"][0]["metadata"].update(treshold="6"), AssertionError),
        ("keda.yaml", "ScaledObject", lambda d: d["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"].update(stabilisationWindowSeconds=0), kubernetes_validate.ValidationError),
    ],
)
def test_validation_catches_mistakes(file, kind, mutate, caught_by):
    """The validation above is not a formality: a misspelt field or a wrong value fails it, and
    the check meant to catch it is the one that does."""
    doc = copy.deepcopy(next(doc for name, doc in documents() if name == file and doc["kind"] == kind))
    validate(doc, VERSIONS[-1])
    mutate(doc)
    with pytest.raises(caught_by):
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


# A rootless pod (hostUsers: false) for real, without a cluster: kiln started as root of a user
# namespace whose ids 0-65535 are an unprivileged range of the host's, in a pid namespace of its
# own (the pod's), with only the rootless pods' capabilities, in a cgroup subtree that range's root
# owns (what the runtime handler's writable cgroup gives the pod).
POD_ROOT = 300000


# argv: the pod's root uid, its cgroup folders, then DROP_AND_EXEC's program and arguments. The
# launcher stays outside as the pod's runtime does (a SIGTERM to it reaches kiln); kiln is 1 of
# the pod's pid namespace, with a /proc of it.
POD = """
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
root, cgroups, program = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3:]
for folder in cgroups:
    with open(folder + "/cgroup.procs", "w") as procs:
        procs.write(str(os.getpid()))
inside_r, inside_w = os.pipe()
mapped_r, mapped_w = os.pipe()
child = os.fork()
if child == 0:
    assert libc.unshare(0x10000000 | 0x20000000 | 0x00020000) == 0  # user, pid, mount
    os.write(inside_w, b"u")
    os.read(mapped_r, 1)
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    kiln = os.fork()
    if kiln:
        signal.signal(signal.SIGTERM, lambda *_: os.kill(kiln, signal.SIGTERM))
        os._exit(os.waitpid(kiln, 0)[1] >> 8)
    libc.mount(None, b"/", None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE
    assert libc.mount(b"proc", b"/proc", b"proc", 0, None) == 0
    os.execv(sys.executable, [sys.executable, "-c", *program])
os.read(inside_r, 1)
for name in ("uid_map", "gid_map"):
    with open(f"/proc/{child}/{name}", "w") as idmap:
        idmap.write(f"0 {root} 65536")
os.write(mapped_w, b"m")
signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGTERM))
os._exit(os.waitpid(child, 0)[1] >> 8)
"""


def _pod_cgroups(name: str) -> list[Path]:
    found = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in ("memory", "pids", "cpuacct", "cpu"):
            if controller in controllers.split(",") and Path("/sys/fs/cgroup", controller).is_dir():
                found.append(Path("/sys/fs/cgroup", controller, path.lstrip("/"), name))
    return found


def test_root_of_a_user_namespace_serves_as_in_a_rootless_pod():
    subtrees = _pod_cgroups("kiln-pod-test")
    for subtree in subtrees:
        subtree.mkdir(exist_ok=True)
        for path in (subtree, *subtree.iterdir()):
            os.chown(path, POD_ROOT, POD_ROOT)
    keep = ",".join(str(CAPABILITY_NUMBERS[name]) for name in ROOTLESS_CAPABILITIES)
    argv = [sys.executable, "-c", POD, str(POD_ROOT), ",".join(map(str, subtrees)), DROP_AND_EXEC, keep, str(KILN)]
    server = Server({"RUN_LANGS": "python,cpp", "RUN_CONCURRENCY": "2"}, argv=argv)
    run_dir = Path(f"/run/{server.instance}")
    try:
        run_dir.mkdir()
        os.chown(run_dir, POD_ROOT, POD_ROOT)
        server.wait_ready(60)
        served_by = []  # the first runs may take plain slots; a slot's replacement is forked from python's template
        while len(served_by) < 10 and not any(served_by):
            answer, record = server.run_logged(lang_slug="python", solution_text="print(6 * 7)\n")
            assert answer["stdout"] == "42\n", answer
            served_by.append(record.get("prestarted"))
            time.sleep(0.2)
        assert any(served_by), served_by
        assert server.logged("template ready")
        judged = server.client.post("/judge", json={"lang_slug": "cpp", "solution_text": "#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b;}\n", "tests": [{"stdin": "40 2", "expected": "42"}]})
        assert judged.status_code == 200 and judged.json()["verdict"] == "AC", judged.text
        assert not server.logged("slot warm-up failed") + server.logged("template failed")
        assert server.client.get("/health").text == "ok\n"  # root of its namespace: nothing rootless to say
    finally:
        server.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
        for subtree in subtrees:
            assert wait_until(lambda subtree=subtree: not any(p.is_dir() for p in subtree.iterdir()), 10), list(subtree.iterdir())
            subtree.rmdir()

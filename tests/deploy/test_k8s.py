"""deploy/k8s validates strictly against Kubernetes' schemas and keeps the release order safe.

kubernetes-validate --strict (pinned in the dev extras) checks every manifest; the rest asserts
what an operator relies on: migrations in a Job with a generated name (never applied with the
Deployments) and every app pod waiting for them, exactly one beat (Recreate), probes, a
PodDisruptionBudget, resource requests, and only the proxy reaching Daphne.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.dockerfile import ROOT

K8S = ROOT / "deploy" / "k8s"
MANIFESTS = sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def _documents() -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in MANIFESTS:
        for document in yaml.safe_load_all(path.read_text()):
            meta = document["metadata"]
            found[(document["kind"], meta.get("name") or meta["generateName"])] = document
    return found


DOCS = _documents()


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_manifests_validate_strictly(manifest: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet", str(manifest)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_unknown_field_fails_strict_validation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((K8S / "beat.yaml").read_text().replace("strategy:", "stratagem:"))
    result = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0


def test_migrations_run_in_a_generated_job_before_the_deployments() -> None:
    job = DOCS[("Job", "synapsia-migrate-")]
    assert "name" not in job["metadata"]
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command == ["python", "manage.py", "migrate", "--no-input"]
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert "migrate-job.yaml" not in kustomization["resources"]
    for name in ("synapsia-web", "synapsia-worker", "synapsia-beat"):
        init = DOCS[("Deployment", name)]["spec"]["template"]["spec"]["initContainers"]
        assert "migrate --check" in " ".join(init[0]["command"]), name


def test_exactly_one_beat_replaced_not_rolled() -> None:
    beat = DOCS[("Deployment", "synapsia-beat")]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"] == {"type": "Recreate"}
    beats = [
        key
        for key, doc in DOCS.items()
        if doc["kind"] == "Deployment"
        and "beat" in doc["spec"]["template"]["spec"]["containers"][0].get("command", [])
    ]
    assert beats == [("Deployment", "synapsia-beat")]


def test_web_has_probes_a_disruption_budget_and_every_container_requests_resources() -> None:
    web = DOCS[("Deployment", "synapsia-web")]["spec"]["template"]["spec"]["containers"][0]
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert DOCS[("PodDisruptionBudget", "synapsia-web")]["spec"]["minAvailable"] == 1
    for (kind, name), doc in DOCS.items():
        if kind not in ("Deployment", "Job"):
            continue
        pod = doc["spec"]["template"]["spec"]
        for container in pod["containers"] + pod.get("initContainers", []):
            requests = container["resources"]["requests"]
            assert requests["cpu"] and requests["memory"], (name, container["name"])


def test_only_the_proxy_reaches_daphne() -> None:
    policy = DOCS[("NetworkPolicy", "synapsia-web-from-proxy-only")]["spec"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "web"
    assert policy["policyTypes"] == ["Ingress"]
    [rule] = policy["ingress"]
    [source] = rule["from"]
    assert source["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "ingress-nginx"
    }
    assert source["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "ingress-nginx"}
    assert rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert "networkpolicy.yaml" in kustomization["resources"]


def test_web_and_worker_append_to_one_shared_deletion_journal() -> None:
    claim = DOCS[("PersistentVolumeClaim", "synapsia-deletion-journal")]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    for name in ("synapsia-web", "synapsia-worker"):
        pod = DOCS[("Deployment", name)]["spec"]["template"]["spec"]
        mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert mounts["deletion-journal"] == "/var/lib/synapsia", name
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert "deletion-journal.yaml" in kustomization["resources"]


def test_migrations_web_and_worker_open_the_same_key_store() -> None:
    """A migration that seals vault items writes data keys: without the claim the migrate Job
    would write them to its own throw-away file (or fail on the read-only root), and web would
    never find them."""
    key_store = DOCS[("ConfigMap", "synapsia")]["data"]["SYNAPSIA_KEY_STORE_PATH"]
    pods = {
        "synapsia-migrate-": DOCS[("Job", "synapsia-migrate-")],
        "synapsia-web": DOCS[("Deployment", "synapsia-web")],
        "synapsia-worker": DOCS[("Deployment", "synapsia-worker")],
    }
    for name, doc in pods.items():
        pod = doc["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert {"configMapRef": {"name": "synapsia"}} in container["envFrom"], name
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert key_store.startswith(mounts["deletion-journal"] + "/"), name
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in pod["volumes"]
            if "persistentVolumeClaim" in v
        }
        assert claims["deletion-journal"] == "synapsia-deletion-journal", name

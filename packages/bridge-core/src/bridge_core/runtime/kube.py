"""The Kubernetes documents a sandbox would be submitted as: a Pod and a NetworkPolicy (pure data).

No API client here (none was ever run against a cluster): these are the manifests a Kubernetes
backend would submit, generated from the same :class:`~bridge_core.runtime.base.SandboxSpec` and
the same hardening facts (:mod:`._hardening`, :mod:`._seccomp`) the podman and docker backends
use, so a change to the hardening reaches all three. ``podman kube play`` runs the Pod as it is
(``integration-tests/runtime/test_kube_spec.py`` checks each measure from inside).

What Kubernetes cannot say per pod, and where it goes instead (docs/runtime.md):

* the pids limit: a kubelet setting (``podPidsLimit``), not a pod field;
* nofile/nproc ulimits: the container runtime's defaults on the node;
* no network: a NetworkPolicy denying all egress and ingress (enforced by the cluster's network
  plugin); ``podman kube play --network none`` gives the pod only ``lo``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from bridge_core.runtime._hardening import PRODUCT_LABEL_VALUE, SANDBOX_USER
from bridge_core.runtime.base import PRODUCT_LABEL, SandboxSpec

__all__ = [
    "CONTAINER_NAME",
    "SECCOMP_LOCALHOST_PROFILE",
    "network_policy",
    "pod_manifest",
    "sandbox_manifests",
    "to_yaml",
]

CONTAINER_NAME = "sandbox"
SECCOMP_LOCALHOST_PROFILE = "mcp-code-execution-mode-sandbox.json"
"""The sandbox profile's file name in the kubelet's seccomp root on every node
(``/var/lib/kubelet/seccomp/`` by default; ``podman kube play --seccomp-profile-root``). Flat:
podman 4.3 resolves only the first component of a nested name (measured)."""
_TMP_VOLUME = "tmp"
_PLAIN_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*")


def _user_and_group() -> tuple[int, int]:
    user, _, group = SANDBOX_USER.partition(":")
    return int(user), int(group or user)


def _cpu(spec: SandboxSpec) -> str | None:
    """The CFS quota as Kubernetes CPU units in millicores (50000/100000 → ``500m``)."""
    limits = spec.limits
    if limits.cpu_quota is None:
        return None
    return f"{max(1, round(1000 * limits.cpu_quota / limits.cpu_period))}m"


def _labels(spec: SandboxSpec) -> dict[str, str]:
    # Ours win, as for containers: a setting can never forge the product label.
    return {**spec.labels, PRODUCT_LABEL: PRODUCT_LABEL_VALUE}


def pod_manifest(
    spec: SandboxSpec, *, pod_name: str, command: Sequence[str] | None = None
) -> dict[str, Any]:
    """The Pod running ``spec``'s image with every hardening measure of the containers.

    ``command`` replaces the image's entrypoint (None: the sandbox client, the image's own).
    """
    user, group = _user_and_group()
    limits = spec.limits
    resources: dict[str, str] = {"memory": str(limits.memory_bytes)}
    if (cpu := _cpu(spec)) is not None:
        resources["cpu"] = cpu
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        # The sandbox client speaks on stdin/stdout once the channel needs no shared directory.
        "stdin": True,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": user,
            "runAsGroup": group,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,  # no_new_privs
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {
                "type": "Localhost",
                "localhostProfile": SECCOMP_LOCALHOST_PROFILE,
            },
        },
        # Requests equal to limits: the pod is Guaranteed, never scheduled on memory it lacks.
        "resources": {"limits": dict(resources), "requests": dict(resources)},
        "volumeMounts": [{"name": _TMP_VOLUME, "mountPath": "/tmp"}],
    }
    if command is not None:
        container["command"] = list(command)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "labels": _labels(spec),
            # Older runtimes (and podman 4.3's kube play) read the profile from this annotation.
            "annotations": {
                f"container.seccomp.security.alpha.kubernetes.io/{CONTAINER_NAME}": (
                    f"localhost/{SECCOMP_LOCALHOST_PROFILE}"
                )
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            # No service variables injected: the sandbox's environment is the image's alone.
            "enableServiceLinks": False,
            "hostNetwork": False,
            "hostPID": False,
            "hostIPC": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": user,
                "runAsGroup": group,
                "seccompProfile": {
                    "type": "Localhost",
                    "localhostProfile": SECCOMP_LOCALHOST_PROFILE,
                },
            },
            "containers": [container],
            "volumes": [
                {
                    "name": _TMP_VOLUME,
                    # tmpfs, its pages charged to the pod's memory limit, like the containers'.
                    "emptyDir": {"medium": "Memory", "sizeLimit": str(limits.tmpfs_bytes)},
                }
            ],
        },
    }


def network_policy(spec: SandboxSpec, *, name: str) -> dict[str, Any]:
    """A NetworkPolicy denying every egress and ingress of sandbox pods (``--network=none``)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "labels": _labels(spec)},
        "spec": {
            "podSelector": {"matchLabels": {PRODUCT_LABEL: PRODUCT_LABEL_VALUE}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    }


def sandbox_manifests(
    spec: SandboxSpec, *, pod_name: str, command: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The Pod, then the NetworkPolicy that isolates it."""
    return [
        pod_manifest(spec, pod_name=pod_name, command=command),
        network_policy(spec, name=f"{pod_name}-deny-all"),
    ]


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    # A JSON string is a valid YAML double-quoted scalar: no value is ever re-typed ("500m",
    # "1024", "true" stay strings).
    return json.dumps(str(value))


def _key(key: str) -> str:
    return key if _PLAIN_KEY.fullmatch(key) else json.dumps(key)


def _lines(value: object, indent: str) -> list[str]:
    if isinstance(value, dict):
        if not value:
            return [f"{indent}{{}}"]
        lines = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{indent}{_key(key)}:")
                lines += _lines(item, indent + "  ")
            else:
                lines.append(f"{indent}{_key(key)}: {_block(item)}")
        return lines
    if isinstance(value, list):
        if not value:
            return [f"{indent}[]"]
        lines = []
        for item in value:
            inner = _lines(item, indent + "  ")
            lines.append(f"{indent}- {inner[0].lstrip()}")
            lines += inner[1:]
        return lines
    return [f"{indent}{_scalar(value)}"]


def _block(value: object) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def to_yaml(documents: Sequence[dict[str, Any]]) -> str:
    """The documents as one YAML stream (block style; what ``kubectl apply -f`` and ``podman
    kube play`` read). Only the types these manifests hold: dicts, lists, str, int, bool."""
    # Separators between documents only: podman 4.3 refuses a stream whose first is empty.
    return "---\n".join("\n".join(_lines(doc, "")) + "\n" for doc in documents)

"""The scheduling framework: Status codes, the extension-point protocols, the
per-profile runtime that runs them, and the pod/node views plugins read."""

from k8py.scheduler.framework.diagnosis import Diagnosis, FitError
from k8py.scheduler.framework.interfaces import CycleState, PostFilterResult, PreFilterResult
from k8py.scheduler.framework.runtime import Framework
from k8py.scheduler.framework.status import Code, Status
from k8py.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo

__all__ = ["Code", "Status", "CycleState", "PreFilterResult", "PostFilterResult", "Diagnosis", "FitError",
           "Framework", "NodeInfo", "PodInfo", "QueuedPodInfo"]

"""batch/v1: jobs and cronjobs."""

from __future__ import annotations

from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.strategies import JobStrategy, StandardStrategy, path_getter

DEFINITIONS = [
    ResourceDefinition(
        group="batch",
        version="v1",
        kind="Job",
        plural="jobs",
        singular="job",
        namespaced=True,
        categories=("all",),
        subresources=frozenset({"status"}),
        strategy=JobStrategy("batch", "v1", "Job", has_status=True, tracks_generation=True),
        field_getters={"status.successful": path_getter("status", "succeeded")},
        openapi_name="io.k8s.api.batch.v1.Job",
    ),
    ResourceDefinition(
        group="batch",
        version="v1",
        kind="CronJob",
        plural="cronjobs",
        singular="cronjob",
        namespaced=True,
        short_names=("cj",),
        categories=("all",),
        subresources=frozenset({"status"}),
        strategy=StandardStrategy("batch", "v1", "CronJob", has_status=True, tracks_generation=True),
        openapi_name="io.k8s.api.batch.v1.CronJob",
    ),
]

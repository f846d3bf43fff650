"""metrics.k8s.io arithmetic: parsing the kubelet's text, the CPU rate over two scrapes."""

from __future__ import annotations

from k8py.apiserver.streaming.resource_metrics import _cpu, _duration, _memory, parse_resource_metrics
from k8py.kubelet import stats
from k8py.kubelet.server.resource_stats import ContainerSample, Sample, render_resource_metrics


def test_what_the_kubelet_renders_the_api_server_parses():
    usage = stats.Usage(cpu_seconds=12.5, memory_bytes=3 * 1024 * 1024, timestamp=1000.0)
    sample = Sample(1000.0, 40.25, stats.NodeMemory(total=8 << 30, available=6 << 30),
                    [ContainerSample("default", "web", "uid", "main", 900.0, usage)])
    scrape = parse_resource_metrics(render_resource_metrics(sample), now=0.0)
    assert scrape.timestamp == 1000.0
    assert scrape.node_cpu == 40.25 and scrape.node_memory == 2 << 30
    assert scrape.containers == {("default", "web", "main"): (12.5, 3 * 1024 * 1024)}


def test_quantities_as_metrics_server_writes_them():
    assert _cpu(0.25) == "250000000n"
    assert _cpu(-1.0) == "0n"
    assert _memory(3 * 1024 * 1024 + 5) == "3072Ki"
    assert _duration(10.5) == "10.5s" and _duration(2.0) == "2s"


def test_the_process_tree_of_this_test_is_measured():
    import os

    usage = stats.usage_of([os.getpid()])[os.getpid()]
    assert usage.memory_bytes > 1024 * 1024 and usage.cpu_seconds > 0
    assert stats.node_memory().working_set > 0 and stats.node_cpu_seconds() > 0
    assert stats.usage_of([2**22 + 12345]) == {}

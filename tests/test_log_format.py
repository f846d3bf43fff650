"""Component log lines carry the fields their call sites pass in ``extra`` (klog's key=value form)."""

from __future__ import annotations

import logging
import subprocess
import sys

from k8py.cli.log_format import FORMAT, MAX_VALUE, FieldsFormatter


def _line(msg: str, extra: dict | None = None, exc: bool = False) -> str:
    record = logging.LogRecord("k8py.proxy.proxier", logging.WARNING, __file__, 1, msg, (), None)
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            record.exc_info = sys.exc_info()
    for key, value in (extra or {}).items():
        setattr(record, key, value)
    return FieldsFormatter(FORMAT).format(record)


def test_fields_follow_the_message_quoted_only_where_a_reader_needs_it():
    line = _line("proxy rules sync failed; retrying",
                 {"error": 'nft -f failed: "x"', "failures": 2, "node": "k8py-node-0", "ports": [80, 443], "empty": "",
                  "ok": True, "why": None})
    assert line.endswith('WARNING k8py.proxy.proxier: proxy rules sync failed; retrying error="nft -f failed: \\"x\\"" failures=2 '
                         'node=k8py-node-0 ports=[80,443] empty="" ok=true why=null'), line


def test_a_record_without_fields_is_as_before_and_a_traceback_comes_after_the_fields():
    assert _line("plain").endswith("WARNING k8py.proxy.proxier: plain")
    lines = _line("failed", {"step": "sync"}, exc=True).splitlines()
    assert lines[0].endswith("failed step=sync") and lines[1] == "Traceback (most recent call last):" and lines[-1] == "ValueError: boom"


def test_a_long_value_is_cut_and_an_object_is_written_as_text():
    line = _line("m", {"body": "x" * (MAX_VALUE * 2), "obj": object()})
    body = line.split(" body=")[1].split(" obj=")[0]
    assert len(body) == MAX_VALUE + 1 and body.endswith("…")
    assert " obj=\"<object object at" in line


def test_every_k8py_command_logs_its_fields(tmp_path):
    # a real command through k8py's main (status of an empty directory), then a record with fields at its level
    code = ("import logging; from k8py.cli.main import main; "
            f"main(['status', '--data-dir', {str(tmp_path)!r}]); "
            "logging.getLogger('k8py.test').warning('cannot listen for a service port', extra={'listen': '10.0.0.1:80/TCP'})")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert "no cluster is running" in run.stdout + run.stderr
    assert "WARNING k8py.test: cannot listen for a service port listen=10.0.0.1:80/TCP" in run.stderr, run.stderr

"""A bad Service range on the API server's command line is a usage error that
says what a good one looks like, never a traceback at start-up."""

from __future__ import annotations

import pytest

from k8py.cli.main import build_parser


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--service-cluster-ip-range", "10.0.0.300/12", "is not a network such as 127.192.0.0/12"),
        ("--service-cluster-ip-range", "127.192.0.1/12", "is not a network such as 127.192.0.0/12"),  # host bits set
        ("--service-cluster-ip-range", "127.192.0.0/31", "give a range of at least 8"),
        ("--service-node-port-range", "high-low", "is not a port range such as 30000-32767"),
        ("--service-node-port-range", "40000-30000", "1 <= LOW <= HIGH <= 65535"),
    ],
)
def test_a_bad_service_range_is_a_usage_error_with_an_example(capsys, flag, value, says) -> None:
    with pytest.raises(SystemExit) as exit:
        build_parser().parse_args(["apiserver", flag, value])
    assert exit.value.code == 2
    assert says in capsys.readouterr().err


def test_good_ranges_pass_through_unchanged() -> None:
    args = build_parser().parse_args(["apiserver", "--service-cluster-ip-range", "127.200.0.0/16", "--service-node-port-range", "31000-31999"])
    assert (args.service_cluster_ip_range, args.service_node_port_range) == ("127.200.0.0/16", "31000-31999")

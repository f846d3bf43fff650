"""Kubernetes' IP and CIDR libraries: ``net.IP`` and ``net.CIDR``.

Upstream (``k8s.io/apiserver/pkg/cel/library/ip.go``, ``cidr.go``) parses with
Go's ``netip``; IPv4-mapped IPv6 addresses and zones are refused::

    ip(<string>) IP, isIP(<string>) bool, ip.isCanonical(<string>) bool
    <IP>.family() int, .isUnspecified(), .isLoopback(), .isLinkLocalMulticast(),
    .isLinkLocalUnicast(), .isGlobalUnicast() bool; string(<IP>) string
    cidr(<string>) CIDR, isCIDR(<string>) bool
    <CIDR>.containsIP(<IP|string>) bool, .containsCIDR(<CIDR|string>) bool,
    .ip() IP, .masked() CIDR, .prefixLength() int (``string(<CIDR>)``: not available, see below)

A CIDR keeps its address bits (``cidr('10.0.0.1/8').ip() == ip('10.0.0.1')``)
as ``netip.Prefix`` does; ``masked()`` clears them. ``isGlobalUnicast`` is
Go's definition (private ranges count), not :attr:`ipaddress.IPv4Address.is_global`.

Missing: ``string(<CIDR>)`` (``string(<IP>)`` holds the one Python overload of
``string`` on a message that cel-cpp allows; ``cidr(x).ip()``,
``.prefixLength()`` and ``.masked()`` give the same information).
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any

from cel_expr_python import cel

from k8py.apiserver.cel import types

__all__ = ["extension", "parse_ip", "parse_cidr"]

T = cel.Type
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Interface = ipaddress.IPv4Interface | ipaddress.IPv6Interface


@functools.lru_cache(maxsize=1024)
def parse_ip(text: str) -> Address:
    if "%" in text:
        raise ValueError("IP address with zone value is not allowed")
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f'IP Address "{text}" parse error during conversion from string: '
                         f'ParseAddr("{text}"): unable to parse IP') from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError("IPv4-mapped IPv6 address is not allowed")
    return address


@functools.lru_cache(maxsize=1024)
def parse_cidr(text: str) -> Interface:
    if "%" in text:
        raise ValueError("CIDR with zone value is not allowed")
    address_text, _, prefix = text.partition("/")
    try:
        if not prefix or not prefix.isdigit() or (len(prefix) > 1 and prefix[0] == "0"):
            raise ValueError
        ipaddress.ip_address(address_text)
        interface = ipaddress.ip_interface(text)
    except ValueError:
        raise ValueError(f'network address parse error during conversion from string: '
                         f'netip.ParsePrefix("{text}"): invalid prefix') from None
    if isinstance(interface, ipaddress.IPv6Interface) and interface.ip.ipv4_mapped is not None:
        raise ValueError("IPv4-mapped IPv6 address is not allowed")
    return interface


def _ip(message: Any) -> Address:
    return ipaddress.ip_address(message.value)


def _cidr(message: Any) -> Interface:
    return ipaddress.ip_interface(message.value)


def to_ip(text: str) -> Any:
    return types.new_ip(str(parse_ip(text)))


def to_cidr(text: str) -> Any:
    return types.new_cidr(str(parse_cidr(text)))


def _valid(parse: Any) -> Any:
    def check(text: str) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True
    return check


def is_canonical(text: str) -> bool:
    return str(parse_ip(text)) == text


def is_global_unicast(message: Any) -> bool:
    address = _ip(message)
    if address.is_unspecified or address.is_loopback or address.is_multicast or address.is_link_local:
        return False
    return not (address.version == 4 and address == ipaddress.IPv4Address("255.255.255.255"))


def is_link_local_multicast(message: Any) -> bool:
    address = _ip(message)
    if address.version == 4:
        return address in ipaddress.IPv4Network("224.0.0.0/24")
    return address.is_multicast and (address.packed[1] & 0x0F) == 0x02


def contains_ip(cidr: Any, other: Any) -> bool:
    address = parse_ip(other) if isinstance(other, str) else _ip(other)
    return address in _cidr(cidr).network


def contains_cidr(cidr: Any, other: Any) -> bool:
    inner = parse_cidr(other) if isinstance(other, str) else _cidr(other)
    outer = _cidr(cidr)
    return inner.version == outer.version and inner.network.subnet_of(outer.network)  # type: ignore[arg-type]


def extension() -> cel.CelExtension:
    def ip_member(name: str, result: Any, impl: Any) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, [cel.Overload(f"ip_{name}", result, [types.IP], is_member=True, impl=impl)])

    def cidr_member(name: str, result: Any, impl: Any) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, [cel.Overload(f"cidr_{name}", result, [types.CIDR], is_member=True,
                                                    impl=impl)])

    return cel.CelExtension("k8py.ip", [
        cel.FunctionDecl("ip", [
            cel.Overload("string_to_ip", types.IP, [T.STRING], impl=to_ip),
            cel.Overload("cidr_ip", types.IP, [types.CIDR], is_member=True,
                         impl=lambda c: types.new_ip(str(_cidr(c).ip))),
        ]),
        cel.FunctionDecl("isIP", [cel.Overload("is_ip", T.BOOL, [T.STRING], impl=_valid(parse_ip))]),
        cel.FunctionDecl("ip.isCanonical", [cel.Overload("ip_is_canonical", T.BOOL, [T.STRING], impl=is_canonical)]),
        ip_member("family", T.INT, lambda m: _ip(m).version),
        ip_member("isUnspecified", T.BOOL, lambda m: _ip(m).is_unspecified),
        ip_member("isLoopback", T.BOOL, lambda m: _ip(m).is_loopback),
        ip_member("isLinkLocalMulticast", T.BOOL, is_link_local_multicast),
        ip_member("isLinkLocalUnicast", T.BOOL, lambda m: _ip(m).is_link_local and not _ip(m).is_multicast),
        ip_member("isGlobalUnicast", T.BOOL, is_global_unicast),
        cel.FunctionDecl("cidr", [cel.Overload("string_to_cidr", types.CIDR, [T.STRING], impl=to_cidr)]),
        cel.FunctionDecl("isCIDR", [cel.Overload("is_cidr", T.BOOL, [T.STRING], impl=_valid(parse_cidr))]),
        cel.FunctionDecl("containsIP", [
            cel.Overload("cidr_contains_ip_string", T.BOOL, [types.CIDR, T.STRING], is_member=True, impl=contains_ip),
            cel.Overload("cidr_contains_ip_ip", T.BOOL, [types.CIDR, types.IP], is_member=True, impl=contains_ip),
        ]),
        cel.FunctionDecl("containsCIDR", [
            cel.Overload("cidr_contains_cidr_string", T.BOOL, [types.CIDR, T.STRING], is_member=True,
                         impl=contains_cidr),
            cel.Overload("cidr_contains_cidr", T.BOOL, [types.CIDR, types.CIDR], is_member=True, impl=contains_cidr),
        ]),
        cidr_member("masked", types.CIDR, lambda c: types.new_cidr(str(_cidr(c).network))),
        cidr_member("prefixLength", T.INT, lambda c: _cidr(c).network.prefixlen),
        # string(<CIDR>) cannot be added beside it: cel-cpp dispatches Python
        # overloads on the runtime kind, and both types are of kind "message"
        cel.FunctionDecl("string", [cel.Overload("ip_to_string", T.STRING, [types.IP], impl=lambda m: m.value)]),
    ])

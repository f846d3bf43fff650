"""Kubernetes' CEL libraries: lists, sets, regex, URLs, IP/CIDR, quantity, and cel's extensions."""

import pytest

from k8py.apiserver import cel


def evaluate(expression, self=None):
    return cel.compile(expression, ["self"]).evaluate({"self": self})


@pytest.mark.parametrize("expression, expected", [
    # lists
    ("[1, 2, 3].isSorted() && !['b', 'a'].isSorted()", True),
    ("[1, 2, 3].sum()", 6),
    ("[1.5, 2.0].sum()", 3.5),
    ("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3", True),
    ("['a', 'b', 'a'].indexOf('a')", 0),
    ("['a', 'b', 'a'].lastIndexOf('a')", 2),
    ("[1, 2].indexOf(3)", -1),
    ("[true, 1].indexOf(1)", 1),
    ("[[1], [2]].indexOf([2])", 1),
    # sets
    ("sets.contains([1, 2, 3], [3, 1])", True),
    ("sets.equivalent([1, 2], [2, 1, 1])", True),
    ("sets.intersects([1, 2], [3])", False),
    # regex
    ("'abc 123 def 456'.find('[0-9]+')", "123"),
    ("'abc 123 def 456'.findAll('[0-9]+')", ["123", "456"]),
    ("'a1b2c3'.findAll('[0-9]', 2)", ["1", "2"]),
    ("'abc'.find('x')", ""),
    ("'abc'.matches('^a.c$')", True),
    # strings (cel-cpp's strings extension)
    ("'Hello'.lowerAscii() + 'x'.upperAscii()", "helloX"),
    ("'a,b,c'.split(',')", ["a", "b", "c"]),
    ("['a', 'b'].join('-')", "a-b"),
    ("'  x '.trim()", "x"),
    ("'abcdef'.substring(1, 3)", "bc"),
    ("'abc'.charAt(1)", "b"),
    ("'abcabc'.lastIndexOf('b')", 4),
    ("'a-b'.replace('-', '_')", "a_b"),
    ("'%s has %d'.format(['x', 3])", "x has 3"),
    ("strings.quote('a\"b')", '"a\\"b"'),
    # urls
    ("url('https://example.com:8443/a%20b?x=1&x=2&y').getScheme()", "https"),
    ("url('https://example.com:8443/path').getHost()", "example.com:8443"),
    ("url('https://[::1]:80/').getHostname()", "::1"),
    ("url('https://example.com:8443/path').getPort()", "8443"),
    ("url('https://example.com/path').getPort()", ""),
    ("url('https://example.com/a%20b').getEscapedPath()", "/a%20b"),
    ("url('https://example.com/?x=1&x=2&y').getQuery()", {"x": ["1", "2"], "y": [""]}),
    ("url('/just/a/path').getHostname()", ""),
    ("isURL('https://example.com') && !isURL('not a url') && !isURL('relative/path')", True),
    # ip and cidr
    ("ip('10.0.0.1').family() == 4 && ip('::1').family() == 6", True),
    ("ip('127.0.0.1').isLoopback() && ip('0.0.0.0').isUnspecified()", True),
    ("ip('fe80::1').isLinkLocalUnicast() && ip('ff02::1').isLinkLocalMulticast()", True),
    ("ip('10.1.2.3').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast()", True),
    ("ip('::1') == ip('0:0::1')", True),
    ("string(ip('2001:db8::0:1'))", "2001:db8::1"),
    ("isIP('1.2.3.4') && !isIP('1.2.3') && !isIP('::ffff:1.2.3.4')", True),
    ("ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:DB8::1')", True),
    ("cidr('10.0.0.0/8').containsIP('10.9.8.7') && !cidr('10.0.0.0/8').containsIP(ip('11.0.0.1'))", True),
    ("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && !cidr('10.1.0.0/16').containsCIDR(cidr('10.0.0.0/8'))", True),
    ("cidr('10.1.2.3/8').ip() == ip('10.1.2.3') && cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8')", True),
    ("cidr('fd00::/64').prefixLength()", 64),
    ("isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0') && !isCIDR('10.0.0.0/33')", True),
    # quantity
    ("quantity('1') == quantity('1000m')", True),
    ("quantity('1Gi').isGreaterThan(quantity('1G')) && quantity('1k').isLessThan(quantity('1Ki'))", True),
    ("quantity('500m').compareTo(quantity('1'))", -1),
    ("quantity('1.5').add(quantity('500m')).asInteger()", 2),
    ("quantity('3').sub(1).asInteger()", 2),
    ("quantity('100Mi').asApproximateFloat()", 104857600.0),
    ("quantity('-2').sign() == -1 && quantity('0').sign() == 0", True),
    ("quantity('1.5').isInteger() || !quantity('2').isInteger()", False),
    ("isQuantity('1Gi') && !isQuantity('1 Gi')", True),
    ("type(quantity('1')) == kubernetes.Quantity && type(url('/a')) == kubernetes.URL", True),
    # format
    ("format.dns1123Label().validate('my-name').hasValue()", False),
    ("format.dns1123Label().validate('My_Name').value()", [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
        "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]),
    ("format.dns1123SubdomainPrefix().validate('web-').hasValue()", False),
    ("format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()", False),
    ("format.labelValue().validate('a').hasValue() || format.date().validate('2024-13-01').hasValue()", True),
    ("optional.of(1).hasValue() && !optional.none().hasValue()", True),
    # optionals, bindings, has
    ("self.?spec.?replicas.orValue(1)", 1),
    ("{'a': 2}[?'a'].hasValue()", True),
    ("[1, 2][?5].orValue(9)", 9),
    ("cel.bind(n, 'abc'.size(), n * n)", 9),
    ("has(self.spec)", False),
])
def test_library_functions(expression, expected):
    assert evaluate(expression, {"other": 1}) == expected


@pytest.mark.parametrize("expression, message", [
    ("quantity('1 Gi')", "quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ("quantity('1.5').asInteger()", "cannot convert value to integer"),
    ("ip('::ffff:1.2.3.4')", "IPv4-mapped IPv6 address is not allowed"),
    ("ip('fe80::1%eth0')", "IP address with zone value is not allowed"),
    ("url('relative')", 'URL parse error during conversion from string: parse "relative": invalid URI for request'),
    ("[].min()", "min called on empty list"),
    ("'a'.find('(')", "error parsing regexp: missing ), unterminated subpattern: `(`"),
])
def test_library_errors(expression, message):
    with pytest.raises(cel.EvaluationError) as err:
        evaluate(expression)
    assert str(err.value) == message


def test_opaque_results_come_back_as_their_type_and_canonical_text():
    assert evaluate("ip('2001:db8::0:1')") == cel.Opaque("net.IP", "2001:db8::1")
    assert evaluate("cidr('10.0.0.0/8')") == cel.Opaque("net.CIDR", "10.0.0.0/8")
    assert evaluate("url('https://x/y')") == cel.Opaque("kubernetes.URL", "https://x/y")

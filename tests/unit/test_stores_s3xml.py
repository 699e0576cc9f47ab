"""The XML bodies s3bulk sends name each key exactly: read back by an XML parser, as a server
reads them, they give the keys they were made of."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from s3bulk._stores.s3xml import delete_objects_body, xml_safe


def test_a_delete_objects_body_reads_back_as_the_keys_it_names() -> None:
    """A raw carriage return is read as a line feed by every XML parser (end-of-line
    normalization), so `a\\rb` named `a\\nb`: a DeleteObjects deleted another object."""
    keys = ["a\rb", "a\r\nb", "a\nb", "tab\there", "<&>'\"", "line\u2028sep\x85", "trailing\r"]
    assert all(xml_safe(key) for key in keys)
    body = delete_objects_body([(key, "") for key in keys] + [("versioned\r", "v\r1")])
    root = ET.fromstring(body)
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    objects = root.iter(f"{ns}Object")
    named = [(each.findtext(f"{ns}Key"), each.findtext(f"{ns}VersionId")) for each in objects]
    assert named == [(key, None) for key in keys] + [("versioned\r", "v\r1")]

"""Greets people, with abox_fixture_dep from a package index (the e2e test's local one)."""
from abox_fixture_dep import shout


def greet(name):
    return shout(f"hello {name}")

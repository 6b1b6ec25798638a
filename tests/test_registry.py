"""The one registry type (qclm.registry; issue 37, item 5): kinds, backends, commands, materials and analysis
outputs are references "module:NAME" resolved by one function, whose every failure is one line naming what was
looked up."""

from __future__ import annotations

import pytest

from qclm.registry import NoSuchName, NotImportable, Registry, RegistryError, resolve


def test_resolve_names_what_was_looked_up_and_why_in_one_line(kind_module):
    good = kind_module("VALUE = 41\n")
    broken, raising = kind_module("def broken(:\n"), kind_module("raise RuntimeError('boom')\n")
    assert resolve(f"{good}:VALUE") == 41
    cases = {
        "not_a_ref": ("no colon", RegistryError, "thing x: a reference is module:NAME, got 'no colon'"),
        "missing": ("no_such_module_here:X", NotImportable,
                    "thing x: module no_such_module_here is not importable (No module named 'no_such_module_here')"),
        "syntax": (f"{broken}:X", RegistryError, f"thing x: module {broken} has a syntax error ("),
        "raises": (f"{raising}:X", RegistryError, f"thing x: module {raising} cannot be imported: RuntimeError: boom"),
        "no_name": (f"{good}:OTHER", NoSuchName, f"thing x: module {good} has no OTHER"),
    }
    for case, (ref, error, said) in cases.items():
        with pytest.raises(error) as caught:
            resolve(ref, "thing x:")
        message = str(caught.value)
        assert said in message and message.startswith("thing x: ") and "\n" not in message, (case, message)
        assert isinstance(caught.value, ValueError)  # callers that check input catch ValueError


def test_a_registry_loads_each_name_once_and_refuses_an_unknown_one(kind_module):
    name = kind_module("import itertools\nCOUNTER = itertools.count()\nFIRST = next(COUNTER)\n")
    registry = Registry("widget", {"a": f"{name}:COUNTER", "b": f"{name}:FIRST"})
    assert list(registry) == ["a", "b"] and len(registry) == 2 and registry["b"] == f"{name}:FIRST"
    counter = registry.load("a")
    assert registry.load("a") is counter  # imported and looked up once
    with pytest.raises(KeyError, match="unknown widget 'c': one of a, b"):
        registry.load("c")
    assert "c" not in registry and registry.builtin == {"a": f"{name}:COUNTER", "b": f"{name}:FIRST"}


def test_the_packages_registries_resolve_every_entry():
    """Every built-in kind, backend class and loader, and shared command resolves (a renamed module or class
    would otherwise fail only where it is first used)."""
    from qclm.commands import COMMANDS
    from qclm.engine.capabilities import FACTS
    from qclm.probes.registry import KINDS, REGISTRY

    assert set(KINDS) <= set(REGISTRY)
    for name in KINDS:
        assert REGISTRY.load(name).name == name
    for name, facts in FACTS.items():
        assert isinstance(resolve(facts.backend), type) and callable(resolve(facts.loader)), name
    for name in COMMANDS:
        assert callable(COMMANDS.load(name)), name


def test_a_kinds_shorthand_brings_its_config_section_and_may_not_take_a_shared_one(kind_module):
    """The shared config schema names no kind: the ``questionnaires`` section is the Likert kind's shorthand's,
    made from what the kind declares (qclm.probes.shorthand_schema), and validated as the shared sections are; a
    module kind whose shorthand is a shared section, or that has no file key for it, is refused."""
    import importlib

    from qclm.probes import full_config_schema, kind_class, kind_problem, shorthand_schema
    from qclm.settings import config_schema

    likert = kind_class("likert")
    assert "questionnaires" not in config_schema()["properties"]
    assert full_config_schema()["properties"]["questionnaires"] == shorthand_schema(likert)
    assert "the likert kind's instances" in shorthand_schema(likert)["description"]
    head = "from qclm.probes.base import ProbeKind\nclass K(ProbeKind):\n    name = 'k'\n"
    body = ("    def requests(self, c, p, a):\n        return []\n"
            "    def rows(self, cell, answers):\n        return None\n")

    def problem(extra: str) -> str | None:
        name = kind_module(head + extra + body + "KIND = K\n")
        return kind_problem(importlib.import_module(name).KIND, name)

    assert problem("    shorthand = 'engine'\n    file_keys = ('f',)\n").endswith(
        "KIND.shorthand: engine is a shared config section; name the kind's own")
    assert problem("    shorthand = 'things'\n").endswith(
        "KIND.shorthand needs a file key (KIND.file_keys), the setting its files give")
    assert problem("    shorthand = 'things'\n    file_keys = ('f',)\n") is None

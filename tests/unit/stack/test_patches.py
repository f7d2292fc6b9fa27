"""wap_stack/patches.py: replaced attributes are put back as their owners held them, after a block that installed
them, and left alone by a block that found them installed."""

from __future__ import annotations

import types

from wap_stack.patches import Patches


class Base:
    def answer(self) -> str:
        return "base"


class Child(Base):
    @property
    def value(self) -> str:
        return "own"


def test_a_block_installs_and_puts_back_what_each_owner_held() -> None:
    module = types.SimpleNamespace(parse=len)
    patches = Patches()

    def install() -> None:
        patches.replace(module, "parse", str)
        patches.replace(Child, "value", property(lambda self: "patched"))

    own_property = vars(Child)["value"]
    with patches.during(install):
        assert patches.active and module.parse is str and Child().value == "patched"
    assert not patches.active and module.parse is len and vars(Child)["value"] is own_property


def test_a_block_that_found_them_installed_leaves_them_installed() -> None:
    patches = Patches()
    patches.replace(Child, "answer", lambda self: "patched")
    with patches.during(lambda: None):
        assert Child().answer() == "patched"
    assert Child().answer() == "patched"
    patches.restore()
    assert Child().answer() == "base"

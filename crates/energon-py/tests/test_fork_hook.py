"""`fork_hook`: weakly held callbacks around `os.fork`."""

from __future__ import annotations

import gc
import os

from energon_rs.fork_hook import (
    ForkMixin,
    WeakCallbacks,
    after_in_child_fork_hook,
    after_in_parent_fork_hook,
    before_fork_hook,
)


def test_weak_callbacks_dedupe_and_forget_collected_callables():
    calls = []

    class A:
        def m(self):
            calls.append("m")

    def f():
        calls.append("f")

    a = A()
    reg = WeakCallbacks()
    reg.add_hook(a.m)
    reg.add_hook(f)
    reg.add_hook(a.m)
    reg.run()
    assert calls == ["m", "f"] and len(reg._hooks) == 2
    del a
    gc.collect()
    assert len(reg._hooks) == 1
    reg.add_hook(lambda: calls.append("kept"), make_persistent=True)
    gc.collect()
    reg.run()
    assert calls == ["m", "f", "f", "kept"]


def test_hooks_run_around_fork():
    r, w = os.pipe()
    seen = []

    class Obj(ForkMixin):
        def __after_in_child_fork__(self):
            os.write(w, b"c")

        def __after_in_parent_fork__(self):
            seen.append("parent")

    obj = Obj()

    def before():
        seen.append("before")

    before_fork_hook(before)
    after_in_parent_fork_hook(lambda: None)  # collected at once: never runs
    after_in_child_fork_hook(lambda: os.write(w, b"x"), make_persistent=False)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(w)
    assert os.read(r, 10) == b"c"
    os.close(r)
    assert seen == ["before", "parent"]
    del obj

"""Callbacks around `os.fork`, held weakly: an object registers its hooks and is still garbage
collected as if it had not.

    class Reader(ForkMixin):
        def __after_in_child_fork__(self):
            self.file = open(self.path, "rb")    # never share a descriptor with the parent

    before_fork_hook(flush_logs)                 # plain functions too (held weakly)

The hooks run in the order they were added; one whose function or object was collected is
dropped from its registry at once.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Callable, Hashable

__all__ = [
    "DataclassForkMixin",
    "ForkMixin",
    "WeakCallbacks",
    "after_in_child_fork_hook",
    "after_in_parent_fork_hook",
    "before_fork_hook",
]


class WeakCallbacks:
    """An ordered set of callables held by weak references (bound methods through
    `weakref.WeakMethod`); adding the same callable twice keeps one entry."""

    def __init__(self) -> None:
        self._hooks: dict[Hashable, Callable[[], Any]] = {}
        self._persistent: dict[Hashable, Callable[..., Any]] = {}
        self._lock = threading.RLock()

    @staticmethod
    def _key(fn: Callable[..., Any]) -> Hashable:
        owner = getattr(fn, "__self__", None)
        func = getattr(fn, "__func__", None)
        if owner is not None and func is not None:
            return ("method", id(owner), id(func))
        return ("function", id(fn))

    def add_hook(self, callable: Callable[..., None], make_persistent: bool = False) -> None:
        """Adds `callable`; `make_persistent` keeps it alive (a strong reference)."""
        key = self._key(callable)

        def forget(_ref: Any, key: Hashable = key, registry: Any = weakref.ref(self)) -> None:
            owner = registry()
            if owner is not None:
                with owner._lock:
                    owner._hooks.pop(key, None)

        ref: Callable[[], Any]
        if getattr(callable, "__self__", None) is not None and hasattr(callable, "__func__"):
            ref = weakref.WeakMethod(callable, forget)  # type: ignore[arg-type]
        else:
            ref = weakref.ref(callable, forget)
        with self._lock:
            self._hooks[key] = ref
            if make_persistent:
                self._persistent[key] = callable

    def run(self, *args: Any, **kwargs: Any) -> None:
        """Calls every live callable with `args` and `kwargs`."""
        with self._lock:
            refs = list(self._hooks.values())
        for ref in refs:
            fn = ref()
            if fn is not None:
                fn(*args, **kwargs)


_before = WeakCallbacks()
_after_in_parent = WeakCallbacks()
_after_in_child = WeakCallbacks()


def _reset_child_locks() -> None:
    # A fork may have happened while another thread held a registry's lock.
    for registry in (_before, _after_in_parent, _after_in_child):
        registry._lock = threading.RLock()


def _run_after_in_child() -> None:
    _reset_child_locks()
    _after_in_child.run()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before.run, after_in_parent=_after_in_parent.run, after_in_child=_run_after_in_child
    )


def before_fork_hook(callable: Callable[[], None], make_persistent: bool = False) -> None:
    """Runs `callable` in the parent just before each fork (held weakly unless persistent)."""
    _before.add_hook(callable, make_persistent)


def after_in_parent_fork_hook(callable: Callable[[], None], make_persistent: bool = False) -> None:
    """Runs `callable` in the parent just after each fork."""
    _after_in_parent.add_hook(callable, make_persistent)


def after_in_child_fork_hook(callable: Callable[[], None], make_persistent: bool = False) -> None:
    """Runs `callable` in each forked child, first thing."""
    _after_in_child.add_hook(callable, make_persistent)


def _register(obj: Any) -> None:
    cls = type(obj)
    if cls.__before_fork__ is not ForkMixin.__before_fork__:
        before_fork_hook(obj.__before_fork__)
    if cls.__after_in_parent_fork__ is not ForkMixin.__after_in_parent_fork__:
        after_in_parent_fork_hook(obj.__after_in_parent_fork__)
    if cls.__after_in_child_fork__ is not ForkMixin.__after_in_child_fork__:
        after_in_child_fork_hook(obj.__after_in_child_fork__)


class ForkMixin:
    """A class whose instances get their `__before_fork__`, `__after_in_parent_fork__` and
    `__after_in_child_fork__` methods called around forks, for as long as they live."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _register(self)

    def __before_fork__(self) -> None:
        """Called in the parent before a fork."""

    def __after_in_parent_fork__(self) -> None:
        """Called in the parent after a fork."""

    def __after_in_child_fork__(self) -> None:
        """Called in the child after a fork."""


class DataclassForkMixin:
    """`ForkMixin` for dataclasses: the hooks are registered in `__post_init__` (a subclass
    that defines its own `__post_init__` calls `super().__post_init__()`)."""

    def __post_init__(self) -> None:
        _register(self)

    __before_fork__ = ForkMixin.__before_fork__
    __after_in_parent_fork__ = ForkMixin.__after_in_parent_fork__
    __after_in_child_fork__ = ForkMixin.__after_in_child_fork__

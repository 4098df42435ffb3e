"""Calling the blocking client from asyncio, cancellably."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
from typing import Any, Callable, TypeVar

from ._errors import Cancelled, Error

T = TypeVar("T")


def _takes_cancel(func: Callable[..., Any]) -> bool:
    try:
        return "cancel" in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False


def _give_back(result: Any) -> None:
    """Releases what a call granted for a caller that is gone: a Lock, a
    Hold (a campaign's leadership too)."""
    release = getattr(result, "release", None)
    if callable(release):
        try:
            release()
        except Error:
            pass


async def to_thread(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Runs func(*args, **kwargs) in a thread, as asyncio.to_thread does,
    and stays cancellable: for client.acquire, client.hold and
    Election.campaign, which take a cancel event, cancelling the awaiting
    task (Ctrl-C under asyncio.run does) sets that event, so the waiter
    leaves the node's queue at once and the thread ends within moments
    (asyncio.run waits for it); a lock or hold granted as the task was
    cancelled is released. For example:

        lock = await lockd.to_thread(client.acquire, "deploy", 30)
        hold = await lockd.to_thread(client.hold, "deploy", 30)

    asyncio.to_thread(client.acquire, ...) cannot be interrupted: the
    thread waits on, and asyncio.run waits for the thread.

    It is for a program that shares a lockd.Client between threads and
    asyncio code; a program that is all asyncio uses lockd.AsyncClient,
    whose calls are coroutines and need no thread.
    """
    cancel = threading.Event()
    if _takes_cancel(func) and "cancel" not in kwargs:
        kwargs["cancel"] = cancel
    mu = threading.Lock()
    gone = False

    def run() -> T:
        result = func(*args, **kwargs)
        with mu:
            if not gone:
                return result
        # The task was cancelled while the call completed: nobody takes it.
        _give_back(result)
        raise Cancelled("the awaiting task was cancelled")

    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    fut = loop.run_in_executor(None, functools.partial(ctx.run, run))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        with mu:
            gone = True
            cancel.set()

        def settle(f: "asyncio.Future[T]") -> None:
            # It returned before it saw gone: give back what it got.
            if not f.cancelled() and f.exception() is None:
                _give_back(f.result())

        fut.add_done_callback(settle)
        raise

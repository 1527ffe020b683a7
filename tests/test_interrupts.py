"""SIGTERM / SIGINT raise :class:`Interrupted` once, and never split a resource from its release.

Real signals sent to this process (``os.kill``); the cluster test sends its signal from a
real client preload, that is from inside :class:`distributed.Client`'s constructor.
"""

from __future__ import annotations

import os
import signal

import dask.config
import pytest
from distributed import Client

from dpipe._interrupts import Interrupted, deferred_interrupts, install_handlers, restore_handlers
from dpipe.engine import cluster_client

SIGTERM_AT_CONNECT = '''
import asyncio, os, signal

import dask.config

async def dask_setup(client):
    dask.config.get("dpipe-test.clients").append(client)  # the test's list: the client outlives its failed constructor
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.sleep(0.5)
'''


@pytest.fixture
def handlers():
    previous = install_handlers()
    yield
    restore_handlers(previous)


def test_a_signal_raises_interrupted_at_once(handlers):
    with pytest.raises(Interrupted) as info:
        os.kill(os.getpid(), signal.SIGTERM)
        pytest.fail("the signal did not interrupt")
    assert info.value.signum == signal.SIGTERM


def test_a_signal_inside_a_deferred_section_is_raised_when_it_ends(handlers):
    steps = []
    with pytest.raises(Interrupted) as info:
        with deferred_interrupts():
            with deferred_interrupts():  # nested: held until the outermost section ends
                os.kill(os.getpid(), signal.SIGINT)
                steps.append("inner")
            steps.append("outer")
        steps.append("after")
    assert steps == ["inner", "outer"] and info.value.signum == signal.SIGINT


def test_a_second_signal_during_the_clean_up_is_ignored(handlers):
    with pytest.raises(Interrupted):
        os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGTERM)  # would raise (or exit) if it were not ignored


def test_without_the_handlers_a_section_holds_nothing_back():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as info, deferred_interrupts():
            os.kill(os.getpid(), signal.SIGINT)
            pytest.fail("held back without dpipe's handlers")
        assert not isinstance(info.value, Interrupted)
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.integration
def test_a_signal_while_the_client_connects_leaves_no_client_open(handlers, tmp_path):
    preload = tmp_path / "sigterm_at_connect.py"
    preload.write_text(SIGTERM_AT_CONNECT)
    clients: list[Client] = []
    with dask.config.set({"distributed.client.preload": [str(preload)], "dpipe-test.clients": clients}):
        with pytest.raises(Interrupted) as info:
            with cluster_client(workers=1):
                pytest.fail("the client's block ran after the signal")
    assert info.value.signum == signal.SIGTERM
    # interrupted inside its constructor, the client would be left open, its close waiting a minute on the closed cluster's loop
    assert [c.status for c in clients] == ["closed"]

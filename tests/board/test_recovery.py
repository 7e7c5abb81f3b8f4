"""The recovery ladder's transitions, and the watchdog's guards (real threads, real waits)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from hil.attention import NeedsPerson
from hil.board.console import ConsoleCrash
from hil.board.recovery import Rung, first_rung, transition
from hil.board.watchdog import BoardSilent, Watch, bounded
from hil.errors import InfraError


@pytest.mark.parametrize(("rung", "recovered", "power", "after"), [
    (Rung.HEALTHY, False, True, Rung.RECONNECT),
    (Rung.RECONNECT, True, True, Rung.HEALTHY),
    (Rung.RECONNECT, False, True, Rung.REBOOT),
    (Rung.REBOOT, True, False, Rung.HEALTHY),
    (Rung.REBOOT, False, True, Rung.POWER_CYCLE),
    (Rung.REBOOT, False, False, Rung.QUARANTINED),
    (Rung.POWER_CYCLE, True, True, Rung.HEALTHY),
    (Rung.POWER_CYCLE, False, True, Rung.QUARANTINED),
])
def test_the_ladder_climbs_one_rung_per_failure(rung, recovered, power, after) -> None:
    assert transition(rung, recovered, power) is after


@pytest.mark.parametrize(("rung", "recovered", "power", "after"), [
    (Rung.REBOOT, False, False, Rung.REFLASH),  # no power control: re-flash after the reboot
    (Rung.REBOOT, False, True, Rung.POWER_CYCLE),
    (Rung.POWER_CYCLE, False, True, Rung.REFLASH),  # with it: after the power cycle
    (Rung.REFLASH, True, True, Rung.HEALTHY),
    (Rung.REFLASH, False, False, Rung.QUARANTINED),
])
def test_a_board_with_images_is_re_flashed_before_quarantine(rung, recovered, power, after) -> None:
    assert transition(rung, recovered, power, has_images=True) is after


@pytest.mark.parametrize(("power", "images", "after"), [
    (True, False, Rung.POWER_CYCLE),  # `adb reboot` would go to the adbd that does not answer
    (True, True, Rung.POWER_CYCLE),
    (False, False, Rung.REBOOT),  # nothing else left before quarantine: tried anyway
])
def test_a_frozen_board_skips_the_reboot_when_it_has_power_control(power, images, after) -> None:
    assert transition(Rung.RECONNECT, False, power, images, frozen=True) is after
    assert transition(Rung.RECONNECT, True, power, images, frozen=True) is Rung.HEALTHY


def test_a_board_that_needs_a_person_is_re_flashed_when_it_can_be() -> None:
    gone = NeedsPerson("b: the board is not usable for ENN: libenn_public_api_cpp.so did not load")
    assert first_rung(gone, has_images=True) is Rung.REFLASH
    assert first_rung(gone) is Rung.QUARANTINED


def test_a_quarantined_board_has_no_next_rung() -> None:
    with pytest.raises(ValueError, match="quarantined"):
        transition(Rung.QUARANTINED, True, True)


def test_a_console_crash_starts_at_reboot() -> None:
    assert first_rung(ConsoleCrash("b", "Kernel panic")) is Rung.REBOOT
    assert first_rung(InfraError("b: push failed")) is Rung.RECONNECT


def test_bounded_returns_raises_or_gives_up() -> None:
    assert bounded(lambda: 42, 5, "answer") == 42
    with pytest.raises(InfraError, match="boom"):
        bounded(lambda: (_ for _ in ()).throw(InfraError("boom")), 5, "raise")
    never = threading.Event()
    with pytest.raises(BoardSilent, match="stuck: no answer within 0.2 s"):
        bounded(never.wait, 0.2, "stuck")


def watched(ended: threading.Event, watch: Watch) -> Watch:
    """Wait for `ended` as the run shell waits for its output: asking `watch` between waits."""
    while not ended.wait(watch.poll()):
        pass
    return watch


def test_the_watch_kills_at_the_deadline_of_a_responsive_board() -> None:
    killed = threading.Event()
    started = time.monotonic()
    watch = watched(killed, Watch(lambda: None, idle_s=5, deadline_s=0.3, on_deadline=killed.set,
                                  what="runner"))
    assert watch.deadline_hit and time.monotonic() - started >= 0.3
    done = threading.Event()
    done.set()
    assert not watched(done, Watch(lambda: None, 5, 30, killed.set, "runner")).deadline_hit


def test_the_watch_probes_a_long_call_no_sooner_than_due() -> None:
    probes: list[float] = []
    ended = threading.Event()
    started = time.monotonic()
    threading.Timer(2.6, ended.set).start()
    watched(ended, Watch(lambda: probes.append(time.monotonic() - started), idle_s=4, deadline_s=30,
                         on_deadline=lambda: None, what="runner"))
    # the first after PROBE_AFTER_S, then at most one a PROBE_EVERY_S (idle_s / 4 = 1 s)
    assert 1 <= len(probes) <= 2 and probes[0] >= 1.0, probes
    assert all(later - earlier >= 1.0 for earlier, later in itertools.pairwise(probes)), probes


def test_a_call_whose_output_keeps_coming_is_not_probed_until_it_falls_silent() -> None:
    """Output heard every 0.3 s for 2.4 s, then silence for 1.6 s (idle_s 4: a probe may
    come 1 s after the last output or probe): no probe while output comes, then at least one
    and none sooner than 1 s after the last output."""
    probes: list[float] = []
    started = time.monotonic()
    watch = Watch(lambda: probes.append(time.monotonic() - started), idle_s=4, deadline_s=30,
                  on_deadline=lambda: None, what="runner")
    ended = threading.Event()
    threading.Timer(4.0, ended.set).start()
    last_heard = 0.0
    while not ended.is_set():
        if time.monotonic() - started < 2.4:
            watch.heard()
            last_heard = time.monotonic() - started
        ended.wait(min(watch.poll(), 0.3))
    assert probes, "a call silent for longer than a probe interval is probed"
    assert last_heard >= 2.0 and probes[0] >= last_heard + 1.0, (last_heard, probes)


def test_output_counts_as_an_answer_but_silence_after_it_is_still_caught() -> None:
    """A board that streamed output and then froze (its probes fail) is declared silent
    `idle_s` after its last output, not sooner and not never."""
    started = time.monotonic()

    def alive() -> None:
        raise InfraError("device offline")

    watch = Watch(alive, idle_s=1.0, deadline_s=30, on_deadline=lambda: None, what="runner")
    last_heard = started
    with pytest.raises(BoardSilent, match="did not answer for 1 s"):
        while True:
            if time.monotonic() - started < 1.5:
                watch.heard()
                last_heard = time.monotonic()
            time.sleep(min(watch.poll(), 0.1))
    assert last_heard - started >= 1.3 and time.monotonic() - last_heard >= 1.0


@pytest.mark.parametrize("probe", ["raises", "blocks"])
def test_the_watch_declares_a_silent_board_frozen_before_the_deadline(probe: str) -> None:
    never = threading.Event()

    def alive() -> None:
        if probe == "raises":
            raise InfraError("device offline")
        never.wait(30)

    def on_deadline() -> None:
        raise AssertionError("the deadline is not what must catch a frozen board")

    with pytest.raises(BoardSilent, match="did not answer for 1.5 s"):
        watched(never, Watch(alive, idle_s=1.5, deadline_s=30, on_deadline=on_deadline, what="runner"))


def test_a_board_frozen_at_the_deadline_is_found_silent_while_the_kill_hangs() -> None:
    never, kill_released = threading.Event(), threading.Event()
    kills = []

    def kill() -> None:  # the kill's shell on a frozen board: stuck until its own time limit
        kills.append("started")
        kill_released.wait(10)

    def alive() -> None:
        raise InfraError("device offline")

    try:
        with pytest.raises(BoardSilent, match="did not answer for 1 s"):
            watched(never, Watch(alive, idle_s=1.0, deadline_s=0.3, on_deadline=kill, what="runner"))
        assert kills == ["started"] and not kill_released.is_set()  # not waited for
    finally:
        kill_released.set()

"""The tree isotonic regression against brute force on small random trees."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from detemplate.engine.detectors.isotonic import is_monotone, isotonic_tree, objective
from hypothesis import given, settings
from hypothesis import strategies as st


@st.composite
def trees(draw: st.DrawFn, max_nodes: int = 6) -> tuple[list[float], list[int], float, list[float]]:
    n = draw(st.integers(1, max_nodes))
    parent = [-1]
    for i in range(1, n):
        # Mostly one tree; sometimes a second root (forest).
        parent.append(draw(st.integers(-1, i - 1)) if draw(st.booleans()) else draw(st.integers(0, i - 1)))
    levels = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.6, 0.9, 1.0])
    x = draw(st.lists(levels, min_size=n, max_size=n))
    c = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0, 5.0]))
    w = draw(st.lists(st.sampled_from([1.0, 0.5, 2.0, 3.0]), min_size=n, max_size=n))
    return x, parent, c, w


def brute(x: list[float], parent: list[int], c: float, w: list[float], candidates: list[float]) -> float:
    best = np.inf
    for y in itertools.product(candidates, repeat=len(x)):
        if is_monotone(y, parent):
            best = min(best, objective(x, y, parent, c, w))
    return best


@settings(max_examples=150, deadline=None)
@given(trees())
def test_matches_brute_force_over_data_values(case: tuple[list[float], list[int], float, list[float]]) -> None:
    x, parent, c, w = case
    y, cost = isotonic_tree(x, parent, c, w)
    assert is_monotone(y, parent)
    assert cost == pytest.approx(objective(x, y, parent, c, w))
    assert cost == pytest.approx(brute(x, parent, c, w, sorted(set(x))))


@settings(max_examples=60, deadline=None)
@given(trees(max_nodes=4))
def test_no_better_off_the_data_values(case: tuple[list[float], list[int], float, list[float]]) -> None:
    """The lemma: allowing values between and beyond the data does not lower the optimum."""
    x, parent, c, w = case
    vals = sorted(set(x))
    extra = vals + [(a + b) / 2 for a, b in itertools.pairwise(vals)] + [vals[0] - 0.5, vals[-1] + 0.5]
    _, cost = isotonic_tree(x, parent, c, w)
    assert cost == pytest.approx(brute(x, parent, c, w, sorted(set(extra))))


def test_zero_regularisation_keeps_monotone_data() -> None:
    x = [0.1, 0.4, 0.9, 0.5]
    parent = [-1, 0, 1, 0]
    y, cost = isotonic_tree(x, parent, 0.0)
    assert list(y) == x
    assert cost == 0.0


def test_violation_is_pooled_to_a_median() -> None:
    # A parent scored template above its children: L1 pools it with them.
    x = [0.9, 0.2, 0.3]
    parent = [-1, 0, 0]
    y, cost = isotonic_tree(x, parent, 0.0)
    assert is_monotone(y, parent)
    assert cost == pytest.approx(0.7)


def test_large_regularisation_gives_one_section() -> None:
    x = [0.1, 0.9, 0.8, 0.7, 0.2]
    parent = [-1, 0, 0, 1, 1]
    y, _ = isotonic_tree(x, parent, 100.0)
    assert len(set(y.tolist())) == 1


def test_value_cap_stays_monotone() -> None:
    rng = np.random.default_rng(7)
    n = 400
    parent = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    x = rng.random(n)
    y, cost = isotonic_tree(x, parent, 0.5, max_values=16)
    assert is_monotone(y, parent)
    assert len(set(y.tolist())) <= 16
    assert cost == pytest.approx(objective(x, y, parent, 0.5))


def test_rejects_cycles() -> None:
    with pytest.raises(ValueError):
        isotonic_tree([0.1, 0.2], [1, 0], 0.1)

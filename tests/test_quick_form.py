"""The seed's module-level quick form."""

from __future__ import annotations

import pytest

from gangplace import InvalidRequest, place_gang


def test_seed_lines_verbatim() -> None:
    assert place_gang({"rack-b": [8], "rack-a": [4, 4]}, 8) == "rack-a"
    assert place_gang({"rack-a": [4], "rack-b": [3, 1]}, 8) is None


def test_smallest_fitting_rack_wins() -> None:
    assert place_gang({"r3": [16], "r2": [1], "r1": [2, 2]}, 4) == "r1"
    assert place_gang({"r3": [16], "r2": [1], "r1": [2, 1]}, 4) == "r3"
    assert place_gang({}, 1) is None


@pytest.mark.parametrize("required", [0, -1])
def test_nonpositive_requirement_is_a_value_error(required: int) -> None:
    with pytest.raises(ValueError):
        place_gang({"r": [8]}, required)


def test_negative_counts_are_invalid_requests() -> None:
    with pytest.raises(InvalidRequest, match="negative"):
        place_gang({"a": [8], "b": [4, -1]}, 2)


@pytest.mark.parametrize("bad", [1.5, "8", None, True])
def test_non_int_requirement_is_a_type_error(bad: object) -> None:
    with pytest.raises(TypeError):
        place_gang({"r": [8]}, bad)  # type: ignore[arg-type]


def test_non_int_counts_are_type_errors() -> None:
    with pytest.raises(TypeError):
        place_gang({"r": [8.0]}, 8)  # type: ignore[list-item]

"""The quick acceptance of common data-file values agrees with the full checks, value for value."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpuwise.catalog import _datafile
from gpuwise.catalog._datafile import FieldSpec

_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-(10**400), max_value=10**400),
    st.booleans(), st.text(max_size=4), st.sampled_from(["a", "b", "c"]), st.none(),
    st.lists(st.one_of(st.text(max_size=3), st.integers()), max_size=3), st.just(-0.0), st.just(0), st.just(0.0),
)
_SPECS = st.builds(FieldSpec, kind=st.sampled_from(["str", "float", "int", "bool", "strlist"]),
                   choices=st.sampled_from([(), ("a", "b")]), positive=st.booleans())


def _full(value: Any, spec: FieldSpec) -> tuple[bool, Any]:
    """What the general checks say: (accepted, converted value), OverflowError as float() raises it."""
    ok, converted = _datafile._convert(value, spec.kind)
    return (ok and _datafile._problem(value, converted, spec) is None), converted


@given(_VALUES, _SPECS)
def test_a_value_accepted_quickly_is_accepted_by_the_full_checks_with_the_same_result(value: Any,
                                                                                       spec: FieldSpec) -> None:
    try:
        quick = _datafile._plainly_fine(value, spec)
    except OverflowError:  # an int too large for a float field: float() raises it on both paths
        quick = OverflowError
    try:
        accepted, converted = _full(value, spec)
    except OverflowError:
        assert quick is OverflowError
        return
    if quick is _datafile._NOT_PLAIN:
        return  # the full checks decide, as before
    assert accepted
    assert type(quick) is type(converted) and (quick == converted or (math.isnan(quick) and math.isnan(converted)))
    if isinstance(quick, float):
        assert math.copysign(1.0, quick) == math.copysign(1.0, converted)  # -0.0 stays -0.0


@given(st.floats(min_value=0.0, exclude_min=True, allow_infinity=False), st.text(max_size=3), st.booleans())
def test_the_common_valid_values_take_the_quick_way(number: float, text: str, flag: bool) -> None:
    assert _datafile._plainly_fine(number, FieldSpec("float", positive=True)) == number
    assert _datafile._plainly_fine(7, FieldSpec("float")) == 7.0
    assert _datafile._plainly_fine(text, FieldSpec("str")) == text
    assert _datafile._plainly_fine(flag, FieldSpec("bool")) is flag
    assert _datafile._plainly_fine([text], FieldSpec("strlist")) == (text,)


def test_a_bad_value_still_gets_the_full_message() -> None:
    from pathlib import Path

    import pytest

    from gpuwise.errors import DataError
    from gpuwise.i18n import Text

    for value, spec, words in [(-1.0, FieldSpec("float"), "0 or more"), (0, FieldSpec("int", positive=True), "greater"),
                               (float("nan"), FieldSpec("float"), "finite"), ("x", FieldSpec("str", choices=("a",)),
                                                                             "one of a"),
                               (True, FieldSpec("float"), "a number")]:
        with pytest.raises(DataError, match=words):
            _datafile.check_row({"f": value}, {"f": spec}, path=Path("t.toml"), where=Text("row", "行"), require=True)

"""The compiled-dataclass cache can only make class creation faster, never different."""

from __future__ import annotations

import dataclasses
import inspect
import os
from pathlib import Path
from typing import Any

import pytest

from gpuwise.codecache import compiled_dataclasses


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUWISE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GPUWISE_NO_CACHE", raising=False)
    return tmp_path / "cache"


def _classes() -> tuple[type[Any], type[Any]]:
    """A frozen dataclass with a default factory and a post-init check, and a plain one with
    order and keyword-only fields: between them every method `dataclasses` writes."""

    @dataclasses.dataclass(frozen=True)
    class Point:
        """A point."""

        x: int
        y: float = 2.5
        tags: tuple[str, ...] = dataclasses.field(default_factory=tuple)

        def __post_init__(self) -> None:
            if self.x < 0:
                raise ValueError("x must be 0 or more")

    @dataclasses.dataclass(order=True, kw_only=True)
    class Box:
        w: int
        h: list[int] = dataclasses.field(default_factory=list, compare=False, repr=False)

    return Point, Box


def _behaviour(point: type[Any], box: type[Any]) -> list[Any]:
    p, q = point(1), point(1, 2.5, ())
    out: list[Any] = [repr(p), p == q, hash(p) == hash(q), p == point(2), dataclasses.astuple(p),
                      repr(dataclasses.replace(p, y=4.0)), [f.name for f in dataclasses.fields(point)],
                      str(inspect.signature(point)), point.__init__.__annotations__, point.__match_args__,
                      point.__doc__, box.__doc__, repr(box(w=3)), box(w=1) < box(w=2), box(w=1, h=[1]) == box(w=1)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        del p.x
    with pytest.raises(ValueError, match="x must be 0 or more"):
        point(-1)
    with pytest.raises(TypeError):
        box(3)  # keyword-only
    return out


def test_classes_built_from_the_cache_behave_as_plain_dataclasses(own_cache: Path) -> None:
    plain = _behaviour(*_classes())
    with compiled_dataclasses("test"):  # compiles and stores
        filled = _behaviour(*_classes())
    stored = list(own_cache.glob("dataclass-code-*.marshal"))
    assert len(stored) == 1
    with compiled_dataclasses("test"):  # served from the file
        served = _behaviour(*_classes())
    assert plain == filled == served
    assert served[8] == {"x": "int", "y": "float", "tags": "tuple[str, ...]", "return": None}  # not '_return_type'


def test_a_block_that_finds_everything_cached_does_not_rewrite_the_file(own_cache: Path) -> None:
    with compiled_dataclasses("test"):
        _classes()
    (entry,) = own_cache.glob("dataclass-code-*.marshal")
    os.utime(entry, ns=(1, 1))
    with compiled_dataclasses("test"):
        _classes()
    assert entry.stat().st_mtime_ns == 1


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign", "empty", "not-a-table"])
def test_a_damaged_cache_file_is_ignored_and_rewritten(own_cache: Path, damage: str) -> None:
    with compiled_dataclasses("test"):
        _classes()
    (entry,) = own_cache.glob("dataclass-code-*.marshal")
    blob = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":  # one byte of a code object changed: the checksum no longer matches
        entry.write_bytes(blob[:-40] + bytes([blob[-40] ^ 0xFF]) + blob[-39:])
    elif damage == "foreign":
        entry.write_bytes(b"gpuwise-code:1:cpython-27:4:" + blob[40:])
    elif damage == "empty":
        entry.write_bytes(b"")
    else:  # a well-formed file whose payload is not text -> code
        import marshal
        import zlib

        from gpuwise import codecache

        body = marshal.dumps({"def f(): pass": "not code", 3: None})
        entry.write_bytes(codecache._HEADER + zlib.crc32(body).to_bytes(4, "little") + body)
    with compiled_dataclasses("test"):
        rebuilt = _behaviour(*_classes())
    assert rebuilt == _behaviour(*_classes())
    assert entry.read_bytes() != b""  # stored again, readable next time
    with compiled_dataclasses("test"):
        assert _behaviour(*_classes()) == rebuilt


def test_the_cache_is_off_with_gpuwise_no_cache(own_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUWISE_NO_CACHE", "1")
    with compiled_dataclasses("test"):
        assert "exec" not in vars(dataclasses)
        _classes()
    assert not own_cache.exists()


def test_an_unwritable_cache_folder_only_costs_speed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("GPUWISE_CACHE_DIR", str(blocker / "cache"))
    with compiled_dataclasses("test"):
        assert _behaviour(*_classes()) == _behaviour(*_classes())


def test_dataclasses_is_left_as_it_was_even_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), compiled_dataclasses("test"):
        assert "exec" in vars(dataclasses)
        with compiled_dataclasses("test"):  # nested: the outer block stays in charge
            assert "exec" in vars(dataclasses)
        assert "exec" in vars(dataclasses)
        raise RuntimeError("boom")
    assert "exec" not in vars(dataclasses)


def test_no_home_folder_means_no_cache_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwise.tomlcache import load_toml

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("GPUWISE_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    with compiled_dataclasses("test"):
        assert _behaviour(*_classes()) == _behaviour(*_classes())
    data = Path(__file__).resolve().parent.parent / "src" / "gpuwise" / "data" / "form_factors.toml"
    assert load_toml(data)  # parsed, uncached

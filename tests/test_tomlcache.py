"""The parsed-TOML cache can only make a load faster, never different."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from gpuwise.tomlcache import cache_dir, load_toml


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUWISE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GPUWISE_NO_CACHE", raising=False)
    return tmp_path / "cache"


def test_a_cached_load_equals_a_fresh_parse_of_every_shipped_data_file() -> None:
    data = Path(__file__).resolve().parent.parent / "src" / "gpuwise" / "data"
    for path in sorted(data.glob("*.toml")):
        fresh = tomllib.loads(path.read_text(encoding="utf-8"))
        assert load_toml(path) == fresh  # parses and stores
        assert load_toml(path) == fresh  # served from the cache
    assert list(cache_dir().glob("toml-*.marshal"))


def test_an_edited_file_is_parsed_again(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text("x = 1\n")
    assert load_toml(path) == {"x": 1}
    path.write_text("x = 22\n")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert load_toml(path) == {"x": 22}


def test_a_corrupt_cache_entry_falls_back_to_parsing(tmp_path: Path, own_cache: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text("y = 'z'\n")
    load_toml(path)
    for entry in own_cache.glob("toml-*.marshal"):
        entry.write_bytes(b"\x00garbage")
    assert load_toml(path) == {"y": "z"}


def test_dates_are_loaded_but_not_cached(tmp_path: Path, own_cache: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("when = 2026-01-02\n")
    assert str(load_toml(path)["when"]) == "2026-01-02"
    assert not list(own_cache.glob("toml-*.marshal"))


def test_a_parse_error_is_the_parsers_error(tmp_path: Path) -> None:
    path = tmp_path / "d.toml"
    path.write_text("x = = 1\n")
    with pytest.raises(tomllib.TOMLDecodeError):
        load_toml(path)


def test_a_flipped_bit_in_a_cache_entry_is_a_miss_never_a_changed_value(tmp_path: Path, own_cache: Path) -> None:
    path = tmp_path / "e.toml"
    path.write_text("memory_gb = 80.0\nname = 'H100'\n")
    load_toml(path)
    (entry,) = own_cache.glob("toml-*.marshal")
    blob = bytearray(entry.read_bytes())
    for i in range(4, len(blob)):  # every byte after the checksum, one at a time
        damaged = bytearray(blob)
        damaged[i] ^= 0x01
        entry.write_bytes(bytes(damaged))
        assert load_toml(path) == {"memory_gb": 80.0, "name": "H100"}


def test_table_keys_come_back_interned_from_a_parse_and_from_the_cache(tmp_path: Path) -> None:
    import sys

    path = tmp_path / "f.toml"
    path.write_text("[[card]]\nmemory_gb = 80.0\n[[card]]\nmemory_gb = 40.0\n[t]\nx_y = 'v'\n")
    for _ in range(2):  # parsed and stored, then served from the cache
        doc = load_toml(path)
        assert doc == {"card": [{"memory_gb": 80.0}, {"memory_gb": 40.0}], "t": {"x_y": "v"}}
        keys = [*doc, *doc["card"][0], *doc["card"][1], *doc["t"]]
        assert all(k is sys.intern(k) for k in keys)

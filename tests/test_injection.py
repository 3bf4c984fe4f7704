"""A hostile model name cannot inject code into an exported file.

A GGUF's `general.name` and a model folder's name are text someone else wrote. Each case builds
such a file, runs `gpuwise plan SRC --emit TARGET` through the real CLI, then EXECUTES what came
out with stub tools, in tmp_path as the working directory: the vllm line piped to bash with a stub
`vllm` first on PATH; the Ray script run by python against a stub `ray` package; the YAML parsed
by PyYAML (and the shell parts of SkyPilot and dstack run by bash). Every payload tries to create
a file named PWNED; it must never appear.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuwise.textsafe import clean_text

gguf = pytest.importorskip("gguf")
pytest.importorskip("numpy")

from tests.test_gguf import write_model  # after the skips: it needs gguf and numpy
from tests.test_sources_local import CONFIG

PAYLOADS = {
    "python-triple-quotes": 'x"""\nimport os; os.system("touch PWNED")\n#',
    "python-single-triple-quotes": "x'''\nimport os; os.system('touch PWNED')\n#",
    "shell-newline": "tiny\ntouch PWNED",
    "shell-carriage-return": "tiny\rtouch PWNED\r",
    "yaml-new-keys": "tiny\nfile_mounts:\n  /root: /etc\nevil: 1",
    "yaml-line-separators": "tiny\u2028evil: 1\u0085file_mounts: {}\u2029",
    "command-substitution": "$(touch PWNED)",
    "backticks": "`touch PWNED`",
    "single-quote": "it's'; touch PWNED; echo '",
    "bidi-override": "tiny\u202e\ntouch PWNED #\u2066\u200b",
    "pep263-utf7": "coding: utf-7 +AAo-import os+ADs- os.system(+ACI-touch PWNED+ACI-)",
}
IDS = list(PAYLOADS)
TARGETS = ("vllm", "skypilot", "dstack", "k8s", "ray")
YAML_TARGETS = ("skypilot", "dstack", "k8s")
_UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}

_VLLM_STUB = """#!{python}
import json, os, sys
with open(os.environ["STUB_LOG"], "a") as fh:
    fh.write(json.dumps(sys.argv) + "\\n")
"""

# A stand-in for the ray package: remote functions run in-process, placement groups are no-ops.
_RAY_STUB = {
    "ray/__init__.py": """
        import json, os
        from ray import util

        def _log(event, **data):
            with open(os.environ["STUB_LOG"], "a") as fh:
                fh.write(json.dumps(["ray." + event, data]) + "\\n")

        def init(*args, **kwargs):
            _log("init")

        class _Ref:
            def __init__(self, value):
                self.value = value

        def get(refs):
            return [r.value for r in refs] if isinstance(refs, list) else refs.value

        class _Remote:
            def __init__(self, fn, opts):
                self.fn, self.opts = fn, opts
                _log("remote", name=fn.__name__, options=opts)

            def options(self, **kwargs):
                return self

            def remote(self, *args, **kwargs):
                return _Ref(self.fn(*args, **kwargs))

        def remote(*args, **kwargs):
            if len(args) == 1 and callable(args[0]) and not kwargs:
                return _Remote(args[0], {})
            return lambda fn: _Remote(fn, kwargs)
    """,
    "ray/util/__init__.py": """
        def get_node_ip_address():
            return "127.0.0.1"
    """,
    "ray/util/placement_group.py": """
        class _PG:
            def __init__(self, bundles, strategy):
                self.bundles, self.strategy = bundles, strategy

            def ready(self):
                import ray
                return ray._Ref(True)

        def placement_group(bundles, strategy="PACK"):
            return _PG(bundles, strategy)
    """,
    "ray/util/scheduling_strategies.py": """
        class PlacementGroupSchedulingStrategy:
            def __init__(self, placement_group, placement_group_bundle_index=-1):
                self.placement_group = placement_group
                self.index = placement_group_bundle_index
    """,
}


# --- helpers -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli() -> Any:
    from gpuwise.cli import app as app_module

    if not app_module.app.registered_commands:
        app_module._register()
    runner = CliRunner()

    def invoke(*args: str) -> str:
        result = runner.invoke(app_module.app, list(args), env={"COLUMNS": "200", "LANG": "C.UTF-8"})
        assert result.exit_code == 0, (args, result.output, result.exception)
        return result.stdout

    return invoke


@pytest.fixture()
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """tmp_path as cwd, stub vllm/pip/torchrun first on PATH, a stub ray on PYTHONPATH."""
    monkeypatch.chdir(tmp_path)
    bin_dir, lib_dir = tmp_path / "stub-bin", tmp_path / "stub-lib"
    bin_dir.mkdir()
    for tool in ("vllm", "pip", "torchrun", "ray"):
        stub = bin_dir / tool
        stub.write_text(_VLLM_STUB.format(python=sys.executable))
        stub.chmod(0o755)
    for rel, body in _RAY_STUB.items():
        path = lib_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
    return {"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", "PYTHONPATH": str(lib_dir),
            "STUB_LOG": str(tmp_path / "stub.log"), "HOME": str(tmp_path), "LANG": "C.UTF-8"}


def stub_calls(env: dict[str, str]) -> list[Any]:
    log = Path(env["STUB_LOG"])
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def hostile_gguf(folder: Path, payload: str) -> Path:
    return write_model(folder / "evil.gguf", extra=lambda w: w.add_name(payload))


def hostile_folder(root: Path, payload: str) -> Path:
    """A model folder named after the payload, whose config.json also carries it."""
    try:
        folder = root / payload.replace("/", "_")
        folder.mkdir()
    except (OSError, ValueError):  # a file system that refuses the name: the config still carries it
        folder = root / "model"
        folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**CONFIG, "_name_or_path": payload}))
    return folder


def assert_not_pwned(root: Path) -> None:
    found = list(root.rglob("PWNED"))  # the file `touch PWNED` makes (folder names may hold the word)
    assert not found, found


def one_clean_line(text: str) -> None:
    assert not any(unicodedata.category(ch) in _UNSAFE for ch in text), ascii(text)


# --- model --json ------------------------------------------------------------------------
@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=IDS)
def test_a_hostile_gguf_name_is_shown_cleaned_by_model_json(payload: str, cli: Any, sandbox: Any,
                                                           tmp_path: Path) -> None:
    data = json.loads(cli("model", str(hostile_gguf(tmp_path, payload)), "--json"))
    assert data["name"] == clean_text(payload)
    one_clean_line(data["name"])
    one_clean_line(data["source"])


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=IDS)
def test_a_hostile_folder_name_is_shown_cleaned_by_model_json(payload: str, cli: Any, sandbox: Any,
                                                             tmp_path: Path) -> None:
    data = json.loads(cli("model", str(hostile_folder(tmp_path, payload)), "--json"))
    one_clean_line(data["name"])
    one_clean_line(data["source"])


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=IDS)
def test_a_config_json_in_a_hostile_folder_is_named_cleanly(payload: str, cli: Any, sandbox: Any,
                                                           tmp_path: Path) -> None:
    data = json.loads(cli("model", str(hostile_folder(tmp_path, payload) / "config.json"), "--json"))
    one_clean_line(data["name"])
    one_clean_line(data["source"])


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=IDS)
def test_hub_ids_and_revisions_are_cleaned_where_every_source_meets(payload: str) -> None:
    from gpuwise.catalog.hf_config import arch_from_config

    arch = arch_from_config({**CONFIG, "model_type": "llama" + payload, "torch_dtype": payload},
                            "org/" + payload, source=f"hf:org/{payload}@{payload}")
    assert arch.name == clean_text("org/" + payload)
    assert arch.source == clean_text(f"hf:org/{payload}@{payload}")
    for text in (arch.name, arch.source, arch.model_type, arch.dtype):
        one_clean_line(text)


# --- the exports, executed ---------------------------------------------------------------
def run_vllm_line(text: str, env: dict[str, str], cwd: Path) -> list[Any]:
    proc = subprocess.run(["bash"], input=text, text=True, env=env, cwd=cwd, capture_output=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return stub_calls(env)


def run_ray_script(text: str, env: dict[str, str], cwd: Path) -> list[Any]:
    import ast

    ast.parse(text)
    script = cwd / "ray_launch.py"
    script.write_text(text, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], text=True, env=env, cwd=cwd,
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return stub_calls(env)


def baseline(cli: Any, src: Path, target: str) -> str:
    return str(cli("plan", str(src), "--emit", target, "--context", "2048"))


def check_yaml(text: str, clean: str, target: str) -> None:
    """Same documents and top-level keys as the benign export; nothing starts a line but YAML."""
    docs = list(yaml.safe_load_all(text))
    clean_docs = list(yaml.safe_load_all(clean))
    assert [sorted(d) for d in docs] == [sorted(d) for d in clean_docs]
    for doc in docs:
        assert not {"file_mounts", "evil"} & set(doc)
    for line in text.splitlines():
        assert not line.lstrip().startswith(("touch", "import", "evil", "file_mounts")), line


def shell_parts(text: str, target: str) -> str:
    """The shell a SkyPilot task or dstack service would run (installs go to a stub pip)."""
    if target not in ("skypilot", "dstack"):
        return ""
    doc = yaml.safe_load(text)
    if target == "skypilot":
        return str(doc.get("setup", "")) + "\n" + str(doc["run"])
    return "\n".join(doc["commands"]) + "\n"


def served_once(calls: list[Any], src: Path) -> None:
    """The stub vllm ran exactly once, as `vllm serve <model path>`, the path one argument."""
    served = [c for c in calls if isinstance(c[0], str) and c[0].endswith("/vllm")]
    assert len(served) == 1 and served[0][1] == "serve", calls
    # The path as typed, or cleaned where the plan reader cleans it (still one argument).
    assert served[0][2] in (str(src), clean_text(str(src), 500)), served


def exercise(cli: Any, src: Path, benign: Path, target: str, env: dict[str, str], cwd: Path) -> None:
    text = cli("plan", str(src), "--emit", target, "--context", "2048")
    if target == "vllm":
        served_once(run_vllm_line(text, env, cwd), src)
    elif target == "ray":
        served_once(run_ray_script(text, env, cwd), src)
    else:
        check_yaml(text, baseline(cli, benign, target), target)
        script = shell_parts(text, target)
        if script:
            served_once(run_vllm_line(script, env, cwd), src)
    assert_not_pwned(cwd)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=IDS)
def test_a_hostile_gguf_name_never_runs_in_an_export(payload: str, target: str, cli: Any,
                                                    sandbox: dict[str, str], tmp_path: Path) -> None:
    evil, benign = tmp_path / "evil", tmp_path / "benign"
    evil.mkdir()
    benign.mkdir()
    exercise(cli, hostile_gguf(evil, payload), write_model(benign / "evil.gguf"), target, sandbox,
             tmp_path)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=IDS)
def test_a_hostile_model_folder_never_runs_in_an_export(payload: str, target: str, cli: Any,
                                                       sandbox: dict[str, str], tmp_path: Path) -> None:
    evil, benign = tmp_path / "evil", tmp_path / "benign"
    evil.mkdir()
    benign.mkdir()
    exercise(cli, hostile_folder(evil, payload), hostile_folder(benign, "tiny"), target, sandbox,
             tmp_path)


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=IDS)
def test_the_ray_script_shows_the_cleaned_name_in_comments_only(payload: str, cli: Any, sandbox: Any,
                                                               tmp_path: Path) -> None:
    import ast

    text = cli("plan", str(hostile_gguf(tmp_path, payload)), "--emit", "ray")
    tree = ast.parse(text)
    assert ast.get_docstring(tree) is None
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert not any(clean_text(payload) in s for s in strings)
    head = text.splitlines()[:2]
    assert all("coding" not in line for line in head)
    assert any(line.startswith("# ") and clean_text(payload) in line for line in text.splitlines())


# --- the YAML emitter and the Ray script, directly ---------------------------------------
HOSTILE_SCALARS = [*PAYLOADS.values(), "", " ", "yes", "No", "null", "~", "1e3", "0x1F", "1_000", ".inf",
                   "-.nan", "12:30:00", "2024-01-01", "- a", "? a", ": a", "a: b", "a #b", "#a", "&a", "*a",
                   "!tag", "|", ">", "@a", "%a", "[a]", "{a}", "'a'", '"a"', "---", "...", "<<", "=",
                   "a\tb", "\ufeffa", "a\x85b", "a\u2028b", "\x00a", "\x7f", "\u00a0a", "a ", " a",
                   "a\n", "a\n\n", "a\n\n\n", "\na", "a\nb", "line one\n  indented\nback", "é中文",
                   "\U0001f600", "\ufffe", "\uffff"]


@pytest.mark.parametrize("value", HOSTILE_SCALARS, ids=ascii)
def test_every_hostile_string_reads_back_from_the_yaml_emitter_unchanged(value: str) -> None:
    from gpuwise.export import _yaml

    doc = {"key": value, value or "empty": [value, {"inner": value}], "after": 1}
    text = _yaml.dump(doc, comments=[value, "plain"])
    assert yaml.safe_load(text) == doc
    assert list(yaml.safe_load_all(_yaml.dump_all([doc, {"second": value}], comments=[value]))) == [
        doc, {"second": value}]


@pytest.mark.parametrize("value", HOSTILE_SCALARS, ids=ascii)
def test_a_yaml_comment_is_one_line_whatever_its_text(value: str) -> None:
    from gpuwise.export import _yaml

    text = _yaml.dump({"a": 1}, comments=[value, f"model {value} on 8 x H100"])
    lines = text.split("\n")
    assert lines[:2] == [line for line in lines[:2] if line.startswith("#")]
    assert lines[2:] == ["a: 1", ""]


# Any character YAML can carry: everything but lone surrogates.
_ANY_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


@settings(max_examples=300, deadline=None)
@given(_ANY_TEXT, _ANY_TEXT)
def test_any_text_reads_back_from_the_yaml_emitter_unchanged(value: str, comment: str) -> None:
    from gpuwise.export import _yaml

    doc = {"key": value, "list": [value], value: "as a key"}
    assert yaml.safe_load(_yaml.dump(doc, comments=[comment])) == doc


@settings(max_examples=200, deadline=None)
@given(_ANY_TEXT)
def test_the_ray_script_parses_as_python_for_any_model_name(name: str) -> None:
    import ast

    from gpuwise.export import ray as ray_export
    from gpuwise.export._plan import parse_plan

    plan = parse_plan({"card": "rtx-4090", "card_name": name, "gpus": 1,
                           "workload": {"task": "infer", "model": name or "m", "hf_id": "org/model"}})
    tree = ast.parse(ray_export.emit(plan))
    assert ast.get_docstring(tree) is None

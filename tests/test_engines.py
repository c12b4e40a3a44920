"""The engine registry (checker/engine_registry.py): one table behind `--engine`, the config
file's `engine` and `barrierproof.check(..., engine=...)`, with typed settings."""

import json

import pytest

import barrierproof
from barrierproof.checker.engine_registry import ENGINES, engine, run
from barrierproof.checker.engine_settings import ProveSettings, TlcSettings, settings_of
from barrierproof.cli import build_parser, main
from barrierproof.config import KEYS
from barrierproof.model.ir import ModelError
from barrierproof.model.samples import handoff, lost_arrival

RING = "examples/cluster.py::cluster_exchange"      # proved in about a second


def test_the_command_line_and_the_config_file_offer_the_registrys_engines():
    check = build_parser()._subparsers._group_actions[0].choices["check"]
    flag = next(a for a in check._actions if "--engine" in a.option_strings)
    assert sorted(flag.choices) == sorted(ENGINES)
    assert all(name in KEYS["engine"][1] for name in ENGINES)


def test_every_engine_loads_and_takes_its_own_settings():
    for name, spec in ENGINES.items():
        assert callable(spec.load()), name
        assert isinstance(spec.make_settings(None), spec.settings)


def test_settings_come_from_a_mapping_or_flags_and_a_misspelt_one_is_refused():
    assert settings_of(TlcSettings, {"workers": 2}) == TlcSettings(workers=2)
    assert settings_of(ProveSettings, {"symbolic": ["steps"]}) == ProveSettings(("steps",))

    class Flags:          # a parsed command line: only the engine's own fields are read
        symbolic = ["steps"]
        max_states = 10
    assert settings_of(ProveSettings, Flags()) == ProveSettings(("steps",))
    with pytest.raises(TypeError, match="no setting worker .*workers"):
        settings_of(TlcSettings, {"worker": 2})
    with pytest.raises(ModelError, match="no engine named 'z3'.*explore"):
        engine("z3")


def _cli_json(capsys, *argv) -> list[dict]:
    capsys.readouterr()
    main(["check", *argv, "--format", "json", "--no-cache", "--no-config", "--jobs", "1", "-q"])
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", ["explore", "symbolic"])
def test_the_library_gets_the_command_lines_verdict_for_each_engine(capsys, name):
    [api] = barrierproof.check(RING, engine=name)
    [cli] = _cli_json(capsys, RING, "--engine", name)
    assert (api.verdict, api.engine, api.codes) == (cli["verdict"], cli["engine"],
                                                    [d["code"] for d in cli["diagnostics"]])
    assert api.engine == ("symbolic" if name == "symbolic" else "explore")


def test_engine_settings_reach_the_prover():
    [asked] = barrierproof.check(RING, engine="symbolic", engine_options={"symbolic": ["blocks"]})
    assert asked.verdict == "error" and "has no parameter blocks" in asked.diagnostics[0].message
    [declared] = barrierproof.check(RING, engine="symbolic", engine_options=ProveSettings())
    assert declared.verdict == "proved" and declared.coverage.startswith("proved for all steps")


def test_run_is_the_registrys_single_entry():
    assert run(handoff.build()).verdict == "verified"
    found = run(lost_arrival.build(), name="explore")
    assert found.verdict == "violation" and found.codes == ["BP100"]

"""The contracts as code (fedkd_core.contracts): every chapter module is what the notebooks, the
sweep, the ledger, the robustness grids and compare ask of it; a member missing is named."""

import types

import pytest

from fedkd_core.chapters import CHAPTERS, chapter_module
from fedkd_core.compare import PROPOSED
from fedkd_core.contracts import (NEEDS, AlgorithmProtocol, ChapterProtocol, ClaimsChapter, RecordReusingChapter,
                                  RobustChapter, check_needs, missing_members)
from fedkd_core.conformance import tiny_config

PAPER_CHAPTERS = sorted(PROPOSED)


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_every_chapter_is_a_chapter(name):
    module = chapter_module(name)
    assert missing_members(module, ChapterProtocol) == [] and isinstance(module, ChapterProtocol)


@pytest.mark.parametrize("name", PAPER_CHAPTERS)
def test_every_paper_chapter_reuses_records_has_claims_and_a_robustness_grid(name):
    module = chapter_module(name)
    for protocol in (RecordReusingChapter, ClaimsChapter, RobustChapter):
        assert missing_members(module, protocol) == [], protocol.__name__
        assert isinstance(module, protocol)


def test_a_missing_member_is_named_with_those_of_the_protocols_it_extends():
    module = types.ModuleType("half_a_chapter")
    module.Params, module.experiments, module.EFFECT_CELL_KEYS = object, lambda params: [], ("cell",)
    assert missing_members(module, ChapterProtocol) == []
    assert missing_members(module, RobustChapter) == sorted(
        ["METHOD_COLUMN", "PAPER_RUNS", "observations", "paper_observations", "effects_of", "claim_effects",
         "ledger_rows", "ROBUSTNESS", "ROBUSTNESS_BASE"])
    assert not isinstance(module, ClaimsChapter)


@pytest.mark.parametrize("protocol", [AlgorithmProtocol, ChapterProtocol, RecordReusingChapter, ClaimsChapter,
                                      RobustChapter])
def test_every_member_of_a_protocol_is_documented_once(protocol):
    """Each attribute has a docstring right under it and each method its own docstring."""
    import ast
    import inspect
    import textwrap

    body = ast.parse(textwrap.dedent(inspect.getsource(protocol))).body[0].body
    undocumented = []
    for statement, following in zip(body, body[1:] + [None]):
        if isinstance(statement, ast.AnnAssign):
            documented = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
            undocumented += [] if documented else [statement.target.id]
        elif isinstance(statement, ast.FunctionDef) and not ast.get_docstring(statement):
            undocumented.append(statement.name)
    assert not undocumented
    assert {"Config", "CLIENT_STATE", "NEEDS", "client_update"} <= set(missing_members(object(), AlgorithmProtocol))


def test_a_need_the_runs_lack_is_named_with_what_to_do():
    with_set, without = tiny_config("fedavg"), tiny_config("fedavg", data=tiny_config("fedavg").data.__class__(
        "mnist", num_clients=3, samples_per_client=60, local_test_size=20))
    check_needs("mine", {"transfer_set"}, [with_set])  # offered: nothing to say
    with pytest.raises(ValueError, match="mine needs transfer_set .* which 1 of the 2 runs lack: compare on a chapter"):
        check_needs("mine", {"transfer_set"}, [with_set, without])
    with pytest.raises(ValueError, match="unknown NEEDS \\['gpu'\\]; the known ones are"):
        check_needs("mine", {"gpu"}, [])
    assert set(NEEDS) == {"transfer_set", "full_participation"}


def test_the_round_shapes_stand_apart_from_the_methods():
    """``ALGORITHMS`` names methods only; each method's round is one of the shapes in ``shapes/``."""
    from fedkd_core.algorithms import ALGORITHMS, SHAPES, shape_of

    assert not set(SHAPES.values()) & set(ALGORITHMS.values())
    assert all(cls.__module__.startswith("fedkd_core.algorithms.shapes.") for cls in SHAPES.values())
    assert not any(cls.__module__.startswith("fedkd_core.algorithms.shapes.") for cls in ALGORITHMS.values())
    assert {name: shape_of(ALGORITHMS[name]) for name in ("pfedme", "feddf", "fedprox", "fpl", "fedper", "knfu")} == {
        "pfedme": "algorithm", "feddf": "algorithm", "fedprox": "from_global", "fpl": "from_global",
        "fedper": "partial_sharing", "knfu": "transfer_distillation"}
    with pytest.raises(ValueError, match="no round shape"):
        shape_of(int)

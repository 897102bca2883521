"""The suite's oracles are its own: restated from the documented rules, never imported from the code
under test, so a slip made in dynbsz's fast path *and* in its reference walk is still caught."""

from __future__ import annotations

import ast
import inspect

from hypothesis import given, settings
from hypothesis import strategies as st

from dynbsz.selection import select, select_reference
from properties import packer_props, suite
from properties.runner import RunSettings, run_property
from properties.scenarios import Sample
from properties.targets import resolve


def _imports(module) -> set[str]:
    tree = ast.parse(inspect.getsource(module))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def test_the_greedy_oracle_and_the_warmup_oracle_import_nothing_from_the_code_they_judge():
    imported = _imports(packer_props)
    assert not any(name.startswith(("dynbsz.selection", "dynbsz.warmup", "dynbsz.packer")) for name in imported)


@settings(max_examples=300, deadline=None, database=None)
@given(st.data())
def test_the_oracle_states_the_rule_dynbsz_documents(data):
    # Differential, for the record: the oracle and dynbsz's literal walk agree on the documented rule.
    budget = data.draw(st.integers(1, 40))
    cap = data.draw(st.none() | st.integers(1, 60))
    n = data.draw(st.integers(1, 12))
    rows = [(data.draw(st.integers(0, 2 * budget)), data.draw(st.integers(0, 30))) for _ in range(n)]
    buf = [Sample(i, t, max(t, 1) + extra if cap is not None else None) for i, (t, extra) in enumerate(rows)]
    phys = [s.tokens if s.physical is None else s.physical for s in buf]
    lone = [s.tokens == 0 for s in buf]
    want = select_reference([s.tokens for s in buf], budget, phys, cap, lone if any(lone) else None)
    assert packer_props.greedy_walk(buf, budget, cap, empties_alone=True) == [buf[i].id for i in want]


def _strict_reference(tokens, budget, physical=None, cap=None, alone=None):
    """dynbsz's literal walk with the ``<=`` -> ``<`` slip."""
    return select_reference(tokens, max(budget - 1, 0), physical, None if cap is None else max(cap - 1, 0), alone)


def test_a_slip_in_both_of_dynbsz_walks_is_caught(monkeypatch):
    # Plant the same slip in the fast walk and in the reference walk (this test only): an oracle
    # taken from select_reference would agree with the broken packer; the suite's own does not.
    import dynbsz.selection
    from dynbsz.packer import GreedyPacker

    def strict(tok, budget, physical=None, cap=None, alone=None):
        return select(tok, max(budget - 1, 0), physical, None if cap is None else max(cap - 1, 0), alone)

    monkeypatch.setattr(dynbsz.selection, "select_reference", _strict_reference)
    monkeypatch.setattr(GreedyPacker, "_select", staticmethod(strict))
    target = resolve("dynbsz")
    result = run_property(target, suite.get("ordered_greedy"), target.component("packer"),
                          RunSettings(profile="ci", seed=0, database=None, shrink=False))
    assert result.status == "fail" and "ordered greedy" in result.message

"""``properties.targets.loader_target``: a plain loader under the suite from one factory, a one-line error
for every setting it gets wrong, and the suite's verdicts reaching a loader declared this way."""

from __future__ import annotations

import pytest
import torch
from torchdata.stateful_dataloader import StatefulDataLoader

from properties import suite
from properties.errors import PropertyViolation
from properties.runner import RunSettings, run_property
from properties.scenarios import LoaderScenario
from properties.targets import LoaderComponent, TargetError, loader_target, resolve
from properties.targets.plain import default_batch_ids


class SeededLoader:
    """Reshuffles per epoch from (seed, epoch); ``ignore_epoch`` replays epoch 0 forever."""

    def __init__(self, sc, *, ignore_epoch=False):
        self.sc, self.ignore_epoch, self.epoch = sc, ignore_epoch, 0
        self.dl = self._build()

    def _build(self):
        seed = self.sc.shuffle_seed + (0 if self.ignore_epoch else 1000 * self.epoch)
        return StatefulDataLoader(self.sc.dataset(), batch_size=self.sc.fetch_batch_size, shuffle=True,
                                  generator=torch.Generator().manual_seed(seed))

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.dl = self._build()

    def __iter__(self):
        return iter(self.dl)

    def state_dict(self):
        return self.dl.state_dict()

    def load_state_dict(self, state):
        self.dl.load_state_dict(state)


def component(target) -> LoaderComponent:
    (c,) = target.components
    return c


def test_defaults_are_a_plain_loader():
    c = component(loader_target(SeededLoader, name="seeded"))
    assert c.name == "loader:seeded" and c.kind == "loader"
    assert c.trainers == ("torchdata",) and c.stopping == ("epoch",) and c.state_codec == "pickle"
    assert c.micro_batches_per_step == (1,) and not c.warmup
    assert c.unsupported(LoaderScenario(micro_batches_per_step=2)) is not None
    assert c.unsupported(LoaderScenario()) is None


def test_steps_carry_the_batch_sample_ids_in_order():
    sc = LoaderScenario(num_samples=7, fetch_batch_size=3, epochs=1)
    loader = component(loader_target(SeededLoader)).make_loader(sc)
    loader.set_epoch(0)
    steps = [s.micro_batches[0].ids for s in loader]
    assert [len(s) for s in steps] == [3, 3, 1]
    assert sorted(i for s in steps for i in s) == sorted(int(i) for i in sc.trace().ids)
    loader.close()


def test_batch_ids_reads_collated_and_listed_samples():
    assert default_batch_ids({"id": torch.tensor([4, 2])}) == [4, 2]
    assert default_batch_ids([{"id": 1}, {"id": 3}]) == [1, 3]
    with pytest.raises(PropertyViolation, match="batch_ids="):
        default_batch_ids(torch.tensor([1, 2]))


def test_a_custom_batch_layout_is_read_by_batch_ids():
    def make(sc):
        loader = SeededLoader(sc)
        loader.dl = StatefulDataLoader(sc.dataset(), batch_size=2, collate_fn=lambda b: tuple(s["id"] for s in b))
        return loader

    sc = LoaderScenario(num_samples=4, epochs=1)
    loader = component(loader_target(make, batch_ids=list)).make_loader(sc)
    assert [s.micro_batches[0].ids for s in loader] == [tuple(int(i) for i in sc.trace().ids[:2]),
                                                         tuple(int(i) for i in sc.trace().ids[2:])]


@pytest.mark.parametrize("kwargs, fragment", [
    ({"state_codec": "yaml"}, "state_codec='yaml'; allowed values: json, pickle"),
    ({"trainers": "torchdata"}, "trainers='torchdata' must be a tuple"),
    ({"trainers": ("pytorch",)}, "allowed values: torchdata"),
    ({"in_order": True}, "in_order=True must be a tuple"),
    ({"stopping": ("forever",)}, "unknown order or stopping rule 'forever'"),
    ({"max_workers": 9}, "max_workers=9; allowed values: 0..4"),
    ({"batch_ids": "id"}, "batch_ids='id' must be callable"),
    ({"name": 3}, "name=3 must be a string"),
])
def test_every_wrong_setting_is_one_line_naming_it(kwargs, fragment):
    with pytest.raises(TargetError) as err:
        loader_target(SeededLoader, **kwargs)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def resolve_error(tmp_path, monkeypatch, module: str, source: str) -> str:
    """The one-line error ``--target MODULE:target`` gets for a module holding ``source``."""
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TargetError) as err:
        resolve(f"{module}:target")
    return str(err.value)


def test_a_bare_stateful_dataloader_is_refused_at_check_time_naming_set_epoch(tmp_path, monkeypatch):
    message = resolve_error(tmp_path, monkeypatch, "bare",
                            "from torchdata.stateful_dataloader import StatefulDataLoader\n"
                            "from properties.targets import loader_target\n"
                            "def target():\n"
                            "    return loader_target(lambda sc: StatefulDataLoader(sc.dataset(), batch_size=1))\n")
    assert "StatefulDataLoader, which lacks set_epoch()" in message and "\n" not in message


def test_make_loader_must_be_callable():
    with pytest.raises(TargetError, match="make_loader"):
        loader_target(None)


def test_the_suite_fails_a_loader_that_ignores_set_epoch_and_passes_one_that_reads_it():
    reads = loader_target(SeededLoader, name="reads", in_order=(True,), max_workers=2)
    ignores = loader_target(lambda sc: SeededLoader(sc, ignore_epoch=True), name="ignores", in_order=(True,), max_workers=2)
    rs = RunSettings(max_examples=5, database=None)
    prop = suite.get("epoch_reshuffle")
    assert run_property(reads, prop, component(reads), rs).status == "pass"
    failed = run_property(ignores, prop, component(ignores), rs)
    assert failed.status == "fail" and "epoch" in failed.message


def test_a_component_built_wrong_inside_a_target_factory_says_so_without_the_factory_hint(tmp_path, monkeypatch):
    message = resolve_error(tmp_path, monkeypatch, "wrongcodec",
                            "from properties.targets import loader_target\n"
                            "def target():\n"
                            "    return loader_target(lambda sc: None, state_codec='yaml')\n")
    assert "state_codec='yaml'; allowed values: json, pickle" in message
    assert "FACTORY" not in message

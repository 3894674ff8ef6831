"""The integration tier's tiny model is trained once per cache, however many pytest-xdist workers ask for it
at once (``integration/infinity_model.py``): a second training beside the first only slows both down."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from integration import infinity_model as im

SECOND_CALLER_GRACE_S = 3.0  # how long the first training waits for a second one to start beside it


def test_concurrent_builds_train_once_and_both_get_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setenv("A0R_INFINITY_CACHE", str(tmp_path / "cache"))
    trainings: list[str] = []
    second_trains = threading.Event()

    def train(work: Path) -> None:  # a stand-in for the real training: writes the folder the build renames
        trainings.append(threading.current_thread().name)
        if len(trainings) == 1:  # held until a second training starts beside it (or its grace runs out)
            second_trains.wait(SECOND_CALLER_GRACE_S)
        else:
            second_trains.set()
        (work / "model").mkdir()
        (work / "model" / "a0r_build.json").write_text("{}", encoding="utf-8")

    monkeypatch.setattr(im, "_train", train)
    builders = [threading.Thread(target=im.build_tiny_reranker, args=(tmp_path / name,), name=name)
                for name in ("first", "second")]
    for builder in builders:
        builder.start()
    for builder in builders:
        builder.join()

    assert len(trainings) == 1, trainings
    assert all((tmp_path / name / "a0r_build.json").is_file() for name in ("first", "second"))

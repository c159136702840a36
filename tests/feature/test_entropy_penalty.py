"""examples/entropy_penalty.py on the patched build: differentiating the gradient-graph entropy
(create_graph=True in log_entropy) lowers it in training while the task is still learned."""
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "examples"))
import entropy_penalty  # noqa: E402


def test_entropy_penalty_lowers_the_entropy_and_the_task_is_learned(tmp_path):
    result = entropy_penalty.run(tmp_path, steps=200, log=lambda line: None)
    plain, penalized = result["runs"][0.0], result["runs"][0.05]
    # Same initialization, same batches: the same entropy at step 0.
    assert plain["entropy"][0] == penalized["entropy"][0]
    assert penalized["entropy"][-1] < 0.85 * plain["entropy"][-1], (plain, penalized)
    assert penalized["accuracy"][-1] > 0.9 and plain["accuracy"][-1] > 0.9, (plain, penalized)
    assert result["png"].stat().st_size > 10_000

"""scripts/semiring metrics: the tables it writes into the RFC, from the benchmarks' rows."""
import pytest

from semiring_tool import metrics
from semiring_tool.bench import BenchResult
from semiring_tool.progress import ToolError

SEMIRINGS = ["ordinary", *metrics.SEMIRINGS]


def results() -> metrics.Results:
    cost = []
    for w in ("mlp_4x256", "bert_L6_H512"):
        cost += [{"workload": w, "semiring": s, "ms": 10.0 * (i + 1), "ratio": i + 1.0, "baseline": "ordinary",
                  "peak_mib": 100.0 + i} for i, s in enumerate(SEMIRINGS)]
    # bert's rows run 1x..9x: those above 5x carry their products' split
    for x in cost[len(SEMIRINGS):]:
        x.update(products_ms=4.0, products_ratio=x["ratio"] / 2, rest_ratio=x["ratio"] / 2)
    cost += [{"workload": "semiring_mm_1024", "semiring": s, "ms": 30.0, "ratio": 3.0, "baseline": "BLAS mm",
              "peak_mib": 1.0} for s in ("max_plus", "max_product", "log")]
    paths = {"threads": 2, "off": {"ask_ns": 40.0, "tiny_backward_us": 30.0},
             "agreement": {"sentences": 1000, "seconds": 200.0, "peak_mib": 900.0},
             "rows": [{"semiring": s, "backward_ms": 500.0, "recorded_ms": 600.0, "ratio": 1.2, "path_ms": 5.0,
                       "first_path_ms": 7.0, "steps": 52, "branches_ms": 20.0, "bytes_per_element": 6.5,
                       "peak_mib": 300.0, "recorded_peak_mib": 400.0} for s in ("max_product", "max_plus")]}
    second = {"rows": [{"workload": w, "semiring": s, "ms": 5.0, "ratio": 2.5, "peak_mib": 50.0}
                       for w in ("mlp_4x256", "bert_L2_H128") for s in ("ordinary", "log", "max_product")]}
    return metrics.Results(
        revision="commit abc1234 (2026-11-27)", machine="2 x Some CPU, 2026-11-27",
        real_path=BenchResult(within=True, instructions={"chain_2000": (1.0001, 0.9999, 1.0003)},
                              time={"chain_2000": {"patched": (1.001, 0.998, 1.004),
                                                   "control": (1.0, 0.997, 1.002)}}),
        real_path_seconds=900.0, cost={"threads": 2, "rows": cost}, paths=paths, second_order=second,
        sizes={"wheel": (110, 100)})


def test_render_has_every_figure_once_and_fits_the_budget():
    lines = metrics.render(results())
    text = "\n".join(lines)
    assert len(lines) <= metrics.MAX_LINES
    assert "commit abc1234" in text and "2 x Some CPU" in text
    assert "| chain_2000 | 1.0001 [0.9999, 1.0003] | 1.0010 [0.9980, 1.0040] | 1.0000 [0.9970, 1.0020] |" in text
    assert "(upper bounds): yes." in text
    mlp = next(line for line in lines if line.startswith("| mlp_4x256 | ordinary"))
    cells = [c.strip() for c in mlp.strip("|").split("|")]
    # ordinary's ms, then one ratio per semiring in the header's order
    assert cells[2:] == ["10.0", *[f"{j + 2.0:.2f}x" for j in range(len(metrics.SEMIRINGS))]]
    kernel = next(line for line in lines if line.startswith("| semiring_mm_1024"))
    assert "BLAS mm" in kernel and kernel.count("3.00x") == 3
    assert "| max_product | 500 | 1.20x | 5.0 (7.0) | 52 |" in text
    assert "1000 sentences" in text and "200 s" in text
    assert "wheel 110 / 100 (+10.0%)" in text
    # the split: bert's rows of the five bounded semirings above 5x (max_plus 6x ... log_entropy
    # 9x), not log (5x), not counting (3x, not bounded), not mlp's (no split measured)
    split = next(line for line in lines if "Above 5x" in line)
    assert "bert_L6_H512 entropy 8.00x = products 4.00x + rest 4.00x" in split
    assert "bert_L6_H512 max_plus 6.00x = products 3.00x + rest 3.00x" in split
    assert split.count(" = products ") == 4 and "mlp_4x256" not in split
    # what bounds them, from the same rows: ordinary's products, log_entropy against entropy
    assert "Ordinary backward's own products: bert_L6_H512 0.50x." in split
    assert "log_entropy against entropy, the same semiring in linear space: bert_L6_H512 9.00x against 8.00x" in split


def test_render_refuses_a_block_over_the_budget():
    r = results()
    r.real_path.instructions = {f"w{i}": (1.0, 1.0, 1.0) for i in range(metrics.MAX_LINES)}
    with pytest.raises(ToolError, match="more than the RFC's"):
        metrics.render(r)


def test_replace_block_keeps_what_is_outside_the_markers():
    text = f"head\n{metrics.BEGIN}\nold\n{metrics.END}\ntail\n"
    assert metrics.replace_block(text, ["a", "b"]) == f"head\n{metrics.BEGIN}\na\nb\n{metrics.END}\ntail\n"
    with pytest.raises(ToolError, match="exactly one"):
        metrics.replace_block("no markers", ["a"])


def test_render_decoder_puts_each_kind_against_ordinary_of_its_length():
    rows = [{"attention": "sdpa", "length": 128, "kind": "ordinary", "seconds": 0.5, "peak_mib": 100.0,
             "threads": 2},
            {"attention": "sdpa", "length": 128, "kind": "max_product", "seconds": 2.0, "peak_mib": 110.0},
            {"attention": "sdpa", "length": 128, "kind": "log_entropy", "seconds": 3.0, "peak_mib": 150.0},
            {"attention": "sdpa", "length": 128, "kind": "max_product+paths", "seconds": 2.5,
             "peak_mib": 2048.0},
            {"attention": "eager", "length": 2048, "kind": "ordinary", "seconds": 10.0, "peak_mib": 1000.0},
            {"attention": "eager", "length": 2048, "kind": "max_product", "seconds": 50.0, "peak_mib": 1000.0},
            {"attention": "eager", "length": 2048, "kind": "max_product+paths",
             "error": "stopped at 20.2 GiB resident, over 90% of the 22.4 GiB available"}]
    lines = metrics.render_decoder("commit abc1234 (2026-11-29)", "2 x Some CPU", rows)
    text = "\n".join(lines)
    assert "commit abc1234" in text and "2 threads" in text
    assert "| sdpa | 128 | 0.50 | 4.00x | 6.00x | 5.00x | 100 | 1.10x | 1.50x | 20.48x (2.0 GiB) |" in lines
    # a kind not run is blank; one whose peak did not fit says so in both columns
    assert "| eager | 2048 | 10.00 | 5.00x |  | did not fit | 1000 | 1.00x |  | did not fit |" in lines


def test_replace_block_takes_the_decoder_markers():
    text = f"{metrics.BEGIN}\nm\n{metrics.END}\n{metrics.DECODER_BEGIN}\nold\n{metrics.DECODER_END}\n"
    out = metrics.replace_block(text, ["d"], metrics.DECODER_BEGIN, metrics.DECODER_END)
    assert out == f"{metrics.BEGIN}\nm\n{metrics.END}\n{metrics.DECODER_BEGIN}\nd\n{metrics.DECODER_END}\n"


def test_render_paths_puts_the_k_best_against_the_top_paths():
    row = {"semiring": "max_product", "k": 8, "tokens": 128, "top_s": 0.5, "best_s": 1.25, "ratio": 2.5,
           "best_each_s": 2.5, "ratio_each": 5.0, "top_shared_s": 0.25, "ratio_shared": 5.0, "steps": 50.0,
           "distinct_steps": 0.51}
    lines = metrics.render_paths("commit abc1234 (2026-11-29)", "2 x Some CPU", {"threads": 2, "rows": [row]})
    text = "\n".join(lines)
    assert "commit abc1234" in text and "128 tokens" in text and "the 8 best" in text and "2 threads" in text
    assert "| max_product | 0.50 | 1.25 | 2.50x | 2.50 | 5.00x | 0.25 | 5.00x | 50 | 51% |" in lines

"""The derivatives.yaml coverage table: the formula reading and the classifier, on synthetic entries.

That docs/derivatives-coverage.md is current needs the applied series (upstream's loader reads the
patched tree): the fast tier checks it in its codegen step (testing.codegen, which has the tree).
Here, only that the document is consistent with itself.
"""
import re

import pytest

from semiring_tool import coverage_table as ct
from semiring_tool.coverage_table import Entry

NODE = (("Default", "FooBackward0"),)


@pytest.mark.parametrize("formula, kind", [
    ("grad * self.sgn()", "elementwise"),
    ("-grad * (result * result).conj()", "elementwise"),
    ("2.0 / sqrt(M_PI) * exp(-(self.pow(2))) * grad", "elementwise"),
    ("handle_r_to_c(other.scalar_type(), maybe_multiply(grad, alpha.conj()))", "elementwise"),
    ("where(self >= min, grad, at::scalar_tensor(0., grad.options()))", "elementwise"),
    ("at::where(self == other, grad / 2, grad).masked_fill_(self > other, 0)", "elementwise"),
    ("grad", "identity"),
    ("grad.reshape_symint(self.sym_sizes())", "move"),
    ("unsqueeze_to(grad, dim, self.sym_sizes())", "move"),
    ("channel_shuffle_symint(grad, grad.sym_size(1) / groups)", "move"),  # reads grad's size only
    ("zeros_like(grad)", "zero"),
    ("at::sum_to(grad, self.sym_sizes())", "ring"),
    ("grad.expand_symint(self.sym_sizes()) / self.sym_numel()", "ring"),
    ("result * (grad - (grad * result).sum(dim, true))", "ring"),  # softmax: subtracts
    ("grad.bmm(mat2.transpose(1, 2).conj())", "ring"),
    ("self / grad", "ring"),  # grad in a divisor
    ("grad.defined() ? foo_backward(grad, self, weight) : std::tuple<Tensor, Tensor>()", "ring"),
    ("scale_grad_by_count(grad, mask, dim)", "unknown"),
])
def test_read_formula(formula, kind):
    assert ct.read_formula(formula)[0] == kind


def test_comments_strings_and_exponents_do_not_split():
    assert ct.read_formula('-grad * self.div(other, /*rounding_mode=*/"trunc")')[0] == "elementwise"
    assert ct.read_formula("grad * 1e-5 * self")[0] == "elementwise"


def test_categories_from_formulas_and_schema():
    rows = ct.classify([
        Entry("acos", NODE, (("self", "grad * -((-self * self + 1).rsqrt()).conj()"),)),
        Entry("gelu2", NODE, (("self", "gelu2_backward(grad, self)"),), pointwise=True),
        Entry("softmax2", NODE, (("self", "_softmax2_backward_data(grad, result, dim)"),)),
        Entry("flip", NODE, (("self", "grad.flip(dims)"),)),
        Entry("floor", NODE, (("self", "zeros_like(grad)"),)),
        Entry("split", NODE, (("self", "split_backward(grads, split_size, dim)"),)),
        Entry("geqrf", NODE, (("self", 'not_implemented("geqrf")'),)),
        Entry("amax", NODE, (("self", "scale_grad_by_count(grad, mask, dim)"),)),
    ], {})
    assert [r.category for r in rows] == [ct.ELEMENTWISE, ct.ELEMENTWISE, ct.RING, ct.STRUCTURAL, ct.ZERO,
                                          ct.SEVERAL_GRADS, ct.NOT_IMPLEMENTED, ct.UNCLASSIFIED]
    assert "pointwise" in rows[1].reason and "_softmax2_backward_data(" in rows[2].reason


def test_rules_no_node_names_and_in_place():
    entries = [
        Entry("mm", NODE, (("self", "mm_mat1_backward(grad, mat2)"),)),
        Entry("eq.Scalar", output_differentiability=(False,)),
        Entry("special_bessel_j0", non_differentiable=("self",)),
        Entry("_sparse_sum", NODE, (("self", "grad"),)),
        Entry("cudnn_thing", NODE, (("self", "grad"),)),
        Entry("gelu_backward", NODE, (("grad_output", "gelu_backward(grad, self)"),)),
        Entry("matmul", NODE, (("self, other", "matmul_backward(grad, self, other, grad_input_mask)"),),
              composite=True),
        Entry("squeeze.dim", NODE, (("self", "unsqueeze_to(grad, dim, self.sym_sizes())"),)),
        Entry("squeeze_.dim", (("Default", "SqueezeBackward4"),),
              (("self", "unsqueeze_to(grad, dim, self.sym_sizes())"),), inplace=True),
    ]
    rows = ct.classify(entries, {"mm": ("explicit", "mm"), "squeeze.dim": ("structural", "structural")})
    mm, eq, bessel, sparse, cudnn, double, matmul, squeeze, squeeze_ = rows
    assert (mm.category, mm.status, mm.heuristic) == ("rule: explicit", "rule: explicit (`mm`)", ct.RING)
    assert eq.category == bessel.category == ct.NO_NODE
    assert "integer/bool" in eq.reason and "non_differentiable" in bessel.reason
    assert (sparse.category, cudnn.category, double.category, matmul.category) == \
        (ct.SPARSE, ct.BACKEND, ct.DOUBLE_BACKWARD, ct.COMPOSITE)
    assert squeeze.status == "rule: structural (`structural`)"
    assert squeeze_.category == ct.INPLACE
    assert "functional `squeeze.dim`: rule: structural" in squeeze_.reason and "same formulas" in squeeze_.reason


def test_a_declared_op_without_an_entry_is_an_error():
    with pytest.raises(ValueError, match="softmax"):
        ct.classify([Entry("mm", NODE, (("self", "grad"),))], {"softmax": ("explicit", "softmax")})


def test_render_counts_and_shares():
    rows = ct.classify([Entry("a", NODE, (("self", "grad * x"),)), Entry("b", NODE, (("self", "grad"),)),
                        Entry("c", output_differentiability=(False,))], {"b": ("structural", "structural")})
    doc = ct.render(rows)
    assert "**1 of 3 entries have a rule (33.3%); 1 of the 2 that generate a Default backward node (50.0%).**" in doc
    assert f"| {ct.ELEMENTWISE} | 1 | 33.3% |" in doc and "| total | 3 | 100% |" in doc
    assert "| 3 | `c` | - | no node | not differentiable: output_differentiability all False |" in doc


def test_document_counts_match_its_rows():
    text = ct.DOC.read_text()
    summary = dict(re.findall(r"^\| ([^|#][^|]*?) \| (\d+) \| [\d.]+%? \|$", text, re.M))
    rows = re.findall(r"^\| \d+ \| `[^`]+` \| [^|]* \| ([^|]+?) \| ", text, re.M)
    categories = [r if not r.startswith("rule: ") else r.split(" (")[0] for r in rows]
    assert int(summary.pop("total")) == len(rows)
    assert summary == {c: str(categories.count(c)) for c in set(categories)}
